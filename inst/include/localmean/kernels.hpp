// The kernel registry: every localization kernel the package knows.
//
// Convention: a kernel is a univariate density k(u) in its standard form (compact kernels are
// supported on [-1, 1], the Gaussian is the standard normal, the Laplace is exp(-|u|) / 2, the
// Cauchy is 1 / (pi (1 + u^2))). A bandwidth h is the kernel's scale parameter, K_h(t) = k(t / h) / h,
// so h is the Gaussian's sd and the half-width of a compact kernel. In d dimensions the kernel is
// radial, K(x*, x) proportional to k(||(x - x*) / h||), so a uniform kernel is a ball. The second
// moment mu2 and the roughness R = int k^2 convert bandwidths between kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "simd.hpp"

namespace localmean {

enum class KernelType {
  gaussian, epanechnikov, uniform, triangular, biweight, triweight, tricube, cosine, laplace, cauchy
};

struct KernelInfo {
  KernelType type;
  const char* name;
  bool compact;       // zero outside |u| <= 1
  double cutoff;      // radius beyond which the tree strategy ignores points (support for compact;
                      // infinite: never truncated, so only the exact strategy applies)
  double constant;    // c such that c * shape(u^2) integrates to 1 on the line
  double mu2;         // int u^2 k(u) du (infinite for the Cauchy)
  double roughness;   // int k(u)^2 du
  bool multivariate;  // the radial kernel has a density in d >= 2 (shape(||u||^2) integrable)
  double reach;       // how far, in scales, a density grid extends beyond the data
  double quartile;    // upper quartile of k: matches bandwidths when mu2 is infinite
  // The shadow kernel: -d shape(r2) / d r2 = shadow_factor * shape of `shadow`, so that the
  // gradient of a kernel-smoothed density (the score) is a local mean under the shadow kernel.
  // shadow_factor 0: the derivative is no registry kernel (uniform: a spike at the edge;
  // triangular, laplace: unbounded at 0; tricube, cosine, cauchy: another shape).
  KernelType shadow;
  double shadow_factor;
};

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();

// One row per kernel, in the order of KernelType. Cut-offs for the kernels with unbounded
// support: the neglected weight is below exp(-32) of the peak for the Gaussian (8 sd) and the
// Laplace (32 scales). The Cauchy has no useful cut-off. Density grids reach three standard
// deviations beyond the data for the Gaussian (as stats::density) and the Cauchy, the support
// for compact kernels, and 8 scales for the Laplace (tail mass 2e-4).
constexpr KernelInfo kKernelTable[] = {
    {KernelType::gaussian, "gaussian", false, 8.0, 0.3989422804014327, 1.0, 0.28209479177387814,
     true, 3.0, 0.6744897501960817, KernelType::gaussian, 0.5},
    {KernelType::epanechnikov, "epanechnikov", true, 1.0, 0.75, 0.2, 0.6, true, 1.0,
     0.3472963553338607, KernelType::uniform, 1.0},
    {KernelType::uniform, "uniform", true, 1.0, 0.5, 1.0 / 3.0, 0.5, true, 1.0, 0.5,
     KernelType::uniform, 0.0},
    {KernelType::triangular, "triangular", true, 1.0, 1.0, 1.0 / 6.0, 2.0 / 3.0, true, 1.0,
     0.2928932188134524, KernelType::triangular, 0.0},
    {KernelType::biweight, "biweight", true, 1.0, 15.0 / 16.0, 1.0 / 7.0, 5.0 / 7.0, true, 1.0,
     0.2811276704207059, KernelType::epanechnikov, 2.0},
    {KernelType::triweight, "triweight", true, 1.0, 35.0 / 32.0, 1.0 / 9.0, 350.0 / 429.0, true,
     1.0, 0.2423031187165852, KernelType::biweight, 3.0},
    {KernelType::tricube, "tricube", true, 1.0, 70.0 / 81.0, 35.0 / 243.0, 175.0 / 247.0, true,
     1.0, 0.2948734051557818, KernelType::tricube, 0.0},
    {KernelType::cosine, "cosine", true, 1.0, kPi / 4.0, 1.0 - 8.0 / (kPi * kPi),
     kPi * kPi / 16.0, true, 1.0, 0.3333333333333333, KernelType::cosine, 0.0},
    {KernelType::laplace, "laplace", false, 32.0, 0.5, 2.0, 0.25, true, 8.0, 0.6931471805599453,
     KernelType::laplace, 0.0},
    {KernelType::cauchy, "cauchy", false, kInf, 1.0 / kPi, kInf, 0.5 / kPi, false, 3.0, 1.0,
     KernelType::cauchy, 0.0},
};
constexpr std::size_t kKernelCount = sizeof(kKernelTable) / sizeof(kKernelTable[0]);

constexpr bool table_in_enum_order(std::size_t i = 0) {
  return i == kKernelCount ||
         (static_cast<std::size_t>(kKernelTable[i].type) == i && table_in_enum_order(i + 1));
}
static_assert(table_in_enum_order(), "kKernelTable must list the kernels in enum order");
static_assert(kKernelCount == static_cast<std::size_t>(KernelType::cauchy) + 1,
              "kKernelTable must have one row per KernelType (cauchy is the last)");

inline const KernelInfo* kernel_table(std::size_t* size) {
  *size = kKernelCount;
  return kKernelTable;
}

// Kernels of the user's own (KernelProfile, below) take the KernelType values after the
// registry's: kKernelCount + j is the j-th tabulated profile.
inline bool is_tabulated(KernelType type) { return static_cast<std::size_t>(type) >= kKernelCount; }
class KernelProfile;
inline const KernelProfile* kernel_profile(KernelType type);
inline const KernelInfo& profile_info(const KernelProfile& profile);

inline const KernelInfo& kernel_info(KernelType type) {
  if (is_tabulated(type)) return profile_info(*kernel_profile(type));
  std::size_t size;
  const KernelInfo* table = kernel_table(&size);
  return table[static_cast<int>(type)];
}

// 1 when r2 <= cut2, else 0, without a branch (vectorisable).
inline double within(double r2, double cut2) { return 0.5 + 0.5 * std::copysign(1.0, cut2 - r2); }

// max(x, lo) for finite lo, selected bitwise: under GCC's default -ftrapping-math, std::max with
// a constant bound stays a branch and keeps the loop around it from vectorising.
LOCALMEAN_INLINE double at_least(double x, double lo) {
  std::uint64_t xb, lb;
  std::memcpy(&xb, &x, sizeof xb);
  std::memcpy(&lb, &lo, sizeof lb);
  const std::uint64_t below = 0 - static_cast<std::uint64_t>(x < lo);
  const std::uint64_t out = (xb & ~below) | (lb & below);
  std::memcpy(&x, &out, sizeof x);
  return x;
}

// exp(x) for x <= 0 (0 below -746, where exp underflows), relative error below 1e-14:
// x = k ln 2 + r with |r| <= ln(2) / 2, the Taylor polynomial of degree 11 at r, times 2^k
// written into the exponent bits as 2^(k + 537) 2^-537 (both factors normal, so subnormal
// results are rounded once). No branches or tables, so loops over it vectorise.
LOCALMEAN_INLINE double exp_nonpositive(double x) {
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2High = 6.93147180369123816490e-01;  // ln 2 in 32 bits: k * it is exact
  constexpr double kLn2Low = 1.90821492927058770002e-10;
  x = at_least(x, -746.0);
  const double shifted = x * kLog2e + kShift;
  const double k = shifted - kShift;
  const double r = (x - k * kLn2High) - k * kLn2Low;
  double p = 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // The low bits of `shifted` hold k; k + 537 + 1023 (in [484, 1560]) is the exponent field.
  std::uint64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  bits = (bits + 1560) << 52;
  double high;
  std::memcpy(&high, &bits, sizeof high);
  const std::uint64_t low_bits = static_cast<std::uint64_t>(1023 - 537) << 52;
  double low;
  std::memcpy(&low, &low_bits, sizeof low);
  return p * high * low;
}

// The bits of a v4d's lanes.
typedef std::uint64_t v4u __attribute__((vector_size(32), aligned(8)));

// exp_nonpositive() of the 4 G values at x, in place, G registers side by side: the same
// operations on every value as the scalar version (bit-identical results), with G independent
// chains of the polynomial in flight. Without FMA (simd.hpp) each of its steps costs a multiply
// and an add in series, and one chain at a time left the processor waiting on their latency
// (the exact Gaussian sweep took 1.5x as long). The loop over the coefficients stays a loop:
// unrolled, GCC expands each chain whole, one after the other.
template <std::size_t G> LOCALMEAN_INLINE void exp_nonpositive_group(double* x) {
  constexpr double kShift = 6755399441055744.0;
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2High = 6.93147180369123816490e-01;
  constexpr double kLn2Low = 1.90821492927058770002e-10;
  static constexpr double kCoef[] = {1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                                     1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                                     1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
  const v4d lo = {-746.0, -746.0, -746.0, -746.0};
  v4d r[G], shifted[G], p[G];
  for (std::size_t g = 0; g < G; ++g) {
    r[g] = LOCALMEAN_LOAD4(x + 4 * g);
    r[g] = r[g] < lo ? lo : r[g];  // at_least()
    shifted[g] = r[g] * kLog2e + kShift;
    const v4d k = shifted[g] - kShift;
    r[g] = (r[g] - k * kLn2High) - k * kLn2Low;
    p[g] = kCoef[0] * r[g] + kCoef[1];
  }
  LOCALMEAN_NO_UNROLL
  for (std::size_t c = 2; c < sizeof kCoef / sizeof kCoef[0]; ++c)
    for (std::size_t g = 0; g < G; ++g) p[g] = p[g] * r[g] + kCoef[c];
  const std::uint64_t low_bits = static_cast<std::uint64_t>(1023 - 537) << 52;
  double low;
  std::memcpy(&low, &low_bits, sizeof low);
  for (std::size_t g = 0; g < G; ++g) {
    v4u bits;
    std::memcpy(&bits, &shifted[g], sizeof bits);
    bits = (bits + 1560) << 52;
    v4d high;
    std::memcpy(&high, &bits, sizeof high);
    LOCALMEAN_STORE4(x + 4 * g, p[g] * high * low);
  }
}

// x[k] = exp_nonpositive(x[k]) for k < len: 32 values at a time, then 16, 4 and 1 (the same
// result for a value wherever it lies).
template <class Len> LOCALMEAN_INLINE void exp_nonpositive_lanes(double* x, Len len) {
  std::size_t k = 0;
  for (; k + 32 <= len; k += 32) exp_nonpositive_group<8>(x + k);
  if (k + 16 <= len) {
    exp_nonpositive_group<4>(x + k);
    k += 16;
  }
  for (; k + 4 <= len; k += 4) exp_nonpositive_group<1>(x + k);
  for (; k < len; ++k) x[k] = exp_nonpositive(x[k]);
}

// Kernel shapes as functions of the squared scaled distance r2 = ||u||^2, without the constant:
// the local mean does not need it, and density estimates multiply it back. Two versions:
// shape(), vectorisable, for loops; exact(), with the standard library, for single values.
// slope() is -d shape(r2) / d r2 (the gradients of leave-one-out scores in the bandwidths,
// metric.hpp). Where the profile has a kink it is the slope from inside the support (at the
// edge of a compact one) or 0 at r2 = 0 (triangular, Laplace: unbounded there, but a weight at
// distance 0 does not depend on the bandwidth); the uniform kernel's is 0 (a step: no slope).
// Always inlined, so that loops over several kernels (metric.hpp) vectorise in every build.
struct Gaussian {
  LOCALMEAN_INLINE static double shape(double r2) { return exp_nonpositive(-0.5 * r2); }
  // w[k] = shape(r2[k]) for k < len (w may be r2), several at a time (exp_nonpositive_lanes).
  template <class Len>
  LOCALMEAN_INLINE static void shapes(const double* r2, Len len, double* w) {
    for (std::size_t k = 0; k < len; ++k) w[k] = -0.5 * r2[k];
    exp_nonpositive_lanes(w, len);
  }
  static double exact(double r2) { return std::exp(-0.5 * r2); }
  LOCALMEAN_INLINE static double slope(double r2) { return 0.5 * exp_nonpositive(-0.5 * r2); }
};
// The polynomial kernels (1 - u^2)^P: Epanechnikov, biweight and triweight.
template <int P> struct QuadraticPower {
  LOCALMEAN_INLINE static double shape(double r2) {
    const double t = std::max(0.0, 1.0 - r2);
    double p = t;
    for (int i = 1; i < P; ++i) p *= t;
    return p;
  }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) {  // P (1 - r2)^(P - 1)
    const double t = std::max(0.0, 1.0 - r2);
    double p = P * within(r2, 1.0);
    for (int i = 1; i < P; ++i) p *= t;
    return p;
  }
};
using Epanechnikov = QuadraticPower<1>;
struct Uniform {
  LOCALMEAN_INLINE static double shape(double r2) { return within(r2, 1.0); }
  static double exact(double r2) { return shape(r2); }
  static double slope(double) { return 0.0; }
};
struct Triangular {
  LOCALMEAN_INLINE static double shape(double r2) { return std::max(0.0, 1.0 - std::sqrt(r2)); }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) {  // 1 / (2 r)
    const double r = std::sqrt(r2);
    return r > 0.0 && r <= 1.0 ? 0.5 / r : 0.0;
  }
};
using Biweight = QuadraticPower<2>;
using Triweight = QuadraticPower<3>;
struct Tricube {
  LOCALMEAN_INLINE static double shape(double r2) {
    const double r = std::sqrt(r2);
    const double t = std::max(0.0, 1.0 - r * r * r);
    return t * t * t;
  }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) {  // 9/2 r (1 - r^3)^2
    const double r = std::sqrt(r2);
    if (!(r2 < 1.0)) return 0.0;  // (also at an infinite distance, where r * 0 is NaN)
    const double t = 1.0 - r * r * r;
    return 4.5 * r * t * t;
  }
};
struct Cosine {
  LOCALMEAN_INLINE static double shape(double r2) {
    return r2 < 1.0 ? std::cos(0.5 * kPi * std::sqrt(r2)) : 0.0;
  }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) {  // pi sin(pi r / 2) / (4 r), pi^2 / 8 at r = 0
    const double r = std::sqrt(r2);
    if (!(r2 < 1.0)) return 0.0;
    return r > 0.0 ? 0.25 * kPi * std::sin(0.5 * kPi * r) / r : 0.125 * kPi * kPi;
  }
};
struct Laplace {
  LOCALMEAN_INLINE static double shape(double r2) { return exp_nonpositive(-std::sqrt(r2)); }
  static double exact(double r2) { return std::exp(-std::sqrt(r2)); }
  LOCALMEAN_INLINE static double slope(double r2) {  // exp(-r) / (2 r)
    const double r = std::sqrt(r2);
    return r > 0.0 ? 0.5 * exp_nonpositive(-r) / r : 0.0;
  }
};
struct Cauchy {
  LOCALMEAN_INLINE static double shape(double r2) { return 1.0 / (1.0 + r2); }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) { return 1.0 / ((1.0 + r2) * (1.0 + r2)); }
};

