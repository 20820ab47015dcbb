// The local-moment engine: for every query q it accumulates, over the data points x_i near q,
//   S = sum_i W_i phi(u_i) phi(u_i)',  T = sum_i W_i phi(u_i) v_i',  S2 = sum_i k_i W_i phi phi'
// with u_i = (x_i - q) / h_q in scaled coordinates, k_i the kernel weight, W_i = k_i * prior_i and
// phi the monomials of degree <= p, then solves the local least-squares problem S beta = T.
// Degree 0 is the local mean itself; no n x m weight matrix is ever formed.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <type_traits>
#include <vector>

#include "family.hpp"
#include "kernels.hpp"
#include "neighbors.hpp"
#include "parallel.hpp"
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
        to[e] += ((from[0] + from[1]) + (from[2] + from[3])) +
                 ((from[4] + from[5]) + (from[6] + from[7]));
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
};

// Solves the moments of query q (of m) into the outputs: Cholesky of S with a rank check.
inline void solve_moments(Moments& mo, std::size_t q, std::size_t m, const EngineOutput& out) {
  const std::size_t nb = mo.nb, nv = mo.nv;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (out.wsum) out.wsum[q] = mo.S[0];
  int status = kOk;
  if (!(mo.S[0] > 0.0)) status = kNoWeight;
  // Cholesky S = L L' (L stored row-major in chol, lower part).
  std::vector<double>& L = mo.chol;
  for (std::size_t a = 0; a < nb && status == kOk; ++a) {
    for (std::size_t b = 0; b <= a; ++b) {
      double s = mo.S[b * nb + a];  // upper triangle holds S[b][a] for b <= a
      for (std::size_t c = 0; c < b; ++c) s -= L[a * nb + c] * L[b * nb + c];
      if (a == b) {
        if (!(s > kRankTolerance * mo.S[a * nb + a])) {
          status = kSingular;
          break;
        }
        L[a * nb + a] = std::sqrt(s);
      } else {
        L[a * nb + b] = s / L[b * nb + b];
      }
    }
  }
  if (out.status) out.status[q] = status;
  if (status != kOk) {
    for (std::size_t k = 0; k < nb * nv; ++k) out.coef[q + m * k] = nan;
    if (out.var)
      for (std::size_t b = 0; b < nb; ++b) out.var[q + m * b] = nan;
    if (out.s00) out.s00[q] = nan;
    return;
  }
  // inv = S^-1, column by column.
  std::vector<double>& inv = mo.inv;
  std::vector<double>& col = mo.col;  // scratch: no allocation per query
  for (std::size_t c = 0; c < nb; ++c) {
    for (std::size_t a = 0; a < nb; ++a) {
      double s = (a == c) ? 1.0 : 0.0;
      for (std::size_t k = 0; k < a; ++k) s -= L[a * nb + k] * col[k];
      col[a] = s / L[a * nb + a];
    }
    for (std::size_t a = nb; a-- > 0;) {
      double s = col[a];
      for (std::size_t k = a + 1; k < nb; ++k) s -= L[k * nb + a] * col[k];
      col[a] = s / L[a * nb + a];
    }
    for (std::size_t a = 0; a < nb; ++a) inv[a * nb + c] = col[a];
  }
  for (std::size_t j = 0; j < nv; ++j)
    for (std::size_t a = 0; a < nb; ++a) {
      double s = 0.0;
      for (std::size_t b = 0; b < nb; ++b) s += inv[a * nb + b] * mo.T[b * nv + j];
      out.coef[q + m * (a + nb * j)] = s;
    }
  if (out.s00) out.s00[q] = inv[0];
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

// Categorical variables of the data, which enter through the generalized product kernel: the
// weight of point i is its numeric kernel weight times prod_j L_j(level of the query, z_ij).
// Level codes are 0-based, n x count column-major; per variable its levels, kernel and lambda.
struct CategoricalVars {
  const int* codes = nullptr;
  std::size_t count = 0;
  std::vector<int> levels;
  std::vector<DiscreteKernel> kernels;
  std::vector<double> lambda;
  bool unit_mass = false;  // weights as probabilities (densities), see discrete_weight
};

// The data side of the engine: points in scaled coordinates, kept in kd-tree order together with
// their values, prior weights and categorical levels, so that every strategy sweeps contiguous
// memory. Optional per-point scales s_i (sample-point bandwidths, as in adaptive density
// estimation) stretch the kernel of point i: its weight is k(|x_i - q| / (h_q s_i)).
class LocalData {
public:
  LocalData(const double* x, std::size_t n, std::size_t d, const double* values, std::size_t nv,
            const double* prior, const double* point_scale = nullptr,
            const CategoricalVars& categorical = {})
      : tree_(x, n, d), nv_(nv), values_(n * nv), prior_(prior ? n : 0),
        inv_scale2_(point_scale ? n : 0), cat_(categorical),
        codes_(categorical.count * n) {
    const std::vector<std::size_t>& ord = tree_.order();
    for (std::size_t j = 0; j < cat_.count; ++j)
      for (std::size_t i = 0; i < n; ++i) codes_[j * n + i] = cat_.codes[j * n + ord[i]];
    cat_.codes = nullptr;  // the caller's order; codes_ holds tree order
    table_size_ = 0;
    for (int c : cat_.levels) table_size_ += static_cast<std::size_t>(c);
    for (std::size_t j = 0; j < nv; ++j)
      for (std::size_t i = 0; i < n; ++i) values_[j * n + i] = values[j * n + ord[i]];
    for (std::size_t i = 0; i < prior_.size(); ++i) prior_[i] = prior[ord[i]];
    // Prefix sums of the weights in tree order: the weight of any node in O(1).
    weight_prefix_.assign(n + 1, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      weight_prefix_[i + 1] = weight_prefix_[i] + (prior ? prior_[i] : 1.0);
    for (std::size_t i = 0; i < inv_scale2_.size(); ++i) {
      const double s = point_scale[ord[i]];
      inv_scale2_[i] = 1.0 / (s * s);
      min_scale_ = std::min(min_scale_, s);
      max_scale_ = std::max(max_scale_, s);
    }
  }
  // 1 / s_i^2 in tree order, or null without point scales; the extreme scales bound the reach.
  const double* inv_scale2() const { return inv_scale2_.empty() ? nullptr : inv_scale2_.data(); }
  double min_scale() const { return inv_scale2_.empty() ? 1.0 : min_scale_; }
  // Sum of the prior weights at tree positions [begin, end).
  double weight(std::size_t begin, std::size_t end) const {
    return weight_prefix_[end] - weight_prefix_[begin];
  }
  double max_scale() const { return inv_scale2_.empty() ? 1.0 : max_scale_; }
  const KdTree& tree() const { return tree_; }
  std::size_t n() const { return tree_.size(); }
  std::size_t d() const { return tree_.dim(); }
  std::size_t nv() const { return nv_; }
  const double* values() const { return values_.data(); }
  const double* prior() const { return prior_.empty() ? nullptr : prior_.data(); }
  bool categorical() const { return cat_.count > 0; }
  // Entries of a query's level table: one weight per level of every categorical variable.
  std::size_t table_size() const { return table_size_; }
  // The level table of a query whose code of variable j is query_codes[j * stride].
  void level_table(const int* query_codes, std::size_t stride, double* table) const {
    for (std::size_t j = 0; j < cat_.count; ++j) {
      const int c = cat_.levels[j], query = query_codes[j * stride];
      for (int level = 0; level < c; ++level)
        *table++ = discrete_weight(cat_.kernels[j], query, level, c, cat_.lambda[j], cat_.unit_mass);
    }
  }
  // Multiplies the weights w of the points at tree positions [s, s + len) by their level weights.
  template <class Len>
  void weigh_levels(const double* table, std::size_t s, Len len, double* w) const {
    const std::size_t n = this->n();
    for (std::size_t j = 0; j < cat_.count; ++j) {
      const int* code = codes_.data() + j * n + s;
      for (std::size_t k = 0; k < len; ++k) w[k] *= table[code[k]];
      table += cat_.levels[j];
    }
  }

private:
  KdTree tree_;
  std::size_t nv_;
  std::vector<double> values_, prior_, inv_scale2_, weight_prefix_;
  double min_scale_ = kInf, max_scale_ = 0.0;
  CategoricalVars cat_;
  std::vector<int> codes_;
  std::size_t table_size_ = 0;
};

struct EngineSettings {
  KernelType kernel = KernelType::gaussian;
  int degree = 0;
  bool want_var = false;
  bool use_tree = true;  // prune with the tree; otherwise sweep every point
  double cutoff = 0.0;   // truncation radius in scales; 0: the kernel's own cut-off
  double rtol = 0.0;     // weight sums only: relative error allowed (0: exact), see density_sum
  // The local likelihood (families other than the Gaussian): at most max_iter Newton steps,
  // converged when the deviance changes by less than tol relative (glm.control's rule).
  Family family = Family::gaussian;
  int max_iter = 25;
  double tol = 1e-8;
};

// The truncation radius that applies: the user's, else the registry's (infinite for the Cauchy).
inline double effective_cutoff(const EngineSettings& set) {
  return set.cutoff > 0.0 ? set.cutoff : kernel_info(set.kernel).cutoff;
}

namespace detail {

// Where a leaf's points lie relative to the cut-off (sweep_block): all within it, or some
// beyond it (they weigh nothing).
enum DistanceRange { kInside, kNearOnly };



// Squared scaled distances r2 of `len` points from tree position s to query q (in v4d
// registers for a full block: GCC keeps its own vectorised version of this loop in memory).
LOCALMEAN_INLINE void squared_distances(const LocalData& data, const double* q, double inv_h,
                                        std::size_t s, std::integral_constant<std::size_t, kBlock>,
                                        double* r2) {
  static_assert(kBlock == 16, "four v4d per block");
  const std::size_t n = data.n(), d = data.d();
  const double* col = data.tree().points() + s;
  v4d r0 = {0.0, 0.0, 0.0, 0.0}, r1 = r0, r2v = r0, r3 = r0;
  for (std::size_t j = 0; j < d; ++j, col += n) {
    const double qj = q[j];
    const v4d t0 = (LOCALMEAN_LOAD4(col) - qj) * inv_h, t1 = (LOCALMEAN_LOAD4(col + 4) - qj) * inv_h;
    const v4d t2 = (LOCALMEAN_LOAD4(col + 8) - qj) * inv_h,
              t3 = (LOCALMEAN_LOAD4(col + 12) - qj) * inv_h;
    r0 += t0 * t0;
    r1 += t1 * t1;
    r2v += t2 * t2;
    r3 += t3 * t3;
  }
  LOCALMEAN_STORE4(r2, r0);
  LOCALMEAN_STORE4(r2 + 4, r1);
  LOCALMEAN_STORE4(r2 + 8, r2v);
  LOCALMEAN_STORE4(r2 + 12, r3);
}
LOCALMEAN_INLINE void squared_distances(const LocalData& data, const double* q, double inv_h,
                                        std::size_t s, std::size_t len, double* r2) {
  const std::size_t n = data.n(), d = data.d();
  const double* pts = data.tree().points();
  std::fill(r2, r2 + len, 0.0);
  for (std::size_t j = 0; j < d; ++j) {
    const double* col = pts + j * n + s;
    for (std::size_t k = 0; k < len; ++k) {
      const double t = (col[k] - q[j]) * inv_h;
      r2[k] += t * t;
    }
  }
}

// The kernel weights w of `len` points from tree position s for query q (without the prior
// weights): the numeric kernel times the level weights of the query's `table` (null: none). Len
// is either the compile-time block length (so that the loops vectorise) or a run-time tail length.
template <class K, class Len>
LOCALMEAN_INLINE void block_weights(const LocalData& data, const double* q, const double* table,
                                    double inv_h, double cut2, DistanceRange range, std::size_t s,
                                    Len len, double* w) {
  double r2[kBlock];
  squared_distances(data, q, inv_h, s, len, r2);
  if (const double* inv_s2 = data.inv_scale2())
    for (std::size_t k = 0; k < len; ++k) r2[k] *= inv_s2[s + k];
  if (range == kInside) {
    for (std::size_t k = 0; k < len; ++k) w[k] = K::shape(r2[k]);
  } else {
    for (std::size_t k = 0; k < len; ++k) w[k] = within(r2[k], cut2) * K::shape(r2[k]);
  }
  if (table) data.weigh_levels(table, s, len, w);
}

// Lane arithmetic on a block: acc[k % kLanes] += x[k] * y[k] (k in order) and out[k] = x[k] *
// y[k], written with v4d for full blocks (the compiler's own vectorisation of these loops is
// unreliable).
static_assert(kLanes == 8 && kBlock % kLanes == 0, "a lane group is two v4d");
LOCALMEAN_INLINE void add_product(double* acc, const double* x, const double* y,
                                  std::integral_constant<std::size_t, kBlock>) {
  v4d low = LOCALMEAN_LOAD4(acc), high = LOCALMEAN_LOAD4(acc + 4);
  for (std::size_t c = 0; c < kBlock; c += kLanes) {
    low += LOCALMEAN_LOAD4(x + c) * LOCALMEAN_LOAD4(y + c);
    high += LOCALMEAN_LOAD4(x + c + 4) * LOCALMEAN_LOAD4(y + c + 4);
  }
  LOCALMEAN_STORE4(acc, low);
  LOCALMEAN_STORE4(acc + 4, high);
}
LOCALMEAN_INLINE void add_product(double* acc, const double* x, const double* y, std::size_t len) {
  for (std::size_t k = 0; k < len; ++k) acc[k % kLanes] += x[k] * y[k];
}
// acc[k % kLanes] += x[k]
LOCALMEAN_INLINE void add_lanes(double* acc, const double* x,
                                std::integral_constant<std::size_t, kBlock>) {
  v4d low = LOCALMEAN_LOAD4(acc), high = LOCALMEAN_LOAD4(acc + 4);
  for (std::size_t c = 0; c < kBlock; c += kLanes) {
    low += LOCALMEAN_LOAD4(x + c);
    high += LOCALMEAN_LOAD4(x + c + 4);
  }
  LOCALMEAN_STORE4(acc, low);
  LOCALMEAN_STORE4(acc + 4, high);
}
LOCALMEAN_INLINE void add_lanes(double* acc, const double* x, std::size_t len) {
  for (std::size_t k = 0; k < len; ++k) acc[k % kLanes] += x[k];
}
LOCALMEAN_INLINE void product(double* out, const double* x, const double* y,
                              std::integral_constant<std::size_t, kBlock>) {
  for (std::size_t c = 0; c < kBlock; c += 4)
    LOCALMEAN_STORE4(out + c, LOCALMEAN_LOAD4(x + c) * LOCALMEAN_LOAD4(y + c));
}
LOCALMEAN_INLINE void product(double* out, const double* x, const double* y, std::size_t len) {
  for (std::size_t k = 0; k < len; ++k) out[k] = x[k] * y[k];
}

// Accumulates `len` points from tree position s into the lanes of query q's moments (see
// block_weights), leaving out the first `skip` of them (already swept: see sweep_body).
template <class K, class Len>
LOCALMEAN_INLINE void sweep_block(const LocalData& data, const Basis& basis, const double* q,
                                  const double* table, double inv_h, double cut2,
                                  DistanceRange range, std::size_t s, Len len, std::size_t skip,
                                  Moments& mo) {
  const std::size_t n = data.n(), nv = data.nv(), nb = mo.nb;
  const double* pts = data.tree().points();
  const double* prior = data.prior();
  double w[kBlock], W[kBlock];
  block_weights<K>(data, q, table, inv_h, cut2, range, s, len, w);
  for (std::size_t k = 0; k < skip; ++k) w[k] = 0.0;
  if (prior) {
    product(W, w, prior + s, len);
  } else {
    std::copy(w, w + len, W);
  }
  if (nb == 1 && !mo.want_var) {
    // The local mean.
    add_lanes(mo.S_lanes(), W, len);
    for (std::size_t j = 0; j < nv; ++j)
      add_product(mo.T_lanes() + j * kLanes, W, data.values() + j * n + s, len);
    return;
  }
  // Local polynomial: basis values of the block, each term its parent times one variable.
  double* phi = mo.block_phi.data();
  std::fill(phi, phi + kBlock, 1.0);
  for (std::size_t b = 1; b < nb; ++b) {
    const double* up = phi + basis.parent(b) * kBlock;
    const double* col = pts + basis.var(b) * n + s;
    const double qj = q[basis.var(b)];
    double* out = phi + b * kBlock;
    for (std::size_t k = 0; k < len; ++k) out[k] = up[k] * ((col[k] - qj) * inv_h);
  }
  for (std::size_t a = 0; a < nb; ++a) {
    double Wa[kBlock], kWa[kBlock];
    product(Wa, W, phi + a * kBlock, len);
    if (mo.want_var) product(kWa, w, Wa, len);
    for (std::size_t b = a; b < nb; ++b) {
      add_product(mo.S_lanes() + (a * nb + b) * kLanes, Wa, phi + b * kBlock, len);
      if (mo.want_var)
        add_product(mo.S2_lanes() + (a * nb + b) * kLanes, kWa, phi + b * kBlock, len);
    }
    for (std::size_t j = 0; j < nv; ++j)
      add_product(mo.T_lanes() + (a * nv + j) * kLanes, Wa, data.values() + j * n + s, len);
  }
}

// Accumulates the points at tree positions [begin, end) into the lanes of query q's moments, in
// full blocks: a last partial block is swept as the block that ends at `end`, without the
// points it shares with the block before. Only ranges shorter than a block take the slower loop
// of run-time length.
template <class K>
LOCALMEAN_INLINE void sweep_body(const LocalData& data, const Basis& basis, const double* q,
                                 const double* table, double inv_h, double cut2,
                                 DistanceRange range, std::size_t begin, std::size_t end,
                                 Moments& mo) {
  const auto full = std::integral_constant<std::size_t, kBlock>();
  if (end - begin < kBlock) {
    sweep_block<K>(data, basis, q, table, inv_h, cut2, range, begin, end - begin, 0, mo);
    return;
  }
  std::size_t s = begin;
  for (; s + kBlock <= end; s += kBlock)
    sweep_block<K>(data, basis, q, table, inv_h, cut2, range, s, full, 0, mo);
  if (s < end)
    sweep_block<K>(data, basis, q, table, inv_h, cut2, range, end - kBlock, full,
                   kBlock - (end - s), mo);
}

// The sweep in its best build for the processor (see simd.hpp).
template <class K>
void sweep(const LocalData& data, const Basis& basis, const double* q, const double* table,
           double inv_h, double cut2, DistanceRange range, std::size_t begin, std::size_t end,
           Moments& mo) {
  best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    sweep_body<K>(data, basis, q, table, inv_h, cut2, range, begin, end, mo);
  });
}

// The tiled sweep of local means over every data point (tiled_local_means): kSweepTile queries
// share each block of points, and kCacheBlock points (a multiple of kBlock) stay in cache while
// every tile of a chunk of queries sweeps them. kTileLanes lanes per sum.
constexpr std::size_t kSweepTile = 4;
constexpr std::size_t kCacheBlock = 2048;
constexpr std::size_t kTileLanes = 4;

// Weight sums over the points at tree positions [begin, end) (at least kBlock of them) for a tile
// of kSweepTile queries: query t at q[t * d + j], with inverse scale inv_h[t]. Adds to
// `lanes`, per query, the lanes of the weight sum and then of each value's weighted sum, point
// k of a block into lane k % kTileLanes. A last partial block is swept as the block that ends at
// `end`, without the points it shares with the block before (see sweep_body).
template <class K>
LOCALMEAN_INLINE void tile_sums(const LocalData& data, const double* q, const double* inv_h,
                                std::size_t begin, std::size_t end, double* lanes) {
  static_assert(kBlock == 16 && kTileLanes == 4, "four v4d per block, one per lane group");
  constexpr std::size_t tile = kSweepTile;
  const std::size_t n = data.n(), d = data.d(), nv = data.nv();
  const double* pts = data.tree().points();
  const double* prior = data.prior();
  const double* inv_s2 = data.inv_scale2();
  double w[tile * kBlock];  // squared distances, then weights: query t's at w + t * kBlock
  for (std::size_t s = begin; s < end; s += kBlock) {
    const std::size_t start = std::min(s, end - kBlock), skip = s - start;
    for (std::size_t t = 0; t < tile; ++t) {
      v4d r0 = {0.0, 0.0, 0.0, 0.0}, r1 = r0, r2 = r0, r3 = r0;
      const double* col = pts + start;
      // Scaled before squaring, as squared_distances(): the scale of a point's own nn(1)
      // window is the smallest normal double, whose square underflows.
      const double ih = inv_h[t];
      for (std::size_t j = 0; j < d; ++j, col += n) {
        const double qj = q[t * d + j];
        const v4d t0 = (LOCALMEAN_LOAD4(col) - qj) * ih, t1 = (LOCALMEAN_LOAD4(col + 4) - qj) * ih;
        const v4d t2 = (LOCALMEAN_LOAD4(col + 8) - qj) * ih,
                  t3 = (LOCALMEAN_LOAD4(col + 12) - qj) * ih;
        r0 += t0 * t0;
        r1 += t1 * t1;
        r2 += t2 * t2;
        r3 += t3 * t3;
      }
      double* to = w + t * kBlock;
      LOCALMEAN_STORE4(to, r0);
      LOCALMEAN_STORE4(to + 4, r1);
      LOCALMEAN_STORE4(to + 8, r2);
      LOCALMEAN_STORE4(to + 12, r3);
    }
    if (inv_s2)
      for (std::size_t t = 0; t < tile; ++t)
        for (std::size_t k = 0; k < kBlock; ++k) w[t * kBlock + k] *= inv_s2[start + k];
    // One loop over the whole tile: many independent evaluations in flight.
    for (std::size_t k = 0; k < tile * kBlock; ++k) w[k] = K::shape(w[k]);
    for (std::size_t t = 0; t < tile; ++t) {
      double* wt = w + t * kBlock;
      for (std::size_t k = 0; k < skip; ++k) wt[k] = 0.0;
      if (prior) product(wt, wt, prior + start, std::integral_constant<std::size_t, kBlock>());
      double* acc = lanes + t * (1 + nv) * kTileLanes;
      v4d sum = LOCALMEAN_LOAD4(acc);
      for (std::size_t c = 0; c < kBlock; c += kTileLanes) sum += LOCALMEAN_LOAD4(wt + c);
      LOCALMEAN_STORE4(acc, sum);
      for (std::size_t j = 0; j < nv; ++j) {
        const double* y = data.values() + j * n + start;
        double* at = acc + (1 + j) * kTileLanes;
        v4d sy = LOCALMEAN_LOAD4(at);
        for (std::size_t c = 0; c < kBlock; c += kTileLanes)
          sy += LOCALMEAN_LOAD4(wt + c) * LOCALMEAN_LOAD4(y + c);
        LOCALMEAN_STORE4(at, sy);
      }
    }
  }
}

// Local means (degree 0, no variance, no categorical variables) of queries [begin, end) of m
// over every data point, as accumulate_query() and solve_moments() give them, tiled: the data in
// cache blocks, each swept by every tile of queries. Tiles start at multiples of kSweepTile of
// the query index, so that query i always takes slot i % kSweepTile of its tile (empty slots
// repeat a query of the range): every query's sums are formed by the same operations in the
// same order, however the queries are cut into chunks and threads. A cache block's lanes are
// added to the query's totals, and those lanes' pairwise sums into its moments.
template <class K>
void tiled_local_means(const LocalData& data, const double* queries, std::size_t m,
                       const double* radius, std::size_t begin, std::size_t end,
                       const EngineOutput& out) {
  constexpr std::size_t tile = kSweepTile;
  const std::size_t n = data.n(), d = data.d(), nv = data.nv();
  const std::size_t width = (1 + nv) * kTileLanes;  // lanes per query
  const std::size_t first = begin - begin % tile, slots = (end - first + tile - 1) / tile * tile;
  std::vector<double> q(slots * d), inv_h(slots), total(slots * width, 0.0), part(tile * width);
  for (std::size_t slot = 0; slot < slots; ++slot) {
    const std::size_t i = std::min(std::max(first + slot, begin), end - 1);
    for (std::size_t j = 0; j < d; ++j) q[slot * d + j] = queries[j * m + i];
    inv_h[slot] = 1.0 / (radius ? radius[i] : 1.0);
  }
  for (std::size_t c = 0; c < n;) {
    // Every cache block holds at least kBlock points (n >= kBlock).
    const std::size_t c_end = n - c < kCacheBlock + kBlock ? n : c + kCacheBlock;
    for (std::size_t slot = 0; slot < slots; slot += tile) {
      std::fill(part.begin(), part.end(), 0.0);
      best_build([&]() LOCALMEAN_LAMBDA_INLINE {
        tile_sums<K>(data, q.data() + slot * d, inv_h.data() + slot, c, c_end, part.data());
      });
      for (std::size_t k = 0; k < tile * width; ++k) total[slot * width + k] += part[k];
    }
    c = c_end;
  }
  Moments mo(1, nv, false);
  for (std::size_t i = begin; i < end; ++i) {
    const double* lane = total.data() + (i - first) * width;
    mo.reset();
    for (std::size_t j = 0; j <= nv; ++j, lane += kTileLanes) {
      const double sum = (lane[0] + lane[1]) + (lane[2] + lane[3]);
      if (j == 0)
        mo.S[0] = sum;
      else
        mo.T[j - 1] = sum;
    }
    solve_moments(mo, i, m, out);
  }
}

}  // namespace detail

