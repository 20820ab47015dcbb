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

// Query i of m (m x d column-major) into q, and with categorical variables its level table
// (query_codes m x count column-major) into `table`, which it returns (null: none).
inline const double* load_query(const LocalData& data, const double* queries,
                                const int* query_codes, std::size_t m, std::size_t i,
                                std::vector<double>& q, std::vector<double>& table) {
  for (std::size_t j = 0; j < q.size(); ++j) q[j] = queries[j * m + i];
  if (!data.categorical()) return nullptr;
  data.level_table(query_codes + i, m, table.data());
  return table.data();
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
  check_sweep_kernel(data, set);
  auto fn = [&](std::size_t begin, std::size_t end) {
    if (tiled) {
      // Compiled per kernel: the profile is a large share of this sweep's work (a compact
      // kernel's local means over every point were 1.3x slower through with_sweep_kernel()).
      with_kernel(set.kernel, [&](auto kern) {
        detail::tiled_local_means<decltype(kern)>(data, queries, m, radius, begin, end, out);
        return 0;
      });
      return;
    }
    with_sweep_kernel(set.kernel, [&](auto kern) {
      using K = decltype(kern);
      Moments mo(detail::fit_size(basis, set), set.design > 0 ? 1 : data.nv(), set.want_var);
      std::vector<double> q(d), table(data.table_size());
      Window win;
      for (std::size_t i = begin; i < end; ++i) {
        const double* levels = load_query(data, queries, query_codes, m, i, q, table);
        const double h = radius ? radius[i] : 1.0;
        mo.reset();
        if (likelihood) {
          win.clear();
          collect_window<K>(data, q.data(), levels, h, how, win);
          if (leave_out && leave_out[i] >= 0)
            win.drop(position[static_cast<std::size_t>(leave_out[i])]);
          if (out.window) {
            double ksum = 0.0;
            for (double k : win.kernel) ksum += k;
            out.window[i] = static_cast<double>(win.pos.size());
            out.window[i + m] = ksum;
          }
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

// The kernel windows of m queries, as local_fit() would sweep them (same reach, cut-off, level
// weights and per-query scales): for query i, rows[i] holds the data rows (0-based, the
// caller's order, ascending) of positive weight and weights[i] their kernel weights (level
// weights included, prior weights not). Clients that fit their own model in each window (R's
// localize()) take their weights here. With `sizes` (m x 2), rows and weights stay empty and
// sizes[i] and sizes[i + m] get each window's number of rows and the sum of its kernel weights
// (in the sweep's order, as local_fit()'s EngineOutput::window). Returns false if the monitor
// stopped it.
inline bool kernel_windows(const LocalData& data, const double* queries, std::size_t m,
                           const double* radius, const int* query_codes,
                           const EngineSettings& set, std::vector<std::vector<std::size_t>>& rows,
                           std::vector<std::vector<double>>& weights,
                           const ParallelFor& parallel_for = serial_for,
                           const Monitor& monitor = {}, double* sizes = nullptr) {
  const std::size_t d = data.d();
  const Reach how(set);
  const std::vector<std::size_t>& order = data.tree().order();
  rows.assign(m, {});
  weights.assign(m, {});
  check_sweep_kernel(data, set);
  auto fn = [&](std::size_t begin, std::size_t end) {
    with_sweep_kernel(set.kernel, [&](auto kern) {
      using K = decltype(kern);
      std::vector<double> q(d), table(data.table_size());
      std::vector<std::size_t> idx;
      Window win;
      for (std::size_t i = begin; i < end; ++i) {
        const double* levels = load_query(data, queries, query_codes, m, i, q, table);
        win.clear();
        collect_window<K>(data, q.data(), levels, radius ? radius[i] : 1.0, how, win);
        if (sizes) {  // the count and the weight sum, in the sweep's order: no sort
          double ksum = 0.0;
          for (double k : win.kernel) ksum += k;
          sizes[i] = static_cast<double>(win.pos.size());
          sizes[i + m] = ksum;
          continue;
        }
        // the caller's row order, so that a window's rows do not depend on the tree
        idx.resize(win.pos.size());
        for (std::size_t b = 0; b < idx.size(); ++b) idx[b] = b;
        std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
          return order[win.pos[a]] < order[win.pos[b]];
        });
        rows[i].resize(idx.size());
        weights[i].resize(idx.size());
        for (std::size_t b = 0; b < idx.size(); ++b) {
          rows[i][b] = order[win.pos[idx[b]]];
          weights[i][b] = win.kernel[idx[b]];
        }
      }
      return 0;
    });
  };
  return run_chunked(m, chunk_size(data.n()), parallel_for, monitor, fn);
}

// Weights chained by squaring (CandidateScales::source) stay within 2^kMaxSquarings times the
// kernel's own rounding of their values: a chain longer than this starts again from the profile.
constexpr int kMaxSquarings = 8;

// The CandidateScales of scales[idx[c]] (largest first) with truncation radii reach (in scales,
// infinite: none). The Gaussian's weights at h / sqrt(2) (h / 2) are its weights at h squared
// (twice), when that larger candidate truncates no nearer (a relative 1e-12 in the scales'
// squares is equality).
inline detail::CandidateScales candidate_scales(const double* scales, const double* reach,
                                                const std::vector<std::size_t>& idx,
                                                KernelType kernel) {
  const std::size_t K = idx.size();
  detail::CandidateScales cs;
  cs.inv_h.resize(K);
  cs.cut2.resize(K);
  cs.source.assign(K, -1);
  cs.squarings.assign(K, 0);
  std::vector<int> depth(K, 0);
  for (std::size_t c = 0; c < K; ++c) {
    const double h = scales[idx[c]], r = reach[idx[c]];
    cs.inv_h[c] = 1.0 / h;
    cs.cut2[c] = std::isfinite(r) ? r * r : kInf;
    if (kernel != KernelType::gaussian) continue;
    for (int m = 1; m <= 2 && cs.source[c] < 0; ++m) {
      for (std::size_t b = 0; b < c; ++b) {
        const double hb = scales[idx[b]], ratio = m == 1 ? 2.0 : 4.0;
        if (std::fabs(hb * hb - ratio * h * h) <= 1e-12 * hb * hb && cs.cut2[b] >= cs.cut2[c] &&
            depth[b] + m <= kMaxSquarings) {
          cs.source[c] = static_cast<int>(b);
          cs.squarings[c] = m;
          depth[c] = depth[b] + m;
          break;
        }
      }
    }
  }
  return cs;
}

// Least-squares fits at the data points themselves for K scales at once (the candidates of a
// bandwidth search), one variable, without categorical variables or point scales: for every
// point, one sweep of the window of the largest scale feeds the moments of every candidate, and
// each is solved as local_fit() solves it. scales[c] are relative to the coordinates the data
// hold, reach[c] the truncation radius in scales (infinite: none; the data point itself is the
// query's nearest point, so this is also the tree strategy's reach). Outputs in the caller's
// order: fitted[(c * nv + j) * n + i] and s00[c * n + i] (NaN where no fit exists). The fits
// equal local_fit()'s up to rounding (the sums are grouped in other blocks); they do not
// depend on the thread count.
inline bool candidate_data_fits(const LocalData& data, const double* scales, const double* reach,
                                std::size_t K, const EngineSettings& set, double* fitted,
                                double* s00, const ParallelFor& parallel_for = serial_for,
                                const Monitor& monitor = {}) {
  const std::size_t n = data.n(), nv = data.nv();
  if (K == 0 || n == 0) return true;
  const Basis basis(1, set.degree);
  const std::size_t nb = basis.size();
  std::vector<std::size_t> idx(K);
  for (std::size_t c = 0; c < K; ++c) idx[c] = c;
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return scales[a] > scales[b]; });
  const detail::CandidateScales cs = candidate_scales(scales, reach, idx, set.kernel);
  // Windows from the points' running maximum and minimum in tree order (the 1-D tree keeps its
  // leaves in order, so a window spans little more than its points).
  const double* x = data.tree().points();
  std::vector<double> upto(n), from(n);
  for (std::size_t i = 0; i < n; ++i) upto[i] = i ? std::max(upto[i - 1], x[i]) : x[i];
  for (std::size_t i = n; i-- > 0;) from[i] = i + 1 < n ? std::min(from[i + 1], x[i]) : x[i];
  const std::vector<std::size_t>& order = data.tree().order();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Each candidate's half-width (the cut-off in data units) and the part of it whose points all
  // lie within the cut-off (points within 1e-9 of its edge are left to the sweep's own test).
  std::vector<double> half(K), inner(K);
  for (std::size_t c = 0; c < K; ++c) {
    half[c] = std::sqrt(cs.cut2[c]) / cs.inv_h[c];
    inner[c] = half[c] * (1.0 - 1e-9);
  }
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<Moments> mo(K, Moments(nb, nv, false));
    std::vector<std::size_t> lo(K), hi(K), inside_lo(K), inside_hi(K);
    std::vector<double> w(K * kBlock), coef(nb * nv);
    double s00_one;
    int status;
    EngineOutput one;
    one.coef = coef.data();
    one.s00 = &s00_one;
    one.status = &status;
    for (std::size_t p = begin; p < end; ++p) {
      const double q = x[p];
      for (std::size_t c = 0; c < K; ++c) {
        const bool finite = std::isfinite(half[c]);
        lo[c] = finite ? static_cast<std::size_t>(
            std::lower_bound(upto.begin(), upto.end(), q - half[c]) - upto.begin()) : 0;
        hi[c] = finite ? static_cast<std::size_t>(
            std::upper_bound(from.begin(), from.end(), q + half[c]) - from.begin()) : n;
        // the positions all of whose points lie within the cut-off
        inside_lo[c] = finite ? static_cast<std::size_t>(
            std::lower_bound(from.begin(), from.end(), q - inner[c]) - from.begin()) : 0;
        inside_hi[c] = finite ? static_cast<std::size_t>(
            std::upper_bound(upto.begin(), upto.end(), q + inner[c]) - upto.begin()) : n;
      }
      // Nested windows, the largest at least a full block (the extra points weigh nothing).
      for (std::size_t c = K - 1; c > 0; --c) {
        lo[c - 1] = std::min(lo[c - 1], lo[c]);
        hi[c - 1] = std::max(hi[c - 1], hi[c]);
      }
      if (n >= kBlock && hi[0] - lo[0] < kBlock) {
        lo[0] = std::min(lo[0], n - kBlock);
        hi[0] = lo[0] + kBlock;
      }
      for (Moments& m : mo) m.reset();
      detail::sweep_candidates(set.kernel, data, basis, &q, cs, lo.data(), hi.data(),
                               inside_lo.data(), inside_hi.data(), w.data(), mo.data());
      const std::size_t i = order[p];
      for (std::size_t c = 0; c < K; ++c) {
        mo[c].flush();
        detail::candidate_rescale(cs.inv_h[c], mo[c]);
        solve_moments(mo[c], 0, 1, one);
        const std::size_t at = idx[c];
        for (std::size_t j = 0; j < nv; ++j) fitted[(at * nv + j) * n + i] = coef[j * nb];
        s00[at * n + i] = status == kOk ? s00_one : nan;
      }
    }
    return 0;
  };
  return run_chunked(n, chunk_size(n * K), parallel_for, monitor, fn);
}

}  // namespace localmean
