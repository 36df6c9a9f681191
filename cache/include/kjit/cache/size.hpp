// Sizes as users type them (KJIT_CACHE_MAX_SIZE, `kjit-cache prune --max-size`). Pure C++17.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kjit::cache {

// "123", "100B", "64K", "512M", "4G", "1T": bytes, or binary units with a K/M/G/T suffix (either
// case; "KB", "KiB" and "Ki" mean the same). nullopt when malformed, negative or over 2^64-1.
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace kjit::cache