// How far the sweep of one query reaches: the cut-off in scales (infinite: every point) and
// whether it counts from the nearest data point (see local_fit).
struct Reach {
  double cutoff;
  bool from_nearest;
  explicit Reach(const EngineSettings& set)
      : cutoff(set.use_tree || set.cutoff > 0.0 ? effective_cutoff(set) : kInf),
        from_nearest(set.use_tree && std::isfinite(cutoff) && set.cutoff <= 0.0 &&
                     !kernel_info(set.kernel).compact) {}
};

// Without a cut-off every point is swept, so there is nothing to prune: nodes of up to this many
// points are swept whole (fewer, longer sweeps), still in the tree's fixed order.
constexpr std::size_t kWholeSweepGroup = 1024;

// Visits the kd-tree leaves within reach of query q (scaled coordinates) with scale h:
// visit(begin, end, range, cut2) for each, with the leaf's kernel range (see sweep_block) and the
// squared truncation radius in scales.
template <class K, class Visit>
void visit_window(const LocalData& data, const double* q, double h, const Reach& how,
                  Visit&& visit) {
  // Point scales widen the ball to the largest and bound the scaled distances of a leaf.
  double reach = how.cutoff;
  if (how.from_nearest) reach += data.tree().kth_distance(q, 1) / (h * data.min_scale());
  const double far_scale = 1.0 / (h * h * data.min_scale() * data.min_scale());
  const double cut2 = reach * reach;
  // Consecutive leaves of one range join into one visit: fewer, longer sweeps.
  std::size_t run_begin = 0, run_end = 0;
  detail::DistanceRange run_range = detail::kInside;
  data.tree().visit_ball(q, reach * h * data.max_scale(),
                         [&](std::size_t b, std::size_t e, double, double far2) {
    const detail::DistanceRange range =
        far2 * far_scale <= cut2 ? detail::kInside : detail::kNearOnly;
    if (b == run_end && range == run_range) {
      run_end = e;
      return;
    }
    if (run_end > run_begin) visit(run_begin, run_end, run_range, cut2);
    run_begin = b;
    run_end = e;
    run_range = range;
  }, std::isfinite(reach) ? 0 : kWholeSweepGroup);
  if (run_end > run_begin) visit(run_begin, run_end, run_range, cut2);
}

