// Metric learning for kernel regression (Weinberger and Tesauro 2007): the leave-one-out squared
// error of the local mean (degree 0) or local linear fit (degree 1) under the metric x -> A x,
// for any kernel of the registry, and its gradient with respect to A, for a gradient-based
// optimiser. At a diagonal A = diag(1 / h) it is the "cv" score of the bandwidths h.
//
// With z = A x the weight of data point j in the window of point i is
//   w_ij = p_j shape(|A (x_i - x_j)|^2) prod_c L_c(level_ic, level_jc)
// (the kernel's profile, prior weights p, categorical kernels L with fixed lambdas; zero beyond
// the engine's cut-off), and the leave-one-out fit at x_i uses every j != i. The loss is
// L(A) = sum_i p_i r_i^2 / W, W = sum_i p_i, r_i = y_i - yhat_i.
// Only the kernel depends on A: dw_ij/dA = -v_ij A d d' with d = x_i - x_j and the slope weight
// v_ij = 2 p_j slope(|A d|^2) prod_c L_c, slope = -d shape / d r2 from the registry (kernels.hpp;
// the Gaussian's v is w itself). Hence
//   dL/dA = A M, M = sum_{i != j} (2 p_i r_i / W) (dyhat_i / dw_ij) v_ij d d'.
// A compact kernel's profile has a kink at the edge of its support (Epanechnikov: slope 1
// inside, 0 outside), where the gradient is the one-sided one from inside; the loss is
// differentiable wherever no pair lies exactly at the edge. The uniform kernel's weights are a
// step: its slope is 0, the gradient 0, and the loss a step function of A (R does not descend
// on it). Kernels of the user's own have no slope: the glue refuses them.
// Degree 0: dyhat_i/dw_ij = (y_j - yhat_i) / sum_j w_ij.
// Degree 1: the local linear fit beta = S^-1 b, S = sum_j w_ij phi_j phi_j', b = sum_j w_ij phi_j
// y_j with phi_j = (1, z_j - z_i); dyhat_i/dw_ij = (a' phi_j)(y_j - phi_j' beta), a = S^-1 e_1.
// For invertible A the basis in z spans the same functions as one in x, so the fit depends on A
// through the weights only and the formula above is the whole gradient.
//
// What comes from the engine: the kernel profile (the registry's kernel_shapes()), the level tables and
// level weights (local_data.hpp, shared with LocalData), the products of the sweep (product()),
// the moments of the local design (the sweep's accumulate_weighted() into Moments, kLanes lanes
// flushed in its order), the walks over blocks (walk_blocks(), walk_full_blocks()), the lane
// sums of the gradient (add_product(), lanes_total()), the Cholesky factorisation and solve
// (moments.hpp), the chunked parallel run (run_chunked) and the best build (simd.hpp).
// What stays here, and why:
// - z = A x: the engine scales each variable; a full metric needs the matrix product.
// - the slope weights v and the lambda derivative tables: the engine never differentiates.
// - the prior weights multiply the kernel weights before the level weights (the engine's sweep
//   multiplies them last): the same factors in another order would change the results' last bits.
// - the general pass (a full metric, or more than kFusedMaxD variables) keeps the differences
//   z_j - z_i of every point (the sweep's squared_distances() keeps none and reads LocalData's
//   tree), for the local design, g_j and the gradient's sums of d d'.
// - the fused passes keep their own window (FusedData: one variable, sorted); see the note above
//   FusedData. Their first pass is compiled once per build (fused_design()), their second per
//   count of variables and degree (fused_gradient(): its sums stay in registers).
#pragma once

#include <localmean/engine.hpp>
#include <localmean/kernels.hpp>
#include <localmean/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace localmean {

// Inputs of the metric loss: x is n x d column-major, y length n, prior NULL or length n,
// categorical NULL or the categorical variables (lambdas fixed; unit_mass is ignored).
struct MetricProblem {
  const double* x = nullptr;
  std::size_t n = 0, d = 0;
  const double* y = nullptr;
  const double* prior = nullptr;
  const CategoricalVars* categorical = nullptr;
  KernelType kernel = KernelType::gaussian;  // a registry kernel
  int degree = 0;  // 0: local mean, 1: local linear
  // Truncation radius of the kernel in metric units, as the engine's (0: the registry's, 8 for
  // the Gaussian, the support of a compact kernel), so that the loss scores the engine's fit.
  double cutoff = 0.0;
  // A point's leave-one-out fit counts when the leverage L_ii of the full fit (the point in its
  // own window) is below 1 - min_gap: the "cv" score's rule for 1e-10.
  double min_gap = 1e-10;
  // A is diagonal (bandwidths 1 / A_kk): only the diagonal of the gradient is computed.
  bool diagonal = false;
  // Also the gradient with respect to the categorical lambdas (MetricLoss::lambda_gradient).
  bool lambda_gradient = false;
};

