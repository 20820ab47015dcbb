// The binned strategy for d <= 2 (KernSmooth's approach): linear binning of the data onto a
// regular grid, local moments at every grid node by a discrete convolution with the kernel
// weights, the local fits at the nodes, and linear interpolation of the fits to the queries.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "engine.hpp"
#include "simd.hpp"

namespace localmean {

// The smallest and largest of x[0..n) (the extent a binning grid must span) and whether all are
// finite, in one pass at memory speed: pairs of lanes in SSE2-sized vectors (GCC's vector
// extension), since GCC leaves a scalar or lane-array min/max unvectorised. `v - v` is NaN
// for NaN and +-Inf, so the finiteness sum is 0 exactly when every value is finite; min and
// max are exact in any order. The vectors may alias the doubles they are loaded from.
inline bool extent(const double* x, std::size_t n, double* lo, double* hi) {
  const double inf = std::numeric_limits<double>::infinity();
  v2d vlo[2] = {{inf, inf}, {inf, inf}}, vhi[2] = {{-inf, -inf}, {-inf, -inf}};
  v2d bad[2] = {{0.0, 0.0}, {0.0, 0.0}};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 2; ++l) {
      const v2d v = *reinterpret_cast<const v2d*>(x + i + 2 * l);
      bad[l] += v - v;
      vlo[l] = v < vlo[l] ? v : vlo[l];
      vhi[l] = v > vhi[l] ? v : vhi[l];
    }
  double a = inf, b = -inf, c = 0.0;
  for (int l = 0; l < 2; ++l)
    for (int j = 0; j < 2; ++j) {
      a = std::min(a, vlo[l][j]);
      b = std::max(b, vhi[l][j]);
      c += bad[l][j];
    }
  for (; i < n; ++i) {
    c += x[i] - x[i];
    a = std::min(a, x[i]);
    b = std::max(b, x[i]);
  }
  *lo = a;
  *hi = b;
  return c == 0.0;
}

// A regular grid in scaled coordinates: size[j] nodes from lo[j] in steps of step[j].
struct Grid {
  std::size_t d = 1;
  std::size_t size[2] = {1, 1};
  double lo[2] = {0.0, 0.0};
  double step[2] = {1.0, 1.0};
  std::size_t nodes() const { return d == 1 ? size[0] : size[0] * size[1]; }
};

// The grid covering [lo, hi] per dimension with `size` nodes.
inline Grid make_grid(std::size_t d, const double* lo, const double* hi, const std::size_t* size) {
  Grid g;
  g.d = d;
  for (std::size_t j = 0; j < d; ++j) {
    g.size[j] = std::max<std::size_t>(size[j], 2);
    g.lo[j] = lo[j];
    const double width = hi[j] - lo[j];
    g.step[j] = width > 0.0 ? width / static_cast<double>(g.size[j] - 1) : 1.0;
  }
  return g;
}

// The cell of a grid coordinate `pos` (in steps from the first node; the last node at `last`):
// the lower node k and the weight f of the upper one. False off the grid (a point on the top
// edge, up to rounding, is on it). The one cell arithmetic of binning, interpolation and the
// fits at the data points, so that they agree to the bit; the conversion to the cell is signed
// (a single instruction).
LOCALMEAN_INLINE bool grid_cell(double pos, double last, long* k, double* f) {
  if (!(pos >= 0.0 && pos <= last)) {
    if (!(pos > last && pos <= last * (1.0 + 1e-12))) return false;
    pos = last;
  }
  *k = std::min(static_cast<long>(pos), static_cast<long>(last) - 1);
  *f = pos - static_cast<double>(*k);
  return true;
}

// Position of x on the grid along dimension j: the lower node and the weight of the upper one.
inline bool grid_position(const Grid& g, std::size_t j, double x, std::size_t* node, double* frac) {
  long k;
  if (!grid_cell((x - g.lo[j]) / g.step[j], static_cast<double>(g.size[j] - 1), &k, frac))
    return false;
  *node = static_cast<std::size_t>(k);
  return true;
}

