// Fits at the data points of a least-squares local fit and the fit's summaries (residual sum of
// squares, trace of the smoother matrix, leave-one-out score, spread of the response) in one
// pass over the points, with no n-length temporaries. The binned strategy interpolates its
// node fits and [S^-1]_00 to each point on the fly; other strategies pass their fits in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

#include "binning.hpp"

namespace localmean {

// A point's grid cell: the corner nodes with their linear-interpolation shares, and its status
// (kNoWeight off the grid, else the worst status of the nodes that carry a share). The
// arithmetic is that of interpolate_nodes(), so that both give identical fits.
struct CellCorners {
  std::size_t count = 0;
  std::size_t node[4] = {0, 0, 0, 0};
  double share[4] = {0.0, 0.0, 0.0, 0.0};
  int status = kOk;
  // Column `col` of a node array (G nodes per column) at the point.
  double mix(const double* nodes, std::size_t G, std::size_t col) const {
    double s = 0.0;
    for (std::size_t c = 0; c < count; ++c)
      if (share[c] > 0.0) s += share[c] * nodes[node[c] + G * col];
    return s;
  }
};

// The cell of the point with scaled coordinates q[0..d) on grid g, whose nodes have the
// statuses node_status.
inline CellCorners cell_corners(const Grid& g, const int* node_status, const double* q) {
  CellCorners cell;
  std::size_t lower[2] = {0, 0};
  double frac[2] = {0.0, 0.0};
  for (std::size_t j = 0; j < g.d; ++j) {
    if (!grid_position(g, j, q[j], &lower[j], &frac[j])) {
      cell.status = kNoWeight;
      return cell;
    }
  }
  cell.count = g.d == 1 ? 2 : 4;
  for (std::size_t corner = 0; corner < cell.count; ++corner) {
    const std::size_t a = corner & 1, b = corner >> 1;
    cell.share[corner] =
        (a ? frac[0] : 1.0 - frac[0]) * (g.d == 1 ? 1.0 : (b ? frac[1] : 1.0 - frac[1]));
    cell.node[corner] = (lower[0] + a) + (g.d == 1 ? 0 : (lower[1] + b) * g.size[0]);
    if (cell.share[corner] > 0.0 && node_status[cell.node[corner]] != kOk)
      cell.status = std::max(cell.status, node_status[cell.node[corner]]);
  }
  return cell;
}

// Summaries of a least-squares fit at its data points, over the points that have a finite fit
// and leverage ("fitted" points), with prior weights w (1 without them) and residuals r:
struct FitSums {
  double count = 0.0;    // fitted points with w > 0
  double weight = 0.0;   // sum of w
  double rss = 0.0;      // sum of w r^2 over all value columns
  double trace = 0.0;    // sum of the leverages L (the effective degrees of freedom)
  double loo = 0.0;      // sum of w (r / (1 - L))^2 over all value columns
  double mean = 0.0;     // weighted mean of the first value column (the response)
  double spread = 0.0;   // sum of w (y - mean)^2 of the first value column
  bool near_one = false; // some fitted point with w > 0 has L >= 1 - 1e-10 (no LOO identity)
  std::size_t status[4] = {0, 0, 0, 0};  // points per QueryStatus; a non-finite fit is kSingular

