// Conditional distributions on the engine's windows: the kernel on the predictors is the
// engine's (its data, windows and weights); the kernel in the response y comes from the
// registry. Two requests of kde(y ~ x): conditional quantiles (F(y | x) = tau solved in each
// query's window) and the moments of the likelihood cross-validation score of the Gaussian
// product kernel with its derivatives in the log-bandwidths.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "engine.hpp"

namespace localmean {

// Beyond this many bandwidths the y-kernel's distribution function of a registry kernel is 0 or
// 1 to within 1e-17 (its support's edge for compact kernels): the points beyond count whole or
// not at all. Infinite for the Cauchy's heavy tails.
inline double cdf_reach(KernelType kernel) {
  if (kernel_info(kernel).compact) return 1.0;
  if (kernel == KernelType::gaussian) return 8.5;
  if (kernel == KernelType::laplace) return 40.0;
  return kInf;
}

namespace detail {

// erfc(a) = exp(-a^2) t g(x) for 0 <= a <= 6.02, t = 4 / (4 + a), x = t mapped from
// [kErfcT0, 1] to [-1, 1], g a polynomial of degree 17 (its Chebyshev series computed at 40
// digits, in powers of x): erfc within 1e-15 absolute in double arithmetic (with an exact
// exponential; exp_nonpositive() adds at most 1e-14 relative), branch-free, so that loops over
// it vectorise. Beyond a = 6.02 (8.5 standard deviations, cdf_reach()) erfc is below
// 2e-17: points there count whole or not at all.
constexpr double kErfcT0 = 0.3992015968063872;  // 4 / (4 + 6.02)
constexpr double kErfcPoly[18] = {
    0.41349637818595414,   0.2950244655288126,     0.1699569385310823,
    0.07972709513677784,   0.03030004817637295,    0.009127381878953504,
    0.0020650147103443216, 0.0003013822816730462,  9.50138118547554e-06,
    -6.987213413214606e-06, -1.336435150039995e-06, 6.586338370609307e-08,
    5.2386505111131936e-08, 1.5080517297639841e-09, -1.86443209958352e-09,
    -1.2168742971072085e-10, 6.11231409366216e-11, 4.462927748421431e-12};

// Adds the 2 kBlock window points ys[k], weights w[k] at y to the lanes of F and f:
// lanes[k % kLanes] += w G(u) and lanes[kLanes + k % kLanes] += w exp(-u^2 / 2),
// u = (y - ys[k]) inv_h, G the standard normal distribution function: exactly (the erfc above)
// or, with `approximate`, within 1.5e-7 (Abramowitz and Stegun 7.1.26: erfc(a) = t (a1 + t (a2 +
// ...)) exp(-a^2), t = 1 / (1 + p a), a = |u| / sqrt(2)). Each step is a loop over the points:
// a long block keeps many independent chains in flight.
LOCALMEAN_INLINE void gaussian_cdf_block(bool approximate, const double* ys, const double* w,
                                         double y, double inv_h, double* lanes) {
  constexpr double p = 0.3275911, a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741,
                   a4 = -1.453152027, a5 = 1.061405429;
  constexpr double kScale = 2.0 / (1.0 - kErfcT0);
  constexpr std::size_t len = 2 * kBlock;
  const auto full = std::integral_constant<std::size_t, kBlock>();
  double u[len], e[len], t[len], x[len], g[len];
  for (std::size_t k = 0; k < len; ++k) {
    u[k] = (y - ys[k]) * inv_h;
    e[k] = -0.5 * u[k] * u[k];
    const double a = std::fabs(u[k]) * 0.70710678118654752440;
    t[k] = (approximate ? p : 0.25) * a;
    g[k] = kErfcPoly[17];
  }
  for (std::size_t k = 0; k < len; ++k) t[k] = 1.0 / (1.0 + t[k]);
  exp_nonpositive_lanes(e, std::integral_constant<std::size_t, len>());
  if (approximate) {
    for (std::size_t k = 0; k < len; ++k)
      g[k] = t[k] * (a1 + t[k] * (a2 + t[k] * (a3 + t[k] * (a4 + t[k] * a5))));
  } else {
    for (std::size_t k = 0; k < len; ++k) x[k] = (t[k] - kErfcT0) * kScale - 1.0;
    LOCALMEAN_NO_UNROLL
    for (std::size_t j = 17; j > 0; --j)
      for (std::size_t k = 0; k < len; ++k) g[k] = g[k] * x[k] + kErfcPoly[j - 1];
    for (std::size_t k = 0; k < len; ++k) g[k] *= t[k];
  }
  for (std::size_t k = 0; k < len; ++k) {
    const double tail = 0.5 * g[k] * e[k];
    t[k] = u[k] >= 0.0 ? 1.0 - tail : tail;
  }
  for (std::size_t h = 0; h < len; h += kBlock) {
    add_product(lanes, w + h, t + h, full);
    add_product(lanes + kLanes, w + h, e + h, full);
  }
}

// sums[0] = sum_b w[b] G(u_b) and sums[1] = sum_b w[b] exp(-u_b^2 / 2) over b in [begin, end)
// (gaussian_cdf_block()), 2 kBlock points at a time (the last ones padded with weight 0), the
// lanes added in a fixed order.
LOCALMEAN_INLINE void gaussian_cdf_sums(bool approximate, const double* ys, const double* w,
                                        std::size_t begin, std::size_t end, double y,
                                        double inv_h, double* sums) {
  constexpr std::size_t len = 2 * kBlock;
  double lanes[2 * kLanes] = {}, y_pad[len], w_pad[len];
  for (std::size_t s = begin; s < end; s += len) {
    const double* yb = ys + s;
    const double* wb = w + s;
    if (end - s < len) {
      for (std::size_t k = 0; k < len; ++k) {
        y_pad[k] = s + k < end ? ys[s + k] : y;
        w_pad[k] = s + k < end ? w[s + k] : 0.0;
      }
      yb = y_pad;
      wb = w_pad;
    }
    gaussian_cdf_block(approximate, yb, wb, y, inv_h, lanes);
  }
  for (std::size_t c = 0; c < 2; ++c) {
    double sum = 0.0;
    for (std::size_t k = 0; k < kLanes; ++k) sum += lanes[c * kLanes + k];
    sums[c] = sum;
  }
}

}  // namespace detail

// The responses of one query's window, ascending, with their weights normalised to sum to one
// and the running sums of those weights: F(y | x) and f(y | x) at any y in one pass over the
// points within the y-kernel's reach of y.
class ResponseWindow {
public:
  ResponseWindow(KernelType kernel, double hy)
      : kernel_(kernel), hy_(hy), reach_(cdf_reach(kernel) * hy),
        constant_(kernel_info(kernel).constant) {}
  // A query's window: `weight` holds the kernel weights (with the level weights) of the tree
  // positions of `runs` (the window's ranges, [first, second)), 0 at every other position;
  // `prior` the prior weights in tree order (null: none). Its points of positive weight are put
  // in response order (ties in tree order): `by_y` holds the tree positions in that order,
  // `rank` its inverse and `y_sorted` the responses in that order, so that a window holding a
  // good share of the points is put in order by one pass over by_y rather than by sorting.
  // False when no weight is positive.
  bool load(const double* weight, const double* prior,
            const std::vector<std::pair<std::size_t, std::size_t>>& runs,
            const std::vector<std::size_t>& by_y, const std::vector<std::size_t>& rank,
            const double* y_sorted) {
    const std::size_t n = by_y.size();
    std::size_t k = 0;
    for (const auto& run : runs) k += run.second - run.first;
    if (k * 8 >= n) {
      y_.resize(n);
      w_.resize(n);
      k = 0;
      for (std::size_t r = 0; r < n; ++r) {
        const std::size_t p = by_y[r];
        const double v = prior ? weight[p] * prior[p] : weight[p];
        y_[k] = y_sorted[r];
        w_[k] = v;
        k += v > 0.0;
      }
    } else {
      idx_.clear();
      for (const auto& run : runs)
        for (std::size_t p = run.first; p < run.second; ++p)
          if ((prior ? weight[p] * prior[p] : weight[p]) > 0.0) idx_.push_back(p);
      std::sort(idx_.begin(), idx_.end(),
                [&](std::size_t a, std::size_t b) { return rank[a] < rank[b]; });
      k = idx_.size();
      y_.resize(k);
      w_.resize(k);
      for (std::size_t b = 0; b < k; ++b) {
        const std::size_t p = idx_[b];
        y_[b] = y_sorted[rank[p]];
        w_[b] = prior ? weight[p] * prior[p] : weight[p];
      }
    }
    y_.resize(k);
    w_.resize(k);
    double total = 0.0;
    for (double w : w_) total += w;
    if (!(total > 0.0)) return false;
    cum_.assign(k + 1, 0.0);
    for (std::size_t b = 0; b < k; ++b) {
      w_[b] /= total;
      cum_[b + 1] = cum_[b] + w_[b];
    }
    return true;
  }
  // F (and f, when asked) at y.
  void at(double y, double* F, double* f) const {
    const std::size_t lo = std::isfinite(reach_) ? static_cast<std::size_t>(
        std::lower_bound(y_.begin(), y_.end(), y - reach_) - y_.begin()) : 0;
    const std::size_t hi = std::isfinite(reach_) ? static_cast<std::size_t>(
        std::upper_bound(y_.begin(), y_.end(), y + reach_) - y_.begin()) : y_.size();
    if (gaussian()) {
      gaussian_sums(false, lo, hi, y, F, f);
      return;
    }
    double cdf = cum_[lo], dens = 0.0;
    for (std::size_t b = lo; b < hi; ++b) {
      const double u = (y - y_[b]) / hy_;
      cdf += w_[b] * kernel_cdf(kernel_, u);
      if (f) dens += w_[b] * kernel_shape(kernel_, u * u);
    }
    *F = cdf;
    if (f) *f = dens * constant_ / hy_;
  }
  // For the Gaussian kernel: F and f at y within 1e-7 (absolute, in F): the distribution
  // function from the rational approximation of erfc of Abramowitz and Stegun (7.1.26, error
  // below 1.5e-7) sharing one exponential with the density. Cheaper than at(): the first steps
  // of invert_cdf(), whose last step takes the exact at(). Points beyond 5.5 bandwidths count
  // whole or not at all (an error below 2e-8, within the approximation's).
  void at_approximately(double y, double* F, double* f) const {
    const double reach = 5.5 * hy_;
    const std::size_t lo = static_cast<std::size_t>(
        std::lower_bound(y_.begin(), y_.end(), y - reach) - y_.begin());
    const std::size_t hi = static_cast<std::size_t>(
        std::upper_bound(y_.begin(), y_.end(), y + reach) - y_.begin());
    gaussian_sums(true, lo, hi, y, F, f);
  }
  bool gaussian() const { return kernel_ == KernelType::gaussian; }
  // The weighted empirical tau-quantile of the responses: a start within a bandwidth or so.
  double start(double tau) const {
    const std::size_t b = static_cast<std::size_t>(
        std::lower_bound(cum_.begin() + 1, cum_.end(), tau) - cum_.begin() - 1);
    return y_[std::min(b, y_.size() - 1)];
  }
  double bandwidth() const { return hy_; }

private:
  // F and f of the Gaussian kernel at y from the points [lo, hi) (the others count whole or
  // not at all), in the best build for the processor.
  void gaussian_sums(bool approximate, std::size_t lo, std::size_t hi, double y, double* F,
                     double* f) const {
    double sums[2];
    best_build([&]() LOCALMEAN_LAMBDA_INLINE {
      detail::gaussian_cdf_sums(approximate, y_.data(), w_.data(), lo, hi, y, 1.0 / hy_, sums);
    });
    *F = cum_[lo] + sums[0];
    if (f) *f = sums[1] * constant_ / hy_;
  }