namespace detail {

// Adds `share` of point i (its weight and its values) to node k.
LOCALMEAN_INLINE void bin_add(std::size_t k, double share, std::size_t i, std::size_t n,
                              const double* values, std::size_t nv, std::size_t G, double* cnt,
                              double* sum) {
  cnt[k] += share;
  for (std::size_t v = 0; v < nv; ++v) sum[v * G + k] += share * values[v * n + i];
}

// Bins points [begin, end) into cnt (G nodes) and sum (nv x G) on a grid of D = 1 or 2
// dimensions. D and Counts (unit weights, no values: a density) are compile-time constants, so
// that the common loops carry no unused work.
template <std::size_t D, bool Counts>
void bin_points(const Grid& g, const double* x, std::size_t n, std::size_t begin,
                std::size_t end, const double* values, std::size_t nv, const double* prior,
                double* cnt, double* sum) {
  if (Counts) {
    values = nullptr;
    nv = 0;
    prior = nullptr;
  }
  const std::size_t G = g.nodes(), s0 = g.size[0];
  const double inv0 = 1.0 / g.step[0], last0 = static_cast<double>(s0 - 1);
  const double inv1 = 1.0 / g.step[1], last1 = static_cast<double>(g.size[1] - 1);
  for (std::size_t i = begin; i < end; ++i) {
    long k0, k1 = 0;
    double f0, f1 = 0.0;
    if (!grid_cell((x[i] - g.lo[0]) * inv0, last0, &k0, &f0)) continue;
    if (D == 2 && !grid_cell((x[n + i] - g.lo[1]) * inv1, last1, &k1, &f1)) continue;
    const double w = prior ? prior[i] : 1.0;
    const std::size_t k = static_cast<std::size_t>(k1) * s0 + static_cast<std::size_t>(k0);
    bin_add(k, (1.0 - f0) * (1.0 - f1) * w, i, n, values, nv, G, cnt, sum);
    bin_add(k + 1, f0 * (1.0 - f1) * w, i, n, values, nv, G, cnt, sum);
    if (D == 2) {
      bin_add(k + s0, (1.0 - f0) * f1 * w, i, n, values, nv, G, cnt, sum);
      bin_add(k + s0 + 1, f0 * f1 * w, i, n, values, nv, G, cnt, sum);
    }
  }
}

// Bins points [begin, end) of one variable with at most one value column into two partial
// grids, even points into `acc` and odd ones into acc + S G: node k's weight at acc[S k] and
// (with Value, S = 2) its value sum at acc[S k + 1], so that a point adds to two adjacent pairs.
// Alternating grids halve the chains of additions to one node when consecutive points share a
// cell (sorted data); locals that the stores cannot alias and no loop over value columns keep the
// loop short. With a value, the
// point's four terms go in as one 4-wide addition (one AVX2 instruction in that build).
template <bool Value, bool Prior>
LOCALMEAN_INLINE void bin_points_1d(const Grid& g, const double* x, std::size_t begin,
                                    std::size_t end, const double* values, const double* prior,
                                    double* acc) {
  constexpr std::size_t S = Value ? 2 : 1;
  const double lo = g.lo[0], inv = 1.0 / g.step[0], last = static_cast<double>(g.size[0] - 1);
  double* const half[2] = {acc, acc + S * g.size[0]};
  for (std::size_t i = begin; i < end; ++i) {
    long k;
    double f;
    if (!grid_cell((x[i] - lo) * inv, last, &k, &f)) continue;  // off the grid
    double e = 1.0 - f;
    if (Prior) {
      e *= prior[i];
      f *= prior[i];
    }
    double* a = half[i & 1] + S * static_cast<std::size_t>(k);
    if (Value) {
      const double v = values[i];
      const v4d terms = {e, e * v, f, f * v};
      LOCALMEAN_STORE4(a, LOCALMEAN_LOAD4(a) + terms);
    } else {
      a[0] += e;
      a[1] += f;
    }
  }
}

}  // namespace detail

// Points per chunk of linear_bin: at least kMinBinChunk (2^17, about 1 ms of binning, so that
// small data are one chunk), and at most kMaxBinChunks chunks, each with its own partial grid;
// and at least kMinBinLoad points per node, so that zeroing and summing the partial grids of a
// fine grid does not cost more than binning the points into them.
constexpr std::size_t kMinBinChunk = std::size_t(1) << 17, kMaxBinChunks = 16, kMinBinLoad = 2;

