// The iterative solvers of the local decision: the local likelihood by Newton steps on the
// moments of a kernel window, and the local multinomial logit.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "sweep.hpp"

namespace localmean {

// The local likelihood at query q (of m): Newton-Raphson on the kernel-weighted log-likelihood
// sum_i W_i l(y_i, g^-1(phi(u_i)' beta)) of the local polynomial, from the local mean (beta =
// (g(ybar), 0, ...)). Every step is a weighted least-squares solve of the moments with weights
// W_i v(mu_i) and working values eta_i + (y_i - mu_i) / v(mu_i); a step that raises the deviance
// is halved. The outputs are those of the last solve: the coefficients, [S^-1]_00 and the
// variance diag(S^-1 S2 S^-1), S2 with the weights K_i W_i v(mu_i) (dispersion 1).
inline void likelihood_solve(const LocalData& data, const Basis& basis, const double* q,
                             double h, const EngineSettings& set, const Window& win, Moments& mo,
                             std::size_t i, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = basis.size(), d = data.d(), n = data.n();
  const double* pts = data.tree().points();
  const double* y = data.values();
  const Family family = set.family;
  double sw = 0.0, swy = 0.0, wmax = 0.0;
  for (std::size_t b = 0; b < win.pos.size(); ++b) {
    sw += win.weight[b];
    swy += win.weight[b] * y[win.pos[b]];
    wmax = std::max(wmax, win.weight[b]);
  }
  std::vector<double> beta(nb, 0.0), previous(nb, 0.0), next(nb), phi(nb), u(d);
  double s00 = 0.0, wsum = 0.0;
  int status = kOk;
  EngineOutput step;
  step.coef = next.data();
  step.s00 = &s00;
  step.wsum = &wsum;
  step.status = &status;
  auto fail = [&](int why) {
    mo.reset();  // a zero S: solve_moments writes NaN outputs
    solve_moments(mo, i, m, out);
    if (out.status) out.status[i] = why;
  };
  if (!(sw > 0.0)) return fail(kNoWeight);
  if (!family_valid_mean(family, swy / sw)) return fail(kNoFit);
  beta[0] = family_link(family, swy / sw);
  double old_deviance = kInf;
  int halvings = 0;
  for (int iter = 0; iter < set.max_iter;) {
    mo.reset();
    double deviance = 0.0;
    bool perfect = true;
    for (std::size_t b = 0; b < win.pos.size(); ++b) {
      const std::size_t p = win.pos[b];
      for (std::size_t j = 0; j < d; ++j) u[j] = (pts[j * n + p] - q[j]) / h;
      basis.eval(u.data(), phi.data());
      double eta = 0.0;
      for (std::size_t a = 0; a < nb; ++a) eta += phi[a] * beta[a];
      const double mu = family_mean(family, eta), v = family_variance(family, mu);
      deviance += win.weight[b] * family_deviance(family, y[p], mu);
      if (win.weight[b] >= kPerfectFitWeight * wmax && !(std::fabs(y[p] - mu) < kPerfectFit))
        perfect = false;
      const double W = win.weight[b] * v, z = eta + (y[p] - mu) / v;
      for (std::size_t a = 0; a < nb; ++a) {
        for (std::size_t c = a; c < nb; ++c) {
          mo.S[a * nb + c] += W * phi[a] * phi[c];
          if (mo.want_var) mo.S2[a * nb + c] += win.kernel[b] * W * phi[a] * phi[c];
        }
        mo.T[a] += W * phi[a] * z;
      }
    }
    if (!(deviance <= old_deviance * (1.0 + 1e-12)) && halvings < set.max_iter) {
      // Halve the step back towards the previous iterate.
      for (std::size_t a = 0; a < nb; ++a) beta[a] = 0.5 * (beta[a] + previous[a]);
      ++halvings;
      continue;
    }
    if (perfect) return fail(kNoFit);
    const bool converged = std::fabs(deviance - old_deviance) < set.tol * (std::fabs(deviance) + 0.1);
    if (converged) {
      solve_moments(mo, i, m, out);
      return;
    }
    solve_moments(mo, 0, 1, step);
    // Singular at the start: too few distinct points; later: the Newton weights v(mu) vanish
    // as the fit diverges.
    if (status != kOk) return fail(iter == 0 ? status : static_cast<int>(kNoFit));
    previous = beta;
    beta = next;
    old_deviance = deviance;
    ++iter;
  }
  fail(kNoFit);
}

namespace detail {

// Cholesky factor A = L L' of a dense symmetric dim x dim matrix (row-major; the lower part is
// read and overwritten by L). False when a pivot falls below kRankTolerance of its own diagonal
// entry, the rank rule of solve_moments().
inline bool dense_cholesky(std::vector<double>& A, std::size_t dim) {
  for (std::size_t a = 0; a < dim; ++a) {
    const double diag = A[a * dim + a];
    for (std::size_t b = 0; b <= a; ++b) {
      double s = A[a * dim + b];
      for (std::size_t c = 0; c < b; ++c) s -= A[a * dim + c] * A[b * dim + c];
      if (a == b) {
        if (!(s > kRankTolerance * diag)) return false;
        A[a * dim + a] = std::sqrt(s);
      } else {
        A[a * dim + b] = s / A[b * dim + b];
      }
    }
  }
  return true;
}

// Solves L L' x = b in place, L from dense_cholesky().
inline void dense_cholesky_solve(const std::vector<double>& L, std::size_t dim, double* b) {
  for (std::size_t a = 0; a < dim; ++a) {
    double s = b[a];
    for (std::size_t c = 0; c < a; ++c) s -= L[a * dim + c] * b[c];
    b[a] = s / L[a * dim + a];
  }
  for (std::size_t a = dim; a-- > 0;) {
    double s = b[a];
    for (std::size_t c = a + 1; c < dim; ++c) s -= L[c * dim + a] * b[c];
    b[a] = s / L[a * dim + a];
  }
}

}  // namespace detail

// A class whose weight in a window is at most this share of the window's weight counts as
// absent from it: its local probability is 0 (the limit of the local likelihood, whose
// supremum drives that class's linear predictor to -infinity) and its points leave the fit.
// Its local-constant probability would be that share, below the convergence tolerance; far
// classes with negligible Gaussian weights would otherwise separate and void the fit.
constexpr double kAbsentClass = 1e-8;

// The local multinomial logit at query q (of m): the values are one-hot indicators of
// K = data.nv() classes; among the J + 1 classes present in the window (see kAbsentClass), the
// first is the baseline and each other class c has the linear predictor phi(u)' beta_c, a
// local polynomial; p_c = exp(eta_c) / sum_c' exp(eta_c'). Newton-Raphson on the
// kernel-weighted log-likelihood sum_i W_i log p_{y_i}(u_i) over the J x nb coefficients, from
// the local class shares (intercepts log(w_c / w_baseline), slopes 0), with the convergence
// rule, step halving and failure codes of likelihood_solve(): a fit that gives every window
// point its class with probability 1 (within kPerfectFit) is separated (kNoFit).
// Outputs: coef (m x nb x K) the coefficients of eta_c (0 for the baseline; an absent class has
// intercept -Inf and slopes 0), so that softmax of the intercepts gives the probabilities at q;
// s00 the trace of C V, C the intercept block of the inverse Hessian and V = diag(p) - p p' at
// q: a data point's leverage (the trace of its influence matrix) divided by its weight; var NaN.
inline void multinomial_solve(const LocalData& data, const Basis& basis, const double* q,
                              double h, const EngineSettings& set, const Window& win,
                              std::size_t i, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = basis.size(), d = data.d(), n = data.n(), nk = data.nv();
  const std::size_t count = win.pos.size();
  const double* pts = data.tree().points();
  const double* y = data.values();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::size_t> cls(count);
  std::vector<double> class_weight(nk, 0.0);
  double sw = 0.0, wmax = 0.0;
  for (std::size_t b = 0; b < count; ++b) {
    std::size_t k = 0;
    while (k + 1 < nk && !(y[k * n + win.pos[b]] > 0.5)) ++k;
    cls[b] = k;
    class_weight[k] += win.weight[b];
    sw += win.weight[b];
    wmax = std::max(wmax, win.weight[b]);
  }
  if (out.wsum) out.wsum[i] = sw;
  auto finish = [&](int status, const std::vector<double>* coef, const std::vector<int>* slot,
                    double s00) {
    for (std::size_t k = 0; k < nk; ++k)
      for (std::size_t a = 0; a < nb; ++a) {
        double v = nan;
        if (coef) {
          const int s = (*slot)[k];
          v = s < 0 ? (a == 0 ? -kInf : 0.0) : s == 0 ? 0.0 : (*coef)[(s - 1) * nb + a];
        }
        out.coef[i + m * (a + nb * k)] = v;
      }
    if (out.var)
      for (std::size_t a = 0; a < nb; ++a) out.var[i + m * a] = nan;
    if (out.s00) out.s00[i] = s00;
    if (out.status) out.status[i] = status;
  };
  auto fail = [&](int why) { finish(why, nullptr, nullptr, nan); };
  if (!(sw > 0.0)) return fail(kNoWeight);
  // slot[k]: 0 for the baseline, 1..J for the free classes, -1 for absent ones.
  std::vector<int> slot(nk, -1);
  std::size_t base = nk;
  int free_classes = -1;
  for (std::size_t k = 0; k < nk; ++k) {
    if (!(class_weight[k] > kAbsentClass * sw)) continue;
    slot[k] = ++free_classes;
    if (base == nk) base = k;
  }
  const std::size_t J = static_cast<std::size_t>(free_classes), dim = J * nb;
  std::vector<double> beta(dim, 0.0), previous(dim, 0.0), grad(dim), H(dim * dim), L(dim * dim),
      step(dim), phi(nb), u(d), eta(J + 1), prob(J + 1);
  // The basis values of the window's points, once for all Newton steps (count x nb).
  std::vector<double> window_phi(count * nb);
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t j = 0; j < d; ++j) u[j] = (pts[j * n + win.pos[b]] - q[j]) / h;
    basis.eval(u.data(), window_phi.data() + b * nb);
  }
  for (std::size_t k = 0; k < nk; ++k)
    if (slot[k] > 0) beta[(slot[k] - 1) * nb] = std::log(class_weight[k] / class_weight[base]);
  if (J == 0) return finish(kOk, &beta, &slot, 0.0);  // one class: probability 1
  // Class probabilities (slots 0..J) at the basis values phi for coefficients c; returns the
  // log-normaliser.
  auto probabilities = [&](const std::vector<double>& c, const double* ph) {
    double top = 0.0;
    eta[0] = 0.0;
    for (std::size_t s = 1; s <= J; ++s) {
      double e = 0.0;
      for (std::size_t a = 0; a < nb; ++a) e += ph[a] * c[(s - 1) * nb + a];
      eta[s] = e;
      top = std::max(top, e);
    }
    double total = 0.0;
    for (std::size_t s = 0; s <= J; ++s) total += (prob[s] = std::exp(eta[s] - top));
    for (std::size_t s = 0; s <= J; ++s) prob[s] /= total;
    return top + std::log(total);
  };
  double old_deviance = kInf;
  int halvings = 0;
  for (int iter = 0; iter < set.max_iter;) {
    std::fill(grad.begin(), grad.end(), 0.0);
    std::fill(H.begin(), H.end(), 0.0);
    double deviance = 0.0;
    bool perfect = true;
    for (std::size_t b = 0; b < count; ++b) {
      const int own = slot[cls[b]];
      if (own < 0) continue;
      const double* ph = window_phi.data() + b * nb;
      const double w = win.weight[b];
      const double log_normaliser = probabilities(beta, ph);
      deviance -= 2.0 * w * (eta[own] - log_normaliser);  // -2 W log p_own
      if (w >= kPerfectFitWeight * wmax && !(1.0 - prob[own] < kPerfectFit)) perfect = false;
      for (std::size_t s = 1; s <= J; ++s) {
        const double r = (static_cast<int>(s) == own ? 1.0 : 0.0) - prob[s];
        for (std::size_t a = 0; a < nb; ++a) grad[(s - 1) * nb + a] += w * ph[a] * r;
        for (std::size_t t = s; t <= J; ++t) {
          const double c = w * prob[s] * ((s == t ? 1.0 : 0.0) - prob[t]);
          for (std::size_t e = 0; e < nb; ++e) {
            double* row = H.data() + ((t - 1) * nb + e) * dim + (s - 1) * nb;
            const double ce = c * ph[e];
            for (std::size_t a = 0; a < nb; ++a) row[a] += ce * ph[a];
          }
        }
      }
    }
    if (!(deviance <= old_deviance * (1.0 + 1e-12)) && halvings < set.max_iter) {
      for (std::size_t a = 0; a < dim; ++a) beta[a] = 0.5 * (beta[a] + previous[a]);
      ++halvings;
      continue;
    }
    if (perfect) return fail(kNoFit);
    const bool converged =
        std::fabs(deviance - old_deviance) < set.tol * (std::fabs(deviance) + 0.1);
    // The Newton step H step = grad (H filled in its lower block triangle, which the
    // factorisation reads).
    L = H;
    // Singular at the start: too few distinct points; later: the Newton weights vanish as
    // the fit diverges.
    if (!detail::dense_cholesky(L, dim)) return fail(iter == 0 ? kSingular : kNoFit);
    step = grad;
    detail::dense_cholesky_solve(L, dim, step.data());
    previous = beta;
    for (std::size_t a = 0; a < dim; ++a) beta[a] += step[a];
    if (converged) {
      // The leverage factor tr(C V) at the query (u = 0: phi = e_0), with the new iterate.
      std::vector<double> C(J * J), unit(dim);
      for (std::size_t s = 0; s < J; ++s) {
        std::fill(unit.begin(), unit.end(), 0.0);
        unit[s * nb] = 1.0;
        detail::dense_cholesky_solve(L, dim, unit.data());
        for (std::size_t t = 0; t < J; ++t) C[t * J + s] = unit[t * nb];
      }
      std::fill(phi.begin(), phi.end(), 0.0);
      phi[0] = 1.0;
      probabilities(beta, phi.data());
      double trace = 0.0;
      for (std::size_t s = 0; s < J; ++s)
        for (std::size_t t = 0; t < J; ++t)
          trace += C[s * J + t] * prob[t + 1] * ((s == t ? 1.0 : 0.0) - prob[s + 1]);
      return finish(kOk, &beta, &slot, trace);
    }
    old_deviance = deviance;
    ++iter;
  }
  fail(kNoFit);
}

}  // namespace localmean
