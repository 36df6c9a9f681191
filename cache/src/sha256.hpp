// Incremental SHA-256 over OpenSSL EVP: used for keys, entry checksums and archive checksums.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace kjit::cache::detail {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();  // throws std::bad_alloc if OpenSSL cannot allocate a context
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::string_view data);
  void update_u64(uint64_t v);  // little-endian, as everywhere in kjit's formats
  Digest finish();              // the object cannot be updated afterwards

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace kjit::cache::detail