// The loss, its gradient dL/dA (d x d column-major) and how many points had no leave-one-out fit
// (an empty window, at degree 1 a singular local design, or a leverage L_ii of the full fit of
// at least 1 - min_gap); the loss is +Inf when any had.
struct MetricLoss {
  double loss = 0.0;
  std::vector<double> gradient;
  std::size_t failed = 0;
  double gap = 1.0;  // the smallest 1 - L_ii of the points with a fit
  std::vector<double> lambda_gradient;  // dL/dlambda_c, with MetricProblem::lambda_gradient
};

namespace detail {

// Per-thread scratch of the leave-one-out loss: for one point i, the differences z_j - z_i
// (d x n, column-major), the weights, slope weights and their products, and the level tables.
// The moments of the local design are the sweep's (Moments, one value: y), added by its
// accumulate_weighted().
struct LooScratch {
  std::vector<double> dz, d2, w, v, wd, g, tmp, table, dtable;
  std::vector<double> S, full, b, a, e1;  // the local design, (d + 1) x (d + 1)
  Moments mo;
  LooScratch(std::size_t n, std::size_t d, int degree, std::size_t table_size, std::size_t n_cat)
      : dz(d * n), d2(n), w(n), v(n), wd(d * n), g(n), tmp(n), table(table_size),
        dtable(table_size * n_cat),
        S((d + 1) * (d + 1)), full((d + 1) * (d + 1)), b(d + 1), a(d + 1), e1(d + 1),
        mo(degree == 1 ? d + 1 : 1, 1, false) {}
};

// sum_j a_j b_j in the sweep's lanes: point j into lane j % kLanes (add_product()), the lanes
// summed as Moments::flush() sums them.
LOCALMEAN_INLINE double lane_dot(const double* a, const double* b, std::size_t n) {
  double acc[kLanes] = {};
  std::size_t j = 0;
  for (; j + kBlock <= n; j += kBlock)
    add_product(acc, a + j, b + j, std::integral_constant<std::size_t, kBlock>());
  add_product(acc, a + j, b + j, n - j);
  return lanes_total(acc);
}

// The design's moments, summed (Moments::flush()), into s.S and s.b as loo_fit() reads them:
// Moments keeps the upper triangle row-major, the same storage as loo_fit()'s lower triangle
// column-major.
inline void take_design(LooScratch& s) {
  s.mo.flush();
  std::copy(s.mo.S.begin(), s.mo.S.end(), s.S.begin());
  std::copy(s.mo.T.begin(), s.mo.T.end(), s.b.begin());
}

// The kernel weights of `len` squared distances r2 within the reach: w = shape(r2) (the sweep's
// profile loop) and, when v is not null, the slope weights v = 2 slope(r2) (see the top of the
// file; the engine's sweep never differentiates, so the slope loop is the metric's own).
template <class K, class Len>
LOCALMEAN_INLINE void profile_weights(const double* r2, double reach2, Len len, double* w,
                                      double* v) {
  kernel_shapes(K{}, r2, len, w);
  for (std::size_t t = 0; t < len; ++t) w[t] *= within(r2[t], reach2);
  if (v)
    for (std::size_t t = 0; t < len; ++t) v[t] = within(r2[t], reach2) * 2.0 * K::slope(r2[t]);
}
// One out-of-line copy for the kernels other than the Gaussian, shared by both builds (the
// library stays small; their searches spend little time here).
template <class Len>
__attribute__((noinline)) void other_kernel_weights(KernelType kernel, const double* r2,
                                                    double reach2, Len len, double* w,
                                                    double* v) {
  with_kernel(kernel, [&](auto k) LOCALMEAN_LAMBDA_INLINE {
    profile_weights<decltype(k)>(r2, reach2, len, w, v);
  });
}
template <class Len>
LOCALMEAN_INLINE void kernel_weights(KernelType kernel, const double* r2, double reach2, Len len,
                                     double* w, double* v) {
  if (kernel == KernelType::gaussian)
    profile_weights<Gaussian>(r2, reach2, len, w, v);
  else  // a run-time length: one copy for full blocks and tails
    other_kernel_weights(kernel, r2, reach2, static_cast<std::size_t>(len), w, v);
}

// Whether the slope weights are the weights themselves (the Gaussian: 2 slope = shape).
inline bool slope_is_shape(KernelType kernel) { return kernel == KernelType::gaussian; }

// The level tables of point i (each `size` entries): the engine's level table (without unit
// mass), and per categorical variable c the table of dw / dlambda_c / (numeric weight): the level
// table with c's weights L_c(level_ic, l) replaced by dL_c / dlambda_c (the engine never
// differentiates: that loop is the metric's own). weigh_levels() applies either.
inline void level_tables(const CategoricalVars* cat, std::size_t n, std::size_t i,
                         std::size_t size, double* table, double* dtables) {
  if (cat == nullptr) return;
  level_table(*cat, cat->codes + i, n, false, table);
  std::size_t off = 0;
  for (std::size_t c = 0; c < cat->count; ++c) {
    double* dtable = dtables + c * size;
    std::copy(table, table + size, dtable);
    const int levels = cat->levels[c], query = cat->codes[c * n + i];
    for (int l = 0; l < levels; ++l)
      dtable[off + l] =
          discrete_weight_derivative(cat->kernels[c], query, l, levels, cat->lambda[c]);
    off += levels;
  }
}

// The leave-one-out fit of a point from the moments of its window, s.S (the lower triangle of the
// q x q design, q = d + 1) and s.b (degree 0: S = sum w, b = sum w y): the coefficients fb of the
// fit (in s.b: beta) and ga (in s.a) of g_j = dyhat_i / dw_ij = (ga_0 + sum_k ga_k dz_jk)
// (y_j - fb_0 - sum_k fb_k dz_jk), degree 0: g_j = (y_j - fb_0) / ga_0; and the gap 1 - L_ii of
// the full fit, whose design adds the point itself with weight `own`. False when the fit does not
// exist (no weight, or a singular design). Both passes (loo_point, fused_contribution) solve here,
// with the engine's Cholesky (moments.hpp).
inline bool loo_fit(int degree, std::size_t q, double own, LooScratch& s, double* gap) {
  if (degree == 0) {
    const double den = s.S[0];
    if (!(den > 0.0)) return false;
    *gap = den / (den + own);
    s.b[0] /= den;
    s.a[0] = den;  // divides (see g_j)
    return true;
  }
  double* S = s.S.data();
  double* b = s.b.data();
  double* full = s.full.data();
  double* a = s.a.data();
  double* e1 = s.e1.data();
  // The engine's rank check on the design with the point itself (weight `own` at phi = e_1),
  // whose fit the "cv" score corrects by the leverage. The leave-one-out design need only be
  // positive definite: where it is nearly singular the leverage is nearly 1, and the "cv"
  // score's identity as well as this direct solve give a large residual.
  std::copy(S, S + q * q, full);
  full[0] += own;
  if (!cholesky(full, q, kRankTolerance)) return false;
  std::fill(e1, e1 + q, 0.0);
  e1[0] = 1.0;
  cholesky_solve(full, q, e1);
  *gap = 1.0 - own * e1[0];
  if (!cholesky(S, q, 0.0)) return false;
  cholesky_solve(S, q, b);  // b is now beta
  std::fill(a, a + q, 0.0);
  a[0] = 1.0;
  cholesky_solve(S, q, a);  // a = S^-1 e_1
  return true;
}

// The leave-one-out fit at point i (weights in s.w, w_i = 0, differences in s.dz; `own` is the
// weight of the point in its own window): the residual r_i, g_j = dyhat_i/dw_ij in s.g and
// 1 - L_ii, L_ii the leverage of the full fit. False when the fit does not exist.
LOCALMEAN_INLINE bool loo_point(const MetricProblem& p, std::size_t i, double own, LooScratch& s,
                                double* r, double* gap) {
  const std::size_t n = p.n, d = p.d;
  const double* w = s.w.data();
  const std::size_t q = d + 1;
  double* b = s.b.data();
  const double* a = s.a.data();
  // The design's moments by the sweep's walk and accumulation, the differences as the basis.
  s.mo.reset();
  double* phi = s.mo.block_phi.data();
  walk_blocks(0, n, [&](std::size_t at, auto len, std::size_t skip) LOCALMEAN_LAMBDA_INLINE {
    double wb[kBlock];
    for (std::size_t k = 0; k < len; ++k) wb[k] = k < skip ? 0.0 : w[at + k];
    for (std::size_t k = 0; k < d && p.degree == 1; ++k)
      std::copy(s.dz.data() + k * n + at, s.dz.data() + k * n + at + len, phi + (k + 1) * kBlock);
    accumulate_weighted(nullptr, p.y, n, 1, at, len, wb, phi, s.mo);
  });
  take_design(s);
  if (!loo_fit(p.degree, q, own, s, gap)) return false;
  *r = p.y[i] - b[0];
  double* g = s.g.data();
  if (p.degree == 0) {
    for (std::size_t j = 0; j < n; ++j) g[j] = (p.y[j] - b[0]) / a[0];
    return true;
  }
  double* fit = s.tmp.data();
  for (std::size_t j = 0; j < n; ++j) {
    g[j] = a[0];
    fit[j] = b[0];
  }
  for (std::size_t k = 0; k < d; ++k) {
    const double* dzk = s.dz.data() + k * n;
    const double ak = a[k + 1], bk = b[k + 1];
    for (std::size_t j = 0; j < n; ++j) {
      g[j] += ak * dzk[j];
      fit[j] += bk * dzk[j];
    }
  }
  for (std::size_t j = 0; j < n; ++j) g[j] *= p.y[j] - fit[j];
  return true;
}

// Point i's share of the loss and gradient: sq_res = p_i r_i^2; m (d x d upper triangle, or its
// diagonal alone with p.diagonal) and lam (one per categorical variable), to be divided by W.
// False when the point has no leave-one-out fit.
LOCALMEAN_INLINE bool loo_contribution(const MetricProblem& p, const double* zc, double reach2,
                                       std::size_t i, LooScratch& s, double* sq_res, double* gap,
                                       double* m, double* lam) {
  const std::size_t n = p.n, d = p.d;
  const CategoricalVars* cat = p.categorical;
  double* d2 = s.d2.data();
  double* w = s.w.data();
  std::fill(d2, d2 + n, 0.0);
  for (std::size_t k = 0; k < d; ++k) {
    const double* col = zc + k * n;
    double* dzk = s.dz.data() + k * n;
    const double zi = col[i];
    for (std::size_t j = 0; j < n; ++j) {
      const double t = col[j] - zi;
      dzk[j] = t;
      d2[j] += t * t;
    }
  }
  double* v = slope_is_shape(p.kernel) ? nullptr : s.v.data();
  kernel_weights(p.kernel, d2, reach2, n, w, v);
  if (p.prior) product(w, w, p.prior, n);
  if (p.prior && v) product(v, v, p.prior, n);
  // The weights without the level weights, for the lambda derivatives: kept in d2, which
  // loo_point() leaves alone.
  if (cat && p.lambda_gradient) std::copy(w, w + n, d2);
  double own = p.prior ? p.prior[i] : 1.0;
  if (cat) {
    level_tables(cat, n, i, s.table.size(), s.table.data(), s.dtable.data());
    weigh_levels(*cat, cat->codes, n, s.table.data(), 0, n, w);
    if (v) weigh_levels(*cat, cat->codes, n, s.table.data(), 0, n, v);
    weigh_levels(*cat, cat->codes, n, s.table.data(), i, std::size_t{1}, &own);
  }
  w[i] = 0.0;
  if (v) v[i] = 0.0;
  double r = 0.0;
  if (!loo_point(p, i, own, s, &r, gap) || !(*gap > p.min_gap)) return false;
  const double pi = p.prior ? p.prior[i] : 1.0;
  *sq_res = pi * r * r;
  // c_j = 2 p_i r_i g_j v_j
  double* c = s.tmp.data();
  const double scale = 2.0 * pi * r;
  const double* slope = v ? v : w;
  for (std::size_t j = 0; j < n; ++j) c[j] = scale * s.g[j] * slope[j];
  if (p.diagonal) {
    // (x_ik - x_jk)^2 = dz_k^2 / A_kk^2: divided by A_kk^2 by the caller
    for (std::size_t k = 0; k < d; ++k) {
      const double* dzk = s.dz.data() + k * n;
      double* cd = s.wd.data();
      product(cd, c, dzk, n);
      m[k] = lane_dot(cd, dzk, n);
    }
  } else {
    for (std::size_t a = 0; a < d; ++a) {
      const double* xa = p.x + a * n;
      double* cd = s.wd.data();
      for (std::size_t j = 0; j < n; ++j) cd[j] = c[j] * (xa[i] - xa[j]);
      for (std::size_t b = a; b < d; ++b) {
        const double* xb = p.x + b * n;
        double* diff = s.dz.data();  // no longer needed: reused for x_ib - x_jb
        for (std::size_t j = 0; j < n; ++j) diff[j] = xb[i] - xb[j];
        m[a * d + b] = lane_dot(cd, diff, n);
      }
    }
  }
  if (cat && p.lambda_gradient) {
    // dw_j / dlambda_c = (numeric weight, in d2) dL_c prod_{c' != c} L_c'; w_i stays 0.
    for (std::size_t cv = 0; cv < cat->count; ++cv) {
      double* dw = s.wd.data();
      std::copy(d2, d2 + n, dw);
      weigh_levels(*cat, cat->codes, n, s.dtable.data() + cv * s.table.size(), 0, n, dw);
      dw[i] = 0.0;
      // dL/dlambda = -sum_i 2 p_i r_i sum_j g_j dw_ij / W
      lam[cv] = -scale * lane_dot(s.g.data(), dw, n);
    }
  }
  return true;
}

// ---- The fused passes of a diagonal metric ----------------------------------------------------
//
// At a diagonal metric with at most kFusedMaxD numeric variables (the "cv" bandwidth search),
// each point takes two passes over the data in blocks of kBlock points instead of a pass per
// moment, with the number of variables known at compile time:
// the first computes the weights and adds the moments of the local design, the second (after the
// small solve) adds the gradient terms. Both sweep only the blocks of the point's window in one
// variable (see FusedData). They add the terms of loo_contribution() in the sorted order, with
// the sweep's accumulation and lanes, so the two give the same loss and gradient up to
// rounding, and each point's sums do not depend on the threads.
// Why not the engine's window here: it is the kd-tree of a LocalData, whose points are x / h
// (the metric's are A x) and which a search over A would rebuild or rescale at every evaluation;
// the sorted key variable costs one sort per evaluation.
constexpr std::size_t kFusedMaxD = 4;

// `size` zeros in `store`, from a 64-byte boundary: the fused passes load whole v4d of
// blocks, which then never straddle a cache line.
inline double* aligned_rows(std::vector<double>& store, std::size_t size) {
  store.assign(size + 8, 0.0);
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(store.data());
  return store.data() + (64 - at % 64) % 64 / sizeof(double);
}

// The inputs of the fused passes: the points sorted by the variable `key` of z = A x in which the
// kernel's reach leaves the fewest pairs, so that each point sweeps only the blocks that hold its
// window in that variable (the others weigh 0 and add nothing), padded with points of weight 0
// to whole blocks: z (d x stride), y, the prior weights (1 without them) and the level codes
// (count x stride), position[i] the place of point i.
struct FusedData {
  std::size_t n, stride, key = 0;
  bool whole = false;  // every window is the whole data
  std::vector<double> store;  // z, y and prior, each starting on a cache line
  double *z, *y, *prior;
  std::vector<int> codes;
  std::vector<std::size_t> position;
  FusedData(const MetricProblem& p, const double* zc, double reach)
      : n(p.n), stride((p.n + kBlock - 1) / kBlock * kBlock), position(p.n) {
    z = aligned_rows(store, (p.d + 2) * stride);
    y = z + p.d * stride;
    prior = y + stride;
    // The key: the variable with the fewest pairs within the reach (on a tie, the first). Data
    // that are not all finite stay in their order, and every window is the whole data.
    std::vector<std::size_t> order(n), best(n);
    for (std::size_t i = 0; i < n; ++i) best[i] = i;
    std::vector<double> sorted(n);
    double fewest = std::numeric_limits<double>::infinity();
    for (std::size_t e = 0; e < n * p.d; ++e) whole = whole || !std::isfinite(zc[e]);
    for (std::size_t k = 0; k < p.d && !whole; ++k) {
      const double* col = zc + k * n;
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [col](std::size_t a, std::size_t b) {
        return col[a] < col[b] || (col[a] == col[b] && a < b);
      });
      for (std::size_t i = 0; i < n; ++i) sorted[i] = col[order[i]];
      double pairs = 0.0;
      for (std::size_t i = 0, lo = 0, hi = 0; i < n; ++i) {
        while (sorted[i] - sorted[lo] > reach) ++lo;
        while (hi < n && sorted[hi] - sorted[i] <= reach) ++hi;
        pairs += static_cast<double>(hi - lo);
      }
      if (pairs < fewest) {
        fewest = pairs;
        key = k;
        best = order;
      }
    }
    for (std::size_t s = 0; s < n; ++s) {
      const std::size_t i = best[s];
      position[i] = s;
      for (std::size_t k = 0; k < p.d; ++k) z[k * stride + s] = zc[k * n + i];
      y[s] = p.y[i];
      prior[s] = p.prior ? p.prior[i] : 1.0;
    }
    if (const CategoricalVars* cat = p.categorical) {
      codes.assign(cat->count * stride, 0);
      for (std::size_t c = 0; c < cat->count; ++c)
        for (std::size_t s = 0; s < n; ++s) codes[c * stride + s] = cat->codes[c * n + best[s]];
    }
  }
  FusedData(const FusedData&) = delete;
  FusedData& operator=(const FusedData&) = delete;
  // The blocks [*begin, *end) (multiples of kBlock) that hold every point at sorted position
  // s whose difference t = z_j - z_s in the key has t^2 <= reach2, as the passes compute it: a
  // point left out has a squared distance d2 >= t^2 > reach2, hence the weight 0.
  void window(std::size_t s, double reach2, std::size_t* begin, std::size_t* end) const {
    if (whole) {
      *begin = 0;
      *end = stride;
      return;
    }
    const double* key_col = z + key * stride;
    const double zs = key_col[s];
    const auto far = [&](std::size_t j) {
      const double t = key_col[j] - zs;
      return t * t > reach2;
    };
    // t is non-decreasing in j: the far points below s are a prefix, those above a suffix.
    std::size_t lo = 0, hi = s;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (far(mid)) lo = mid + 1; else hi = mid;
    }
    std::size_t up_lo = s + 1, up_hi = n;
    while (up_lo < up_hi) {
      const std::size_t mid = up_lo + (up_hi - up_lo) / 2;
      if (far(mid)) up_hi = mid; else up_lo = mid + 1;
    }
    *begin = lo / kBlock * kBlock;
    *end = (up_lo + kBlock - 1) / kBlock * kBlock;
  }
};

