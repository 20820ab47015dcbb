// The iterative solvers of the local decision, one per kind of loss of the registry
// (losses.hpp), each on the window of one query: the local likelihood by IRLS, M-estimation by
// iteratively reweighted moments, the check loss by IRLS and exact pivots, and the local
// multinomial logit by Newton steps. The likelihood, robust and check-loss solvers also fit the
// varying-coefficient model (EngineSettings::design): local polynomial in the points, linear in a
// design x.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "losses.hpp"
#include "sweep.hpp"

namespace localmean {

namespace detail {

// The number of coefficients of a local fit: the polynomial's terms, times the design's columns
// in a varying-coefficient fit (set.design > 0).
inline std::size_t fit_size(const Basis& basis, const EngineSettings& set) {
  return basis.size() * static_cast<std::size_t>(std::max(set.design, 1));
}

// The basis values phi(u_b) of the window's points (count x fit_size), once for all steps. In a
// varying-coefficient fit the values' columns 1..p are the design x_b (column 0 the response):
// phi_b = p(u_b) (x) x_b, term t of the polynomial times column j at t * p + j, so that the first
// p coefficients are those of the design at the query.
inline std::vector<double> window_basis(const LocalData& data, const Basis& basis, const double* q,
                                        double h, const Window& win, const EngineSettings& set) {
  const std::size_t nt = basis.size(), d = data.d(), n = data.n(), count = win.pos.size();
  const std::size_t p = static_cast<std::size_t>(set.design), nb = fit_size(basis, set);
  const double* pts = data.tree().points();
  const double* x = data.values() + n;  // the design's columns, when p > 0
  std::vector<double> phi(count * nb), u(d), poly(nt);
  if (p > 0 && nt == 1) {  // local constant: the design itself (the basis' one term is 1)
    for (std::size_t b = 0; b < count; ++b)
      for (std::size_t j = 0; j < p; ++j) phi[b * p + j] = x[j * n + win.pos[b]];
    return phi;
  }
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t j = 0; j < d; ++j) u[j] = (pts[j * n + win.pos[b]] - q[j]) / h;
    if (p == 0) {
      basis.eval(u.data(), phi.data() + b * nb);
      continue;
    }
    basis.eval(u.data(), poly.data());
    for (std::size_t t = 0; t < nt; ++t)
      for (std::size_t j = 0; j < p; ++j) phi[b * nb + t * p + j] = poly[t] * x[j * n + win.pos[b]];
  }
  return phi;
}

// The moments of the window with working weights W_b and working values z_b: S = sum W phi phi',
// T = sum W phi z and (wanted) S2 = sum k_b W phi phi', summed in window order.
inline void window_moments(const std::vector<double>& phi, const Window& win, const double* W,
                           const double* z, Moments& mo) {
  const std::size_t nb = mo.nb;
  mo.reset();
  for (std::size_t b = 0; b < win.pos.size(); ++b) {
    const double* ph = phi.data() + b * nb;
    for (std::size_t a = 0; a < nb; ++a) {
      for (std::size_t c = a; c < nb; ++c) {
        mo.S[a * nb + c] += W[b] * ph[a] * ph[c];
        if (mo.want_var) mo.S2[a * nb + c] += win.kernel[b] * W[b] * ph[a] * ph[c];
      }
      mo.T[a] += W[b] * ph[a] * z[b];
    }
  }
}

// Residuals y_b - phi_b' beta of the window's points.
inline void window_residuals(const std::vector<double>& phi, const Window& win, const double* y,
                             const std::vector<double>& beta, std::vector<double>& r) {
  const std::size_t nb = beta.size();
  for (std::size_t b = 0; b < win.pos.size(); ++b) {
    double fit = 0.0;
    for (std::size_t a = 0; a < nb; ++a) fit += phi[b * nb + a] * beta[a];
    r[b] = y[win.pos[b]] - fit;
  }
}