// Linear binning of weights (prior, or 1) and of weighted values. Points off the grid are dropped.
// Fixed chunks of points fill their own grids, summed in chunk order: the result does not depend
// on the number of threads. Returns false if the monitor stopped it.
inline bool linear_bin(const Grid& g, const double* x, std::size_t n, const double* values,
                       std::size_t nv, const double* prior, std::vector<double>& counts,
                       std::vector<double>& sums, const ParallelFor& parallel_for,
                       const Monitor& monitor = {}) {
  const std::size_t G = g.nodes();
  const std::size_t chunk = std::max({kMinBinChunk, n / kMaxBinChunks + 1, kMinBinLoad * G});
  const std::size_t nchunks = (n + chunk - 1) / chunk;
  // One variable with at most one value column: two node-interleaved partial grids per chunk
  // (bin_points_1d).
  const bool one_d = g.d == 1 && nv <= 1;
  const std::size_t per_chunk = G * (1 + nv) * (one_d ? 2 : 1);
  std::vector<double> part(nchunks * per_chunk, 0.0);
  auto fn = [&](std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      double* cnt = &part[c * per_chunk];
      const std::size_t stop = std::min(n, (c + 1) * chunk);
      const std::size_t b = c * chunk;
      if (one_d) {
        best_build([&]() LOCALMEAN_LAMBDA_INLINE {
          if (nv == 0 && !prior) detail::bin_points_1d<false, false>(g, x, b, stop, values, prior, cnt);
          else if (nv == 0) detail::bin_points_1d<false, true>(g, x, b, stop, values, prior, cnt);
          else if (!prior) detail::bin_points_1d<true, false>(g, x, b, stop, values, prior, cnt);
          else detail::bin_points_1d<true, true>(g, x, b, stop, values, prior, cnt);
        });
      } else if (nv == 0 && !prior) {
        if (g.d == 1) detail::bin_points<1, true>(g, x, n, b, stop, values, nv, prior, cnt, cnt + G);
        else detail::bin_points<2, true>(g, x, n, b, stop, values, nv, prior, cnt, cnt + G);
      } else {
        if (g.d == 1) detail::bin_points<1, false>(g, x, n, b, stop, values, nv, prior, cnt, cnt + G);
        else detail::bin_points<2, false>(g, x, n, b, stop, values, nv, prior, cnt, cnt + G);
      }
    }
  };
  // The first pass bins a few chunks, then run_chunked sizes the passes to about 0.1 s each.
  if (!run_chunked(nchunks, 4, parallel_for, monitor, fn)) return false;
  counts.assign(G, 0.0);
  sums.assign(G * nv, 0.0);
  for (std::size_t c = 0; c < nchunks; ++c) {
    const double* cnt = &part[c * per_chunk];
    if (one_d) {
      const std::size_t S = 1 + nv;
      for (const double* half : {cnt, cnt + S * G})
        for (std::size_t k = 0; k < G; ++k) {
          counts[k] += half[S * k];
          if (nv) sums[k] += half[S * k + 1];
        }
      continue;
    }
    for (std::size_t k = 0; k < G; ++k) counts[k] += cnt[k];
    for (std::size_t k = 0; k < G * nv; ++k) sums[k] += cnt[G + k];
  }
  return true;
}