// w[k] = K::shape(r2[k]) for k < len (w may be r2): the Gaussian's several at a time.
template <class K, class Len>
LOCALMEAN_INLINE void kernel_shapes(K, const double* r2, Len len, double* w) {
  for (std::size_t k = 0; k < len; ++k) w[k] = K::shape(r2[k]);
}
template <class Len>
LOCALMEAN_INLINE void kernel_shapes(Gaussian, const double* r2, Len len, double* w) {
  Gaussian::shapes(r2, len, w);
}

// The tag of the user's tabulated kernels. Their profile is data (KernelProfile), so the sweep
// reads it from LocalData (shape_at in sweep.hpp); these static members serve only loops that
// take no profile, which R never reaches with a user kernel: NaN makes a slip visible.
struct Tabulated {
  static double shape(double) { return std::numeric_limits<double>::quiet_NaN(); }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) { return shape(r2); }
};
// The tag of every kernel but the Gaussian in the engine's sweeps (with_sweep_kernel() in
// sweep.hpp): the sweep looks their profile up at run time, from the data's kernel. As for
// Tabulated, the static members serve only loops that take no profile.
struct AnyKernel {
  static double shape(double) { return std::numeric_limits<double>::quiet_NaN(); }
  static double exact(double r2) { return shape(r2); }
  LOCALMEAN_INLINE static double slope(double r2) { return shape(r2); }
};