  KernelType kernel_;
  double hy_, reach_, constant_;
  std::vector<std::size_t> idx_;
  std::vector<double> y_, w_, cum_;
};

// The root of F(y | x) = tau (F nondecreasing) by a safeguarded Newton iteration from y with
// F and f from evaluate(y, &F, &f): the points evaluated bracket the root as they come; while one
// side is open a step moves at most a bandwidth, doubling each time it is cut back, and once
// both are known a step that leaves the bracket (or a vanishing f) is replaced by bisection.
// Converged at a change of `tol` relative (the step then taken), or at a Newton step within the
// bracket below `final_step` (the root then lies within about final_step^2 / bandwidth of the
// step's end), at most max_iter steps.
template <class Evaluate>
double newton_root(const ResponseWindow& rw, double tau, double y, double tol, double final_step,
                   int max_iter, Evaluate&& evaluate) {
  double lo = -kInf, hi = kInf, reach = rw.bandwidth();
  for (int iter = 0; iter < max_iter; ++iter) {
    double F, f;
    evaluate(y, &F, &f);
    const double gap = F - tau;
    if (std::fabs(gap) <= 1e-14) break;
    (gap < 0.0 ? lo : hi) = y;
    double next = y - gap / f;
    if (std::isfinite(next) && next > lo && next < hi && std::fabs(next - y) <= final_step)
      return next;
    if (!std::isfinite(lo) || !std::isfinite(hi)) {
      // toward the open side: Newton's step, at most `reach`
      const double toward = gap < 0.0 ? y + reach : y - reach;
      if (!std::isfinite(next) || std::fabs(next - y) > reach) {
        next = toward;
        reach *= 2.0;
      }
    } else if (!(std::isfinite(next) && next > lo && next < hi)) {
      next = 0.5 * (lo + hi);
    }
    const double scale = std::max(std::max(std::fabs(y), std::fabs(next)), 1.0);
    const bool converged = (std::isfinite(lo) && std::isfinite(hi) && hi - lo <= tol * scale) ||
                           std::fabs(next - y) <= tol * scale;
    y = next;
    if (converged) break;
  }
  return y;
}

// The quantile: F(y | x) = tau solved from the weighted empirical quantile to 1e-13 relative.
// For the Gaussian kernel the approximate F (at_approximately()) leads to within about 1e-6
// bandwidths of the root (its last step below 1e-3 bandwidths, which leaves about 1e-6), and
// Newton steps on the exact F finish: a last step below 1e-5 bandwidths leaves an error below
// about 1e-10 bandwidths (f' / f is at most of the order of 1 / bandwidth), so one exact pass,
// rarely two, instead of five.
inline double invert_cdf(const ResponseWindow& rw, double tau, int max_iter) {
  const double h = rw.bandwidth();
  auto exact = [&](double y, double* F, double* f) { rw.at(y, F, f); };
  double y = rw.start(tau);
  if (rw.gaussian()) {
    y = newton_root(rw, tau, y, 1e-9, 1e-3 * h, max_iter,
                    [&](double at, double* F, double* f) { rw.at_approximately(at, F, f); });
    return newton_root(rw, tau, y, 1e-13, 1e-5 * h, max_iter, exact);
  }
  return newton_root(rw, tau, y, 1e-13, 0.0, max_iter, exact);
}

namespace detail {

// The kernel weights (with the level weights) of query q's window at their tree positions in
// `weight` (0 elsewhere, as the caller keeps it between queries), the window's ranges of tree
// positions in `runs`: the points collect_window() finds (in `win`).
template <class K>
__attribute__((noinline)) void window_weights(
    K, const LocalData& data, const double* q, const double* levels, const Reach& how,
    double* weight, std::vector<std::pair<std::size_t, std::size_t>>& runs, Window& win) {
  runs.clear();
  win.clear();
  collect_window<K>(data, q, levels, 1.0, how, win);
  for (std::size_t b = 0; b < win.pos.size(); ++b) {
    const std::size_t p = win.pos[b];
    weight[p] = win.kernel[b];
    if (!runs.empty() && runs.back().second == p)
      ++runs.back().second;
    else
      runs.emplace_back(p, p + 1);
  }
}
// The Gaussian's (the default kernel): the engine's weights of whole blocks of the window's
// leaves, the window's part of each kept, in the best build for the processor.
__attribute__((noinline)) inline void window_weights(
    Gaussian kernel, const LocalData& data, const double* q, const double* levels,
    const Reach& how, double* weight, std::vector<std::pair<std::size_t, std::size_t>>& runs,
    Window& win) {
  const std::size_t n = data.n();
  if (n < kBlock) return window_weights<Gaussian>(kernel, data, q, levels, how, weight, runs, win);
  runs.clear();
  visit_window<Gaussian>(data, q, 1.0, how,
                         [&](std::size_t b, std::size_t e, DistanceRange range, double cut2) {
    runs.emplace_back(b, e);
    best_build([&]() LOCALMEAN_LAMBDA_INLINE {
      for (std::size_t s = b; s < e; s += kBlock) {
        const std::size_t from = std::min(s, n - kBlock);
        double w[kBlock];
        block_weights<Gaussian>(data, q, levels, 1.0, cut2, range, from,
                                std::integral_constant<std::size_t, kBlock>(), w);
        for (std::size_t p = s; p < std::min(s + kBlock, e); ++p) weight[p] = w[p - from];
      }
    });
  });
}

}  // namespace detail

// Conditional quantiles of the local constant estimate F(y | x) = sum_i W_i G((y - y_i) / hy) /
// sum_i W_i, W_i the engine's weights (kernel, levels, prior) of query i's window (scaled
// coordinates, level codes as local_fit()): out[t * m + i] for tau[t] (NaN where the window
// carries no weight). y: the responses in the caller's order. Each query's window is collected
// once for all its tau. Returns false if the monitor stopped it.
inline bool conditional_quantiles(const LocalData& data, const double* queries, std::size_t m,
                                  const int* query_codes, const EngineSettings& set,
                                  const double* y, KernelType y_kernel, double hy,
                                  const double* tau, std::size_t n_tau, int max_iter, double* out,
                                  const ParallelFor& parallel_for = serial_for,
                                  const Monitor& monitor = {}) {
  const std::size_t d = data.d(), n = data.n();
  const Reach how(set);
  std::vector<double> y_tree(n);
  for (std::size_t t = 0; t < n; ++t) y_tree[t] = y[data.tree().order()[t]];
  std::vector<std::size_t> by_y(n), rank(n);  // tree positions by response, ties in tree order
  std::iota(by_y.begin(), by_y.end(), std::size_t{0});
  std::stable_sort(by_y.begin(), by_y.end(),
                   [&](std::size_t a, std::size_t b) { return y_tree[a] < y_tree[b]; });
  std::vector<double> y_sorted(n);
  for (std::size_t r = 0; r < n; ++r) {
    rank[by_y[r]] = r;
    y_sorted[r] = y_tree[by_y[r]];
  }
  check_sweep_kernel(data, set);
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> q(d), table(data.table_size()), weight(n, 0.0);
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    Window win;
    ResponseWindow rw(y_kernel, hy);
    for (std::size_t i = begin; i < end; ++i) {
      const double* levels = load_query(data, queries, query_codes, m, i, q, table);
      with_sweep_kernel(set.kernel, [&](auto kern) {
        detail::window_weights(kern, data, q.data(), levels, how, weight.data(), runs, win);
        return 0;
      });
      const bool ok = rw.load(weight.data(), data.prior(), runs, by_y, rank, y_sorted.data());
      for (const auto& run : runs)
        std::fill(weight.begin() + run.first, weight.begin() + run.second, 0.0);
      for (std::size_t t = 0; t < n_tau; ++t)
        out[t * m + i] = ok ? invert_cdf(rw, tau[t], max_iter)
                            : std::numeric_limits<double>::quiet_NaN();
    }
  };
  return run_chunked(m, chunk_size(n), parallel_for, monitor, fn);
}

