// The kernel sweep: distances, weights and moments of the data near a query, by block, tile
// or kd-tree window; the weight sums of densities; the window of the iterative solvers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "local_data.hpp"
#include "parallel.hpp"

namespace localmean {

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

// Two full blocks (see sweep_pair).
LOCALMEAN_INLINE void squared_distances(const LocalData& data, const double* q, double inv_h,
                                        std::size_t s,
                                        std::integral_constant<std::size_t, 2 * kBlock>,
                                        double* r2) {
  const auto full = std::integral_constant<std::size_t, kBlock>();
  squared_distances(data, q, inv_h, s, full, r2);
  squared_distances(data, q, inv_h, s + kBlock, full, r2 + kBlock);
}

// The kernel profile at squared scaled distance r2: the registry's, a user kernel's table, or
// (AnyKernel) the profile of the data's kernel, looked up at run time.
template <class K> LOCALMEAN_INLINE double shape_at(const LocalData&, double r2) {
  return K::shape(r2);
}
template <> LOCALMEAN_INLINE double shape_at<Tabulated>(const LocalData& data, double r2) {
  return data.profile()->shape(r2);
}
// (only density_sum()'s bounds of tree nodes take single values)
inline double other_shape(KernelType kernel, const LocalData& data, double r2) {
  return with_kernel(kernel, [&](auto k) { return shape_at<decltype(k)>(data, r2); });
}
template <> LOCALMEAN_INLINE double shape_at<AnyKernel>(const LocalData& data, double r2) {
  return other_shape(data.kernel(), data, r2);
}
// w[k] = the profile at r2[k], k < len (w may be r2): the registry's kernel K, or (overloads)
// a user kernel's table, or the data's kernel looked up at run time.
template <class K, class Len>
LOCALMEAN_INLINE void shapes_of(K, const LocalData&, const double* r2, Len len, double* w) {
  kernel_shapes(K{}, r2, len, w);
}
template <class Len>
LOCALMEAN_INLINE void shapes_of(Tabulated, const LocalData& data, const double* r2, Len len,
                                double* w) {
  data.profile()->shapes(r2, len, w);
}
template <class Len>
__attribute__((noinline)) void other_shapes(KernelType kernel, const LocalData& data,
                                            const double* r2, Len len, double* w);
template <class Len>
LOCALMEAN_INLINE void shapes_of(AnyKernel, const LocalData& data, const double* r2, Len len,
                                double* w) {
  other_shapes(data.kernel(), data, r2, len, w);
}
template <class K, class Len>
LOCALMEAN_INLINE void shapes_at(const LocalData& data, const double* r2, Len len, double* w) {
  shapes_of(K{}, data, r2, len, w);
}
// The profile of a kernel other than the Gaussian at r2[k], k < len, into w: one out-of-line
// loop per kernel in its best build, shared by both builds of the sweeps. The sweeps of every
// kernel but the Gaussian (AnyKernel, the candidates' sweep) call it once per block: one
// instance of each sweep per build, not one per kernel (which made the library much larger);
// these profiles are short beside the distances and moments of a block, but a division or an
// exponential (Cauchy, Laplace) is 1.15x slower in the portable build than in AVX2.
template <class Len>
__attribute__((noinline)) void other_shapes(KernelType kernel, const LocalData& data,
                                            const double* r2, Len len, double* w) {
  with_kernel(kernel, [&](auto k) LOCALMEAN_LAMBDA_INLINE {
    best_build([&]() LOCALMEAN_LAMBDA_INLINE { shapes_at<decltype(k)>(data, r2, len, w); });
  });
}

}  // namespace detail

// Calls f(Gaussian{}) for the Gaussian (its profile inline: the default kernel, and the slowest
// profile) and f(AnyKernel{}) for every other kernel, whose profile the sweep looks up in the
// data (detail::other_shapes): the engine's sweeps are compiled twice per build, not once per
// kernel. The data must sweep that kernel (LocalData::use_kernel(): check_sweep_kernel()).
template <class F>
LOCALMEAN_INLINE auto with_sweep_kernel(KernelType type, F&& f) -> decltype(f(Gaussian{})) {
  if (type == KernelType::gaussian) return f(Gaussian{});
  return f(AnyKernel{});
}
// Throws unless the data were told the kernel of the settings (LocalData::use_kernel()), on the
// calling thread, before any sweep.
inline void check_sweep_kernel(const LocalData& data, const EngineSettings& set) {
  if (data.kernel() != set.kernel)
    throw std::invalid_argument("LocalData::use_kernel() was not given the settings' kernel");
}