namespace detail {

// One-dimensional factors of the Gaussian window times a monomial: u^power w(u), or
// u^power w(u)^2 with `squared` (the variance sums), at u = k step for k = -reach..reach.
inline std::vector<double> gaussian_line(long reach, double step, int power = 0,
                                         bool squared = false) {
  std::vector<double> w(2 * reach + 1);
  for (long k = -reach; k <= reach; ++k) {
    const double u = k * step;
    double p = Gaussian::exact(u * u);
    if (squared) p *= p;
    for (int e = 0; e < power; ++e) p *= u;
    w[k + reach] = p;
  }
  return w;
}

// out[i] = sum_t in[i + t] w[t] (t = 0..taps-1, in that order) for i < size; `in` holds
// size + taps - 1 + kLanes values. Blocks of kLanes nodes keep one accumulator each (a plain
// dot product per node would be a serial chain of additions).
inline void row_convolve(const double* in, long size, const double* w, long taps, double* out) {
  constexpr long lanes = static_cast<long>(kLanes);
  for (long i = 0; i < size; i += lanes) {
    double acc[kLanes] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    for (long t = 0; t < taps; ++t) {
      const double wt = w[t];
      const double* p = in + i + t;
      for (long l = 0; l < lanes; ++l) acc[l] += p[l] * wt;
    }
    for (long l = 0; l < lanes && i + l < size; ++l) out[i + l] = acc[l];
  }
}

// Nodes of the window each way along each dimension: the cut-off in steps, within the grid.
inline void window_reach(const Grid& g, double cutoff, long* reach) {
  for (std::size_t j = 0; j < g.d; ++j)
    reach[j] = std::min<long>(static_cast<long>(std::floor(cutoff / g.step[j] + 1e-9)),
                              static_cast<long>(g.size[j]) - 1);
}

// The 2-D Gaussian window factors into a row and a column weight, and so does every monomial
// u0^a u1^b: each local moment is a row pass with u0^a w0 (a "line") followed by a column pass
// with u1^b w1 (a "term"). Lines smooth the counts (powers up to 2 degree, again with squared
// weights for the variances) and each value sum (powers up to degree); terms give the moments
// S (slots 0..nm-1), S2 (nm..2nm-1) and T (2nm + basis term * nv + value).
struct SeparablePlan {
  struct Line { std::size_t array; int power; bool squared; };
  struct Term { std::size_t line; int power; bool squared; std::size_t slot; };
  std::vector<Line> lines;
  std::vector<Term> terms;
  std::size_t nb, nm, nv;
  std::vector<std::size_t> pair;  // pair[a * nb + b]: the moment of basis terms a and b

  SeparablePlan(int degree, std::size_t nv_, bool want_var) : nv(nv_) {
    const Basis basis(2, degree), moments(2, 2 * degree);
    nb = basis.size();
    nm = moments.size();
    pair.resize(nb * nb);
    for (std::size_t a = 0; a < nb; ++a)
      for (std::size_t b = 0; b < nb; ++b)
        for (std::size_t t = 0; t < nm; ++t)
          if (moments.powers(t)[0] == basis.powers(a)[0] + basis.powers(b)[0] &&
              moments.powers(t)[1] == basis.powers(a)[1] + basis.powers(b)[1])
            pair[a * nb + b] = t;
    // line_of[array][power]; array 0 the counts, 1 + v value v, 1 + nv the squared counts
    auto add_line = [&](std::size_t array, int power, bool squared) {
      lines.push_back({array, power, squared});
      return lines.size() - 1;
    };
    std::vector<std::vector<std::size_t>> line_of(2 + nv);
    for (int p = 0; p <= 2 * degree; ++p) line_of[0].push_back(add_line(0, p, false));
    for (std::size_t v = 0; v < nv; ++v)
      for (int p = 0; p <= degree; ++p) line_of[1 + v].push_back(add_line(1 + v, p, false));
    if (want_var)
      for (int p = 0; p <= 2 * degree; ++p) line_of[1 + nv].push_back(add_line(0, p, true));
    for (std::size_t t = 0; t < nm; ++t) {
      const std::vector<int>& e = moments.powers(t);
      terms.push_back({line_of[0][e[0]], e[1], false, t});
      if (want_var) terms.push_back({line_of[1 + nv][e[0]], e[1], true, nm + t});
    }
    for (std::size_t b = 0; b < nb; ++b)
      for (std::size_t v = 0; v < nv; ++v) {
        const std::vector<int>& e = basis.powers(b);
        terms.push_back({line_of[1 + v][e[0]], e[1], false, 2 * nm + b * nv + v});
      }
  }
  std::size_t slots() const { return 2 * nm + nb * nv; }

  // The 1-D weights of every line (along dimension 0) and every term (along dimension 1).
  std::vector<std::vector<double>> row_filters(const Grid& g, const long* reach) const {
    std::vector<std::vector<double>> w;
    for (const Line& l : lines) w.push_back(gaussian_line(reach[0], g.step[0], l.power, l.squared));
    return w;
  }
  std::vector<std::vector<double>> column_filters(const Grid& g, const long* reach) const {
    std::vector<std::vector<double>> w;
    for (const Term& t : terms) w.push_back(gaussian_line(reach[1], g.step[1], t.power, t.squared));
    return w;
  }