// Calls f(KernelStruct{}) for the kernel type, so that hot loops are compiled once per kernel.
// Always inlined (the switch alone), so that an always-inline f stays in its caller's build.
template <class F>
LOCALMEAN_INLINE auto with_kernel(KernelType type, F&& f) -> decltype(f(Gaussian{})) {
  if (is_tabulated(type)) return f(Tabulated{});
  switch (type) {
  case KernelType::gaussian: return f(Gaussian{});
  case KernelType::epanechnikov: return f(Epanechnikov{});
  case KernelType::uniform: return f(Uniform{});
  case KernelType::triangular: return f(Triangular{});
  case KernelType::biweight: return f(Biweight{});
  case KernelType::triweight: return f(Triweight{});
  case KernelType::tricube: return f(Tricube{});
  case KernelType::cosine: return f(Cosine{});
  case KernelType::laplace: return f(Laplace{});
  case KernelType::cauchy: break;
  }
  return f(Cauchy{});
}

// w[k] = the profile of kernel `type` at r2[k], k < len (w may be r2), out of line: one copy per
// kernel, shared by both builds, for loops that compile the Gaussian inline and every other
// kernel once (a copy of the loop per kernel would make the library much larger).
__attribute__((noinline)) inline void kernel_shapes_of(KernelType type, const double* r2,
                                                       std::size_t len, double* w) {
  with_kernel(type, [&](auto k) LOCALMEAN_LAMBDA_INLINE { kernel_shapes(k, r2, len, w); });
}