namespace detail {

// The other half of a symmetric sweep (gaussian_scale_moments() at the data): the weights of
// the pairs (t, p), p > t, added to the sums of each point p as well, into rows p - from of
// `to` (`rows` rows per column, the columns of gaussian_scale_moments()), with the query point
// t's own prior weight. Null `to`: none.
struct PairScatter {
  double* to = nullptr;
  std::size_t from = 0, rows = 0, self = 0;
  double prior = 1.0;
};

// to[k] += x[k] * y[k], k < len (y null: to[k] += x[k]).
template <class Len>
LOCALMEAN_INLINE void add_to(double* to, const double* x, const double* y, Len len) {
  if (y)
    for (std::size_t k = 0; k < len; ++k) to[k] += x[k] * y[k];
  else
    for (std::size_t k = 0; k < len; ++k) to[k] += x[k];
}

// The fused joint of a conditional density (gaussian_scale_moments() with `joint`): the data are
// the predictors (x); the joint kernel on (x, y) has the response y (in scales, tree order;
// null: none) as one more variable, the query's qy, cut at squared radius cut2 (in scales;
// infinite: none). Its pairs must lie within the window of x.
struct FusedJoint {
  const double* y = nullptr;
  double qy = 0.0, cut2 = kInf;
};

// Adds one block's weights w (prior included) to a query's lane sums: W and, with kDerivatives,
// W u_j^2 and W u_j^2 u_l^2 for j <= l < d (u2: the u_j^2 of the block, d x kBlock; wu2 the
// same size, scratch); with `to`, the same sums of the weights `back` into its rows.
template <bool kDerivatives, class Len>
LOCALMEAN_INLINE void add_scale_moments(const double* w, const double* back, const double* u2,
                                        double* wu2, std::size_t d, Len len, double* lanes,
                                        double* to, std::size_t rows) {
  add_lanes(lanes, w, len);
  if (to) add_to(to, back, static_cast<const double*>(nullptr), len);
  if (!kDerivatives) return;
  for (std::size_t j = 0; j < d; ++j) {
    product(wu2 + j * kBlock, w, u2 + j * kBlock, len);
    add_lanes(lanes + (1 + j) * kLanes, wu2 + j * kBlock, len);
    if (to) add_to(to + (1 + j) * rows, back, u2 + j * kBlock, len);
  }
  std::size_t at = 1 + d;
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t l = j; l < d; ++l, ++at) {
      add_product(lanes + at * kLanes, wu2 + j * kBlock, u2 + l * kBlock, len);
      if (to) {
        double* row = to + at * rows;
        const double* uj = u2 + j * kBlock;
        const double* ul = u2 + l * kBlock;
        for (std::size_t k = 0; k < len; ++k) row[k] += back[k] * uj[k] * ul[k];
      }
    }
}