namespace detail {

// The kernel weights w of `len` points from tree position s for query q (without the prior
// weights): the numeric kernel times the level weights of the query's `table` (null: none). Len
// is either the compile-time block length (so that the loops vectorise) or a run-time tail length.
template <class K, class Len>
LOCALMEAN_INLINE void block_weights(const LocalData& data, const double* q, const double* table,
                                    double inv_h, double cut2, DistanceRange range, std::size_t s,
                                    Len len, double* w) {
  double r2[2 * kBlock];
  squared_distances(data, q, inv_h, s, len, r2);
  if (const double* inv_s2 = data.inv_scale2())
    for (std::size_t k = 0; k < len; ++k) r2[k] *= inv_s2[s + k];
  shapes_at<K>(data, r2, len, w);
  if (range != kInside)
    for (std::size_t k = 0; k < len; ++k) w[k] *= within(r2[k], cut2);
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

// The basis values phi (nb x kBlock; the first term, 1, is not stored) of `len` points from tree
// position s about query q, in u = (x - q) * inv_h: each term its parent times one variable.
template <class Len>
LOCALMEAN_INLINE void block_basis(const LocalData& data, const Basis& basis, const double* q,
                                  double inv_h, std::size_t s, Len len, double* phi) {
  const std::size_t n = data.n();
  const double* pts = data.tree().points();
  for (std::size_t b = 1; b < basis.size(); ++b) {
    const double* up = phi + basis.parent(b) * kBlock;
    const double* col = pts + basis.var(b) * n + s;
    const double qj = q[basis.var(b)];
    double* out = phi + b * kBlock;
    if (basis.parent(b) == 0) {
      for (std::size_t k = 0; k < len; ++k) out[k] = (col[k] - qj) * inv_h;
    } else {
      for (std::size_t k = 0; k < len; ++k) out[k] = up[k] * ((col[k] - qj) * inv_h);
    }
  }
}

// Accumulates `len` points from tree position s with kernel weights w (prior weights not yet
// applied) and basis values phi (block_basis(); unused for the local mean) into the lanes of a
// query's moments. The first basis term is 1: its products are skipped (multiplying by 1 is
// exact).
// The data come as prior weights (null: none) and nv value columns of n entries; the metric's
// leave-one-out passes (metric.hpp) add their windows with it too.
template <class Len>
LOCALMEAN_INLINE void accumulate_weighted(const double* prior, const double* values,
                                          std::size_t n, std::size_t nv, std::size_t s, Len len,
                                          const double* w, const double* phi, Moments& mo) {
  const std::size_t nb = mo.nb;
  double W_[kBlock];
  const double* W = w;
  if (prior) {
    product(W_, w, prior + s, len);
    W = W_;
  }
  if (nb == 1 && !mo.want_var) {
    // The local mean.
    add_lanes(mo.S_lanes(), W, len);
    for (std::size_t j = 0; j < nv; ++j)
      add_product(mo.T_lanes() + j * kLanes, W, values + j * n + s, len);
    return;
  }
  for (std::size_t a = 0; a < nb; ++a) {
    double Wa_[kBlock], kWa[kBlock];
    const double* Wa = W;
    if (a > 0) {
      product(Wa_, W, phi + a * kBlock, len);
      Wa = Wa_;
    }
    if (mo.want_var) product(kWa, w, Wa, len);
    for (std::size_t b = a; b < nb; ++b) {
      if (b == 0) {
        add_lanes(mo.S_lanes(), Wa, len);
        if (mo.want_var) add_lanes(mo.S2_lanes(), kWa, len);
        continue;
      }
      add_product(mo.S_lanes() + (a * nb + b) * kLanes, Wa, phi + b * kBlock, len);
      if (mo.want_var)
        add_product(mo.S2_lanes() + (a * nb + b) * kLanes, kWa, phi + b * kBlock, len);
    }
    for (std::size_t j = 0; j < nv; ++j)
      add_product(mo.T_lanes() + (a * nv + j) * kLanes, Wa, values + j * n + s, len);
  }
}

template <class Len>
LOCALMEAN_INLINE void accumulate_weighted(const LocalData& data, std::size_t s, Len len,
                                          const double* w, const double* phi, Moments& mo) {
  accumulate_weighted(data.prior(), data.values(), data.n(), data.nv(), s, len, w, phi, mo);
}

// Accumulates `len` points from tree position s with kernel weights w (prior weights not yet
// applied) into the lanes of query q's moments, the basis in u = (x - q) * inv_h.
template <class Len>
LOCALMEAN_INLINE void accumulate_block(const LocalData& data, const Basis& basis, const double* q,
                                       double inv_h, std::size_t s, Len len, const double* w,
                                       Moments& mo) {
  double* phi = mo.block_phi.data();
  if (mo.nb > 1 || mo.want_var) block_basis(data, basis, q, inv_h, s, len, phi);
  accumulate_weighted(data, s, len, w, phi, mo);
}

// Accumulates `len` points from tree position s into the lanes of query q's moments (see
// block_weights), leaving out the first `skip` of them (already swept: see walk_blocks).
template <class K, class Len>
LOCALMEAN_INLINE void sweep_block(const LocalData& data, const Basis& basis, const double* q,
                                  const double* table, double inv_h, double cut2,
                                  DistanceRange range, std::size_t s, Len len, std::size_t skip,
                                  Moments& mo) {
  double w[kBlock];
  block_weights<K>(data, q, table, inv_h, cut2, range, s, len, w);
  for (std::size_t k = 0; k < skip; ++k) w[k] = 0.0;
  accumulate_block(data, basis, q, inv_h, s, len, w, mo);
}

// Walks the tree positions [begin, end) in full blocks: with kPairs, pair(s) takes the two
// blocks from tree position s while two remain; then block(s, len, skip) takes the `len` points
// from tree position s, leaving out the first `skip` of them. A last partial block is taken as
// the block that ends at `end`, without the points it shares with the block before (len is then
// the compile-time kBlock, so that the loops vectorise). Only ranges shorter than a block take
// the slower loop of run-time length (len a std::size_t).
template <bool kPairs, class Pair, class Block>
LOCALMEAN_INLINE void walk_block_pairs(std::size_t begin, std::size_t end, Pair&& pair,
                                       Block&& block) {
  const auto full = std::integral_constant<std::size_t, kBlock>();
  if (end - begin < kBlock) {
    block(begin, end - begin, std::size_t{0});
    return;
  }
  std::size_t s = begin;
  if (kPairs) {
    for (; s + 2 * kBlock <= end; s += 2 * kBlock) pair(s);
  }
  for (; s + kBlock <= end; s += kBlock) block(s, full, std::size_t{0});
  if (s < end) block(end - kBlock, full, kBlock - (end - s));
}

// walk_block_pairs() one block at a time.
template <class Block>
LOCALMEAN_INLINE void walk_blocks(std::size_t begin, std::size_t end, Block&& block) {
  walk_block_pairs<false>(begin, end, [](std::size_t) {}, block);
}
// Walks [begin, end), whole blocks (both multiples of kBlock), block by block: block(s) takes
// the kBlock points from position s. No partial block, hence one copy of the block's code.
template <class Block>
LOCALMEAN_INLINE void walk_full_blocks(std::size_t begin, std::size_t end, Block&& block) {
  for (std::size_t s = begin; s < end; s += kBlock) block(s);
}

// Accumulates the two full blocks from tree position s into the lanes of query q's moments,
// their weights computed together (twice the independent exponentials of block_weights in
// flight: see exp_nonpositive_lanes), their moments added block by block as sweep_block's.
template <class K>
LOCALMEAN_INLINE void sweep_pair(const LocalData& data, const Basis& basis, const double* q,
                                 const double* table, double inv_h, double cut2,
                                 DistanceRange range, std::size_t s, Moments& mo) {
  const auto full = std::integral_constant<std::size_t, kBlock>();
  double w[2 * kBlock];
  block_weights<K>(data, q, table, inv_h, cut2, range, s,
                   std::integral_constant<std::size_t, 2 * kBlock>(), w);
  accumulate_block(data, basis, q, inv_h, s, full, w, mo);
  accumulate_block(data, basis, q, inv_h, s + kBlock, full, w + kBlock, mo);
}

// Accumulates the points at tree positions [begin, end) into the lanes of query q's moments,
// block by block (walk_blocks()); the Gaussian's by pairs of blocks first (walk_block_pairs()):
// its weights are long chains of dependent steps (exp_nonpositive), which two blocks side by
// side overlap. The other profiles are short, and pairs would only double their code.
template <class K>
LOCALMEAN_INLINE void sweep_body(const LocalData& data, const Basis& basis, const double* q,
                                 const double* table, double inv_h, double cut2,
                                 DistanceRange range, std::size_t begin, std::size_t end,
                                 Moments& mo) {
  const auto block = [&](std::size_t s, auto len, std::size_t skip) LOCALMEAN_LAMBDA_INLINE {
    sweep_block<K>(data, basis, q, table, inv_h, cut2, range, s, len, skip, mo);
  };
  if (std::is_same<K, Gaussian>::value) {
    walk_block_pairs<true>(
        begin, end,
        [&](std::size_t s) LOCALMEAN_LAMBDA_INLINE {
          sweep_pair<K>(data, basis, q, table, inv_h, cut2, range, s, mo);
        },
        block);
  } else {
    walk_blocks(begin, end, block);
  }
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

// ---- Many scales at once: the candidates of a bandwidth search ----

// The scales of a candidate sweep, largest first: inverse scales inv_h[c], squared truncation
// radii cut2[c] (in scales; infinite: none), and source[c], a larger candidate whose kernel
// weights squared `squarings[c]` times are candidate c's (the Gaussian at scale h / sqrt(2):
// exp(-r2) is exp(-r2 / 2) squared, a multiplication instead of an exponential), or -1.
struct CandidateScales {
  std::vector<double> inv_h, cut2;
  std::vector<int> source, squarings;
  std::size_t size() const { return inv_h.size(); }
};

// Accumulates `len` points from tree position s into the moments mo[c] of the `active` largest
// candidates of query q, leaving out the first `skip` points; w holds kBlock weights per
// candidate. Each candidate's weights are block_weights()' at its scale (no level weights, no
// point scales), truncated at its cut-off.
// A block within [inside_lo[c], inside_hi[c]) lies within candidate c's cut-off: not truncated.
// The basis is shared, in u = x - q: candidate_rescale() gives each candidate's moments in its
// own scale. shapes(data, r2, len, w) gives the kernel's profile (GaussianCandidateShapes or
// CandidateShapes).
template <class Shapes, class Len>
LOCALMEAN_INLINE void sweep_candidates_block(const Shapes& shapes, const LocalData& data,
                                             const Basis& basis, const double* q,
                                             const CandidateScales& cs,
                                             const std::size_t* inside_lo,
                                             const std::size_t* inside_hi, std::size_t active,
                                             std::size_t s, Len len, std::size_t skip, double* w,
                                             Moments* mo) {
  double* phi = mo[0].block_phi.data();
  if (active > 0 && mo[0].nb > 1) block_basis(data, basis, q, 1.0, s, len, phi);
  for (std::size_t c = 0; c < active; ++c) {
    // (locals: stores into the weights cannot change them, so the loops vectorise)
    const double inv_h = cs.inv_h[c], cut2 = cs.cut2[c];
    const int source = cs.source[c];
    const bool truncated = cut2 < kInf && (s < inside_lo[c] || s + len > inside_hi[c]);
    double r2[kBlock];
    double* wc = w + c * kBlock;
    if (source < 0 || truncated) squared_distances(data, q, inv_h, s, len, r2);
    if (source >= 0) {
      product(wc, w + source * kBlock, w + source * kBlock, len);
      for (int m = 1; m < cs.squarings[c]; ++m) product(wc, wc, wc, len);
    } else {
      shapes(data, r2, len, wc);
    }
    if (truncated)
      for (std::size_t k = 0; k < len; ++k) wc[k] *= within(r2[k], cut2);
    for (std::size_t k = 0; k < skip; ++k) wc[k] = 0.0;
    accumulate_weighted(data, s, len, wc, phi, mo[c]);
  }
}

// The moments of a candidate swept in u = x - q (sweep_candidates_block()) in its own scale
// u * inv_h, after flush(): a 1-D term b is u^b.
inline void candidate_rescale(double inv_h, Moments& mo) {
  const std::size_t nb = mo.nb, nv = mo.nv;
  double pa = 1.0;  // inv_h^a
  for (std::size_t a = 0; a < nb; ++a, pa *= inv_h) {
    double pab = pa * pa;  // inv_h^(a + b)
    for (std::size_t b = a; b < nb; ++b, pab *= inv_h) mo.S[a * nb + b] *= pab;
    for (std::size_t j = 0; j < nv; ++j) mo.T[a * nv + j] *= pa;
  }
}

// The candidates' sweep of query q over its windows: candidate c holds the tree positions
// [lo[c], hi[c]), nested (c = 0, the largest scale, holds them all). Blocks as in sweep_body()
// (walk_blocks()); a block is swept for every candidate whose window it meets.
template <class Shapes>
LOCALMEAN_INLINE void sweep_candidates_body(const Shapes& shapes, const LocalData& data,
                                            const Basis& basis, const double* q,
                                            const CandidateScales& cs, const std::size_t* lo,
                                            const std::size_t* hi, const std::size_t* inside_lo,
                                            const std::size_t* inside_hi, double* w,
                                            Moments* mo) {
  auto active = [&](std::size_t b, std::size_t e) {
    std::size_t c = 0;
    while (c < cs.size() && lo[c] < e && hi[c] > b) ++c;
    return c;
  };
  walk_blocks(lo[0], hi[0], [&](std::size_t s, auto len, std::size_t skip)
                                LOCALMEAN_LAMBDA_INLINE {
    sweep_candidates_block(shapes, data, basis, q, cs, inside_lo, inside_hi,
                           active(s + skip, s + len), s, len, skip, w, mo);
  });
}

// The kernel profile of the candidates' sweep: GaussianCandidateShapes inline (the default
// kernel), CandidateShapes every other kernel's through other_shapes(). So the sweep is compiled
// twice per build, not once per kernel.
struct CandidateShapes {
  KernelType kernel;
  template <class Len>
  LOCALMEAN_INLINE void operator()(const LocalData& data, const double* r2, Len len,
                                   double* w) const {
    other_shapes(kernel, data, r2, len, w);
  }
};
struct GaussianCandidateShapes {
  template <class Len>
  LOCALMEAN_INLINE void operator()(const LocalData& data, const double* r2, Len len,
                                   double* w) const {
    shapes_at<Gaussian>(data, r2, len, w);
  }
};

// The candidates' sweep (sweep_candidates_body()) of kernel `kernel` in its best build for the
// processor (see simd.hpp).
inline void sweep_candidates(KernelType kernel, const LocalData& data, const Basis& basis,
                             const double* q, const CandidateScales& cs, const std::size_t* lo,
                             const std::size_t* hi, const std::size_t* inside_lo,
                             const std::size_t* inside_hi, double* w, Moments* mo) {
  auto sweep_with = [&](const auto& shapes) {
    best_build([&]() LOCALMEAN_LAMBDA_INLINE {
      sweep_candidates_body(shapes, data, basis, q, cs, lo, hi, inside_lo, inside_hi, w, mo);
    });
  };
  if (kernel == KernelType::gaussian)
    sweep_with(GaussianCandidateShapes{});
  else
    sweep_with(CandidateShapes{kernel});
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
// `end`, without the points it shares with the block before (see walk_blocks).
template <class K>
LOCALMEAN_INLINE void tile_sums(const LocalData& data, const double* q, const double* inv_h,
                                std::size_t begin, std::size_t end, double* lanes) {
  static_assert(kBlock == 16 && kTileLanes == 4, "four v4d per block, one per lane group");
  constexpr std::size_t tile = kSweepTile;
  const std::size_t n = data.n(), d = data.d(), nv = data.nv();
  const double* prior = data.prior();
  const double* inv_s2 = data.inv_scale2();
  double w[tile * kBlock];  // squared distances, then weights: query t's at w + t * kBlock
  for (std::size_t s = begin; s < end; s += kBlock) {
    const std::size_t start = std::min(s, end - kBlock), skip = s - start;
    for (std::size_t t = 0; t < tile; ++t)
      squared_distances(data, q + t * d, inv_h[t], start,
                        std::integral_constant<std::size_t, kBlock>(), w + t * kBlock);
    if (inv_s2)
      for (std::size_t t = 0; t < tile; ++t)
        for (std::size_t k = 0; k < kBlock; ++k) w[t * kBlock + k] *= inv_s2[start + k];
    // One loop over the whole tile: many independent evaluations in flight.
    shapes_at<K>(data, w, std::integral_constant<std::size_t, tile * kBlock>(), w);
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
        const double kmax = detail::shape_at<K>(data, near2 * inv_h2),
                     kmin = detail::shape_at<K>(data, far2 * inv_h2);
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

}  // namespace localmean