  // Adds another block's sums (Chan, Golub and LeVeque's update for the spread).
  void add(const FitSums& o) {
    const double total = weight + o.weight;
    if (o.weight > 0.0) {
      const double delta = o.mean - mean;
      spread += o.spread + delta * delta * weight * o.weight / total;
      mean += delta * o.weight / total;
    }
    count += o.count;
    weight = total;
    rss += o.rss;
    trace += o.trace;
    loo += o.loo;
    near_one = near_one || o.near_one;
    for (int s = 0; s < 4; ++s) status[s] += o.status[s];
  }
};

// Optional per-point outputs (n x nv column-major, or n), written where not null; points
// without a fit receive `missing`.
struct DataFitOutput {
  double* fitted = nullptr;
  double* leverage = nullptr;
  double* residuals = nullptr;
  double missing = std::numeric_limits<double>::quiet_NaN();
};

// Points per block of fit_summary(): sums are formed per block and added in block order, so
// that the result does not depend on the number of threads.
constexpr std::size_t kSumBlock = std::size_t(1) << 14;

namespace detail {

// Sums of the points [begin, end). `fit_at(i, f, &lev)` gives point i's fits f[0..nv) and
// leverage and returns its status. The response's spread is accumulated about its first
// fitted value in the block (shifted sums: no cancellation while that lies near the mean).
// Weighted and One (nv = 1) are compile-time constants for the common loops.
template <bool Weighted, bool One, class FitAt>
FitSums block_sums(std::size_t begin, std::size_t end, std::size_t n, const double* values,
                   std::size_t nv_, const double* prior, const FitAt& fit_at,
                   const DataFitOutput& out, double* f) {
  const std::size_t nv = One ? 1 : nv_;
  FitSums s;
  double shift = 0.0, wd = 0.0, wd2 = 0.0;
  bool shifted = false;
  double single = 0.0;  // the fit of one value column, kept in a register
  if (One) f = &single;
  for (std::size_t i = begin; i < end; ++i) {
    double lev = 0.0;
    int status = fit_at(i, f, &lev);
    bool ok = status == kOk && std::isfinite(lev);
    for (std::size_t v = 0; v < nv && ok; ++v) ok = std::isfinite(f[v]);
    if (status == kOk && !ok) status = kSingular;
    ++s.status[status];
    if (!ok) {
      for (std::size_t v = 0; v < nv; ++v) {
        if (out.fitted) out.fitted[v * n + i] = out.missing;
        if (out.residuals) out.residuals[v * n + i] = out.missing;
      }
      if (out.leverage) out.leverage[i] = out.missing;
      continue;
    }
    const double w = Weighted ? prior[i] : 1.0;
    const double inv = 1.0 / (1.0 - lev);
    for (std::size_t v = 0; v < nv; ++v) {
      const double r = values[v * n + i] - f[v];
      s.rss += w * (r * r);
      const double e = r * inv;
      s.loo += w * (e * e);
      if (out.fitted) out.fitted[v * n + i] = f[v];
      if (out.residuals) out.residuals[v * n + i] = r;
    }
    if (out.leverage) out.leverage[i] = lev;
    s.trace += lev;
    s.weight += w;
    if (!shifted) {
      shift = values[i];
      shifted = true;
    }
    const double dev = values[i] - shift;
    wd += w * dev;
    wd2 += w * (dev * dev);
    if (!Weighted || w > 0.0) {
      s.count += 1.0;
      s.near_one = s.near_one || lev >= 1.0 - 1e-10;
    }
  }
  if (s.weight > 0.0) {
    s.mean = shift + wd / s.weight;
    s.spread = std::max(0.0, wd2 - wd * (wd / s.weight));
  }
  return s;
}

// block_sums() of a 1-D binned fit with one value column whose grid nodes all have fits (coef
// and s00: the node arrays), for points [begin, end), two points at a time in SSE2-sized
// vectors (GCC's vector extension, as extent()): the divisions of the cell positions and of the
// leave-one-out residuals run two at a time. Each point's cell (grid_cell()), fit and leverage
// take the operations of grid_position() and of binned_data_fit()'s line_fit_at in the same order, so
// the fits equal interpolate_nodes()'s; the sums are formed in two lanes (a different order of
// additions than block_sums(), within rounding). Returns false when some point of the block is
// off the grid or has a non-finite fit or leverage: the caller then takes block_sums(), which
// rewrites every output of the block.
template <bool Weighted>
bool line_block_sums(const Grid& g, const double* coef, const double* s00, const double* x,
                     double scale, const double* y, const double* prior, std::size_t begin,
                     std::size_t end, const DataFitOutput& out, FitSums* sums) {
  typedef long v2l __attribute__((vector_size(16)));
  const double lo = g.lo[0], step = g.step[0], last = static_cast<double>(g.size[0] - 1);
  const double shift = y[begin];
  const v2d zero = {0.0, 0.0}, one = {1.0, 1.0};
  v2d rss = zero, loo = zero, trace = zero, weight = zero, wd = zero, wd2 = zero, count = zero;
  v2d bad = zero;  // NaN once some fit or leverage is not finite
  bool off = false;
  v2l near = {0, 0};
  // Points i and i + 1 (or i alone, in both lanes, for an odd tail).
  auto two_points = [&](std::size_t i, bool two) LOCALMEAN_LAMBDA_INLINE {
    const std::size_t j = two ? i + 1 : i;
    const v2d xv = {x[i], x[j]}, yv = {y[i], y[j]};
    const v2d pos = (xv / scale - lo) / step;
    // (cell 0 for a point off the grid, whose block is then taken again)
    long k0 = 0, k1 = 0;
    double f0 = 0.0, f1 = 0.0;
    off |= !grid_cell(pos[0], last, &k0, &f0);
    off |= !grid_cell(pos[1], last, &k1, &f1);
    const v2d frac = {f0, f1};
    const v2d lower = one - frac;
    const v2d f = lower * v2d{coef[k0], coef[k1]} + frac * v2d{coef[k0 + 1], coef[k1 + 1]};
    const v2d s = lower * v2d{s00[k0], s00[k1]} + frac * v2d{s00[k0 + 1], s00[k1 + 1]};
    const v2d w = Weighted ? v2d{prior[i], prior[j]} : one;
    const v2d lev = Weighted ? w * s : s;
    bad += (f - f) + (lev - lev);
    const v2d r = yv - f;
    const v2d e = r * (one / (one - lev));
    const v2d dev = yv - shift;
    const v2d use = two ? one : v2d{1.0, 0.0};  // the tail's second lane repeats its first
    rss += use * (w * (r * r));
    loo += use * (w * (e * e));
    trace += use * lev;
    weight += use * w;
    wd += use * (w * dev);
    wd2 += use * (w * (dev * dev));
    const v2l counted = Weighted ? (w > 0.0) : v2l{-1, -1};
    count += use * (counted ? one : zero);
    near |= counted & (lev >= 1.0 - 1e-10) & (use > 0.0);
    if (out.fitted) {
      out.fitted[i] = f[0];
      if (two) out.fitted[j] = f[1];
    }
    if (out.residuals) {
      out.residuals[i] = r[0];
      if (two) out.residuals[j] = r[1];
    }
    if (out.leverage) {
      out.leverage[i] = lev[0];
      if (two) out.leverage[j] = lev[1];
    }
  };
  std::size_t i = begin;
  for (; i + 2 <= end; i += 2) two_points(i, true);
  if (i < end) two_points(i, false);
  if (off || !(bad[0] + bad[1] == 0.0)) return false;
  FitSums s;
  s.status[kOk] = end - begin;
  s.count = count[0] + count[1];
  s.weight = weight[0] + weight[1];
  s.rss = rss[0] + rss[1];
  s.loo = loo[0] + loo[1];
  s.trace = trace[0] + trace[1];
  s.near_one = near[0] || near[1];
  const double wdev = wd[0] + wd[1], wdev2 = wd2[0] + wd2[1];
  if (s.weight > 0.0) {
    s.mean = shift + wdev / s.weight;
    s.spread = std::max(0.0, wdev2 - wdev * (wdev / s.weight));
  }
  *sums = s;
  return true;
}

// No block is taken by a faster path.
struct NoFastBlock {
  bool operator()(std::size_t, std::size_t, FitSums*) const { return false; }
};

}  // namespace detail

// Fits at n data points with nv value columns (values: n x nv) and their summaries, where
// fit_at(i, f, &lev) gives point i's fits, its leverage and its status. `fast(from, to, &s)`,
// tried first for every block, may give the block's sums (and outputs) itself, as block_sums()
// would up to rounding in the sums, or return false. Returns false if the monitor stopped it;
// `sums` then is incomplete.
template <class FitAt, class FastBlock = detail::NoFastBlock>
bool fit_summary(std::size_t n, const double* values, std::size_t nv, const double* prior,
                 const FitAt& fit_at, const DataFitOutput& out, FitSums* sums,
                 const ParallelFor& parallel_for, const Monitor& monitor = {},
                 const FastBlock& fast = FastBlock()) {
  const std::size_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<FitSums> parts(blocks);
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> f(nv);
    for (std::size_t b = begin; b < end; ++b) {
      const std::size_t from = b * kSumBlock, to = std::min(n, from + kSumBlock);
      if (fast(from, to, &parts[b])) continue;
      const auto block = [&](auto weighted, auto one) {
        return detail::block_sums<decltype(weighted)::value, decltype(one)::value>(
            from, to, n, values, nv, prior, fit_at, out, f.data());
      };
      using Yes = std::true_type;
      using No = std::false_type;
      parts[b] = prior ? (nv == 1 ? block(Yes(), Yes()) : block(Yes(), No()))
                       : (nv == 1 ? block(No(), Yes()) : block(No(), No()));
    }
  };
  // The monitor counts points.
  const Monitor in_points = [&monitor, n](std::size_t done, std::size_t) {
    return !monitor || monitor(std::min(n, done * kSumBlock), n);
  };
  if (!run_chunked(blocks, 16, parallel_for, in_points, fn)) return false;
  *sums = FitSums();
  for (const FitSums& p : parts) sums->add(p);
  return true;
}

