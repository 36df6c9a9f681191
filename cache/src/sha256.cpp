#include "sha256.hpp"

#include <openssl/evp.h>

#include <new>
#include <stdexcept>

namespace kjit::cache::detail {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw std::runtime_error("kjit cache: OpenSSL SHA-256 is unavailable");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::update(std::string_view data) {
  // EVP_DigestUpdate only fails on a broken context, which the constructor rules out.
  EVP_DigestUpdate(ctx_, data.data(), data.size());
}

void Sha256::update_u64(uint64_t v) {
  char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>(v >> (8 * i));
  update(std::string_view(le, sizeof le));
}

Digest Sha256::finish() {
  Digest out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, out.data(), &len);
  return out;
}

}  // namespace kjit::cache::detail