// The weighted median of |r| with weights w divided by 0.6745: MASS::rlm's scale of
// case-weighted residuals (the cumulative weight share is accumulated in long double, as R's
// cumsum()).
inline double weighted_mad(const std::vector<double>& r, const std::vector<double>& w) {
  const std::size_t count = r.size();
  std::vector<std::size_t> order(count);
  for (std::size_t b = 0; b < count; ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::fabs(r[a]) < std::fabs(r[b]);
  });
  long double total = 0.0L, running = 0.0L;
  for (double v : w) total += v;
  std::size_t below = 0;  // points whose cumulative share is below 1/2
  std::vector<double> share(count);
  for (std::size_t k = 0; k < count; ++k) {
    running += w[order[k]];
    share[k] = static_cast<double>(running) / static_cast<double>(total);
    if (share[k] < 0.5) ++below;
  }
  if (below >= count) below = count - 1;
  const double at = std::fabs(r[order[below]]);
  if (share[below] > 0.5 || below + 1 >= count) return at / 0.6745;
  return (at + std::fabs(r[order[below + 1]])) / (2.0 * 0.6745);
}

// Status of a failed solve: the outputs NaN.
inline void fail_query(Moments& mo, std::size_t i, std::size_t m, const EngineOutput& out,
                       int why) {
  mo.reset();  // a zero S: solve_moments writes NaN outputs
  solve_moments(mo, i, m, out);
  if (out.status) out.status[i] = why;
}

// The outputs of one scratch solve (query 0 of 1, coefficients into `coef`): the iterative
// solvers' steps.
struct StepOutput {
  double s00 = 0.0, wsum = 0.0;
  int status = kOk;
  EngineOutput out;
  explicit StepOutput(double* coef) {
    out.coef = coef;
    out.s00 = &s00;
    out.wsum = &wsum;
    out.status = &status;
  }
  StepOutput(const StepOutput&) = delete;
  StepOutput& operator=(const StepOutput&) = delete;
};

}  // namespace detail