// Pieces of the numeric integrals of a tabulated profile's constants (KernelProfile): at least
// this many (a namespace constant: std::max() odr-uses its arguments, and a static constexpr
// member has no definition in C++14).
constexpr std::size_t kIntegralPieces = 4096;

// ---- Kernels of the user's own ---------------------------------------------------------------
//
// A radial profile g(u) >= 0 of the scaled distance u, tabulated as a function of a variable x:
// the squared distance x = u^2 for profiles smooth in it (a weight then needs no square root:
// (1 - u^2)^3 is a cubic in it, and the Gaussian's exp(-u^2 / 2) is smooth), else x = u (for
// profiles with a kink at 0, such as exp(-u)). The values at N + 1 equally spaced nodes
// x_j = j * x_upper / N, where u_upper is the support of a compact profile, else the radius
// where g falls below exp(-32) of its peak (the registry's cut-off rule). Between nodes g is the
// cubic through the four nearest nodes (one-sided at both ends, so that a profile smooth on
// [0, u_upper] needs no smoothness across 0 or beyond its support), stored as monomial
// coefficients per interval: a weight costs one table row and a Horner step, four lanes at a
// time. Its error is about h^4 max |g^(4)| / 40 with h = x_upper / N; user_kernel() in R chooses
// the variable and N by checking it. Beyond u_upper the weight is 0 (the last row is zeros).
// When every interval holds the same cubic and it vanishes at x_upper (the polynomial kernels,
// such as (1 - u^2)^3), the weight is that cubic, (x_upper - x) q(x) at x clamped to x_upper,
// with no table row to fetch. The row's constants are integrals of the interpolant (4-point
// Gauss-Legendre on at least kIntegralPieces pieces of [0, u_upper]).
class KernelProfile {
public:
  KernelProfile(std::string name, const double* values, std::size_t nodes, double upper,
                bool compact, bool squared)
      : name_(std::move(name)), intervals_(nodes - 1), upper_(upper), squared_(squared),
        x_upper_(squared ? upper * upper : upper), inv_step_((nodes - 1) / x_upper_),
        coef_(4 * nodes, 0.0) {
    for (std::size_t i = 0; i < intervals_; ++i) fit_interval(values, i);
    find_polynomial(values);
    fill_info(compact);
  }
  const std::string& name() const { return name_; }
  const KernelInfo& info() const { return info_; }
  void set_type(KernelType type) {
    info_.type = type;
    info_.shadow = type;
  }
  // The profile at squared scaled distance r2 (0 beyond `upper`).
  double shape(double r2) const {
    double w;
    shapes(&r2, std::size_t{1}, &w);
    return w;
  }
  // w[k] = shape(r2[k]) for k < len (w may be r2).
  template <class Len> LOCALMEAN_INLINE void shapes(const double* r2, Len len, double* w) const {
    if (polynomial_) {
      if (squared_)
        evaluate_polynomial<false>(r2, len, w);
      else
        evaluate_polynomial<true>(r2, len, w);
    } else if (squared_) {
      evaluate<false>(r2, len, w);
    } else {
      evaluate<true>(r2, len, w);
    }
  }
  // int_0^upper g(u)^power u^moment du
  double integral(int power, int moment) const {
    double sum = 0.0;
    for (std::size_t i = 0; i < pieces(); ++i) sum += piece_integral(i, 1.0, power, moment);
    return sum;
  }

private:
  typedef int v4i __attribute__((vector_size(16)));
  // x[k] = sqrt(x[k]) for four lanes (x in place: passing vectors by value would change the ABI
  // between the builds), correctly rounded as std::sqrt: SSE2 on x86-64, which both builds
  // have; elsewhere one lane at a time.
  static LOCALMEAN_INLINE void root_lanes(v4d& x) {
#if defined(__SSE2__)
    const v2d low = _mm_sqrt_pd(v2d{x[0], x[1]}), high = _mm_sqrt_pd(v2d{x[2], x[3]});
    x = v4d{low[0], low[1], high[0], high[1]};
#else
    for (int k = 0; k < 4; ++k) x[k] = std::sqrt(x[k]);
#endif
  }
  // The table at x = r2 or sqrt(r2) (Root), four lanes at a time, then lane by lane for the
  // rest: the same operations on every path, so that a weight does not depend on its position.
  template <bool Root, class Len>
  LOCALMEAN_INLINE void evaluate(const double* r2, Len len, double* w) const {
    const double* coef = coef_.data();
    const double inv_step = inv_step_, last = static_cast<double>(intervals_);
    const v4d last_lanes = {last, last, last, last};
    const std::size_t full = len - len % 4;
    for (std::size_t k = 0; k < full; k += 4) {
      v4d x = LOCALMEAN_LOAD4(r2 + k);
      if (Root) root_lanes(x);
      v4d t = x * inv_step;
      t = t < last_lanes ? t : last_lanes;  // min(t, last); a NaN would read the zero row
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 9)
      const v4i i = __builtin_convertvector(t, v4i);
      const v4d f = t - __builtin_convertvector(i, v4d);
#else  // GCC 8 has no __builtin_convertvector: the same conversions lane by lane
      const v4i i = {static_cast<int>(t[0]), static_cast<int>(t[1]), static_cast<int>(t[2]),
                     static_cast<int>(t[3])};
      const v4d f = t - v4d{static_cast<double>(i[0]), static_cast<double>(i[1]),
                            static_cast<double>(i[2]), static_cast<double>(i[3])};
#endif
      // Each lane's row, transposed into coefficient vectors.
      const double* a = coef + 4 * static_cast<std::ptrdiff_t>(i[0]);
      const double* b = coef + 4 * static_cast<std::ptrdiff_t>(i[1]);
      const double* c = coef + 4 * static_cast<std::ptrdiff_t>(i[2]);
      const double* d = coef + 4 * static_cast<std::ptrdiff_t>(i[3]);
      const v4d c0 = {a[0], b[0], c[0], d[0]}, c1 = {a[1], b[1], c[1], d[1]};
      const v4d c2 = {a[2], b[2], c[2], d[2]}, c3 = {a[3], b[3], c[3], d[3]};
      LOCALMEAN_STORE4(w + k, c0 + f * (c1 + f * (c2 + f * c3)));
    }
    for (std::size_t k = full; k < len; ++k) {
      double t = (Root ? std::sqrt(r2[k]) : r2[k]) * inv_step;
      t = t < last ? t : last;
      const int i = static_cast<int>(t);
      const double f = t - static_cast<double>(i);
      const double* c = coef + 4 * static_cast<std::ptrdiff_t>(i);
      w[k] = c[0] + f * (c[1] + f * (c[2] + f * c[3]));
    }
  }
  // The one cubic (x_upper - x) q(x) at x = min(r2 or sqrt(r2), x_upper), as evaluate().
  template <bool Root, class Len>
  LOCALMEAN_INLINE void evaluate_polynomial(const double* r2, Len len, double* w) const {
    const double top = x_upper_, q0 = quotient_[0], q1 = quotient_[1], q2 = quotient_[2];
    const v4d top_lanes = {top, top, top, top};
    const std::size_t full = len - len % 4;
    for (std::size_t k = 0; k < full; k += 4) {
      v4d x = LOCALMEAN_LOAD4(r2 + k);
      if (Root) root_lanes(x);
      x = x < top_lanes ? x : top_lanes;
      LOCALMEAN_STORE4(w + k, (top - x) * (q0 + x * (q1 + x * q2)));
    }
    for (std::size_t k = full; k < len; ++k) {
      double x = Root ? std::sqrt(r2[k]) : r2[k];
      x = x < top ? x : top;
      w[k] = (top - x) * (q0 + x * (q1 + x * q2));
    }
  }
  double piece_value(std::size_t i, double f) const {
    const double* c = coef_.data() + 4 * i;
    return c[0] + f * (c[1] + f * (c[2] + f * c[3]));
  }
  // Whether the table is one cubic p vanishing at x_upper: the cubic of the first interval, in
  // x, matches every node and every interval's midpoint to rounding, and the last node is 0 to
  // rounding. Then p(x) = (x_upper - x) q(x) + p(x_upper), and the remainder is dropped.
  void find_polynomial(const double* values) {
    double p[4], scale = 1.0, peak = 0.0;
    for (int e = 0; e < 4; ++e, scale *= inv_step_) p[e] = coef_[e] * scale;
    auto at = [&p](double x) { return p[0] + x * (p[1] + x * (p[2] + x * p[3])); };
    for (std::size_t j = 0; j <= intervals_; ++j) peak = std::max(peak, std::fabs(values[j]));
    const double tol = kPolynomialTolerance * peak, step = 1.0 / inv_step_;
    bool one = std::fabs(values[intervals_]) <= tol;
    for (std::size_t j = 0; one && j <= intervals_; ++j)
      one = std::fabs(at(j * step) - values[j]) <= tol &&
            (j == intervals_ || std::fabs(at((j + 0.5) * step) - piece_value(j, 0.5)) <= tol);
    if (!one) return;
    // Synthetic division by (x - x_upper): p = (x - x_upper) s + r, and q = -s.
    const double s2 = p[3], s1 = p[2] + x_upper_ * s2, s0 = p[1] + x_upper_ * s1;
    quotient_[0] = -s0;
    quotient_[1] = -s1;
    quotient_[2] = -s2;
    polynomial_ = true;
  }
  static constexpr double kPolynomialTolerance = 1e-14;
  // The cubic through nodes first..first+3, in the coordinate t = x / step - i of interval i.
  void fit_interval(const double* values, std::size_t i) {
    const std::size_t first = i == 0 ? 0 : std::min(i - 1, intervals_ - 3);
    double* c = coef_.data() + 4 * i;
    for (std::size_t k = 0; k < 4; ++k) {
      // The Lagrange basis polynomial of node k, expanded in powers of t.
      double basis[4] = {1.0, 0.0, 0.0, 0.0}, denom = 1.0;
      const double pk = static_cast<double>(first + k) - static_cast<double>(i);
      for (std::size_t m = 0; m < 4; ++m) {
        if (m == k) continue;
        const double pm = static_cast<double>(first + m) - static_cast<double>(i);
        for (int e = 3; e > 0; --e) basis[e] = basis[e - 1] - pm * basis[e];
        basis[0] *= -pm;
        denom *= pk - pm;
      }
      for (int e = 0; e < 4; ++e) c[e] += values[first + k] * basis[e] / denom;
    }
  }
  // The integrals run over equal pieces of [0, upper] in u: the table's intervals when it is
  // tabulated in u and fine enough (then 4-point Gauss-Legendre is exact for the cubic times u^2,
  // and for its square), else at least kIntegralPieces of them.
  std::size_t pieces() const {
    return squared_ ? std::max(intervals_, kIntegralPieces)
                    : intervals_ * ((kIntegralPieces + intervals_ - 1) / intervals_);
  }
  // int g(u)^power u^moment du over the first `share` of piece i.
  double piece_integral(std::size_t i, double share, int power, int moment) const {
    static const double node[4] = {0.0694318442029737, 0.3300094782075719, 0.6699905217924281,
                                   0.9305681557970263};
    static const double weight[4] = {0.1739274225687269, 0.3260725774312731, 0.3260725774312731,
                                     0.1739274225687269};
    const double step = upper_ / pieces();
    double sum = 0.0;
    for (int k = 0; k < 4; ++k) {
      const double u = (i + share * node[k]) * step;
      sum += weight[k] * std::pow(shape(u * u), power) * std::pow(u, moment);
    }
    return sum * share * step;
  }
  // The radius where int_0^r g reaches `target` (of int_0^upper g), by bisection within the
  // piece where the running integral passes it.
  double radius_at_mass(double target) const {
    const double step = upper_ / pieces();
    double below = 0.0;
    std::size_t i = 0;
    for (; i + 1 < pieces(); ++i) {
      const double piece = piece_integral(i, 1.0, 1, 0);
      if (below + piece >= target) break;
      below += piece;
    }
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 60; ++it) {
      const double mid = 0.5 * (lo + hi);
      (below + piece_integral(i, mid, 1, 0) < target ? lo : hi) = mid;
    }
    return (i + 0.5 * (lo + hi)) * step;
  }
  void fill_info(bool compact) {
    const double half = integral(1, 0);  // int_0^upper g: half the mass on the line
    const double c = 0.5 / half;
    info_.name = name_.c_str();
    info_.compact = compact;
    info_.cutoff = upper_;
    info_.constant = c;
    info_.mu2 = 2.0 * c * integral(1, 2);
    info_.roughness = 2.0 * c * c * integral(2, 0);
    info_.multivariate = true;
    // Density grids reach the support, or where the tails hold the Gaussian's 3-sd mass.
    info_.reach = compact ? upper_ : radius_at_mass(half * (1.0 - 0.0026997960632601866));
    info_.quartile = radius_at_mass(0.5 * half);
    info_.shadow_factor = 0.0;
  }

  std::string name_;
  std::size_t intervals_;
  double upper_;
  bool squared_;     // tabulated in x = u^2 (else in x = u)
  double x_upper_;   // upper_ in the table's variable
  double inv_step_;  // 1 / the node spacing in x
  std::vector<double> coef_;  // 4 per interval, then a row of zeros (beyond `upper`)
  bool polynomial_ = false;   // one cubic (x_upper - x) q(x): the coefficients of q
  double quotient_[3] = {0.0, 0.0, 0.0};
  KernelInfo info_{};
};