  // The node's moments from its term sums (by slot), then its fit.
  void solve(const double* sum, Moments& mo, std::size_t node, std::size_t G,
             const EngineOutput& out) const {
    for (std::size_t a = 0; a < nb; ++a) {
      for (std::size_t b = a; b < nb; ++b) {
        mo.S[a * nb + b] = sum[pair[a * nb + b]];
        if (mo.want_var) mo.S2[a * nb + b] = sum[nm + pair[a * nb + b]];
      }
      for (std::size_t v = 0; v < nv; ++v) mo.T[a * nv + v] = sum[2 * nm + a * nv + v];
    }
    solve_moments(mo, node, G, out);
  }
};

// The separable fits at the `needed` nodes alone (those the queries interpolate from): the row
// pass at the columns that hold a needed node, then the column pass at the needed nodes.
// Every sum runs over the offsets in increasing order, as in separable_fit_grid(), so the
// values equal those of the whole grid; nodes not needed are left untouched.
inline bool separable_fit_at(const Grid& g, const std::vector<double>& counts,
                             const std::vector<double>& sums, const SeparablePlan& plan,
                             bool want_var, double cutoff, const std::vector<char>& needed,
                             const EngineOutput& out, const ParallelFor& parallel_for,
                             const Monitor& monitor) {
  const long size0 = static_cast<long>(g.size[0]), size1 = static_cast<long>(g.size[1]);
  const std::size_t G = g.nodes();
  long reach[2];
  window_reach(g, cutoff, reach);
  std::vector<long> cols, col_of(static_cast<std::size_t>(size0), -1);
  std::vector<std::size_t> nodes;
  for (std::size_t node = 0; node < G; ++node)
    if (needed[node]) {
      nodes.push_back(node);
      col_of[node % g.size[0]] = 0;
    }
  for (long i0 = 0; i0 < size0; ++i0)
    if (col_of[i0] == 0) {
      col_of[i0] = static_cast<long>(cols.size());
      cols.push_back(i0);
    }
  const std::size_t nl = plan.lines.size(), nc = cols.size();
  const auto w0 = plan.row_filters(g, reach), w1 = plan.column_filters(g, reach);
  auto source = [&](std::size_t a) { return a == 0 ? counts.data() : sums.data() + (a - 1) * G; };
  // rows[(k * size1 + i1) * nc + c]: line k at row i1 smoothed along dimension 0, at column cols[c]
  std::vector<double> rows(nl * static_cast<std::size_t>(size1) * nc);
  parallel_for(0, nl * static_cast<std::size_t>(size1), [&](std::size_t begin, std::size_t end) {
    // kLanes rows at a time: independent sums, not one serial chain of additions.
    for (std::size_t r = begin; r < end; r += kLanes) {
      const std::size_t lanes = std::min<std::size_t>(kLanes, end - r);
      const double* in[kLanes];
      const double* w[kLanes];
      for (std::size_t l = 0; l < kLanes; ++l) {
        const std::size_t line = r + std::min(l, lanes - 1), k = line / size1;
        in[l] = source(plan.lines[k].array) + (line % size1) * size0;
        w[l] = w0[k].data() + reach[0];
      }
      for (std::size_t c = 0; c < nc; ++c) {
        const long i0 = cols[c];
        const long lo = std::max(-reach[0], -i0), hi = std::min(reach[0], size0 - 1 - i0);
        double acc[kLanes] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        for (long a = lo; a <= hi; ++a)
          for (std::size_t l = 0; l < kLanes; ++l) acc[l] += in[l][i0 + a] * w[l][a];
        for (std::size_t l = 0; l < lanes; ++l) rows[(r + l) * nc + c] = acc[l];
      }
    }
  });
  parallel_for(0, nodes.size(), [&](std::size_t begin, std::size_t end) {
    Moments mo(plan.nb, plan.nv, want_var);
    std::vector<double> sum(plan.slots(), 0.0);
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t node = nodes[t];
      const long i1 = static_cast<long>(node / g.size[0]);
      const std::size_t c = static_cast<std::size_t>(col_of[node % g.size[0]]);
      const long lo = std::max(-reach[1], -i1), hi = std::min(reach[1], size1 - 1 - i1);
      for (std::size_t s = 0; s < plan.terms.size(); ++s) {
        const SeparablePlan::Term& term = plan.terms[s];
        const double* w = w1[s].data() + reach[1];
        const double* in = &rows[(term.line * size1 + i1) * nc + c];
        double acc = 0.0;
        for (long b = lo; b <= hi; ++b) acc += w[b] * in[b * static_cast<long>(nc)];
        sum[term.slot] = acc;
      }
      plan.solve(sum.data(), mo, node, G, out);
    }
  });
  return !monitor || monitor(G, G);
}