// The local likelihood at query q (of m): Newton-Raphson (IRLS; for non-canonical links with
// the observed information where it is positive, else Fisher's) on the kernel-weighted
// log-likelihood sum_i W_i l(y_i, g^-1(phi(u_i)' beta)) of the local polynomial, from the local
// mean (beta = (g(ybar), 0, ...)). Every step is a weighted least-squares solve of the moments
// with weights W_i I_i, I_i = g'(mu_i)^2 / v(mu_i) for canonical links (g' = d mu / d eta), and
// working values eta_i + (y_i - mu_i) g' / (v I_i); a step that raises the deviance is halved.
// The outputs are those of the last solve: the coefficients, [S^-1]_00 and the variance
// diag(S^-1 S2 S^-1), S2 with the weights K_i times the working weights (dispersion 1).
inline void likelihood_solve(const LocalData& data, const Basis& basis, const double* q,
                             double h, const EngineSettings& set, const Window& win, Moments& mo,
                             std::size_t i, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = detail::fit_size(basis, set), count = win.pos.size();
  const double* y = data.values();
  const LossInfo& loss = loss_info(set.family);
  // A fit that reproduces the responses has no interior maximum where a response can sit on the
  // boundary of the means (0 for binomial and Poisson counts).
  const bool check_perfect = !loss.y_open;
  double sw = 0.0, swy = 0.0, wmax = 0.0;
  for (std::size_t b = 0; b < count; ++b) {
    sw += win.weight[b];
    swy += win.weight[b] * y[win.pos[b]];
    wmax = std::max(wmax, win.weight[b]);
  }
  std::vector<double> beta(nb, 0.0), previous(nb, 0.0), next(nb), W(count), z(count);
  detail::StepOutput step(next.data());
  auto fail = [&](int why) { detail::fail_query(mo, i, m, out, why); };
  if (!(sw > 0.0)) return fail(kNoWeight);
  if (!valid_mean(loss.variance, swy / sw)) return fail(kNoFit);
  const std::vector<double> phi = detail::window_basis(data, basis, q, h, win, set);
  beta[0] = link_function(loss.link, swy / sw);
  double old_deviance = kInf;
  int halvings = 0;
  for (int iter = 0; iter < set.max_iter;) {
    double deviance = 0.0;
    bool perfect = check_perfect;
    for (std::size_t b = 0; b < count; ++b) {
      const double* ph = phi.data() + b * nb;
      const double yb = y[win.pos[b]];
      double eta = 0.0;
      for (std::size_t a = 0; a < nb; ++a) eta += ph[a] * beta[a];
      const double mu = link_inverse(loss.link, eta), v = variance_function(loss.variance, mu);
      deviance += win.weight[b] * unit_deviance(loss.variance, yb, mu);
      if (win.weight[b] >= kPerfectFitWeight * wmax && !(std::fabs(yb - mu) < kPerfectFit))
        perfect = false;
      if (loss.canonical) {  // g' = v
        W[b] = win.weight[b] * v;
        z[b] = eta + (yb - mu) / v;
      } else {
        // Newton's observed information g'^2 / v - (y - mu) d(g' / v) / d eta where it is
        // positive (the Gamma's log link: y / mu), else Fisher's g'^2 / v.
        const double g = link_derivative(loss.link, mu);
        const double g2 = link_second_derivative(loss.link, mu);
        const double dv = variance_derivative(loss.variance, mu);
        const double fisher = g * g / v;
        const double observed = fisher - (yb - mu) * (g2 * v - g * g * dv) / (v * v);
        const double info = observed > 0.0 ? observed : fisher;
        W[b] = win.weight[b] * info;
        z[b] = eta + (yb - mu) * (g / v) / info;
      }
    }
    if (!(deviance <= old_deviance * (1.0 + 1e-12)) && halvings < set.max_iter) {
      // Halve the step back towards the previous iterate.
      for (std::size_t a = 0; a < nb; ++a) beta[a] = 0.5 * (beta[a] + previous[a]);
      ++halvings;
      continue;
    }
    if (perfect) return fail(kNoFit);
    detail::window_moments(phi, win, W.data(), z.data(), mo);
    bool converged = std::fabs(deviance - old_deviance) < set.tol * (std::fabs(deviance) + 0.1);
    if (converged && !loss.canonical) {
      // Where Fisher scoring converges linearly: also ask the linear predictor to settle within
      // tol (its weighted root mean square change over the window).
      double moved = 0.0;
      for (std::size_t b = 0; b < count; ++b) {
        double e = 0.0;
        for (std::size_t a = 0; a < nb; ++a) e += phi[b * nb + a] * (beta[a] - previous[a]);
        moved += win.weight[b] * e * e;
      }
      converged = std::sqrt(moved / sw) < set.tol;
    }
    if (converged) {
      solve_moments(mo, i, m, out);
      return;
    }
    solve_moments(mo, 0, 1, step.out);
    // Singular at the start: too few distinct points; later: the Newton weights v(mu) vanish
    // as the fit diverges.
    if (step.status != kOk) return fail(iter == 0 ? step.status : static_cast<int>(kNoFit));
    previous = beta;
    beta = next;
    old_deviance = deviance;
    ++iter;
  }
  fail(kNoFit);
}

