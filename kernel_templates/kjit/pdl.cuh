// Programmatic dependent launch (sm_90). A kernel launched with the programmatic-serialization
// attribute may be scheduled while the previous kernel in the stream is still running; it must
// call pdl_wait() before it touches global memory that earlier work reads or writes (the wait
// returns once that work has completed and its writes are visible; without the attribute it
// returns at once). No-op below sm_90 and in host code (the gn_min emulation test compiles the
// templates as C++).
//
// An op's last kernel never triggers its dependents early: on the H200 an early trigger
// (griddepcontrol.launch_dependents), before the stores or at the start, made 5 of 20 GroupNorm
// shapes slower than no programmatic launch at all (seed 6.0 us against 5.8), while the implicit
// trigger at exit made all 20 faster (seed 5.5 us). The first kernel of a pair (split GroupNorm)
// does trigger early, so that the second one's CTAs are already in place when it completes.
#pragma once

namespace kjit {

__forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream be scheduled now (it still waits for this one to complete
// in its pdl_wait).
__forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace kjit