// Accumulates the moments of query q (scaled coordinates, level weights `table`) with scale h,
// after mo.reset().
template <class K>
void accumulate_query(const LocalData& data, const Basis& basis, const double* q,
                      const double* table, double h, const Reach& how, Moments& mo) {
  visit_window<K>(data, q, h, how,
                  [&](std::size_t b, std::size_t e, detail::DistanceRange range, double cut2) {
    detail::sweep<K>(data, basis, q, table, 1.0 / h, cut2, range, b, e, mo);
  });
  mo.flush();
}

// The weight sum of query q alone (a kernel density up to its constant) with a relative error of
// at most rtol, as single-tree kernel summation (Gray and Moore, 2003): a node whose kernel values
// lie in [kmin, kmax] counts as its weight times (kmin + kmax) / 2, an error of at most its weight
// times (kmax - kmin) / 2, when the errors so far stay within rtol times a lower bound of the
// sum (what the visited nodes are known to hold) times the share of the weight visited. That
// bound only grows, so the final error is within rtol times the sum; sharing the budget by
// weight keeps some for the far nodes, which carry most of the weight but little of the sum.
// Exact leaves leave their share to later nodes. The nearest nodes come first. A node of at most
// kDensityGroup points that cannot be approximated is swept whole: descending into it would
// cost more in bounds and short sweeps than its exact sum (3-D, n = 1e5: 2.5x faster overall).
constexpr std::size_t kDensityGroup = 512;
template <class K>
void density_sum(const LocalData& data, const Basis& basis, const double* q, double h,
                 double rtol, Moments& mo) {
  const double inv_h2 = 1.0 / (h * h), total = data.weight(0, data.n());
  double lower = 0.0, spent = 0.0, visited = 0.0;
  auto sweep_exactly = [&](std::size_t b, std::size_t e) {
    visited += data.weight(b, e);
    const double before = mo.S[0];
    detail::sweep<K>(data, basis, q, nullptr, 1.0 / h, kInf, detail::kInside, b, e, mo);
    mo.flush();
    lower += mo.S[0] - before;
  };
  data.tree().visit_nearest_first(q,
      [&](std::size_t b, std::size_t e, double near2, double far2) {
        const double kmax = K::exact(near2 * inv_h2), kmin = K::exact(far2 * inv_h2);
        const double w = data.weight(b, e), error = 0.5 * w * (kmax - kmin);
        if (spent + error > rtol * (lower + w * kmin) * (visited + w) / total) {
          if (e - b > kDensityGroup) return false;
          sweep_exactly(b, e);
          return true;
        }
        mo.S[0] += 0.5 * w * (kmax + kmin);
        lower += w * kmin;
        spent += error;
        visited += w;
        return true;
      },
      [&](std::size_t b, std::size_t e, double, double) { sweep_exactly(b, e); });
}

