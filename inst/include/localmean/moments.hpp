// The local polynomial basis and the moments of one query point: S = sum_i W_i phi phi',
// T = sum_i W_i phi v', S2 = sum_i k_i W_i phi phi', summed in a fixed order, and their solve.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "simd.hpp"

namespace localmean {

// Monomials u^a of total degree <= degree in d variables, ordered by degree, then by the
// position of the variables: 1, u1..ud, u1^2, u1 u2, ..., ud^2, ...
class Basis {
public:
  Basis(int d, int degree) : d_(d) {
    std::vector<int> powers(d, 0);
    for (int total = 0; total <= degree; ++total) add(powers, 0, total);
    parent_.assign(terms_.size(), 0);
    var_.assign(terms_.size(), 0);
    for (std::size_t b = 1; b < terms_.size(); ++b) {
      std::vector<int> lower = terms_[b];
      int j = 0;
      while (lower[j] == 0) ++j;
      --lower[j];
      var_[b] = j;
      parent_[b] = static_cast<std::size_t>(
          std::find(terms_.begin(), terms_.end(), lower) - terms_.begin());
    }
  }
  std::size_t size() const { return terms_.size(); }
  int dim() const { return d_; }
  // Term b (b >= 1) is term parent(b) times variable var(b).
  std::size_t parent(std::size_t b) const { return parent_[b]; }
  int var(std::size_t b) const { return var_[b]; }
  const std::vector<int>& powers(std::size_t b) const { return terms_[b]; }
  void eval(const double* u, double* phi) const {
    for (std::size_t b = 0; b < terms_.size(); ++b) {
      double p = 1.0;
      for (int j = 0; j < d_; ++j)
        for (int e = 0; e < terms_[b][j]; ++e) p *= u[j];
      phi[b] = p;
    }
  }

private:
  int d_;
  std::vector<std::vector<int>> terms_;
  std::vector<std::size_t> parent_;
  std::vector<int> var_;
  void add(std::vector<int>& powers, int from, int left) {
    if (left == 0) {
      terms_.push_back(powers);
      return;
    }
    for (int j = from; j < d_; ++j) {
      ++powers[j];
      add(powers, j, left - 1);
      --powers[j];
    }
  }
};

// kNoFit: the local likelihood has no maximum (Newton did not converge, or the fit reproduces
// the window's responses: separation).
enum QueryStatus { kOk = 0, kNoWeight = 1, kSingular = 2, kNoFit = 3 };

// A Cholesky pivot of S below this share of its own diagonal entry marks the local design as
// singular (rank deficient): about 5e4 times the double epsilon, so that rounding in sums of
// many terms is not taken for information, while designs merely ill-conditioned are solved.
// Relative to each column's own scale, so that a predictor with a huge bandwidth (tiny scaled
// coordinates, the kernel nearly constant in it) still spans its polynomial terms.
constexpr double kRankTolerance = 1e-11;

// Points per block of the kernel sweep: a fixed length lets the weight loops vectorise, and 16
// points keep four AVX2 vectors of the kernel's long dependency chain (the exponential) in flight.
constexpr std::size_t kBlock = 16;

namespace detail {
// Pairwise sum of a full block (a fixed order); sequential for a run-time length.
LOCALMEAN_INLINE double pairwise_sum(const double* v, std::integral_constant<std::size_t, 1>) {
  return v[0];
}
template <std::size_t L>
LOCALMEAN_INLINE double pairwise_sum(const double* v, std::integral_constant<std::size_t, L>) {
  const auto half = std::integral_constant<std::size_t, L / 2>();
  return pairwise_sum(v, half) + pairwise_sum(v + L / 2, half);
}
LOCALMEAN_INLINE double block_sum(const double* v, std::integral_constant<std::size_t, kBlock> full) {
  return pairwise_sum(v, full);
}
inline double block_sum(const double* v, std::size_t len) {
  double s = 0.0;
  for (std::size_t k = 0; k < len; ++k) s += v[k];
  return s;
}
}  // namespace detail

// The sum of the kLanes lanes of one moment, in the sweep's fixed order.
static_assert(kLanes == 8, "pairwise sums of eight lanes");
LOCALMEAN_INLINE double lanes_total(const double* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// Lanes per moment (kLanes, simd.hpp): short dependency chains for the local mean's few
// moments, few loads and stores for many moments.

// Moments of one query point (upper triangles of S and S2, and T), with scratch for their
// solution and for the basis values of one block of points. The sweep adds each block into
// kLanes lanes per moment (no horizontal sums in the hot loop, one load and store per block);
// flush() adds the lanes' pairwise sums into S, T and S2, so every moment is summed in a fixed
// order.
struct Moments {
  std::size_t nb, nv;
  bool want_var;
  std::vector<double> S, T, S2, chol, inv, col;
  std::vector<double> block_phi;  // nb x kBlock
  std::vector<double> lanes;      // kLanes lanes of S (nb x nb), then T (nb x nv), then S2
  Moments(std::size_t nb_, std::size_t nv_, bool want_var_)
      : nb(nb_), nv(nv_), want_var(want_var_), S(nb_ * nb_), T(nb_ * nv_), S2(nb_ * nb_),
        chol(nb_ * nb_), inv(nb_ * nb_), col(nb_), block_phi(nb_ * kBlock),
        lanes((2 * nb_ * nb_ + nb_ * nv_) * kLanes) {}
  double* S_lanes() { return lanes.data(); }
  double* T_lanes() { return lanes.data() + nb * nb * kLanes; }
  double* S2_lanes() { return lanes.data() + (nb * nb + nb * nv) * kLanes; }
  void reset() {
    std::fill(S.begin(), S.end(), 0.0);
    std::fill(T.begin(), T.end(), 0.0);
    std::fill(S2.begin(), S2.end(), 0.0);
    std::fill(lanes.begin(), lanes.end(), 0.0);
  }
  void flush() {
    auto add = [&](std::vector<double>& to, double* from) {
      for (std::size_t e = 0; e < to.size(); ++e, from += kLanes) {
        to[e] += lanes_total(from);
        std::fill(from, from + kLanes, 0.0);
      }
    };
    add(S, S_lanes());
    add(T, T_lanes());
    if (want_var) add(S2, S2_lanes());
  }
};

// Output arrays, column-major for R, allocated by the caller; optional ones may be null.
struct EngineOutput {
  double* coef = nullptr;  // m x nb x nv: coefficients of the scaled basis
  double* var = nullptr;   // m x nb: diag(S^-1 S2 S^-1)
  double* s00 = nullptr;   // m: [S^-1]_00, the leverage of a data point divided by its weight
  double* wsum = nullptr;  // m: sum of the weights W_i
  int* status = nullptr;   // m: QueryStatus
  // m x nb x nb: S^-1 of the last solve (the information's inverse of the iterative fits:
  // localize()'s standard errors); NaN where the solver has none (check loss, multinomial)
  double* inverse = nullptr;
  // m x 2: the iterative fits' windows, the number of their rows (of positive weight) and the sum
  // of their kernel weights (prior weights not applied), summed in window order
  double* window = nullptr;
};

// The one Cholesky factorisation of the package: A = L L' of a symmetric dim x dim matrix whose
// lower triangle is held column-major (element (r, c), r >= c, at a[c * dim + r]: the same
// storage as the upper triangle row-major), in place; the other triangle is not read. False
// when a pivot is not above `tol` times its own diagonal entry (kRankTolerance: the engine's
// rank rule; 0: positive definiteness alone).
inline bool cholesky(double* a, std::size_t dim, double tol = kRankTolerance) {
  for (std::size_t k = 0; k < dim; ++k) {
    double pivot = a[k * dim + k];
    const double diag = pivot;
    for (std::size_t c = 0; c < k; ++c) pivot -= a[c * dim + k] * a[c * dim + k];
    if (!(pivot > tol * diag)) return false;
    pivot = std::sqrt(pivot);
    a[k * dim + k] = pivot;
    for (std::size_t r = k + 1; r < dim; ++r) {
      double v = a[k * dim + r];
      for (std::size_t c = 0; c < k; ++c) v -= a[c * dim + r] * a[c * dim + k];
      a[k * dim + r] = v / pivot;
    }
  }
  return true;
}

// Solves L L' v = b in place (v holds b on entry), L from cholesky().
inline void cholesky_solve(const double* l, std::size_t dim, double* v) {
  for (std::size_t k = 0; k < dim; ++k) {
    for (std::size_t c = 0; c < k; ++c) v[k] -= l[c * dim + k] * v[c];
    v[k] /= l[k * dim + k];
  }
  for (std::size_t k = dim; k-- > 0;) {
    for (std::size_t r = k + 1; r < dim; ++r) v[k] -= l[k * dim + r] * v[r];
    v[k] /= l[k * dim + k];
  }
}

// Solves the moments of query q (of m) into the outputs: Cholesky of S with a rank check.
inline void solve_moments(Moments& mo, std::size_t q, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = mo.nb, nv = mo.nv;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (out.wsum) out.wsum[q] = mo.S[0];
  int status = kOk;
  if (!(mo.S[0] > 0.0)) status = kNoWeight;
  // S's upper triangle, row-major, is the lower triangle column-major that cholesky() reads.
  std::vector<double>& L = mo.chol;
  if (status == kOk) {
    std::copy(mo.S.begin(), mo.S.end(), L.begin());
    if (!cholesky(L.data(), nb)) status = kSingular;
  }
  if (out.status) out.status[q] = status;
  if (status != kOk) {
    for (std::size_t k = 0; k < nb * nv; ++k) out.coef[q + m * k] = nan;
    if (out.var)
      for (std::size_t b = 0; b < nb; ++b) out.var[q + m * b] = nan;
    if (out.s00) out.s00[q] = nan;
    if (out.inverse)
      for (std::size_t k = 0; k < nb * nb; ++k) out.inverse[q + m * k] = nan;
    return;
  }
  // inv = S^-1, column by column.
  std::vector<double>& inv = mo.inv;
  std::vector<double>& col = mo.col;  // scratch: no allocation per query
  for (std::size_t c = 0; c < nb; ++c) {
    std::fill(col.begin(), col.end(), 0.0);
    col[c] = 1.0;
    cholesky_solve(L.data(), nb, col.data());
    for (std::size_t a = 0; a < nb; ++a) inv[a * nb + c] = col[a];
  }
  for (std::size_t j = 0; j < nv; ++j)
    for (std::size_t a = 0; a < nb; ++a) {
      double s = 0.0;
      for (std::size_t b = 0; b < nb; ++b) s += inv[a * nb + b] * mo.T[b * nv + j];
      out.coef[q + m * (a + nb * j)] = s;
    }
  if (out.s00) out.s00[q] = inv[0];
  if (out.inverse)
    for (std::size_t a = 0; a < nb; ++a)
      for (std::size_t c = 0; c < nb; ++c) out.inverse[q + m * (a + nb * c)] = inv[a * nb + c];
  if (out.var) {
    auto s2 = [&](std::size_t a, std::size_t b) {
      return a <= b ? mo.S2[a * nb + b] : mo.S2[b * nb + a];
    };
    for (std::size_t a = 0; a < nb; ++a) {
      double s = 0.0;
      for (std::size_t b = 0; b < nb; ++b) {
        double t = 0.0;
        for (std::size_t c = 0; c < nb; ++c) t += s2(b, c) * inv[c * nb + a];
        s += inv[a * nb + b] * t;
      }
      out.var[q + m * a] = s;
    }
  }
}

}  // namespace localmean