// M-estimation at query q (of m), for the robust losses of the registry (identity link): the
// local polynomial minimising sum_i W_i rho((y_i - phi_i' beta) / s), by iteratively reweighted
// moments as MASS::rlm(wt.method = "case", scale.est = "MAD") (or "inv.var" with
// set.inverse_variance: residuals sqrt(W_i) r_i, their plain MAD): from the kernel-weighted
// least-squares fit, each step estimates the scale s as the weighted MAD of the window's
// residuals (weights W_i; see weighted_mad()) and solves the moments with the weights
// W_i psi(r_i / s) / (r_i / s). Converged when the window's residuals change by less than tol
// relative to them (rlm's test on the residuals, weighted by W_i), within 4 max_iter steps; a
// zero scale (the fit reproduces half of the window's weight) ends the steps with the current
// fit. Outputs: the coefficients, [S^-1]_00 and diag(S^-1 S2 S^-1) of the last solve's moments.
inline void robust_solve(const LocalData& data, const Basis& basis, const double* q, double h,
                         const EngineSettings& set, const Window& win, Moments& mo, std::size_t i,
                         std::size_t m, const EngineOutput& out) {
  const std::size_t nb = detail::fit_size(basis, set), count = win.pos.size();
  const double* y = data.values();
  const double c = set.loss_param;
  std::vector<double> beta(nb), W(win.weight), z(count), r(count), before(count);
  detail::StepOutput step(beta.data());
  auto fail = [&](int why) { detail::fail_query(mo, i, m, out, why); };
  if (count == 0) return fail(kNoWeight);
  const std::vector<double> phi = detail::window_basis(data, basis, q, h, win, set);
  for (std::size_t b = 0; b < count; ++b) z[b] = y[win.pos[b]];
  detail::window_moments(phi, win, W.data(), z.data(), mo);
  solve_moments(mo, 0, 1, step.out);
  if (step.status != kOk) return fail(step.status);
  detail::window_residuals(phi, win, y, beta, r);
  // Inverse-variance weights: the residuals scaled by sqrt(W_b), their MAD unweighted.
  std::vector<double> scaled(set.inverse_variance ? count : 0), unit(scaled.size(), 1.0);
  const std::vector<double>& u = set.inverse_variance ? scaled : r;
  const std::vector<double>& mad_weight = set.inverse_variance ? unit : win.weight;
  // Reweighting converges linearly, slower than Newton steps: four times their budget.
  for (int iter = 0; iter < 4 * set.max_iter; ++iter) {
    for (std::size_t b = 0; b < scaled.size(); ++b) scaled[b] = std::sqrt(win.weight[b]) * r[b];
    const double scale = detail::weighted_mad(u, mad_weight);
    if (!(scale > 0.0)) return solve_moments(mo, i, m, out);
    for (std::size_t b = 0; b < count; ++b)
      W[b] = win.weight[b] * loss_weight(set.family, u[b] / scale, c);
    detail::window_moments(phi, win, W.data(), z.data(), mo);
    solve_moments(mo, 0, 1, step.out);
    // The weights vanish on too many points (bisquare) to span the polynomial.
    if (step.status != kOk) return fail(kNoFit);
    before.swap(r);
    detail::window_residuals(phi, win, y, beta, r);
    double change = 0.0, size = 0.0;
    for (std::size_t b = 0; b < count; ++b) {
      change += win.weight[b] * (before[b] - r[b]) * (before[b] - r[b]);
      size += win.weight[b] * before[b] * before[b];
    }
    if (std::sqrt(change / std::max(size, 1e-300)) <= set.tol) return solve_moments(mo, i, m, out);
  }
  fail(kNoFit);
}