// The separable fits at every node of a 2-D grid (see SeparablePlan). The window is the square
// of half-width `cutoff` (its corners hold weights below exp(-32) of the peak for the default
// cut-off).
inline bool separable_fit_grid(const Grid& g, const std::vector<double>& counts,
                               const std::vector<double>& sums, const SeparablePlan& plan,
                               bool want_var, double cutoff, const EngineOutput& out,
                               const ParallelFor& parallel_for, const Monitor& monitor) {
  const long size0 = static_cast<long>(g.size[0]), size1 = static_cast<long>(g.size[1]);
  const std::size_t G = g.nodes(), nl = plan.lines.size(), nt = plan.terms.size();
  long reach[2];
  window_reach(g, cutoff, reach);
  const auto w0 = plan.row_filters(g, reach), w1 = plan.column_filters(g, reach);
  auto source = [&](std::size_t a) { return a == 0 ? counts.data() : sums.data() + (a - 1) * G; };
  // Lines pass along rows into `rows`, terms along columns into `done`.
  std::vector<double> rows(nl * G), done(nt * G);
  parallel_for(0, nl * static_cast<std::size_t>(size1), [&](std::size_t begin, std::size_t end) {
    // The row copied between reach[0] zeros on each side (and kLanes more at the end), so that
    // every node takes the whole window: the zero terms leave each node's sum, taken over the
    // offsets in increasing order, exactly as over its window on the grid.
    std::vector<double> pad(static_cast<std::size_t>(size0 + 2 * reach[0]) + kLanes, 0.0);
    for (std::size_t r = begin; r < end; ++r) {
      const std::size_t k = r / size1, i1 = r % size1;
      const double* in = source(plan.lines[k].array) + i1 * size0;
      std::copy(in, in + size0, pad.begin() + reach[0]);
      row_convolve(pad.data(), size0, w0[k].data(), 2 * reach[0] + 1, &rows[k * G + i1 * size0]);
    }
  });
  parallel_for(0, nt * static_cast<std::size_t>(size1), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const std::size_t t = r / size1, k = plan.terms[t].line;
      const long i1 = static_cast<long>(r % size1);
      const long lo = std::max(-reach[1], -i1), hi = std::min(reach[1], size1 - 1 - i1);
      double* o = &done[t * G + i1 * size0];
      std::fill(o, o + size0, 0.0);
      for (long b = lo; b <= hi; ++b) {
        const double wb = w1[t][b + reach[1]];
        const double* in = &rows[k * G + (i1 + b) * size0];
        for (long i0 = 0; i0 < size0; ++i0) o[i0] += wb * in[i0];
      }
    }
  });
  parallel_for(0, G, [&](std::size_t begin, std::size_t end) {
    Moments mo(plan.nb, plan.nv, want_var);
    std::vector<double> sum(plan.slots(), 0.0);
    for (std::size_t node = begin; node < end; ++node) {
      for (std::size_t t = 0; t < nt; ++t) sum[plan.terms[t].slot] = done[t * G + node];
      plan.solve(sum.data(), mo, node, G, out);
    }
  });
  return !monitor || monitor(G, G);
}
}  // namespace detail

