// The data side of the engine: scaled points in kd-tree order with their values, prior
// weights and categorical codes, and the settings of one engine request.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "losses.hpp"
#include "kernels.hpp"
#include "moments.hpp"
#include "neighbors.hpp"

namespace localmean {

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

// The level table of a query whose code of variable j is query_codes[j * stride]: one weight
// L_j(query's level, level) per level of every variable, variable after variable.
inline void level_table(const CategoricalVars& cat, const int* query_codes, std::size_t stride,
                        bool unit_mass, double* table) {
  for (std::size_t j = 0; j < cat.count; ++j) {
    const int c = cat.levels[j], query = query_codes[j * stride];
    for (int level = 0; level < c; ++level)
      *table++ = discrete_weight(cat.kernels[j], query, level, c, cat.lambda[j], unit_mass);
  }
}

// Multiplies the weights w of the points [s, s + len) by their level weights in a query's level
// table; variable j's codes of point k are at codes[j * stride + k].
template <class Len>
LOCALMEAN_INLINE void weigh_levels(const CategoricalVars& cat, const int* codes,
                                   std::size_t stride, const double* table, std::size_t s,
                                   Len len, double* w) {
  for (std::size_t j = 0; j < cat.count; ++j) {
    const int* code = codes + j * stride + s;
    for (std::size_t k = 0; k < len; ++k) w[k] *= table[code[k]];
    table += cat.levels[j];
  }
}

// The data side of the engine: points in scaled coordinates, kept in kd-tree order together with
// their values, prior weights and categorical levels, so that every strategy sweeps contiguous
// memory. Optional per-point scales s_i (sample-point bandwidths, as in adaptive density
// estimation) stretch the kernel of point i: its weight is k(|x_i - q| / (h_q s_i)).
// Built once with the variables' `spread` (see KdTree), the same data serve any later scales
// (rescale()) and categorical lambdas (set_lambda()): the engine object of a fit.
class LocalData {
public:
  LocalData(const double* x, std::size_t n, std::size_t d, const double* values, std::size_t nv,
            const double* prior, const double* point_scale = nullptr,
            const CategoricalVars& categorical = {}, const double* spread = nullptr)
      : tree_(x, n, d, 32, spread), nv_(nv), values_(n * nv), prior_(prior ? n : 0),
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
  // The kernel of the next sweeps (every kernel but the Gaussian is swept as AnyKernel, whose
  // profile the sweep looks up here: sweep.hpp), and the tabulated profile of a user kernel
  // (null for the registry's kernels). The engine's entry points check it (check_sweep_kernel).
  KernelType kernel() const { return kernel_; }
  const KernelProfile* profile() const { return profile_; }
  void use_kernel(KernelType kernel) {
    kernel_ = kernel;
    profile_ = kernel_profile(kernel);
  }
  const KdTree& tree() const { return tree_; }
  // The points x (the constructor's, caller's order) divided by per-variable scales.
  void rescale(const double* x, const double* scale) { tree_.rescale(x, scale); }
  void set_lambda(const std::vector<double>& lambda) { cat_.lambda = lambda; }
  // Other values (n x nv, the constructor's order) for the same points: permuted into tree
  // order, the tree, weights and levels kept (bootstrap replicates of one fit).
  void set_values(const double* values, std::size_t nv) {
    const std::size_t n = this->n();
    const std::vector<std::size_t>& ord = tree_.order();
    nv_ = nv;
    values_.assign(n * nv, 0.0);
    for (std::size_t j = 0; j < nv; ++j)
      for (std::size_t i = 0; i < n; ++i) values_[j * n + i] = values[j * n + ord[i]];
  }
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
    localmean::level_table(cat_, query_codes, stride, cat_.unit_mass, table);
  }
  // Multiplies the weights w of the points at tree positions [s, s + len) by their level weights.
  template <class Len>
  void weigh_levels(const double* table, std::size_t s, Len len, double* w) const {
    localmean::weigh_levels(cat_, codes_.data(), n(), table, s, len, w);
  }

private:
  KdTree tree_;
  std::size_t nv_;
  std::vector<double> values_, prior_, inv_scale2_, weight_prefix_;
  double min_scale_ = kInf, max_scale_ = 0.0;
  CategoricalVars cat_;
  std::vector<int> codes_;
  std::size_t table_size_ = 0;
  KernelType kernel_ = KernelType::gaussian;
  const KernelProfile* profile_ = nullptr;
};

struct EngineSettings {
  KernelType kernel = KernelType::gaussian;
  int degree = 0;
  bool want_var = false;
  bool use_tree = true;  // prune with the tree; otherwise sweep every point
  double cutoff = 0.0;   // truncation radius in scales; 0: the kernel's own cut-off
  double rtol = 0.0;     // weight sums only: relative error allowed (0: exact), see density_sum
  // The loss (losses.hpp); all but the Gaussian are iterative: at most max_iter steps to a
  // relative change below tol; loss_param is the tuning constant (tau for the check loss).
  Loss family = Loss::gaussian;
  double loss_param = 0.0;
  int max_iter = 25;
  double tol = 1e-8;
  // Iterative losses: a varying-coefficient fit when > 0, whose values hold the response and
  // then `design` columns x, the local model p(u)' B x (see detail::window_basis()).
  int design = 0;
  // Robust losses: the residuals scaled by the square roots of the weights W_i, their plain MAD
  // (MASS::rlm(wt.method = "inv.var")); otherwise case weights.
  bool inverse_variance = false;
};

// The truncation radius that applies: the user's, else the registry's (infinite for the Cauchy).
inline double effective_cutoff(const EngineSettings& set) {
  return set.cutoff > 0.0 ? set.cutoff : kernel_info(set.kernel).cutoff;
}

}  // namespace localmean