namespace detail {

// LU factorisation with partial pivoting of a dense k x k matrix (row-major, in place); false
// when a pivot is not above kRankTolerance times its column's largest entry.
inline bool lu_factor(std::vector<double>& A, std::size_t k, std::vector<std::size_t>& perm) {
  perm.resize(k);
  std::vector<double> colmax(k, 0.0);
  for (std::size_t r = 0; r < k; ++r)
    for (std::size_t c = 0; c < k; ++c) colmax[c] = std::max(colmax[c], std::fabs(A[r * k + c]));
  for (std::size_t r = 0; r < k; ++r) perm[r] = r;
  for (std::size_t c = 0; c < k; ++c) {
    std::size_t best = c;
    for (std::size_t r = c + 1; r < k; ++r)
      if (std::fabs(A[r * k + c]) > std::fabs(A[best * k + c])) best = r;
    if (!(std::fabs(A[best * k + c]) > kRankTolerance * colmax[c])) return false;
    if (best != c) {
      for (std::size_t e = 0; e < k; ++e) std::swap(A[c * k + e], A[best * k + e]);
      std::swap(perm[c], perm[best]);
    }
    for (std::size_t r = c + 1; r < k; ++r) {
      const double f = (A[r * k + c] /= A[c * k + c]);
      for (std::size_t e = c + 1; e < k; ++e) A[r * k + e] -= f * A[c * k + e];
    }
  }
  return true;
}

// Solves A x = b (transposed: A' x = b) with the factors of lu_factor(); b is overwritten by x.
inline void lu_solve(const std::vector<double>& LU, std::size_t k,
                     const std::vector<std::size_t>& perm, bool transposed, double* b) {
  std::vector<double> x(k);
  if (!transposed) {  // P A = L U: L y = P b, U x = y
    for (std::size_t r = 0; r < k; ++r) {
      double s = b[perm[r]];
      for (std::size_t c = 0; c < r; ++c) s -= LU[r * k + c] * x[c];
      x[r] = s;
    }
    for (std::size_t r = k; r-- > 0;) {
      double s = x[r];
      for (std::size_t c = r + 1; c < k; ++c) s -= LU[r * k + c] * x[c];
      x[r] = s / LU[r * k + r];
    }
    std::copy(x.begin(), x.end(), b);
    return;
  }
  // A' = U' L' P: U' y = b, L' w = y, x = P' w.
  for (std::size_t r = 0; r < k; ++r) {
    double s = b[r];
    for (std::size_t c = 0; c < r; ++c) s -= LU[c * k + r] * x[c];
    x[r] = s / LU[r * k + r];
  }
  for (std::size_t r = k; r-- > 0;) {
    double s = x[r];
    for (std::size_t c = r + 1; c < k; ++c) s -= LU[c * k + r] * x[c];
    x[r] = s;
  }
  for (std::size_t r = 0; r < k; ++r) b[perm[r]] = x[r];
}

}  // namespace detail

namespace detail {

// A candidate of a weighted selection: its key, a tie-breaking index and its weight.
struct Weighted {
  double key;
  std::size_t index;
  double weight;
  bool operator<(const Weighted& o) const {
    return key < o.key || (key == o.key && index < o.index);
  }
};

// The position, in `items` (reordered), of the first item in (key, index) order whose
// cumulative weight reaches `target`; items.size() if the total weight does not. Quickselect:
// expected linear time.
inline std::size_t weighted_select(std::vector<Weighted>& items, double target) {
  std::size_t lo = 0, hi = items.size();
  double below = 0.0;  // the weight of the items before lo
  while (hi - lo > 32) {
    const std::size_t mid = lo + (hi - lo) / 2;
    std::nth_element(items.begin() + lo, items.begin() + mid, items.begin() + hi);
    double part = 0.0;
    for (std::size_t k = lo; k < mid; ++k) part += items[k].weight;
    if (below + part >= target) {
      hi = mid;
    } else if (below + part + items[mid].weight >= target) {
      return mid;
    } else {
      below += part + items[mid].weight;
      lo = mid + 1;
    }
  }
  std::sort(items.begin() + lo, items.begin() + hi);
  for (std::size_t k = lo; k < hi; ++k) {
    below += items[k].weight;
    if (below >= target) return k;
  }
  return items.size();
}

// The kSmallest least items (in order) of a stream: a bounded max-heap.
class SmallestItems {
public:
  static constexpr std::size_t kSmallest = 16;
  void clear() { heap_.clear(); }
  void offer(const Weighted& item) {
    if (heap_.size() < kSmallest) {
      heap_.push_back(item);
      std::push_heap(heap_.begin(), heap_.end());
    } else if (item < heap_.front()) {
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.back() = item;
      std::push_heap(heap_.begin(), heap_.end());
    }
  }
  // The items kept, ascending.
  std::vector<Weighted>& sorted() {
    std::sort_heap(heap_.begin(), heap_.end());
    return heap_;
  }

private:
  std::vector<Weighted> heap_;
};

}  // namespace detail