// The points of one query's kernel window: tree positions, kernel weights (with level weights)
// and the weights with the prior weights.
struct Window {
  std::vector<std::size_t> pos;
  std::vector<double> kernel, weight;
  void clear() {
    pos.clear();
    kernel.clear();
    weight.clear();
  }
  // Removes the point at tree position p, if the window holds it (leave-one-out fits).
  void drop(std::size_t p) {
    const auto at = std::find(pos.begin(), pos.end(), p);
    if (at == pos.end()) return;
    const std::ptrdiff_t b = at - pos.begin();
    pos.erase(at);
    kernel.erase(kernel.begin() + b);
    weight.erase(weight.begin() + b);
  }
};

// Collects the points of query q's kernel window that carry weight.
template <class K>
void collect_window(const LocalData& data, const double* q, const double* table, double h,
                    const Reach& how, Window& win) {
  const double* prior = data.prior();
  visit_window<K>(data, q, h, how,
                  [&](std::size_t b, std::size_t e, detail::DistanceRange range, double cut2) {
    for (std::size_t s = b; s < e; s += kBlock) {
      const std::size_t len = std::min(kBlock, e - s);
      double w[kBlock];
      detail::block_weights<K>(data, q, table, 1.0 / h, cut2, range, s, len, w);
      for (std::size_t k = 0; k < len; ++k) {
        const double weight = prior ? w[k] * prior[s + k] : w[k];
        if (weight > 0.0) {
          win.pos.push_back(s + k);
          win.kernel.push_back(w[k]);
          win.weight.push_back(weight);
        }
      }
    }
  });
}

