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
#include <limits>
#include <type_traits>
#include <vector>

#include "iterative.hpp"
#include "local_data.hpp"
#include "moments.hpp"
#include "sweep.hpp"

namespace localmean {

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
  const bool likelihood = set.family != Loss::gaussian;  // an iterative solver
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
          switch (loss_info(set.family).kind) {
            case LossKind::multinomial:
              multinomial_solve(data, basis, q.data(), h, set, win, i, m, out);
              break;
            case LossKind::robust:
              robust_solve(data, basis, q.data(), h, set, win, mo, i, m, out);
              break;
            case LossKind::quantile:
              quantile_solve(data, basis, q.data(), h, set, win, mo, i, m, out);
              break;
            default: likelihood_solve(data, basis, q.data(), h, set, win, mo, i, m, out);
          }
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