// Adds the points at tree positions [begin, end) to a query's lane sums of
// gaussian_scale_moments(): the weights W (kernel, levels, prior) and, with kDerivatives,
// W u_k^2 and W u_k^2 u_l^2, in the engine's lanes (independent chains, as
// accumulate_weighted()); with `scatter`, the same sums the other way round into each point's
// row; with `joint`, the same sums of the joint kernel after them, from the same pairs. u2 and
// wu2 hold (d + 1) x kBlock doubles each.
template <bool kDerivatives>
LOCALMEAN_INLINE void scale_moment_sums(const LocalData& data, const double* q,
                                        const double* levels, double cut2, DistanceRange range,
                                        std::size_t begin, std::size_t end, double* u2,
                                        double* wu2, double* lanes, const PairScatter& scatter,
                                        const FusedJoint& joint) {
  // (the joint's sums come with derivatives only: gaussian_scale_moments())
  const std::size_t d = data.d(), n = data.n();
  const bool fused = kDerivatives && joint.y;
  const std::size_t width = kDerivatives ? 1 + d + d * (d + 1) / 2 : 1;
  const double* pts = data.tree().points();
  const double* prior = data.prior();
  walk_blocks(begin, end, [&](std::size_t s, auto len, std::size_t skip) LOCALMEAN_LAMBDA_INLINE {
    double w[kBlock], back[kBlock], r2[2 * kBlock];
    if (kDerivatives)
      for (std::size_t j = 0; j < d; ++j) {
        const double* col = pts + j * n + s;
        double* uj = u2 + j * kBlock;
        for (std::size_t k = 0; k < len; ++k) {
          const double t = col[k] - q[j];
          uj[k] = t * t;
        }
      }
    if (fused)
      for (std::size_t k = 0; k < len; ++k) {
        const double t = joint.y[s + k] - joint.qy;
        u2[d * kBlock + k] = t * t;
      }
    double* to = scatter.to ? scatter.to + (s - scatter.from) : nullptr;
    // (twice with a joint: the data's weights (as block_weights(); point scales and levels have
    // no joint), then the joint's, in one loop: one copy of the kernel's profile)
    const std::size_t dims[2] = {d, d + 1};
    const double cuts[2] = {cut2, joint.cut2};
    const bool truncated[2] = {range != kInside, std::isfinite(joint.cut2)};
    for (std::size_t pass = 0; pass < (fused ? 2u : 1u); ++pass) {
      if (kDerivatives) {
        for (std::size_t k = 0; k < len; ++k) r2[k] = u2[k];
        for (std::size_t j = 1; j < dims[pass]; ++j)
          for (std::size_t k = 0; k < len; ++k) r2[k] += u2[j * kBlock + k];
      } else {
        squared_distances(data, q, 1.0, s, len, r2);
      }
      if (const double* inv_s2 = data.inv_scale2())
        for (std::size_t k = 0; k < len; ++k) r2[k] *= inv_s2[s + k];
      shapes_at<Gaussian>(data, r2, len, w);
      if (truncated[pass])
        for (std::size_t k = 0; k < len; ++k) w[k] *= within(r2[k], cuts[pass]);
      if (levels) data.weigh_levels(levels, s, len, w);
      for (std::size_t k = 0; k < skip; ++k) w[k] = 0.0;
      if (to) {
        for (std::size_t k = 0; k < len; ++k) back[k] = w[k] * scatter.prior;
        if (scatter.self >= s && scatter.self - s < len) back[scatter.self - s] = 0.0;
      }
      if (prior) product(w, w, prior + s, len);
      const std::size_t offset = pass * width;
      add_scale_moments<kDerivatives>(w, back, u2, wu2, dims[pass], len,
                                      lanes + offset * kLanes, to ? to + offset * scatter.rows
                                                                  : nullptr, scatter.rows);
    }
  });
}