// The check loss at query q (of m): the local polynomial minimising
// sum_i W_i rho_tau(y_i - phi_i' beta), rho_tau(r) = r (tau - [r < 0]), tau = set.loss_param,
// exactly. A weighted linear program, whose optimum interpolates nb window points (a basis).
// The start: the kernel-weighted least-squares fit with its constant moved to the weighted tau
// quantile of its residuals (the optimum for its other coefficients), and the basis of the nb
// points with the smallest residuals that span the polynomial. The basis then descends by simplex
// pivots (Barrodale and Roberts' algorithm for L1 fits): while the subgradient condition fails
// for a basis point j (its multiplier v_j outside [tau - 1, tau]), the fit moves along the edge
// that frees j to the minimum of the (convex, piecewise linear) loss along it, where another
// point enters the basis: the first of the points whose residuals cross 0 along the edge, in the
// order they do, at which their weights outweigh the descent rate (a weighted selection, linear
// time). Ends when the condition holds at every basis point: the exact optimum (kNoFit if that
// takes more than max_iter * (nb + count) pivots). Each pivot takes two passes over the window.
// Outputs: the coefficients; [S^-1]_00 and the variance of the final basis' interpolation are
// not defined (NaN).
inline void quantile_solve(const LocalData& data, const Basis& basis, const double* q, double h,
                           const EngineSettings& set, const Window& win, Moments& mo,
                           std::size_t i, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = detail::fit_size(basis, set), count = win.pos.size();
  const double* y = data.values();
  const double* w = win.weight.data();
  const double tau = set.loss_param, nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> beta(nb), z(count), r(count);
  detail::StepOutput step(beta.data());
  auto fail = [&](int why) { detail::fail_query(mo, i, m, out, why); };
  if (count == 0) return fail(kNoWeight);
  const std::vector<double> phi = detail::window_basis(data, basis, q, h, win, set);
  double yscale = 0.0, total = 0.0;
  for (std::size_t b = 0; b < count; ++b) {
    z[b] = y[win.pos[b]];
    yscale = std::max(yscale, std::fabs(z[b]));
    total += w[b];
  }
  detail::window_moments(phi, win, w, z.data(), mo);
  solve_moments(mo, 0, 1, step.out);
  if (step.status != kOk) return fail(step.status);
  detail::window_residuals(phi, win, y, beta, r);
  // The constant (phi_0 = 1) moved to the weighted tau quantile of the residuals.
  std::vector<detail::Weighted> items(count);
  for (std::size_t b = 0; b < count; ++b) items[b] = {r[b], b, w[b]};
  const std::size_t at = detail::weighted_select(items, tau * total);
  const double shift = r[items[std::min(at, count - 1)].index];
  beta[0] += shift;
  for (std::size_t b = 0; b < count; ++b) r[b] -= shift;
  // The starting basis: the points with the smallest |r| (ties: the first) whose basis rows are
  // independent (Gram-Schmidt with the rank rule), among the kSmallest nearest, else among all.
  detail::SmallestItems nearest;
  for (std::size_t b = 0; b < count; ++b) nearest.offer({std::fabs(r[b]), b, 0.0});
  std::vector<std::size_t> in_basis;
  std::vector<double> ortho, v(nb);  // orthonormal rows of the chosen points
  auto choose_basis = [&](const std::vector<detail::Weighted>& order) {
    in_basis.clear();
    ortho.clear();
    for (std::size_t k = 0; k < order.size() && in_basis.size() < nb; ++k) {
      const double* ph = phi.data() + order[k].index * nb;
      std::copy(ph, ph + nb, v.begin());
      double norm0 = 0.0;
      for (double e : v) norm0 += e * e;
      for (std::size_t s = 0; s < in_basis.size(); ++s) {
        double dot = 0.0;
        for (std::size_t a = 0; a < nb; ++a) dot += v[a] * ortho[s * nb + a];
        for (std::size_t a = 0; a < nb; ++a) v[a] -= dot * ortho[s * nb + a];
      }
      double norm = 0.0;
      for (double e : v) norm += e * e;
      if (!(norm > 1e-10 * norm0)) continue;
      for (double& e : v) e /= std::sqrt(norm);
      ortho.insert(ortho.end(), v.begin(), v.end());
      in_basis.push_back(order[k].index);
    }
  };
  choose_basis(nearest.sorted());
  if (in_basis.size() < nb && count > detail::SmallestItems::kSmallest) {
    for (std::size_t b = 0; b < count; ++b) items[b] = {std::fabs(r[b]), b, 0.0};
    std::sort(items.begin(), items.end());
    choose_basis(items);
  }
  if (in_basis.size() < nb) return fail(kSingular);
  std::vector<char> basic(count, 0);
  for (std::size_t b : in_basis) basic[b] = 1;
  std::vector<double> A(nb * nb), u(nb), delta(nb);
  std::vector<std::size_t> perm;
  const std::size_t max_pivots = static_cast<std::size_t>(set.max_iter) * (nb + count);
  const double slack = 1e-10;  // tolerance of the multipliers' condition
  // The pivots run on responses moved by a tiny fixed jitter (1e-9 of their scale): with tied
  // or rounded data, points off the basis would lie exactly on the fit, and the pivots could
  // cycle on steps of length 0 (degeneracy). The optimal basis of the jittered problem is
  // optimal for the data; the coefficients interpolate the data at it.
  std::vector<double> zp(count);
  const double jitter = 1e-9 * (yscale > 0.0 ? yscale : 1.0);
  for (std::size_t b = 0; b < count; ++b) {
    const std::uint64_t hash = static_cast<std::uint64_t>(b + 1) * 0x9E3779B97F4A7C15ull;
    zp[b] = z[b] + jitter * (static_cast<double>(hash >> 11) / 9007199254740992.0 - 0.5);
  }
  for (std::size_t pivot = 0; pivot <= max_pivots; ++pivot) {
    for (std::size_t s = 0; s < nb; ++s)
      std::copy(phi.begin() + in_basis[s] * nb, phi.begin() + (in_basis[s] + 1) * nb,
                A.begin() + s * nb);
    if (!detail::lu_factor(A, nb, perm)) return fail(kNoFit);
    for (std::size_t s = 0; s < nb; ++s) beta[s] = zp[in_basis[s]];
    detail::lu_solve(A, nb, perm, false, beta.data());
    // The residuals and the multipliers: sum_{j in basis} W_j v_j phi_j = -g, g the off-basis
    // subgradient (a zero residual counts as positive).
    std::fill(u.begin(), u.end(), 0.0);
    for (std::size_t b = 0; b < count; ++b) {
      const double* ph = phi.data() + b * nb;
      double fit = 0.0;
      for (std::size_t a = 0; a < nb; ++a) fit += ph[a] * beta[a];
      r[b] = zp[b] - fit;
      if (basic[b]) continue;
      const double psi = (r[b] < 0.0 ? tau - 1.0 : tau) * w[b];
      for (std::size_t a = 0; a < nb; ++a) u[a] -= psi * ph[a];
    }
    detail::lu_solve(A, nb, perm, true, u.data());
    std::size_t leave = nb;
    double worst = slack, direction = 0.0;
    for (std::size_t s = 0; s < nb; ++s) {
      const double vs = u[s] / w[in_basis[s]];
      if (vs - tau > worst) { worst = vs - tau; leave = s; direction = -1.0; }
      if (tau - 1.0 - vs > worst) { worst = tau - 1.0 - vs; leave = s; direction = 1.0; }
    }
    if (leave == nb) {
      // The optimum: its coefficients, the moments' weight sum, no variance.
      for (std::size_t s = 0; s < nb; ++s) beta[s] = z[in_basis[s]];
      detail::lu_solve(A, nb, perm, false, beta.data());
      for (std::size_t a = 0; a < nb; ++a) out.coef[i + m * a] = beta[a];
      if (out.var)
        for (std::size_t a = 0; a < nb; ++a) out.var[i + m * a] = nan;
      if (out.s00) out.s00[i] = nan;
      if (out.inverse)
        for (std::size_t k = 0; k < nb * nb; ++k) out.inverse[i + m * k] = nan;
      if (out.wsum) out.wsum[i] = total;
      if (out.status) out.status[i] = kOk;
      return;
    }
    // The edge: phi_j' delta = direction for the leaving point j, 0 for the others; along it
    // the loss falls at the rate W_j * worst and each off-basis point whose residual reaches 0
    // (at step r_b / c_b, c_b = phi_b' delta) raises the rate by W_b |c_b|.
    std::fill(delta.begin(), delta.end(), 0.0);
    delta[leave] = direction;
    detail::lu_solve(A, nb, perm, false, delta.data());
    const double rate = w[in_basis[leave]] * worst;
    items.clear();
    nearest.clear();
    double rise = 0.0;
    for (std::size_t b = 0; b < count; ++b) {
      if (basic[b]) continue;
      const double* ph = phi.data() + b * nb;
      double c = 0.0;
      for (std::size_t a = 0; a < nb; ++a) c += ph[a] * delta[a];
      if (!(c > 0.0 ? r[b] >= 0.0 : c < 0.0 && r[b] < 0.0)) continue;
      const detail::Weighted item{r[b] / c, b, w[b] * std::fabs(c)};
      items.push_back(item);
      nearest.offer(item);
      rise += item.weight;
    }
    // unbounded: cannot happen with a full-rank basis
    if (!(rise >= rate)) return fail(kNoFit);
    std::size_t enter = count;
    double crossed = 0.0;
    for (const detail::Weighted& item : nearest.sorted()) {
      crossed += item.weight;
      if (crossed >= rate) {
        enter = item.index;
        break;
      }
    }
    if (enter == count) {
      const std::size_t k = detail::weighted_select(items, rate);
      if (k == items.size()) return fail(kNoFit);
      enter = items[k].index;
    }
    basic[in_basis[leave]] = 0;
    basic[enter] = 1;
    in_basis[leave] = enter;
  }
  fail(kNoFit);
}

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
    if (out.inverse)
      for (std::size_t k = 0; k < nb * nb; ++k) out.inverse[i + m * k] = nan;
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
    // The Newton step H step = grad (H filled in its lower block triangle, row-major: mirrored
    // into the upper one, which cholesky() reads).
    for (std::size_t r = 0; r < dim; ++r)
      for (std::size_t c = 0; c <= r; ++c) L[c * dim + r] = H[r * dim + c];
    // Singular at the start: too few distinct points; later: the Newton weights vanish as
    // the fit diverges.
    if (!cholesky(L.data(), dim)) return fail(iter == 0 ? kSingular : kNoFit);
    step = grad;
    cholesky_solve(L.data(), dim, step.data());
    previous = beta;
    for (std::size_t a = 0; a < dim; ++a) beta[a] += step[a];
    if (converged) {
      // The leverage factor tr(C V) at the query (u = 0: phi = e_0), with the new iterate.
      std::vector<double> C(J * J), unit(dim);
      for (std::size_t s = 0; s < J; ++s) {
        std::fill(unit.begin(), unit.end(), 0.0);
        unit[s * nb] = 1.0;
        cholesky_solve(L.data(), dim, unit.data());
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
