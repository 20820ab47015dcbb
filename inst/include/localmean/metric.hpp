// Metric learning for kernel regression (Weinberger and Tesauro 2007): the leave-one-out squared
// error of the Gaussian-kernel local mean (degree 0) or local linear fit (degree 1) under the
// metric x -> A x, and its gradient with respect to A, for a gradient-based optimiser.
//
// With z = A x the weight of data point j in the window of point i is
//   w_ij = p_j exp(-|A (x_i - x_j)|^2 / 2) prod_c L_c(level_ic, level_jc)
// (prior weights p, categorical kernels L with fixed lambdas; zero beyond the engine's cut-off),
// and the leave-one-out fit at x_i uses every j != i. The loss is
// L(A) = sum_i p_i r_i^2 / W, W = sum_i p_i, r_i = y_i - yhat_i.
// Only the kernel depends on A: dw_ij/dA = -w_ij A d d' with d = x_i - x_j. Hence
//   dL/dA = A M, M = sum_{i != j} (2 p_i r_i / W) (dyhat_i / dw_ij) w_ij d d'.
// Degree 0: dyhat_i/dw_ij = (y_j - yhat_i) / sum_j w_ij.
// Degree 1: the local linear fit beta = S^-1 b, S = sum_j w_ij phi_j phi_j', b = sum_j w_ij phi_j
// y_j with phi_j = (1, z_j - z_i); dyhat_i/dw_ij = (a' phi_j)(y_j - phi_j' beta), a = S^-1 e_1.
// For invertible A the basis in z spans the same functions as one in x, so the fit depends on A
// through the weights only and the formula above is the whole gradient.
#pragma once

#include <localmean/engine.hpp>
#include <localmean/kernels.hpp>
#include <localmean/parallel.hpp>

#include <cmath>
#include <cstddef>
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
  int degree = 0;  // 0: local mean, 1: local linear
  // Truncation radius of the kernel in metric units, as the engine's (0: the registry's, 8 for
  // the Gaussian), so that the loss scores the fit the engine will compute.
  double cutoff = 0.0;
  // A point's leave-one-out fit counts when the leverage L_ii of the full fit (the point in its
  // own window) is below 1 - min_gap: the "cv" score's rule for 1e-10.
  double min_gap = 1e-10;
};

// The loss, its gradient dL/dA (d x d column-major) and how many points had no leave-one-out fit
// (an empty window, at degree 1 a singular local design, or a leverage L_ii of the full fit of
// at least 1 - min_gap); the loss is +Inf when any had.
struct MetricLoss {
  double loss = 0.0;
  std::vector<double> gradient;
  std::size_t failed = 0;
  double gap = 1.0;  // the smallest 1 - L_ii of the points with a fit
};

