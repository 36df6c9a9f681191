#include "alloc_counter.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define KJIT_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KJIT_HOST_ASAN 1
#endif
#endif

namespace {
thread_local int t_scopes = 0;
thread_local uint64_t t_count = 0;
}  // namespace

namespace kjit_host {

CountAllocations::CountAllocations() {
  if (t_scopes++ == 0) t_count = 0;
}
CountAllocations::~CountAllocations() {
  --t_scopes;
}
uint64_t CountAllocations::count() const {
  return t_count;
}

#ifdef KJIT_HOST_ASAN
bool CountAllocations::counting() {
  return false;
}
#else
bool CountAllocations::counting() {
  return true;
}
#endif

}  // namespace kjit_host

#ifndef KJIT_HOST_ASAN
namespace {
void* counted(std::size_t n, std::size_t align) {
  if (t_scopes > 0) ++t_count;
  if (n == 0) n = 1;
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n);
  } else if (posix_memalign(&p, align, n) != 0) {
    p = nullptr;
  }
  return p;
}
void* counted_or_throw(std::size_t n, std::size_t align) {
  if (void* p = counted(n, align)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_or_throw(n, 0);
}
void* operator new[](std::size_t n) {
  return counted_or_throw(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
#endif