// One query's sums of gaussian_scale_moments() over its window (only the tree positions from
// `first` on), added to out[c * m + i] for column c.
inline void scale_moments_of_query(const LocalData& data, const double* q, const double* levels,
                                   const Reach& how, bool derivatives, std::size_t first,
                                   const PairScatter& scatter, std::vector<double>& lanes,
                                   std::vector<double>& u2, std::vector<double>& wu2,
                                   std::size_t width, double* out, std::size_t m, std::size_t i,
                                   const FusedJoint& joint = {}) {
  std::fill(lanes.begin(), lanes.end(), 0.0);
  visit_window<Gaussian>(data, q, 1.0, how,
                         [&](std::size_t b, std::size_t e, DistanceRange range, double cut2) {
    b = std::max(b, first);
    if (b >= e) return;
    if (derivatives)
      best_build([&]() LOCALMEAN_LAMBDA_INLINE {
        scale_moment_sums<true>(data, q, levels, cut2, range, b, e, u2.data(), wu2.data(),
                                lanes.data(), scatter, joint);
      });
    else
      best_build([&]() LOCALMEAN_LAMBDA_INLINE {
        scale_moment_sums<false>(data, q, levels, cut2, range, b, e, u2.data(), wu2.data(),
                                 lanes.data(), scatter, joint);
      });
  });
  for (std::size_t c = 0; c < width; ++c) {
    const double* lane = lanes.data() + c * kLanes;
    double sum = 0.0;
    for (std::size_t k = 0; k < kLanes; ++k) sum += lane[k];
    out[c * m + i] = sum;
  }
}

}  // namespace detail

