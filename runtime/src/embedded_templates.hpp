// Generated at build time (cmake/embed_templates.cmake) from kernel_templates/.
#pragma once

#include <cstddef>

namespace kjit::detail {

struct EmbeddedTemplate {
  const char* name;  // e.g. "kjit/group_norm.cuh"
  const char* text;
};

extern const EmbeddedTemplate kEmbeddedTemplates[];
extern const size_t kEmbeddedTemplateCount;

}  // namespace kjit::detail