// Fits at the data points x (n x d, original units, column-major) of a binned fit: the node
// outputs of binned_fit_nodes() on grid g (scaled coordinates: x / scale) with nb basis terms,
// interpolated as interpolate_nodes() does, then summarised by fit_summary(). A point's leverage
// is its prior weight (or 1) times its [S^-1]_00, as in fit_at_data() in R.
inline bool binned_data_fit(const Grid& g, const EngineOutput& nodes, std::size_t nb,
                            const double* x, std::size_t n, const double* scale,
                            const double* values, std::size_t nv, const double* prior,
                            const DataFitOutput& out, FitSums* sums,
                            const ParallelFor& parallel_for, const Monitor& monitor = {}) {
  const std::size_t G = g.nodes();
  bool nodes_ok = true;
  for (std::size_t k = 0; k < G; ++k) nodes_ok = nodes_ok && nodes.status[k] == kOk;
  if (g.d == 1 && nodes_ok) {
    // Every node has a fit: two corners, always added (a zero share adds zero, as
    // interpolate_nodes() skipping it does).
    auto line_fit_at = [&](std::size_t i, double* f, double* lev) {
      std::size_t k;
      double frac;
      if (!grid_position(g, 0, x[i] / scale[0], &k, &frac)) return static_cast<int>(kNoWeight);
      const double lower = 1.0 - frac;
      for (std::size_t v = 0; v < nv; ++v) {
        const double* c = nodes.coef + G * nb * v;
        f[v] = lower * c[k] + frac * c[k + 1];
      }
      const double s00 = lower * nodes.s00[k] + frac * nodes.s00[k + 1];
      *lev = prior ? prior[i] * s00 : s00;
      return static_cast<int>(kOk);
    };
    if (nv != 1)
      return fit_summary(n, values, nv, prior, line_fit_at, out, sums, parallel_for, monitor);
    auto fast = [&](std::size_t from, std::size_t to, FitSums* s) {
      return prior ? detail::line_block_sums<true>(g, nodes.coef, nodes.s00, x, scale[0], values,
                                                   prior, from, to, out, s)
                   : detail::line_block_sums<false>(g, nodes.coef, nodes.s00, x, scale[0],
                                                    values, prior, from, to, out, s);
    };
    return fit_summary(n, values, nv, prior, line_fit_at, out, sums, parallel_for, monitor, fast);
  }
  auto fit_at = [&](std::size_t i, double* f, double* lev) {
    double q[2] = {0.0, 0.0};
    for (std::size_t j = 0; j < g.d; ++j) q[j] = x[j * n + i] / scale[j];
    const CellCorners cell = cell_corners(g, nodes.status, q);
    if (cell.status != kOk) return cell.status;
    for (std::size_t v = 0; v < nv; ++v) f[v] = cell.mix(nodes.coef, G, nb * v);
    const double s00 = cell.mix(nodes.s00, G, 0);
    *lev = prior ? prior[i] * s00 : s00;
    return cell.status;
  };
  return fit_summary(n, values, nv, prior, fit_at, out, sums, parallel_for, monitor);
}

// Summaries of given fits (n x nv) and leverages at the data points (e.g. from the exact or
// tree strategy); the leverages are taken as they are.
inline bool given_fit_summary(std::size_t n, const double* values, std::size_t nv,
                              const double* prior, const double* fitted, const double* leverage,
                              FitSums* sums, const ParallelFor& parallel_for) {
  auto fit_at = [&](std::size_t i, double* f, double* lev) {
    for (std::size_t v = 0; v < nv; ++v) f[v] = fitted[v * n + i];
    *lev = leverage[i];
    return static_cast<int>(kOk);
  };
  return fit_summary(n, values, nv, prior, fit_at, DataFitOutput(), sums, parallel_for);
}

}  // namespace localmean
