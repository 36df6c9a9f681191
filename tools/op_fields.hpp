// A manifest's problem object as the op registry's Fields (kjit/op/registry.hpp): each JSON
// value as the kind of field it is, with its text for messages.
#pragma once

#include <nlohmann/json.hpp>

#include "kjit/op/registry.hpp"

namespace kjit::tools {

// `problem` is an object whose "op" names a registered op. Values that parse_json marked (out
// of range) keep their mark as the field's problem; every getter reading them reports it.
op::Fields op_fields(const nlohmann::json& problem, const std::string& op);

}  // namespace kjit::tools