// Pass 1 of the fused passes for the point at sorted position si, whose window is the blocks
// [first, last) and whose coordinates are zi: the weights into wrow, those without the level
// weights (for the lambda gradient) into wnum, the slope weights into vrow (all of length
// f.stride; no vrow where slope_is_shape()), and the moments of the local design added by the
// sweep's accumulate_weighted() into s.mo. The number of variables and the degree are run-time
// values here: the moments live in memory lanes whatever their number, so compile-time counts
// would only copy this code (one copy per count and degree in each build).
LOCALMEAN_INLINE void fused_design(const MetricProblem& p, const FusedData& f, double reach2,
                                   std::size_t si, std::size_t first, std::size_t last,
                                   const double* zi, LooScratch& s, double* wrow, double* wnum,
                                   double* vrow) {
  const auto block = std::integral_constant<std::size_t, kBlock>();
  const std::size_t d = p.d, stride = f.stride;
  const CategoricalVars* cat = p.categorical;
  const bool want_lam = cat && p.lambda_gradient;
  const double* z = f.z;
  const int* codes = f.codes.data();
  s.mo.reset();
  walk_full_blocks(first, last, [&](std::size_t start) LOCALMEAN_LAMBDA_INLINE {
    // phi: the differences z_j - z_i, the basis of the local design after its 1
    double phi[(kFusedMaxD + 1) * kBlock], d2[kBlock], w[kBlock], v[kBlock];
    for (std::size_t t = 0; t < kBlock; t += 4) {
      v4d r2 = {0.0, 0.0, 0.0, 0.0};
      for (std::size_t k = 0; k < d; ++k) {
        const v4d dz = LOCALMEAN_LOAD4(z + k * stride + start + t) - zi[k];
        LOCALMEAN_STORE4(phi + (k + 1) * kBlock + t, dz);
        r2 += dz * dz;
      }
      LOCALMEAN_STORE4(d2 + t, r2);
    }
    kernel_weights(p.kernel, d2, reach2, block, w, vrow ? v : nullptr);
    product(w, w, f.prior + start, block);
    if (vrow) product(v, v, f.prior + start, block);
    if (want_lam) std::copy(w, w + kBlock, wnum + start);
    if (cat) {
      weigh_levels(*cat, codes, stride, s.table.data(), start, block, w);
      if (vrow) weigh_levels(*cat, codes, stride, s.table.data(), start, block, v);
    }
    if (si - start < kBlock) {
      w[si - start] = 0.0;
      v[si - start] = 0.0;
      if (want_lam) wnum[si] = 0.0;
    }
    std::copy(w, w + kBlock, wrow + start);
    if (vrow) std::copy(v, v + kBlock, vrow + start);
    accumulate_weighted(nullptr, f.y, stride, 1, start, block, w, phi, s.mo);
  });
}
// fused_design() in its best build: one instance per build for every count and degree.
inline void fused_design_best(const MetricProblem& p, const FusedData& f, double reach2,
                              std::size_t si, std::size_t first, std::size_t last,
                              const double* zi, LooScratch& s, double* wrow, double* wnum,
                              double* vrow) {
  best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    fused_design(p, f, reach2, si, first, last, zi, s, wrow, wnum, vrow);
  });
}