// Local fits at the grid nodes from binned data, written to `out` with m = g.nodes() (only at
// the `needed` nodes when given, see query_nodes(); the others are left untouched). The local
// moments are discrete convolutions of the bin counts and sums with the kernel window times the
// monomials u^e (|e| <= 2 degree): one dot product along each row of the window.
inline bool binned_fit_nodes(const Grid& g, const std::vector<double>& counts,
                             const std::vector<double>& sums, std::size_t nv,
                             const EngineSettings& set, double cutoff, const EngineOutput& out,
                             const ParallelFor& parallel_for, const Monitor& monitor,
                             const std::vector<char>* needed = nullptr) {
  const std::size_t G = g.nodes();
  const int d = static_cast<int>(g.d);
  // The square window of the separable passes differs from the disc by weights below
  // exp(-cutoff^2 / 2): negligible at the registry's cut-off of 8, not at a user's smaller one.
  if (d == 2 && set.kernel == KernelType::gaussian &&
      cutoff >= kernel_info(KernelType::gaussian).cutoff) {
    const detail::SeparablePlan plan(set.degree, nv, set.want_var);
    return needed ? detail::separable_fit_at(g, counts, sums, plan, set.want_var, cutoff, *needed,
                                             out, parallel_for, monitor)
                  : detail::separable_fit_grid(g, counts, sums, plan, set.want_var, cutoff, out,
                                               parallel_for, monitor);
  }
  const Basis basis(d, set.degree), moments(d, 2 * set.degree);
  const std::size_t nb = basis.size(), nm = moments.size();
  // pair[a * nb + b]: the moment of basis terms a and b, u^(e_a + e_b).
  std::vector<std::size_t> pair(nb * nb);
  for (std::size_t a = 0; a < nb; ++a)
    for (std::size_t b = 0; b < nb; ++b) {
      std::vector<int> e = basis.powers(a);
      for (int j = 0; j < d; ++j) e[j] += basis.powers(b)[j];
      for (std::size_t t = 0; t < nm; ++t)
        if (moments.powers(t) == e) pair[a * nb + b] = t;
    }
  // The window: reach[j] nodes each way; window[t] holds w(u) u^e_t, window2[t] w(u)^2 u^e_t.
  long reach[2] = {0, 0};
  detail::window_reach(g, cutoff, reach);
  const long width = 2 * reach[0] + 1, rows = 2 * reach[1] + 1;
  std::vector<double> window(nm * width * rows), window2(nm * width * rows), mono(nm);
  for (long b = -reach[1]; b <= reach[1]; ++b)
    for (long a = -reach[0]; a <= reach[0]; ++a) {
      const double u[2] = {a * g.step[0], b * g.step[1]};
      const double r2 = u[0] * u[0] + u[1] * u[1];
      const double w = r2 <= cutoff * cutoff * (1 + 1e-12)
                           ? kernel_shape(set.kernel, r2)
                           : 0.0;
      moments.eval(u, mono.data());
      const std::size_t o = static_cast<std::size_t>((b + reach[1]) * width + (a + reach[0]));
      for (std::size_t t = 0; t < nm; ++t) {
        window[t * width * rows + o] = w * mono[t];
        window2[t * width * rows + o] = w * w * mono[t];
      }
    }
  const long size0 = static_cast<long>(g.size[0]);
  const long size1 = d == 1 ? 1 : static_cast<long>(g.size[1]);
  auto fn = [&](std::size_t begin, std::size_t end) {
    Moments mo(nb, nv, set.want_var);
    std::vector<double> M(nm), V(nm), N(nb * nv);
    for (std::size_t node = begin; node < end; ++node) {
      if (needed && !(*needed)[node]) continue;
      const long i0 = static_cast<long>(node % g.size[0]);
      const long i1 = static_cast<long>(node / g.size[0]);
      std::fill(M.begin(), M.end(), 0.0);
      std::fill(V.begin(), V.end(), 0.0);
      std::fill(N.begin(), N.end(), 0.0);
      // Offsets that stay on the grid.
      const long a_lo = std::max(-reach[0], -i0), a_hi = std::min(reach[0], size0 - 1 - i0);
      const long b_lo = std::max(-reach[1], -i1), b_hi = std::min(reach[1], size1 - 1 - i1);
      const std::size_t len = static_cast<std::size_t>(a_hi - a_lo + 1);
      for (long b = b_lo; b <= b_hi; ++b) {
        const std::size_t row = static_cast<std::size_t>((i1 + b) * size0 + i0 + a_lo);
        const std::size_t o = static_cast<std::size_t>((b + reach[1]) * width + a_lo + reach[0]);
        const double* c = &counts[row];
        for (std::size_t t = 0; t < nm; ++t) {
          const double* w = &window[t * width * rows + o];
          double s = 0.0;
          for (std::size_t k = 0; k < len; ++k) s += c[k] * w[k];
          M[t] += s;
          if (set.want_var) {
            const double* w2 = &window2[t * width * rows + o];
            double s2 = 0.0;
            for (std::size_t k = 0; k < len; ++k) s2 += c[k] * w2[k];
            V[t] += s2;
          }
        }
        for (std::size_t v = 0; v < nv; ++v)
          for (std::size_t t = 0; t < nb; ++t) {
            // Basis term t is moment t: both lists start with the same monomials.
            const double* w = &window[t * width * rows + o];
            const double* y = &sums[v * G + row];
            double s = 0.0;
            for (std::size_t k = 0; k < len; ++k) s += y[k] * w[k];
            N[t * nv + v] += s;
          }
      }
      for (std::size_t a = 0; a < nb; ++a) {
        for (std::size_t b = a; b < nb; ++b) {
          mo.S[a * nb + b] = M[pair[a * nb + b]];
          mo.S2[a * nb + b] = V[pair[a * nb + b]];
        }
        for (std::size_t v = 0; v < nv; ++v) mo.T[a * nv + v] = N[a * nv + v];
      }
      solve_moments(mo, node, G, out);
    }
  };
  return run_chunked(G, chunk_size(static_cast<double>(width * rows) * nm), parallel_for,
                     monitor, fn);
}

