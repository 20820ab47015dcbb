// Hot loops built twice: a portable copy, and on x86-64 a copy compiled for AVX2 that is chosen at
// run time on processors that have it. A hot loop is an always-inline body; its
// caller wraps the call in a lambda marked LOCALMEAN_LAMBDA_INLINE and passes it to
// best_build(), which instantiates both copies and dispatches:
//
//   best_build([&]() LOCALMEAN_LAMBDA_INLINE { return loop_body(args...); });
//
// Both copies run the same operations in the same order, so results do not depend on the path:
// reductions keep a fixed order, and the AVX2 copy is not compiled for FMA, so that the compiler
// cannot contract a * b + c into a fused multiply-add (rounded once, not twice) in one copy only.
// `make core-test` compares the two copies' outputs bit for bit.
#pragma once

#include <cstddef>

// Keeps the next loop a loop (see exp_nonpositive_lanes in kernels.hpp).
#if defined(__clang__)
#define LOCALMEAN_NO_UNROLL _Pragma("clang loop unroll(disable)")
#elif defined(__GNUC__) && __GNUC__ >= 8
#define LOCALMEAN_NO_UNROLL _Pragma("GCC unroll 1")
#else
#define LOCALMEAN_NO_UNROLL
#endif

#if defined(__GNUC__)
#define LOCALMEAN_INLINE inline __attribute__((always_inline))
#define LOCALMEAN_LAMBDA_INLINE __attribute__((always_inline))
#else
#define LOCALMEAN_INLINE inline
#define LOCALMEAN_LAMBDA_INLINE
#endif

// The AVX2 copy needs per-function targets (GCC and Clang on x86-64); LOCALMEAN_NO_CLONES turns
// it off, e.g. to test the portable copy.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(LOCALMEAN_NO_CLONES)
#define LOCALMEAN_X86_CLONES 1
#else
#define LOCALMEAN_X86_CLONES 0
#endif


namespace localmean {

// Four doubles in a GCC vector register (a portable extension; Clang has it too): one AVX2
// register in the AVX2 copy, two SSE2 registers in the portable one. Macros rather than
// functions: passing vector types by value would change the ABI between the two builds.
typedef double v4d __attribute__((vector_size(32), aligned(8)));
// Two doubles (an SSE2 register), for loops that are memory-bound or gather their lanes; may
// alias the doubles it is loaded from.
typedef double v2d __attribute__((vector_size(16), aligned(8), __may_alias__));
#define LOCALMEAN_LOAD4(p) (*reinterpret_cast<const v4d*>(p))
#define LOCALMEAN_STORE4(p, v) (*reinterpret_cast<v4d*>(p) = (v))

// Independent sums that the hot loops keep side by side (two v4d): the engine's sweep adds point
// k of a block into lane k % kLanes, the grid convolutions compute kLanes nodes or rows together.
constexpr std::size_t kLanes = 8;

namespace detail {

#if LOCALMEAN_X86_CLONES
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// The lambda (and every always-inline body it calls) is compiled here for AVX2 (without FMA).
template <class Body>
__attribute__((target("avx2"), noinline)) auto run_avx2(const Body& body)
    -> decltype(body()) {
  return body();
}
#endif

// Where an AVX2 copy exists, the portable copy is only the fallback for old x86-64 processors: it
// is marked cold, which GCC compiles for size, so that the -O3 of src/Makevars does not double
// the library for code that rarely runs. Elsewhere (e.g. ARM) it is the fast path.
template <class Body>
#if LOCALMEAN_X86_CLONES
__attribute__((noinline, cold))
#elif defined(__GNUC__)
__attribute__((noinline))
#endif
auto run_portable(const Body& body) -> decltype(body()) {
  return body();
}

}  // namespace detail

// Runs body() in its AVX2 copy where the processor has it, else in its portable copy.
template <class Body>
inline auto best_build(const Body& body) -> decltype(body()) {
#if LOCALMEAN_X86_CLONES
  if (detail::cpu_has_avx2()) return detail::run_avx2(body);
#endif
  return detail::run_portable(body);
}

}  // namespace localmean