// Pass 2 of the fused passes, for D numeric variables and degree Degree (compile-time: its sums
// stay in registers), after the leave-one-out fit: with ga and fb the coefficients of
// g_j = dyhat_i / dw_ij = (ga_0 + sum_k ga_k z_jk) (y_j - fit_j), fit_j = fb_0 + sum_k fb_k z_jk
// (degree 0: g_j = (y_j - fb_0) / ga_0), m_k = sum_j c_j z_jk^2 with c_j = scale g_j v_j
// (scale = 2 p_i r_i) and lam_c = -scale sum_j g_j dw_j/dlambda_c. In the sweep's lanes (point
// j into lane j % kLanes, two v4d per sum); s.tmp holds the lanes (kLanes x (D + categorical
// variables)).
template <std::size_t D, int Degree>
LOCALMEAN_INLINE void fused_gradient(const MetricProblem& p, const FusedData& f,
                                     std::size_t first, std::size_t last, const double* zi,
                                     const double* ga, const double* fb, double scale,
                                     LooScratch& s, const double* wrow, const double* wnum,
                                     const double* vrow, double* m, double* lam) {
  static_assert(kLanes == 8 && kBlock % kLanes == 0, "a lane group is two v4d");
  const auto block = std::integral_constant<std::size_t, kBlock>();
  const std::size_t stride = f.stride;
  const CategoricalVars* cat = p.categorical;
  const std::size_t n_cat = cat ? cat->count : 0;
  const bool want_lam = cat && p.lambda_gradient;
  const double* z = f.z;
  const double* y = f.y;
  const int* codes = f.codes.data();
  const double* slope = vrow ? vrow : wrow;
  double* lanes = s.tmp.data();
  std::fill(lanes, lanes + kLanes * (D + n_cat), 0.0);
  const v4d zero = {0.0, 0.0, 0.0, 0.0};
  v4d accM[D][2];
  for (std::size_t k = 0; k < D; ++k) accM[k][0] = accM[k][1] = zero;
  walk_full_blocks(first, last, [&](std::size_t j) LOCALMEAN_LAMBDA_INLINE {
    double G[kBlock];
    for (std::size_t t = 0; t < kBlock; t += 4) {
      const std::size_t half = t / 4 % 2;
      v4d dz[D];
      for (std::size_t k = 0; k < D; ++k) dz[k] = LOCALMEAN_LOAD4(z + k * stride + j + t) - zi[k];
      const v4d Y = LOCALMEAN_LOAD4(y + j + t);
      v4d g;
      if (Degree == 0) {
        g = (Y - fb[0]) / ga[0];
      } else {
        v4d lin = zero + ga[0], fit = zero + fb[0];
        for (std::size_t k = 0; k < D; ++k) {
          lin += ga[k + 1] * dz[k];
          fit += fb[k + 1] * dz[k];
        }
        g = lin * (Y - fit);
      }
      LOCALMEAN_STORE4(G + t, g);
      const v4d C = scale * g * LOCALMEAN_LOAD4(slope + j + t);
      for (std::size_t k = 0; k < D; ++k) accM[k][half] += C * dz[k] * dz[k];
    }
    // dw_j / dlambda_c = (numeric weight) dL_c prod_{c' != c} L_c'
    for (std::size_t cv = 0; cv < n_cat && want_lam; ++cv) {
      double dw[kBlock];
      std::copy(wnum + j, wnum + j + kBlock, dw);
      weigh_levels(*cat, codes, stride, s.dtable.data() + cv * s.table.size(), j, block, dw);
      add_product(lanes + (D + cv) * kLanes, G, dw, block);
    }
  });
  for (std::size_t k = 0; k < D; ++k) {
    LOCALMEAN_STORE4(lanes + k * kLanes, accM[k][0]);
    LOCALMEAN_STORE4(lanes + k * kLanes + 4, accM[k][1]);
  }
  for (std::size_t k = 0; k < D; ++k) m[k] = lanes_total(lanes + k * kLanes);
  for (std::size_t cv = 0; cv < n_cat && want_lam; ++cv)
    lam[cv] = -scale * lanes_total(lanes + (D + cv) * kLanes);
}