inline const KernelInfo& profile_info(const KernelProfile& profile) { return profile.info(); }

// The run-time rows of the registry. Written only from the main thread (registration from R),
// never while an engine request runs; a profile registered again under its name replaces it.
inline std::vector<std::unique_ptr<KernelProfile>>& user_profiles() {
  static std::vector<std::unique_ptr<KernelProfile>> profiles;
  return profiles;
}

inline KernelType register_profile(std::unique_ptr<KernelProfile> profile) {
  std::vector<std::unique_ptr<KernelProfile>>& rows = user_profiles();
  std::size_t j = 0;
  while (j < rows.size() && rows[j]->name() != profile->name()) ++j;
  const KernelType type = static_cast<KernelType>(kKernelCount + j);
  profile->set_type(type);
  if (j == rows.size())
    rows.push_back(std::move(profile));
  else
    rows[j] = std::move(profile);
  return type;
}

// The tabulated profile of a user kernel; null for the registry's own kernels.
inline const KernelProfile* kernel_profile(KernelType type) {
  if (!is_tabulated(type)) return nullptr;
  return user_profiles()[static_cast<std::size_t>(type) - kKernelCount].get();
}

// Returns false when the name is unknown.
inline bool kernel_from_name(const std::string& name, KernelType* type) {
  std::size_t size;
  const KernelInfo* table = kernel_table(&size);
  for (std::size_t i = 0; i < size; ++i) {
    if (name == table[i].name) {
      *type = table[i].type;
      return true;
    }
  }
  const std::vector<std::unique_ptr<KernelProfile>>& rows = user_profiles();
  for (std::size_t j = 0; j < rows.size(); ++j) {
    if (rows[j]->name() == name) {
      *type = static_cast<KernelType>(kKernelCount + j);
      return true;
    }
  }
  return false;
}