// gaussian_scale_moments() at the data points themselves (query_codes: theirs, caller order):
// the tree positions in blocks; block a sweeps, for each of its points t, the window's points
// p >= t alone, adding the pair's terms to t's sums and (times t's prior weight) to p's row of
// the block's own buffer. Each pair is computed once; the buffers are then added to the
// points' sums in block order, so the result is the same for any number of threads.
inline bool gaussian_scale_moments_at_data(const LocalData& data, const int* query_codes,
                                           const Reach& how, bool derivatives,
                                           std::size_t width, double* out,
                                           const ParallelFor& parallel_for,
                                           const Monitor& monitor,
                                           const detail::FusedJoint& joint = {}) {
  const std::size_t d = data.d(), n = data.n();
  const std::size_t block = std::max<std::size_t>(256, (n + 31) / 32);
  const std::size_t blocks = (n + block - 1) / block;
  const double* pts = data.tree().points();
  const double* prior = data.prior();
  const std::vector<std::size_t>& order = data.tree().order();
  // block a's buffer: rows from[a] to n - 1 (walk_blocks() never starts before its range)
  std::vector<std::size_t> from(blocks);
  std::vector<std::vector<double>> buffers(blocks);
  for (std::size_t a = 0; a < blocks; ++a) from[a] = a * block;
  std::vector<double> own(width * n);  // the points' own sums, tree order
  // (a data point's nearest data point is itself: no search for it)
  Reach reach = how;
  reach.from_nearest = false;
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> q(d), table(data.table_size()), lanes(width * kLanes),
        u2((d + 1) * kBlock), wu2((d + 1) * kBlock);
    detail::FusedJoint at = joint;
    for (std::size_t a = begin; a < end; ++a) {
      detail::PairScatter scatter;
      scatter.from = from[a];
      scatter.rows = n - from[a];
      buffers[a].assign(width * scatter.rows, 0.0);
      scatter.to = buffers[a].data();
      for (std::size_t t = a * block; t < std::min(n, (a + 1) * block); ++t) {
        for (std::size_t j = 0; j < d; ++j) q[j] = pts[j * n + t];
        const double* levels = nullptr;
        if (data.categorical()) {
          data.level_table(query_codes + order[t], n, table.data());
          levels = table.data();
        }
        scatter.self = t;
        scatter.prior = prior ? prior[t] : 1.0;
        if (at.y) at.qy = at.y[t];
        detail::scale_moments_of_query(data, q.data(), levels, reach, derivatives, t, scatter,
                                       lanes, u2, wu2, width, own.data(), n, t, at);
      }
    }
  };
  if (!run_chunked(blocks, 1, parallel_for, monitor, fn)) return false;
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t c = 0; c < width; ++c) {
      double sum = own[c * n + t];
      for (std::size_t a = 0; a < blocks && from[a] <= t; ++a)
        sum += buffers[a][c * (n - from[a]) + (t - from[a])];
      out[c * n + order[t]] = sum;
    }
  return true;
}