namespace detail {

// Cholesky factorisation of a small symmetric positive definite matrix (p x p, column-major, in
// place, lower triangle); false when a pivot is not above `tol` times its own diagonal entry
// (the engine's rank rule, see solve_moments()).
inline bool small_cholesky(double* s, std::size_t p, double tol) {
  for (std::size_t k = 0; k < p; ++k) {
    double piv = s[k * p + k];
    const double diag = piv;
    for (std::size_t m = 0; m < k; ++m) piv -= s[m * p + k] * s[m * p + k];
    if (!(piv > tol * diag)) return false;
    piv = std::sqrt(piv);
    s[k * p + k] = piv;
    for (std::size_t r = k + 1; r < p; ++r) {
      double v = s[k * p + r];
      for (std::size_t m = 0; m < k; ++m) v -= s[m * p + r] * s[m * p + k];
      s[k * p + r] = v / piv;
    }
  }
  return true;
}

// Solves L L' v = v in place with the factor of small_cholesky().
inline void small_solve(const double* l, std::size_t p, double* v) {
  for (std::size_t k = 0; k < p; ++k) {
    for (std::size_t m = 0; m < k; ++m) v[k] -= l[m * p + k] * v[m];
    v[k] /= l[k * p + k];
  }
  for (std::size_t k = p; k-- > 0;) {
    for (std::size_t m = k + 1; m < p; ++m) v[k] -= l[k * p + m] * v[m];
    v[k] /= l[k * p + k];
  }
}

// The categorical factor of w_ij (1 without categorical variables).
inline double categorical_factor(const CategoricalVars* cat, std::size_t n, std::size_t i,
                                 std::size_t j) {
  if (cat == nullptr) return 1.0;
  double w = 1.0;
  for (std::size_t c = 0; c < cat->count; ++c) {
    const int* codes = cat->codes + c * n;
    w *= discrete_weight(cat->kernels[c], codes[i], codes[j], cat->levels[c], cat->lambda[c],
                         false);
  }
  return w;
}

// Leave-one-out fit at point i from its weights w (w[i] = 0; `own` is the weight of the point
// in its own window): the residual r_i, the derivatives g_j = dyhat_i/dw_ij and 1 - L_ii, L_ii
// the leverage of the full fit. False when the fit does not exist.
inline bool loo_point(const MetricProblem& p, const double* z, std::size_t i, const double* w,
                      double own, double* g, double* r, double* gap) {
  const std::size_t n = p.n, d = p.d;
  if (p.degree == 0) {
    double den = 0.0, num = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      den += w[j];
      num += w[j] * p.y[j];
    }
    if (!(den > 0.0)) return false;
    *gap = den / (den + own);
    const double fit = num / den;
    for (std::size_t j = 0; j < n; ++j) g[j] = (p.y[j] - fit) / den;
    *r = p.y[i] - fit;
    return true;
  }
  const std::size_t q = d + 1;
  std::vector<double> s(q * q, 0.0), b(q, 0.0), phi(q), a(q, 0.0);
  const double* zi = z + i * d;
  for (std::size_t j = 0; j < n; ++j) {
    if (w[j] == 0.0) continue;
    phi[0] = 1.0;
    for (std::size_t k = 0; k < d; ++k) phi[k + 1] = z[j * d + k] - zi[k];
    for (std::size_t c = 0; c < q; ++c) {
      b[c] += w[j] * phi[c] * p.y[j];
      for (std::size_t r2 = c; r2 < q; ++r2) s[c * q + r2] += w[j] * phi[c] * phi[r2];
    }
  }
  // The engine's rank check on the design with the point itself (weight `own` at phi = e_1),
  // whose fit the "cv" score corrects by the leverage. The leave-one-out design need only be
  // positive definite: where it is nearly singular the leverage is nearly 1, and the "cv"
  // score's identity as well as this direct solve give a large residual.
  std::vector<double> full(s), e1(q, 0.0);
  full[0] += own;
  if (!small_cholesky(full.data(), q, kRankTolerance)) return false;
  e1[0] = 1.0;
  small_solve(full.data(), q, e1.data());
  *gap = 1.0 - own * e1[0];
  if (!small_cholesky(s.data(), q, 0.0)) return false;
  small_solve(s.data(), q, b.data());  // b is now beta
  a[0] = 1.0;
  small_solve(s.data(), q, a.data());  // a = S^-1 e_1
  for (std::size_t j = 0; j < n; ++j) {
    if (w[j] == 0.0) {
      g[j] = 0.0;
      continue;
    }
    double aphi = a[0], fit = b[0];
    for (std::size_t k = 0; k < d; ++k) {
      const double v = z[j * d + k] - zi[k];
      aphi += a[k + 1] * v;
      fit += b[k + 1] * v;
    }
    g[j] = aphi * (p.y[j] - fit);
  }
  *r = p.y[i] - b[0];
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
  std::vector<double> z(n * d);  // row-major: point i at z[i * d]
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t r = 0; r < d; ++r) {
      double v = 0.0;
      for (std::size_t c = 0; c < d; ++c) v += A[c * d + r] * p.x[c * n + i];
      z[i * d + r] = v;
    }
  std::vector<double> xr(n * d);  // the data row-major, for the outer products
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < d; ++c) xr[i * d + c] = p.x[c * n + i];
  const double reach = p.cutoff > 0.0 ? p.cutoff : kernel_info(KernelType::gaussian).cutoff;
  const double reach2 = reach * reach;
  std::vector<double> sq_res(n, 0.0), contrib(n * dd, 0.0), gaps(n, 1.0);
  std::vector<char> ok(n, 1);
  const auto work = [&](std::size_t begin, std::size_t end) {
    std::vector<double> w(n), g(n);
    for (std::size_t i = begin; i < end; ++i) {
      const double* zi = &z[i * d];
      for (std::size_t j = 0; j < n; ++j) {
        double d2 = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
          const double v = z[j * d + k] - zi[k];
          d2 += v * v;
        }
        w[j] = (j == i || d2 > reach2)
                   ? 0.0
                   : (p.prior ? p.prior[j] : 1.0) * std::exp(-0.5 * d2) *
                         detail::categorical_factor(p.categorical, n, i, j);
      }
      const double own = (p.prior ? p.prior[i] : 1.0) *
                         detail::categorical_factor(p.categorical, n, i, i);
      double r = 0.0;
      if (!detail::loo_point(p, z.data(), i, w.data(), own, g.data(), &r, &gaps[i]) ||
          !(gaps[i] > p.min_gap)) {
        ok[i] = 0;
        continue;
      }
      const double pi = p.prior ? p.prior[i] : 1.0;
      sq_res[i] = pi * r * r;
      // M_i = 2 p_i r_i sum_j g_j w_j d d' (divided by W in the reduction); symmetric.
      double* m = &contrib[i * dd];
      const double* xi = &xr[i * d];
      for (std::size_t j = 0; j < n; ++j) {
        const double c = 2.0 * pi * r * g[j] * w[j];
        if (c == 0.0) continue;
        const double* xj = &xr[j * d];
        for (std::size_t a = 0; a < d; ++a) {
          const double da = c * (xi[a] - xj[a]);
          for (std::size_t b = a; b < d; ++b) m[a * d + b] += da * (xi[b] - xj[b]);
        }
      }
    }
  };
  if (!run_chunked(n, chunk_size(n, 2e6), parallel_for, monitor, work)) return false;
  double total_prior = 0.0, loss = 0.0;
  std::vector<double> msum(dd, 0.0);
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
    for (std::size_t k = 0; k < dd; ++k) msum[k] += contrib[i * dd + k];
  }
  out.gradient.assign(dd, 0.0);
  if (out.failed) {
    out.loss = std::numeric_limits<double>::infinity();
    return true;
  }
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = a + 1; b < d; ++b) msum[b * d + a] = msum[a * d + b];  // symmetry
  out.loss = loss / total_prior;
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