// The cell of query i (of mq, scaled, column-major) on the grid: its lower node and the fraction
// of the way to the next in each variable; false outside the grid.
inline bool query_cell(const Grid& g, const double* queries, std::size_t mq, std::size_t i,
                       std::size_t* node, double* frac) {
  bool inside = true;
  for (std::size_t j = 0; j < g.d; ++j)
    inside = inside && grid_position(g, j, queries[j * mq + i], &node[j], &frac[j]);
  return inside;
}

// The nodes that interpolate_nodes() reads for the queries (mq x d, scaled): the corners of
// each query's cell, so that binned_fit_nodes() can skip the others.
inline std::vector<char> query_nodes(const Grid& g, const double* queries, std::size_t mq) {
  std::vector<char> needed(g.nodes(), 0);
  for (std::size_t i = 0; i < mq; ++i) {
    std::size_t node[2] = {0, 0};
    double frac[2] = {0.0, 0.0};
    const bool inside = query_cell(g, queries, mq, i, node, frac);
    if (!inside) continue;
    for (std::size_t b = 0; b < (g.d == 1 ? 1u : 2u); ++b)
      for (std::size_t a = 0; a < 2; ++a)
        needed[(node[0] + a) + (g.d == 1 ? 0 : (node[1] + b) * g.size[0])] = 1;
  }
  return needed;
}

// Interpolates node outputs (m = g.nodes()) linearly to the queries (mq x d, scaled).
inline void interpolate_nodes(const Grid& g, const EngineOutput& nodes, std::size_t nb,
                              std::size_t nv, const double* queries, std::size_t mq,
                              const EngineOutput& out) {
  const std::size_t G = g.nodes();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t i = 0; i < mq; ++i) {
    std::size_t node[2] = {0, 0};
    double frac[2] = {0.0, 0.0};
    const bool inside = query_cell(g, queries, mq, i, node, frac);
    std::size_t ks[4];
    double shares[4];
    const std::size_t corners = g.d == 1 ? 2 : 4;
    int status = inside ? kOk : kNoWeight;
    for (std::size_t corner = 0; corner < corners && inside; ++corner) {
      const std::size_t a = corner & 1, b = corner >> 1;
      shares[corner] =
          (a ? frac[0] : 1.0 - frac[0]) * (g.d == 1 ? 1.0 : (b ? frac[1] : 1.0 - frac[1]));
      ks[corner] = (node[0] + a) + (g.d == 1 ? 0 : (node[1] + b) * g.size[0]);
      if (shares[corner] > 0.0 && nodes.status[ks[corner]] != kOk)
        status = std::max(status, nodes.status[ks[corner]]);
    }
    auto mix = [&](const double* arr, std::size_t col) {
      if (status != kOk) return nan;
      double s = 0.0;
      for (std::size_t c = 0; c < corners; ++c)
        if (shares[c] > 0.0) s += shares[c] * arr[ks[c] + G * col];
      return s;
    };
    for (std::size_t k = 0; k < nb * nv; ++k) out.coef[i + mq * k] = mix(nodes.coef, k);
    if (out.var)
      for (std::size_t b = 0; b < nb; ++b) out.var[i + mq * b] = mix(nodes.var, b);
    if (out.s00) out.s00[i] = mix(nodes.s00, 0);
    if (out.wsum) out.wsum[i] = status == kNoWeight ? 0.0 : mix(nodes.wsum, 0);
    if (out.status) out.status[i] = status;
  }
}

}  // namespace localmean
