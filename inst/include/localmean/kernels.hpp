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
#include <limits>
#include <string>

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

inline const KernelInfo& kernel_info(KernelType type) {
  std::size_t size;
  const KernelInfo* table = kernel_table(&size);
  return table[static_cast<int>(type)];
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
  return false;
}

// exp(x) = exp(x / 2^S)^(2^S) for x <= 0, with the degree-D Taylor polynomial at x / 2^S: no
// branches or bit tricks, so loops over it vectorise (the compiler unrolls the fixed loops).
template <int S, int D> inline double exp_by_squaring(double x) {
  const double r = x / static_cast<double>(1 << S);
  double coef = 1.0;
  for (int i = 2; i <= D; ++i) coef /= i;  // 1 / D!
  double p = coef;
  for (int i = D; i >= 1; --i) {
    coef *= i;  // 1 / (i - 1)!
    p = p * r + coef;
  }
  for (int i = 0; i < S; ++i) p *= p;
  return p;
}

// exp(x) for -32 <= x <= 0 (the Gaussian within 8 sd, the Laplace within 32 scales): relative
// error below 1e-13.
inline double exp_cutoff_range(double x) { return exp_by_squaring<8, 9>(x); }

// exp(x) for -745 <= x <= 0, the whole range where exp is not zero: relative error below 1e-12.
inline double exp_wide_range(double x) { return exp_by_squaring<12, 11>(x); }

// 1 when r2 <= cut2, else 0, without a branch (vectorisable).
inline double within(double r2, double cut2) { return 0.5 + 0.5 * std::copysign(1.0, cut2 - r2); }

// exp(-kExpUnderflow) is about 5e-324, the smallest positive (subnormal) double: below it, exp
// underflows to zero, so wide() caps its argument there and returns zero beyond.
constexpr double kExpUnderflow = 745.0;

// Kernel shapes as functions of the squared scaled distance r2 = ||u||^2, without the constant:
// the local mean does not need it, and density estimates multiply it back. Three versions:
// shape(), the fastest, accurate for r2 <= fast_limit(); wide(), accurate for any r2 and also
// vectorisable; exact(), with the standard library, for single values.
struct Gaussian {
  static constexpr double fast_limit() { return 64.0; }
  static double shape(double r2) { return exp_cutoff_range(-0.5 * r2); }
  static double wide(double r2) {
    constexpr double last = 2.0 * kExpUnderflow;  // r2 where -r2 / 2 reaches the underflow
    return within(r2, last) * exp_wide_range(-0.5 * std::min(r2, last));
  }
  static double exact(double r2) { return std::exp(-0.5 * r2); }
};
// The polynomial kernels (1 - u^2)^P: Epanechnikov, biweight and triweight.
template <int P> struct QuadraticPower {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) {
    const double t = std::max(0.0, 1.0 - r2);
    double p = t;
    for (int i = 1; i < P; ++i) p *= t;
    return p;
  }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};
using Epanechnikov = QuadraticPower<1>;
struct Uniform {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) { return within(r2, 1.0); }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};
struct Triangular {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) { return std::max(0.0, 1.0 - std::sqrt(r2)); }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};
using Biweight = QuadraticPower<2>;
using Triweight = QuadraticPower<3>;
struct Tricube {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) {
    const double r = std::sqrt(r2);
    const double t = std::max(0.0, 1.0 - r * r * r);
    return t * t * t;
  }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};
struct Cosine {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) { return r2 < 1.0 ? std::cos(0.5 * kPi * std::sqrt(r2)) : 0.0; }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};
struct Laplace {
  static constexpr double fast_limit() { return 1024.0; }
  static double shape(double r2) { return exp_cutoff_range(-std::sqrt(r2)); }
  static double wide(double r2) {
    constexpr double last = kExpUnderflow * kExpUnderflow;  // r2 where -sqrt(r2) reaches it
    return within(r2, last) * exp_wide_range(-std::sqrt(std::min(r2, last)));
  }
  static double exact(double r2) { return std::exp(-std::sqrt(r2)); }
};
struct Cauchy {
  static constexpr double fast_limit() { return kInf; }
  static double shape(double r2) { return 1.0 / (1.0 + r2); }
  static double exact(double r2) { return shape(r2); }
  static double wide(double r2) { return shape(r2); }
};

// Calls f(KernelStruct{}) for the kernel type, so that hot loops are compiled once per kernel.
template <class F>
auto with_kernel(KernelType type, F&& f) -> decltype(f(Gaussian{})) {
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

// The kernel value c * shape(u^2) at scaled distance u (a density on the line).
inline double kernel_value(KernelType type, double u) {
  const double s = with_kernel(type, [u](auto k) { return decltype(k)::exact(u * u); });
  return kernel_info(type).constant * s;
}

// Normalising constant of the radial kernel in d dimensions: 1 / int_{R^d} shape(||u||^2) du,
// by composite Simpson integration of the radial profile (d = 1 returns the tabulated constant).
inline double radial_constant(KernelType type, int d) {
  const KernelInfo& info = kernel_info(type);
  if (d == 1) return info.constant;
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
  const double sphere = 2.0 * std::pow(kPi, 0.5 * d) / std::tgamma(0.5 * d);
  return 1.0 / (sphere * sum * step / 3.0);
}

// Kernels of categorical variables, whose c levels are coded 0..c-1, with smoothing parameter
// lambda: the weight of a data point's level given the query's level.
// - Aitchison and Aitken (1976), unordered levels: 1 - lambda at the query's level and
//   lambda / (c - 1) at the others; lambda in [0, (c - 1) / c], where every level weighs the same.
// - Li and Racine (2007), ordered levels: lambda^|difference of ranks|, lambda in [0, 1].
// lambda = 0 keeps the query's level only. For probabilities (densities) every data point must
// carry unit mass: the Li-Racine weights are then divided by their sum over the query's levels
// (np's "racineliyan" form); the Aitchison-Aitken weights already sum to 1.
enum class DiscreteKernel { aitchison_aitken, li_racine };

inline double discrete_weight(DiscreteKernel kernel, int query, int level, int levels,
                              double lambda, bool unit_mass) {
  if (kernel == DiscreteKernel::aitchison_aitken)
    return query == level ? 1.0 - lambda : lambda / (levels - 1);
  const double w = std::pow(lambda, std::abs(query - level));
  if (!unit_mass) return w;
  double mass = 0.0;
  for (int other = 0; other < levels; ++other) mass += std::pow(lambda, std::abs(other - level));
  return w / mass;
}

// The upper bound of lambda: beyond it a kernel would favour the other levels.
inline double discrete_lambda_max(DiscreteKernel kernel, int levels) {
  return kernel == DiscreteKernel::aitchison_aitken ? (levels - 1.0) / levels : 1.0;
}

}  // namespace localmean