// The profile of any kernel at squared scaled distance r2, one value at a time (hot loops take
// a user kernel's profile from their data: shape_at in sweep.hpp).
inline double kernel_shape(KernelType type, double r2) {
  if (const KernelProfile* profile = kernel_profile(type)) return profile->shape(r2);
  return with_kernel(type, [r2](auto k) { return decltype(k)::exact(r2); });
}

// -d shape(r2) / d r2 of a registry kernel (see slope(); NaN for a user kernel: a tabulated
// profile has no slope).
inline double kernel_slope(KernelType type, double r2) {
  return with_kernel(type, [r2](auto k) { return decltype(k)::slope(r2); });
}

// The kernel value c * shape(u^2) at scaled distance u (a density on the line).
inline double kernel_value(KernelType type, double u) {
  return kernel_info(type).constant * kernel_shape(type, u * u);
}

// The kernel's distribution function on the line, int_{-inf}^u k(t) dt: the integrated kernel
// of conditional distribution functions (F(y | x) is a local mean of it). Closed forms of the
// registry's kernels; NaN for a user kernel (a tabulated profile has none).
inline double kernel_cdf(KernelType type, double u) {
  if (std::isnan(u)) return u;
  const double a = std::fabs(u), s = u < 0.0 ? -1.0 : 1.0;
  // half the mass of a symmetric compact kernel plus its signed integral from 0 to min(|u|, 1)
  auto compact = [s](double half_integral) { return 0.5 + s * half_integral; };
  const double b = std::min(a, 1.0), b2 = b * b;
  switch (type) {
  case KernelType::gaussian: return 0.5 * std::erfc(-u / std::sqrt(2.0));
  case KernelType::epanechnikov: return compact(0.75 * b * (1.0 - b2 / 3.0));
  case KernelType::uniform: return compact(0.5 * b);
  case KernelType::triangular: return compact(b - 0.5 * b2);
  case KernelType::biweight: return compact(15.0 / 16.0 * b * (1.0 - b2 * (2.0 / 3.0 - b2 / 5.0)));
  case KernelType::triweight:
    return compact(35.0 / 32.0 * b * (1.0 - b2 * (1.0 - b2 * (3.0 / 5.0 - b2 / 7.0))));
  case KernelType::tricube: {
    const double b3 = b2 * b;
    return compact(70.0 / 81.0 * b * (1.0 - b3 * (0.75 - b3 * (3.0 / 7.0 - b3 / 10.0))));
  }
  case KernelType::cosine: return compact(0.5 * std::sin(0.5 * kPi * b));
  case KernelType::laplace: return compact(0.5 * -std::expm1(-a));
  case KernelType::cauchy: return 0.5 + std::atan(u) / kPi;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Normalising constant of the radial kernel in d dimensions: 1 / int_{R^d} shape(||u||^2) du,
// by composite Simpson integration of the radial profile (d = 1 returns the tabulated constant).
inline double radial_constant(KernelType type, int d) {
  const KernelInfo& info = kernel_info(type);
  if (d == 1) return info.constant;
  const double sphere = 2.0 * std::pow(kPi, 0.5 * d) / std::tgamma(0.5 * d);
  if (const KernelProfile* profile = kernel_profile(type))
    return 1.0 / (sphere * profile->integral(1, d - 1));
  if (type == KernelType::gaussian) return std::pow(2.0 * kPi, -0.5 * d);
  if (type == KernelType::cauchy && d > 1) return 0.0;  // shape not integrable for d >= 2
  // Unbounded profiles (here only the Laplace's, exp(-r)) are integrated up to r = 60: the tail
  // of exp(-r) r^(d-1) beyond is below 1e-15 of the integral up to d = 10. An even number of
  // Simpson steps, fine enough that the constants match their closed forms to about 1e-12
  // (tools/core-test.cpp checks some).
  constexpr double kLaplaceUpper = 60.0;
  constexpr int kSimpsonSteps = 20000;
  const double upper = info.compact ? 1.0 : kLaplaceUpper;
  const int steps = kSimpsonSteps;
  const double step = upper / steps;
  double sum = 0.0;
  for (int i = 0; i <= steps; ++i) {
    const double r = i * step;
    const double f = with_kernel(type, [r](auto k) { return decltype(k)::exact(r * r); }) *
                     std::pow(r, d - 1);
    sum += f * ((i == 0 || i == steps) ? 1.0 : (i % 2 ? 4.0 : 2.0));
  }
  return 1.0 / (sphere * sum * step / 3.0);
}

// Kernels of categorical variables, whose c levels are coded 0..c-1, with smoothing parameter
// lambda: the weight of a data point's level given the query's level.
// - Aitchison and Aitken (1976), unordered levels: 1 - lambda at the query's level and
//   lambda / (c - 1) at the others; lambda in [0, (c - 1) / c], where every level weighs the same.
// - Li and Racine (2007), ordered levels: lambda^|difference of ranks|, lambda in [0, 1].
// - Wang and van Ryzin (1981), ordered levels (statsmodels' default, np's "wangvanryzin"):
//   1 - lambda at the query's level and (1 - lambda) / 2 lambda^|difference of ranks| at the
//   others, lambda in [0, 1] (np's range; at 1 every weight vanishes).
// lambda = 0 keeps the query's level only. For probabilities (densities) every data point must
// carry unit mass: the ordered weights are then divided by their sum over the query's levels
// (np's "racineliyan" form); the Aitchison-Aitken weights already sum to 1.
enum class DiscreteKernel { aitchison_aitken, li_racine, wang_van_ryzin };

// The ordered kernels' weight at a difference of ranks `diff`.
inline double ordered_weight(DiscreteKernel kernel, int diff, double lambda) {
  if (kernel == DiscreteKernel::wang_van_ryzin)
    return diff == 0 ? 1.0 - lambda : 0.5 * (1.0 - lambda) * std::pow(lambda, diff);
  return std::pow(lambda, diff);
}

inline double discrete_weight(DiscreteKernel kernel, int query, int level, int levels,
                              double lambda, bool unit_mass) {
  if (kernel == DiscreteKernel::aitchison_aitken)
    return query == level ? 1.0 - lambda : lambda / (levels - 1);
  const double w = ordered_weight(kernel, std::abs(query - level), lambda);
  if (!unit_mass) return w;
  double mass = 0.0;
  for (int other = 0; other < levels; ++other)
    mass += ordered_weight(kernel, std::abs(other - level), lambda);
  return w / mass;
}

// d discrete_weight / d lambda, for the weights without unit mass (regression): -1 and
// 1 / (c - 1) for Aitchison-Aitken, |difference| lambda^(|difference| - 1) for Li-Racine,
// -1 and (|d| lambda^(|d| - 1) (1 - lambda) - lambda^|d|) / 2 for Wang-van Ryzin.
inline double discrete_weight_derivative(DiscreteKernel kernel, int query, int level, int levels,
                                         double lambda) {
  if (kernel == DiscreteKernel::aitchison_aitken) return query == level ? -1.0 : 1.0 / (levels - 1);
  const int diff = std::abs(query - level);
  if (kernel == DiscreteKernel::wang_van_ryzin) {
    if (diff == 0) return -1.0;
    return 0.5 * (diff * std::pow(lambda, diff - 1) * (1.0 - lambda) - std::pow(lambda, diff));
  }
  return diff == 0 ? 0.0 : diff * std::pow(lambda, diff - 1);
}

// The upper bound of lambda: beyond it a kernel would favour the other levels.
inline double discrete_lambda_max(DiscreteKernel kernel, int levels) {
  return kernel == DiscreteKernel::aitchison_aitken ? (levels - 1.0) / levels : 1.0;
}

}  // namespace localmean
