// One 16/8/4-byte vector of elements and the single load/store instruction behind it.
#pragma once

#include "kjit/types.cuh"

namespace kjit {

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The memory access behind a Pack: one 16/8/4-byte instruction. Copying the struct itself lets
// the compiler split stores into per-element ones (seen in the PTX: 8 x st.global.u16 per bf16
// vector), which multiplies L2 transactions.
template <int kBytes>
struct Word;
template <>
struct Word<16> {
  using type = uint4;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<4> {
  using type = unsigned int;
};
template <>
struct Word<2> {
  using type = unsigned short;
};

template <class T, int V>
__forceinline__ Pack<T, V> load_pack(const T* p) {
  using W = typename Word<sizeof(T) * V>::type;
  const W w = *reinterpret_cast<const W*>(p);
  Pack<T, V> r;
  *reinterpret_cast<W*>(&r) = w;
  return r;
}

// L2 eviction priorities for streaming passes (sm_80+): evict_last for data read again soon (a
// statistics pass whose second read should hit L2), evict_first for data read for the last time.
enum class L2Hint { kKeep, kDrop };

__forceinline__ unsigned long long l2_policy(L2Hint h) {
  unsigned long long p = 0;
#if __CUDA_ARCH__ >= 800
  if (h == L2Hint::kKeep) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  } else if (h == L2Hint::kDrop) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  }
#endif
  return p;
}

// load_pack with an L2 cache policy from l2_policy (16-byte packs; others load plainly).
// kKeepL1: the line also stays in L1 ahead of others (evict_last there too), for a pass whose
// bytes this SM reads again soon and which fit its L1 (a streamed row share of a few KB).
template <class T, int V, bool kKeepL1 = false>
__forceinline__ Pack<T, V> load_pack_hinted(const T* p, unsigned long long policy) {
#if __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) * V == 16) {
    uint4 w;
    if constexpr (kKeepL1)
      asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                   : "l"(p), "l"(policy));
    else
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                   : "l"(p), "l"(policy));
    Pack<T, V> r;
    *reinterpret_cast<uint4*>(&r) = w;
    return r;
  }
#endif
  (void)policy;
  return load_pack<T, V>(p);
}

// The elements of a pack as floats. bf16 widens by a shift or a mask of each 32-bit word (one
// instruction per element, whatever the compiler makes of 16-bit lanes).
template <class T, int V>
__forceinline__ void unpack_floats(const Pack<T, V>& p, float (&f)[V]) {
  if constexpr (sizeof(T) == 2 && V % 2 == 0 && is_bf16<T>::value) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&p);  // a Pack is 4-byte aligned here
#pragma unroll
    for (int k = 0; k < V / 2; ++k) {
      f[2 * k] = __uint_as_float(w[k] << 16);
      f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) f[j] = to_float(p.v[j]);
  }
}

// A pack from floats, rounded to nearest even. 16-bit types convert pairs with one
// cvt.rn.{bf16x2,f16x2}.f32 (sm_80+), which also packs them: per element, half the instructions
// of a scalar cvt and a merge.
template <class T, int V>
__forceinline__ Pack<T, V> pack_floats(const float (&f)[V]) {
  Pack<T, V> p;
#if __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) == 2 && V % 2 == 0) {
    unsigned* w = reinterpret_cast<unsigned*>(&p);
#pragma unroll
    for (int k = 0; k < V / 2; ++k) {
      // d = {a -> upper half, b -> lower half}: element 2k is the lower (first in memory).
      if constexpr (is_bf16<T>::value) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[k]) : "f"(f[2 * k + 1]), "f"(f[2 * k]));
      } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[k]) : "f"(f[2 * k + 1]), "f"(f[2 * k]));
      }
    }
  } else  // the scalar loop below; an unreachable loop after a return draws an NVRTC warning
#endif
  {
#pragma unroll
    for (int j = 0; j < V; ++j) p.v[j] = from_float<T>(f[j]);
  }
  return p;
}

__forceinline__ unsigned bits_of(float v) {
  return __float_as_uint(v);
}
__forceinline__ unsigned bits_of(half v) {
  return v.bits;
}
__forceinline__ unsigned bits_of(bfloat16 v) {
  return v.bits;
}

// 32-bit word k of a pack, assembled from its elements' bits.
template <class T, int V>
__forceinline__ unsigned word_of(const Pack<T, V>& v, int k) {
  if constexpr (sizeof(T) == 4) {
    return bits_of(v.v[k]);
  } else {  // as pack_floats wrote it; a Pack of two or more 16-bit elements is 4-byte aligned
    return reinterpret_cast<const unsigned*>(&v)[k];
  }
}

// Builds the vector register first so the store is one st.global.v4 (or v2 / scalar). kStreaming:
// st.global.cs (evict-first in L2), for outputs that should not push out data still to be read.
template <class T, int V, bool kStreaming = false>
__forceinline__ void store_pack(T* p, const Pack<T, V>& v) {
  constexpr int kBytes = sizeof(T) * V;
  // Inline PTX: NVVM split a plain uint4 store of assembled words into scalar stores.
  if constexpr (kBytes == 16 && kStreaming) {
    asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(word_of(v, 0)),
                 "r"(word_of(v, 1)), "r"(word_of(v, 2)), "r"(word_of(v, 3))
                 : "memory");
  } else if constexpr (kBytes == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(word_of(v, 0)),
                 "r"(word_of(v, 1)), "r"(word_of(v, 2)), "r"(word_of(v, 3))
                 : "memory");
  } else if constexpr (kBytes == 8) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(word_of(v, 0)), "r"(word_of(v, 1))
                 : "memory");
  } else {
    // One element (kjit's vector widths are 16 bytes or one element): a pack of two 16-bit
    // elements would need a 4-byte store, which this does not provide.
    static_assert(V == 1, "store_pack: 16-, 8-byte or single-element packs only");
    *p = v.v[0];
  }
}

}  // namespace kjit