// A local fit that reproduces every response of the window (all within kPerfectFit, at the
// points of weight at least kPerfectFitWeight of the largest) has no interior maximum: the
// responses separate (or are all 0, or all 1) and the coefficients diverge.
constexpr double kPerfectFit = 1e-8;
constexpr double kPerfectFitWeight = 1e-8;

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

// The local mean over a given neighbour list: sum_b w_b y_b / sum_b w_b over b < count, with
// w_b = weight[b] * prior(b) and y_b = value(b), summed in list order; NaN when no weight.
// Methods that find their neighbours themselves (imputation) average through it.
template <class Prior, class Value>
double listed_local_mean(const double* weight, std::size_t count, Prior&& prior, Value&& value) {
  double sw = 0.0, swy = 0.0;
  for (std::size_t b = 0; b < count; ++b) {
    const double w = weight[b] * prior(b);
    sw += w;
    swy += w * value(b);
  }
  return sw > 0.0 ? swy / sw : std::numeric_limits<double>::quiet_NaN();
}

// Kernel weights K(d2_b / h2) of listed neighbours from their squared scaled distances d2 (kInf:
// not comparable, weight 0). With h2 = 0 the neighbours at distance 0 share the weight equally.
inline void listed_kernel_weights(KernelType kernel, const double* d2, std::size_t count,
                                  double h2, double* weight) {
  with_kernel(kernel, [&](auto kern) {
    for (std::size_t b = 0; b < count; ++b) {
      if (!(d2[b] < kInf))
        weight[b] = 0.0;
      else if (h2 > 0.0)
        weight[b] = decltype(kern)::exact(d2[b] / h2);
      else
        weight[b] = d2[b] <= 0.0 ? 1.0 : 0.0;
    }
    return 0;
  });
}