// The weight sums of the Gaussian kernel exp(-|u|^2 / 2) at m queries (scaled coordinates, level
// codes as local_fit()) with their first and second derivatives in the log-scales of the
// numeric variables: per query S = sum_i W_i, S_k = sum_i W_i u_k^2 and S_kl = sum_i W_i u_k^2
// u_l^2 (k <= l), u = x_i - q, W_i the engine's weights (kernel, levels, prior) of its window.
// Since d W / d log h_k = W u_k^2, these give the likelihood cross-validation score of the
// Gaussian product kernel with its gradient and Hessian. out: m x (1 + d + d (d + 1) / 2),
// column-major, S first, then the S_k, then the S_kl row by row; without `derivatives`, m x 1,
// the sums S alone. `at_data`: the queries are the data points in their order (m = n), whose
// pairs are symmetric: each pair's kernel value is computed once, for the point earlier in the
// tree (gaussian_scale_moments_at_data()). With `y` (at the data, with `derivatives`; caller
// order, in scales), the same pass also gives the sums of the joint kernel of the data and y
// (a conditional density's, whose marginal the data are), from the same pairs: those within
// `joint_cutoff` scales, which must lie within the data's window; its columns (of d + 1
// variables, y last) come after the data's. Returns false if the monitor stopped it.
inline bool gaussian_scale_moments(const LocalData& data, const double* queries, std::size_t m,
                                   const int* query_codes, const EngineSettings& set,
                                   bool derivatives, double* out,
                                   const ParallelFor& parallel_for = serial_for,
                                   const Monitor& monitor = {}, bool at_data = false,
                                   const double* y = nullptr, double joint_cutoff = kInf) {
  const std::size_t d = data.d(), n = data.n();
  std::size_t width = derivatives ? 1 + d + d * (d + 1) / 2 : 1;
  Reach how(set);
  // (the symmetric sweep keeps up to 32 blocks of sums per point: for moderate sizes)
  const bool symmetric = at_data && m == n && !data.inv_scale2() && n * width <= 250000;
  detail::FusedJoint joint;
  std::vector<double> y_tree;
  if (y) {
    if (!at_data || m != n || data.categorical() || data.inv_scale2() || !derivatives ||
        joint_cutoff > how.cutoff)
      throw std::invalid_argument("a fused joint needs numeric data at the data points");
    width += 2 + d + (d + 1) * (d + 2) / 2;
    how.from_nearest = false;  // (a data point's nearest data point is itself)
    y_tree.resize(n);
    for (std::size_t t = 0; t < n; ++t) y_tree[t] = y[data.tree().order()[t]];
    joint.y = y_tree.data();
    joint.cut2 = joint_cutoff * joint_cutoff;
  }
  if (symmetric)
    return gaussian_scale_moments_at_data(data, query_codes, how, derivatives, width, out,
                                          parallel_for, monitor, joint);
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> q(d), table(data.table_size()), lanes(width * kLanes),
        u2((d + 1) * kBlock), wu2((d + 1) * kBlock);
    detail::FusedJoint at = joint;
    for (std::size_t i = begin; i < end; ++i) {
      const double* levels = load_query(data, queries, query_codes, m, i, q, table);
      if (y) at.qy = y[i];
      detail::scale_moments_of_query(data, q.data(), levels, how, derivatives, 0, {}, lanes, u2,
                                     wu2, width, out, m, i, at);
    }
  };
  return run_chunked(m, chunk_size(n), parallel_for, monitor, fn);
}

}  // namespace localmean