// Point i's share of the loss and gradient as loo_contribution() with p.diagonal, for D numeric
// variables and degree Degree: pass 1 (fused_design()), the leave-one-out fit, pass 2
// (fused_gradient()), each pass in its best build. The work rows wrow, wnum and vrow are
// fused_design()'s. The window is whole blocks (FusedData::window()).
template <std::size_t D, int Degree>
bool fused_contribution(const MetricProblem& p, const FusedData& f, double reach2, std::size_t i,
                        LooScratch& s, double* wrow, double* wnum, double* vrow, double* sq_res,
                        double* gap, double* m, double* lam) {
  constexpr std::size_t q = D + 1;
  const CategoricalVars* cat = p.categorical;
  const std::size_t si = f.position[i];  // point i's place in the sorted data
  std::size_t first, last;                // the blocks of its window
  f.window(si, reach2, &first, &last);
  double zi[D];
  for (std::size_t k = 0; k < D; ++k) zi[k] = f.z[k * f.stride + si];
  double own = p.prior ? p.prior[i] : 1.0;
  if (cat) {
    level_tables(cat, p.n, i, s.table.size(), s.table.data(), s.dtable.data());
    weigh_levels(*cat, cat->codes, p.n, s.table.data(), i, std::size_t{1}, &own);
  }
  fused_design_best(p, f, reach2, si, first, last, zi, s, wrow, wnum, vrow);
  take_design(s);
  if (!loo_fit(Degree, q, own, s, gap)) return false;
  double ga[q] = {}, fb[q] = {};
  for (std::size_t k = 0; k < (Degree == 1 ? q : 1); ++k) {
    ga[k] = s.a[k];
    fb[k] = s.b[k];
  }
  const double r = p.y[i] - fb[0];
  if (!(*gap > p.min_gap)) return false;
  const double pi = p.prior ? p.prior[i] : 1.0;
  *sq_res = pi * r * r;
  const double scale = 2.0 * pi * r;
  best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    fused_gradient<D, Degree>(p, f, first, last, zi, ga, fb, scale, s, wrow, wnum, vrow, m, lam);
  });
  return true;
}

}  // namespace detail