// Local moments and their solution at m queries (m x d column-major, scaled coordinates) with
// per-query scales radius[q] (null: 1) and, with categorical variables, the queries' level codes
// (m x count column-major). Likelihood families only: `leave_out` (null: none) gives per query a
// data row (0-based, the caller's order; negative: none) left out of its window, for exact
// leave-one-out fits. Returns false if the monitor stopped it.
inline bool local_fit(const LocalData& data, const double* queries, std::size_t m,
                      const double* radius, const int* query_codes, const EngineSettings& set,
                      const EngineOutput& out, const ParallelFor& parallel_for = serial_for,
                      const Monitor& monitor = {}, const int* leave_out = nullptr) {
  const std::size_t d = data.d();
  const Basis basis(static_cast<int>(d), set.degree);
  // The exact strategy truncates only at a cut-off the user asked for. The tree strategy's
  // default cut-off for unbounded kernels counts from the nearest data point, so that no weight
  // it drops exceeds exp(-32) of the largest, however far the query lies from the data.
  const Reach how(set);
  // Approximate sums serve densities only: weight sums, no values, no point scales or levels.
  const bool approximate = set.rtol > 0.0 && set.degree == 0 && data.nv() == 0 &&
                           !set.want_var && !data.inv_scale2() && !data.categorical();
  const bool likelihood = set.family != Family::gaussian;
  // Leave-one-out fits: the tree position of every data row, to drop it from its query's window.
  std::vector<std::size_t> position(leave_out ? data.n() : 0);
  for (std::size_t t = 0; t < position.size(); ++t) position[data.tree().order()[t]] = t;
  // Local means over every data point take the tiled sweep.
  const bool tiled = !approximate && !likelihood && set.degree == 0 && !set.want_var &&
                     !data.categorical() && !std::isfinite(how.cutoff) &&
                     data.n() >= kBlock;
  auto fn = [&](std::size_t begin, std::size_t end) {
    with_kernel(set.kernel, [&](auto kern) {
      using K = decltype(kern);
      if (tiled) {
        detail::tiled_local_means<K>(data, queries, m, radius, begin, end, out);
        return 0;
      }
      Moments mo(basis.size(), data.nv(), set.want_var);
      std::vector<double> q(d), table(data.table_size());
      Window win;
      for (std::size_t i = begin; i < end; ++i) {
        for (std::size_t j = 0; j < d; ++j) q[j] = queries[j * m + i];
        const double* levels = nullptr;
        if (data.categorical()) {
          data.level_table(query_codes + i, m, table.data());
          levels = table.data();
        }
        const double h = radius ? radius[i] : 1.0;
        mo.reset();
        if (likelihood) {
          win.clear();
          collect_window<K>(data, q.data(), levels, h, how, win);
          if (leave_out && leave_out[i] >= 0)
            win.drop(position[static_cast<std::size_t>(leave_out[i])]);
          if (set.family == Family::multinomial)
            multinomial_solve(data, basis, q.data(), h, set, win, i, m, out);
          else
            likelihood_solve(data, basis, q.data(), h, set, win, mo, i, m, out);
          continue;
        }
        if (approximate)
          density_sum<K>(data, basis, q.data(), h, set.rtol, mo);
        else
          accumulate_query<K>(data, basis, q.data(), levels, h, how, mo);
        solve_moments(mo, i, m, out);
      }
      return 0;
    });
  };
  return run_chunked(m, chunk_size(data.n()), parallel_for, monitor, fn);
}

}  // namespace localmean