// The leave-one-out loss of the metric A (d x d, column-major) and its gradient. Points are
// processed in chunks on `parallel_for`; each point's contribution is stored on its own and the
// contributions are summed in point order, so the result does not depend on the threads.
// Returns false when the monitor stopped the work (the output is then incomplete).
inline bool metric_loo_loss(const MetricProblem& p, const double* A, MetricLoss& out,
                            const ParallelFor& parallel_for = serial_for,
                            const Monitor& monitor = Monitor()) {
  const std::size_t n = p.n, d = p.d, dd = d * d;
  const CategoricalVars* cat = p.categorical;
  const std::size_t n_cat = cat ? cat->count : 0;
  std::size_t table_size = 0;
  for (std::size_t c = 0; c < n_cat; ++c) table_size += static_cast<std::size_t>(cat->levels[c]);
  std::vector<double> zc(n * d);  // z = A x, column-major
  for (std::size_t r = 0; r < d; ++r)
    for (std::size_t i = 0; i < n; ++i) {
      double v = 0.0;
      for (std::size_t c = 0; c < d; ++c) v += A[c * d + r] * p.x[c * n + i];
      zc[r * n + i] = v;
    }
  const double reach = p.cutoff > 0.0 ? p.cutoff : kernel_info(p.kernel).cutoff;
  const double reach2 = reach * reach;
  const std::size_t per = p.diagonal ? d : dd;  // gradient entries per point
  std::vector<double> sq_res(n, 0.0), contrib(n * per, 0.0), lam(n * n_cat, 0.0), gaps(n, 1.0);
  std::vector<char> ok(n, 1);
  const auto work = [&](std::size_t begin, std::size_t end) {
    detail::LooScratch s(n, d, p.degree, table_size, n_cat);
    for (std::size_t i = begin; i < end; ++i) {
      ok[i] = best_build([&]() LOCALMEAN_LAMBDA_INLINE {
        return detail::loo_contribution(p, zc.data(), reach2, i, s, &sq_res[i], &gaps[i],
                                        &contrib[i * per], n_cat ? &lam[i * n_cat] : nullptr);
      });
    }
  };
  // The fused passes for D numeric variables and degree Degree (see fused_contribution()).
  const auto fused = [&](auto dim, auto degree) {
    constexpr std::size_t D = decltype(dim)::value;
    constexpr int Degree = decltype(degree)::value;
    const detail::FusedData f(p, zc.data(), reach);
    return run_chunked(n, chunk_size(n, 2e6), parallel_for, monitor,
                       [&](std::size_t begin, std::size_t end) {
      detail::LooScratch s(kLanes * (d + n_cat), d, p.degree, table_size, n_cat);
      std::vector<double> store;
      double* wrow = detail::aligned_rows(store, 3 * f.stride);
      double* wnum = wrow + f.stride;
      double* vrow = detail::slope_is_shape(p.kernel) ? nullptr : wnum + f.stride;
      for (std::size_t i = begin; i < end; ++i)
        ok[i] = detail::fused_contribution<D, Degree>(p, f, reach2, i, s, wrow, wnum, vrow,
                                                      &sq_res[i], &gaps[i], &contrib[i * per],
                                                      n_cat ? &lam[i * n_cat] : nullptr);
    });
  };
  // The degree as a compile-time constant for the dimension `dim`.
  const auto fused_degree = [&](auto dim) {
    return p.degree == 1 ? fused(dim, std::integral_constant<int, 1>())
                         : fused(dim, std::integral_constant<int, 0>());
  };
  bool done;
  const bool fusable = p.diagonal && p.degree <= 1;
  switch (fusable ? d : 0) {  // cases 1 to kFusedMaxD
    case 1: done = fused_degree(std::integral_constant<std::size_t, 1>()); break;
    case 2: done = fused_degree(std::integral_constant<std::size_t, 2>()); break;
    case 3: done = fused_degree(std::integral_constant<std::size_t, 3>()); break;
    case 4: done = fused_degree(std::integral_constant<std::size_t, 4>()); break;
    default: done = run_chunked(n, chunk_size(n, 2e6), parallel_for, monitor, work);
  }
  if (!done) return false;
  double total_prior = 0.0, loss = 0.0;
  std::vector<double> msum(per, 0.0), lsum(n_cat, 0.0);
  out.failed = 0;
  out.gap = 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    total_prior += p.prior ? p.prior[i] : 1.0;
    if (!ok[i]) {
      ++out.failed;
      continue;
    }
    out.gap = std::min(out.gap, gaps[i]);
    loss += sq_res[i];
    for (std::size_t k = 0; k < per; ++k) msum[k] += contrib[i * per + k];
    for (std::size_t c = 0; c < n_cat; ++c) lsum[c] += lam[i * n_cat + c];
  }
  out.gradient.assign(dd, 0.0);
  out.lambda_gradient.assign(n_cat, 0.0);
  if (out.failed) {
    out.loss = std::numeric_limits<double>::infinity();
    return true;
  }
  out.loss = loss / total_prior;
  for (std::size_t c = 0; c < n_cat; ++c) out.lambda_gradient[c] = lsum[c] / total_prior;
  if (p.diagonal) {
    // dL/dA_kk = A_kk M_kk / W with M_kk = sum c (x_ik - x_jk)^2 = (sum c dz_k^2) / A_kk^2
    for (std::size_t k = 0; k < d; ++k)
      out.gradient[k * d + k] = msum[k] / A[k * d + k] / total_prior;
    return true;
  }
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = a + 1; b < d; ++b) msum[b * d + a] = msum[a * d + b];  // symmetry
  // dL/dA = A M / W
  for (std::size_t r = 0; r < d; ++r)
    for (std::size_t c = 0; c < d; ++c) {
      double v = 0.0;
      for (std::size_t k = 0; k < d; ++k) v += A[k * d + r] * msum[c * d + k];
      out.gradient[c * d + r] = v / total_prior;
    }
  return true;
}

}  // namespace localmean
