// Sequences: the temporal local mean (self-attention is one), and the discrete query-key-value
// kernel learned from a token sequence (qkv_fit).
//
// Temporal local mean: for every query position t,
//   y_t = sum_s K(q_t, k_s) L(t, s) v_s / sum_s K(q_t, k_s) L(t, s)
// with a content kernel K (the exponential dot product exp(q.k / h), or a registry kernel of the
// distance ||q - k|| / h) and a time kernel L (causal, two-sided window, exponential decay,
// none). It is computed in log space with an online softmax: per query a running maximum, a
// running weight sum and a running weighted sum of values, rescaled whenever the maximum grows,
// so memory is O(T d) and no T x T matrix exists unless the caller asks for the weights.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine.hpp"
#include "kernels.hpp"

namespace localmean {

enum class TimeKernel { causal, window, exponential, none };

struct TemporalSettings {
  bool softmax = true;                       // exp(q.k / bandwidth); else the distance kernel
  KernelType kernel = KernelType::gaussian;  // distance kernel when !softmax
  double bandwidth = 1.0;
  TimeKernel time = TimeKernel::causal;
  // causal: keys t - s < time_bandwidth (infinite: all the past); window: |t - s| <= it;
  // exponential: weight exp(-(t - s) / time_bandwidth) on the past.
  double time_bandwidth = kInf;
  bool out_column_major = false;  // write out as dv x nq row-major (R's nq x dv matrix)
};

namespace detail {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The log weight of a zero weight: finite, so that arithmetic on it stays branch-free. A log
// weight below kLogZeroBelow (kLogZero plus any score) is a zero weight.
constexpr double kLogZero = -1e300;
constexpr double kLogZeroBelow = 0.5 * kLogZero;

// Log of the distance kernel's shape at squared scaled distance r2 (kLogZero where it is zero):
// closed forms for the Gaussian and the Laplace; every other kernel (AnyKernel) looks its
// profile up at run time, so that the attention tile is compiled three times, not per kernel.
template <class K> inline double log_shape(KernelType type, double r2) {
  const double v = kernel_shape(type, r2);
  return v > 0.0 ? std::log(v) : kLogZero;
}
template <> inline double log_shape<Gaussian>(KernelType, double r2) { return -0.5 * r2; }
template <> inline double log_shape<Laplace>(KernelType, double r2) { return -std::sqrt(r2); }

// The keys [lo, hi] that query t may see (nk keys), for the time kernel.
inline void key_range(const TemporalSettings& set, std::size_t t, std::size_t nk, std::size_t* lo,
                      std::size_t* hi) {
  const double w = set.time_bandwidth;
  switch (set.time) {
  case TimeKernel::causal:
    *hi = std::min(t, nk - 1);
    *lo = std::isfinite(w) && w < static_cast<double>(t + 1)
              ? t + 1 - static_cast<std::size_t>(std::ceil(w))
              : 0;
    break;
  case TimeKernel::window: {
    // Capped beyond any sequence length, so that the conversion is exact.
    const std::size_t half = static_cast<std::size_t>(std::floor(std::min(w, 1e15)));
    *lo = t > half ? t - half : 0;
    *hi = std::min(nk - 1, t + std::min<std::size_t>(half, nk));
    break;
  }
  case TimeKernel::exponential:
    *lo = 0;
    *hi = std::min(t, nk - 1);
    break;
  case TimeKernel::none:
    *lo = 0;
    *hi = nk - 1;
    break;
  }
}

// Queries per tile (they share each block of keys while it is in cache) and keys per block.
constexpr std::size_t kQueryTile = 16;
constexpr std::size_t kKeyBlock = 64;
// Tiles in the first chunk of work; later chunks are sized by the time the first took.
constexpr std::size_t kFirstTiles = 4;
// Keys scored per pass of the scalar loops: their running sums stay in registers.
constexpr std::size_t kKeysPerPass = 16;

// Content kernels as log weights. block() scores the keys of one block, stored transposed
// (kT[c * kKeyBlock + j] is coordinate c of key j), so the inner loop runs over keys and
// vectorises while every score is still summed over coordinates in order; single() gives the
// same number for one key.
struct SoftmaxContent {
  std::size_t dk;
  double inv_h;
  LOCALMEAN_INLINE void block(const double* q, const double* kT, double* score) const {
#if defined(__GNUC__)
    // 32 keys at a time, their sums held in 8 vector registers.
    for (std::size_t j0 = 0; j0 < kKeyBlock; j0 += 32) {
      v4d a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
      for (std::size_t c = 0; c < dk; ++c) {
        const double qc = q[c];
        const double* kc = kT + c * kKeyBlock + j0;
        a0 += qc * LOCALMEAN_LOAD4(kc);
        a1 += qc * LOCALMEAN_LOAD4(kc + 4);
        a2 += qc * LOCALMEAN_LOAD4(kc + 8);
        a3 += qc * LOCALMEAN_LOAD4(kc + 12);
        a4 += qc * LOCALMEAN_LOAD4(kc + 16);
        a5 += qc * LOCALMEAN_LOAD4(kc + 20);
        a6 += qc * LOCALMEAN_LOAD4(kc + 24);
        a7 += qc * LOCALMEAN_LOAD4(kc + 28);
      }
      double* sc = score + j0;
      LOCALMEAN_STORE4(sc, a0 * inv_h);
      LOCALMEAN_STORE4(sc + 4, a1 * inv_h);
      LOCALMEAN_STORE4(sc + 8, a2 * inv_h);
      LOCALMEAN_STORE4(sc + 12, a3 * inv_h);
      LOCALMEAN_STORE4(sc + 16, a4 * inv_h);
      LOCALMEAN_STORE4(sc + 20, a5 * inv_h);
      LOCALMEAN_STORE4(sc + 24, a6 * inv_h);
      LOCALMEAN_STORE4(sc + 28, a7 * inv_h);
    }
#else
    for (std::size_t j0 = 0; j0 < kKeyBlock; j0 += kKeysPerPass) {
      double r[kKeysPerPass] = {};
      for (std::size_t c = 0; c < dk; ++c) {
        const double qc = q[c];
        const double* kc = kT + c * kKeyBlock + j0;
        for (std::size_t u = 0; u < kKeysPerPass; ++u) r[u] += qc * kc[u];
      }
      for (std::size_t u = 0; u < kKeysPerPass; ++u) score[j0 + u] = r[u] * inv_h;
    }
#endif
  }
  double single(const double* q, const double* k) const {
    double s = 0.0;
    for (std::size_t c = 0; c < dk; ++c) s += q[c] * k[c];
    return s * inv_h;
  }
};

template <class K> struct DistanceContent {
  std::size_t dk;
  double inv_h2;
  KernelType type;
  LOCALMEAN_INLINE void block(const double* q, const double* kT, double* score) const {
    for (std::size_t j0 = 0; j0 < kKeyBlock; j0 += kKeysPerPass) {
      double r[kKeysPerPass] = {};
      for (std::size_t c = 0; c < dk; ++c) {
        const double qc = q[c];
        const double* kc = kT + c * kKeyBlock + j0;
        for (std::size_t u = 0; u < kKeysPerPass; ++u) {
          const double diff = qc - kc[u];
          r[u] += diff * diff;
        }
      }
      for (std::size_t u = 0; u < kKeysPerPass; ++u) score[j0 + u] = log_shape<K>(type, r[u] * inv_h2);
    }
  }
  double single(const double* q, const double* k) const {
    double r2 = 0.0;
    for (std::size_t c = 0; c < dk; ++c) {
      const double diff = q[c] - k[c];
      r2 += diff * diff;
    }
    return log_shape<K>(type, r2 * inv_h2);
  }
};

// Maximum and sum of a block in four interleaved lanes, so that the loops vectorise without
// reordering rules; the order is fixed, so the sum is the same on every run and thread.
LOCALMEAN_INLINE double max_of(const double* x, std::size_t len) {
  double m0 = kNegInf, m1 = kNegInf, m2 = kNegInf, m3 = kNegInf;
  std::size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    m0 = m0 > x[j] ? m0 : x[j];
    m1 = m1 > x[j + 1] ? m1 : x[j + 1];
    m2 = m2 > x[j + 2] ? m2 : x[j + 2];
    m3 = m3 > x[j + 3] ? m3 : x[j + 3];
  }
  for (; j < len; ++j) m0 = m0 > x[j] ? m0 : x[j];
  return std::max(std::max(m0, m1), std::max(m2, m3));
}
LOCALMEAN_INLINE double sum_of(const double* x, std::size_t len) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    s0 += x[j];
    s1 += x[j + 1];
    s2 += x[j + 2];
    s3 += x[j + 3];
  }
  for (; j < len; ++j) s0 += x[j];
  return (s0 + s1) + (s2 + s3);
}

// One tile of queries [t0, t1): q (nq x dk), k (nk x dk), v (nk x dv) row-major; out (nq x dv).
// Every query sees its keys in blocks aligned to multiples of kKeyBlock, in increasing order,
// whatever the tile: its result does not depend on how queries are tiled or threaded.
template <class Content>
LOCALMEAN_INLINE void temporal_tile_body(const double* q, std::size_t nq, const double* k,
                                         std::size_t nk,
                                         std::size_t dk, const double* v, std::size_t dv,
                                         const TemporalSettings& set, const Content& content,
                                         std::size_t t0, std::size_t t1, double* out,
                                         double* weights, std::vector<double>& acc,
                                         std::vector<double>& kT) {
  const std::size_t nt = t1 - t0;
  std::size_t lo[kQueryTile], hi[kQueryTile];
  double run_max[kQueryTile], run_sum[kQueryTile];
  acc.assign(nt * dv, 0.0);
  // Keys outside the block's range keep stale (finite) coordinates; their scores are masked.
  if (kT.size() != dk * kKeyBlock) kT.assign(dk * kKeyBlock, 0.0);
  double score[kKeyBlock];
  std::size_t first = nk, last = 0;
  for (std::size_t i = 0; i < nt; ++i) {
    key_range(set, t0 + i, nk, &lo[i], &hi[i]);
    first = std::min(first, lo[i]);
    last = std::max(last, hi[i]);
    run_max[i] = kNegInf;
    run_sum[i] = 0.0;
  }
  const bool decay = set.time == TimeKernel::exponential;
  const double inv_tau = decay ? 1.0 / set.time_bandwidth : 0.0;
  for (std::size_t b0 = first / kKeyBlock * kKeyBlock; b0 <= last; b0 += kKeyBlock) {
    const std::size_t b1 = std::min(last + 1, b0 + kKeyBlock);
    const std::size_t from = std::max(b0, first);
    for (std::size_t s = from; s < b1; ++s)
      for (std::size_t c = 0; c < dk; ++c) kT[c * kKeyBlock + (s - b0)] = k[s * dk + c];
    for (std::size_t i = 0; i < nt; ++i) {
      const std::size_t a = std::max(b0, lo[i]), e = std::min(b1 - 1, hi[i]);
      if (a > e) continue;
      const std::size_t t = t0 + i, ja = a - b0, je = e - b0 + 1;
      content.block(q + t * dk, kT.data(), score);
      if (decay)
        for (std::size_t j = 0; j < kKeyBlock; ++j)
          score[j] -= (static_cast<double>(t) - static_cast<double>(b0 + j)) * inv_tau;
      // Keys outside [a, e] weigh exp(kLogZero) = 0 and add nothing.
      for (std::size_t j = 0; j < ja; ++j) score[j] = kLogZero;
      for (std::size_t j = je; j < kKeyBlock; ++j) score[j] = kLogZero;
      const double block_max = max_of(score, kKeyBlock);
      if (block_max < kLogZeroBelow) continue;  // every weight zero (compact kernels)
      double* at = &acc[i * dv];
      if (block_max > run_max[i]) {
        const double rescale = std::exp(run_max[i] - block_max);  // 0 the first time
        run_sum[i] *= rescale;
        for (std::size_t c = 0; c < dv; ++c) at[c] *= rescale;
        run_max[i] = block_max;
      }
      const double m = run_max[i];
      for (std::size_t j = 0; j < kKeyBlock; ++j) score[j] = exp_nonpositive(score[j] - m);
      run_sum[i] += sum_of(score, kKeyBlock);
      // at += sum_j w_j v_j, keys in order; 8 coordinates at a time held in registers.
      const double* vb = v + b0 * dv;
      std::size_t c_vec = 0;
#if defined(__GNUC__)
      c_vec = dv / 8 * 8;
      for (std::size_t c0 = 0; c0 < c_vec; c0 += 8) {
        v4d a0 = LOCALMEAN_LOAD4(at + c0), a1 = LOCALMEAN_LOAD4(at + c0 + 4);
        for (std::size_t j = ja; j < je; ++j) {
          const double w = score[j];
          a0 += w * LOCALMEAN_LOAD4(vb + j * dv + c0);
          a1 += w * LOCALMEAN_LOAD4(vb + j * dv + c0 + 4);
        }
        LOCALMEAN_STORE4(at + c0, a0);
        LOCALMEAN_STORE4(at + c0 + 4, a1);
      }
#endif
      for (std::size_t j = ja; j < je; ++j) {
        const double w = score[j];
        const double* vs = vb + j * dv;
        for (std::size_t c = c_vec; c < dv; ++c) at[c] += w * vs[c];
      }
    }
  }
  for (std::size_t i = 0; i < nt; ++i) {
    const std::size_t t = t0 + i;
    const double inv = run_sum[i] > 0.0 ? 1.0 / run_sum[i] : std::nan("");
    if (set.out_column_major) {
      for (std::size_t c = 0; c < dv; ++c) out[c * nq + t] = acc[i * dv + c] * inv;
    } else {
      for (std::size_t c = 0; c < dv; ++c) out[t * dv + c] = acc[i * dv + c] * inv;
    }
    if (!weights) continue;
    // The normalised weights, from the final maximum and sum (row t of an nq x nk matrix).
    double* wt = weights + t * nk;
    std::fill(wt, wt + nk, 0.0);
    for (std::size_t s = lo[i]; s <= hi[i]; ++s) {
      double sc = content.single(q + t * dk, k + s * dk);
      if (decay) sc -= (static_cast<double>(t) - static_cast<double>(s)) * inv_tau;
      wt[s] = sc < kLogZeroBelow ? 0.0 : std::exp(sc - run_max[i]) * inv;
    }
  }
}

template <class Content>
void temporal_tile(const double* q, std::size_t nq, const double* k, std::size_t nk,
                   std::size_t dk,
                   const double* v, std::size_t dv, const TemporalSettings& set,
                   const Content& content, std::size_t t0, std::size_t t1, double* out,
                   double* weights, std::vector<double>& acc, std::vector<double>& kT) {
  best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    temporal_tile_body(q, nq, k, nk, dk, v, dv, set, content, t0, t1, out, weights, acc, kT);
  });
}

}  // namespace detail

// The number of query tiles, the unit of the temporal local mean's progress.
inline std::size_t temporal_tile_count(std::size_t nq) {
  return (nq + detail::kQueryTile - 1) / detail::kQueryTile;
}

// The temporal local mean of nq queries over nk keys (for causal, window and exponential time
// kernels query t and key s are positions in one sequence). q: nq x dk, k: nk x dk, v: nk x dv,
// out: nq x dv, all row-major (out column-major if set.out_column_major); weights (nq x nk,
// row-major) is filled when not null. Returns false when the monitor stopped the work.
inline bool temporal_local_mean(const double* q, std::size_t nq, const double* k, std::size_t nk,
                                std::size_t dk, const double* v, std::size_t dv,
                                const TemporalSettings& set, double* out, double* weights,
                                const ParallelFor& parallel_for = serial_for,
                                const Monitor& monitor = {}) {
  if (nq == 0 || nk == 0) return true;
  const std::size_t tiles = temporal_tile_count(nq);
  auto run = [&](const auto& content) {
    auto tiles_from = [&](std::size_t b, std::size_t e) {
      std::vector<double> acc, kT;
      for (std::size_t tile = b; tile < e; ++tile) {
        const std::size_t t0 = tile * detail::kQueryTile;
        detail::temporal_tile(q, nq, k, nk, dk, v, dv, set, content, t0,
                              std::min(nq, t0 + detail::kQueryTile), out, weights, acc, kT);
      }
    };
    return run_chunked(tiles, detail::kFirstTiles, parallel_for, monitor, tiles_from);
  };
  if (set.softmax) return run(detail::SoftmaxContent{dk, 1.0 / set.bandwidth});
  const double inv_h2 = 1.0 / (set.bandwidth * set.bandwidth);
  switch (set.kernel) {
    case KernelType::gaussian:
      return run(detail::DistanceContent<Gaussian>{dk, inv_h2, set.kernel});
    case KernelType::laplace:
      return run(detail::DistanceContent<Laplace>{dk, inv_h2, set.kernel});
    default: return run(detail::DistanceContent<AnyKernel>{dk, inv_h2, set.kernel});
  }
}

// ---------------------------------------------------------------------------------------------
// The QKV model: a Transformer built as a stack of causal temporal local means (Song's
// hierarchical local model). Token t enters as the embedding x0_t = E[tok_t]; layer l maps
// x = x(l-1) to x(l) by
//   y = LN(x),  q, k, v = y Wq, y Wk, y Wv   (dim columns, cut into `heads` slices of dim / heads)
//   o_t(h) = sum_s a_ts(h) v_s(h),  a_ts(h) = softmax_s(q_t(h) . k_s(h) / sqrt(dim / heads)
//            + lag(h)[t - s]),  0 <= t - s < window   (one causal local mean per head; two-sided:
//            |t - s| < window, lag(h) indexed by s - t + window - 1)
//   x1 = x + o Wo                               (heads concatenated and projected; a residual)
//   x(l) = x1 + relu(LN(x1) W1 + c1) W2 + c2     (the feed-forward block, when hidden > 0)
// with LN(x) = gain * (x - mean(x)) / sqrt(var(x) + 1e-5) + bias per position. The output is
// p(target_t) = softmax(Out LN(x(L))_t + bout), the target of position t being the next token
// (causal) or, two-sided, the token hidden behind a mask token at t. Weight matrices act on row
// vectors (x W, in x out row-major); Out (vocab x dim) holds one row per word. Trained by Adam on
// the mean cross-entropy of mini-batches of consecutive positions.

// One block of the flat parameter vector. The names are the model's (R reads the layout here).
// Per-layer blocks hold the layers one after the other.
struct QkvBlock {
  const char* name;
  std::size_t offset, size;
};

constexpr double kLayerNormEps = 1e-5;

struct QkvShape {
  std::size_t vocab = 0, dim = 0, window = 1, layers = 1, heads = 1, hidden = 0;
  bool two_sided = false;  // keys on both sides (|t - s| < window) instead of the past
  std::size_t lags = 1;    // time-kernel weights per head: window, or 2 window - 1 two-sided
  // Offsets of the parameter blocks in one flat vector of `size` parameters.
  std::size_t embed, ln1_gain, ln1_bias, wq, wk, wv, lag, wo, ln2_gain, ln2_bias, w1, c1, w2, c2,
      final_gain, final_bias, out, out_bias, size = 0;
  std::vector<QkvBlock> blocks;  // every block, in order (empty ones included)
  QkvShape(std::size_t v, std::size_t d, std::size_t w, std::size_t l, std::size_t nh,
           std::size_t f, bool both = false)
      : vocab(v), dim(d), window(w), layers(l), heads(nh), hidden(f), two_sided(both),
        lags(both ? 2 * w - 1 : w) {
    auto take = [this](const char* name, std::size_t n) {
      blocks.push_back({name, size, n});
      size += n;
      return blocks.back().offset;
    };
    const std::size_t ff = f > 0 ? 1 : 0;  // the feed-forward block's layer norm, or none
    embed = take("embed", v * d);
    ln1_gain = take("ln1_gain", l * d), ln1_bias = take("ln1_bias", l * d);
    wq = take("query", l * d * d), wk = take("key", l * d * d), wv = take("value", l * d * d);
    lag = take("lag", l * nh * lags), wo = take("mix", l * d * d);
    ln2_gain = take("ln2_gain", ff * l * d), ln2_bias = take("ln2_bias", ff * l * d);
    w1 = take("w1", l * d * f), c1 = take("c1", l * f), w2 = take("w2", l * f * d);
    c2 = take("c2", ff * l * d);
    final_gain = take("final_gain", d), final_bias = take("final_bias", d);
    out = take("output", v * d), out_bias = take("output_bias", v);
  }
  std::size_t head_dim() const { return dim / heads; }
  // The positions whose targets count: all but the last (causal, no next token) or all.
  std::size_t span(std::size_t n) const { return two_sided || n == 0 ? n : n - 1; }
};

// A token sequence as the model reads it: input ids and, per position, the id to predict there
// (-1: none), both of length n.
struct QkvText {
  const int* input;
  const int* target;
  std::size_t n;
};

// Adam's settings; beta1, beta2 and eps are the defaults of Kingma and Ba (2015). The learning
// rate rises linearly to lr over the first share `warmup` of the mini-batches and falls linearly
// towards 0 over all of them (lr / n at the last of n): in a short training the cooling down gains
// more than a constant rate.
struct QkvSettings {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, warmup = 0.02;
  std::size_t batch = 256, epochs = 1;
  // The learning rate's multiplier at mini-batch i (0-based) of n.
  double schedule(std::size_t i, std::size_t n) const {
    const double nd = static_cast<double>(n), id = static_cast<double>(i);
    return std::min((id + 1.0) / (warmup * nd), 1.0 - id / nd);
  }
};

struct QkvTrace {
  std::vector<double> batch_loss, epoch_loss, valid_loss;
};

namespace detail {

// One layer's forward quantities over a segment: its input positions start at `in`, its output
// positions at `out` (rows of the arrays below are positions from there on).
struct QkvLayerWork {
  std::size_t in = 0, out = 0, in_end = 0, out_end = 0, n = 0;  // n: the sequence's length
  std::vector<double> xhat1, rstd1, y1, q, k, v, a, o, x1, xhat2, rstd2, y2, z, x;
};

// Scratch space for one shard of targets.
struct QkvWork {
  std::vector<QkvLayerWork> layer;
  std::size_t targets = 0;  // targets counted by the last segment
  std::vector<double> x0, xhatf, rstdf, yf, logits, tmp, dx, dnext, dx1, dy, dr, dq, dk, dv, dout;
};

LOCALMEAN_INLINE double dot(const double* a, const double* b, std::size_t n) {
  double s = 0.0;
  for (std::size_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// Y (n x co) = X (n x ci) W (ci x co) + bias (bias may be null). The inner loop runs over the
// outputs, so it vectorises while every output still sums over the inputs in order.
LOCALMEAN_INLINE void affine(const double* x, std::size_t n, std::size_t ci, const double* w,
                             std::size_t co, const double* bias, double* y) {
  for (std::size_t i = 0; i < n; ++i) {
    double* yi = y + i * co;
    for (std::size_t o = 0; o < co; ++o) yi[o] = bias ? bias[o] : 0.0;
    for (std::size_t c = 0; c < ci; ++c) {
      const double xc = x[i * ci + c];
      const double* wc = w + c * co;
      for (std::size_t o = 0; o < co; ++o) yi[o] += xc * wc[o];
    }
  }
}

// Back through affine() for the gradient dy (n x co): adds X' dy to dw, the column sums of dy to
// dbias (if not null) and dy W' to dx (if not null).
LOCALMEAN_INLINE void affine_backward(const double* x, std::size_t n, std::size_t ci,
                                      const double* w, std::size_t co, const double* dy,
                                      double* dw, double* dbias, double* dx) {
  for (std::size_t i = 0; i < n; ++i) {
    const double* di = dy + i * co;
    for (std::size_t c = 0; c < ci; ++c) {
      const double xc = x[i * ci + c];
      double* gc = dw + c * co;
      for (std::size_t o = 0; o < co; ++o) gc[o] += xc * di[o];
      if (dx) dx[i * ci + c] += dot(w + c * co, di, co);
    }
    if (dbias)
      for (std::size_t o = 0; o < co; ++o) dbias[o] += di[o];
  }
}

// Layer normalisation of n rows of width d: xhat = (x - mean) / sqrt(var + eps) (rstd the
// inverse square root), y = gain * xhat + bias.
LOCALMEAN_INLINE void layer_norm(const double* x, std::size_t n, std::size_t d, const double* gain,
                                 const double* bias, double* xhat, double* rstd, double* y) {
  const double inv_d = 1.0 / static_cast<double>(d);
  for (std::size_t i = 0; i < n; ++i) {
    const double* xi = x + i * d;
    double mean = 0.0, var = 0.0;
    for (std::size_t c = 0; c < d; ++c) mean += xi[c];
    mean *= inv_d;
    for (std::size_t c = 0; c < d; ++c) var += (xi[c] - mean) * (xi[c] - mean);
    const double r = 1.0 / std::sqrt(var * inv_d + kLayerNormEps);
    rstd[i] = r;
    for (std::size_t c = 0; c < d; ++c) {
      xhat[i * d + c] = (xi[c] - mean) * r;
      y[i * d + c] = gain[c] * xhat[i * d + c] + bias[c];
    }
  }
}

// Back through layer_norm() for the gradient dy: adds to dgain, dbias and dx.
LOCALMEAN_INLINE void layer_norm_backward(const double* dy, std::size_t n, std::size_t d,
                                          const double* gain, const double* xhat,
                                          const double* rstd, double* dgain, double* dbias,
                                          double* dx) {
  const double inv_d = 1.0 / static_cast<double>(d);
  for (std::size_t i = 0; i < n; ++i) {
    const double* di = dy + i * d;
    const double* hi = xhat + i * d;
    double m1 = 0.0, m2 = 0.0;
    for (std::size_t c = 0; c < d; ++c) {
      const double g = di[c] * gain[c];
      m1 += g;
      m2 += g * hi[c];
      dgain[c] += di[c] * hi[c];
      dbias[c] += di[c];
    }
    m1 *= inv_d;
    m2 *= inv_d;
    for (std::size_t c = 0; c < d; ++c)
      dx[i * d + c] += rstd[i] * (di[c] * gain[c] - m1 - hi[c] * m2);
  }
}

// Softmax of n scores in place (the weights of one causal local mean, in lag order).
LOCALMEAN_INLINE void softmax_in_place(double* a, std::size_t n) {
  const double mx = max_of(a, n);
  for (std::size_t j = 0; j < n; ++j) a[j] = exp_nonpositive(a[j] - mx);
  const double inv = 1.0 / sum_of(a, n);
  for (std::size_t j = 0; j < n; ++j) a[j] *= inv;
}

#if defined(__GNUC__)
// y[0, 16) += sum_{i < n} c[i * c_step] x[i * x_step + (0, 16)], i in increasing order, the running
// sums held in four vector registers (independent sums keep the FMA units busy).
LOCALMEAN_INLINE void add_scaled_rows16(double* y, const double* c, std::size_t c_step,
                                        const double* x, std::size_t x_step, std::size_t n) {
  v4d a0 = LOCALMEAN_LOAD4(y), a1 = LOCALMEAN_LOAD4(y + 4);
  v4d a2 = LOCALMEAN_LOAD4(y + 8), a3 = LOCALMEAN_LOAD4(y + 12);
  for (std::size_t i = 0; i < n; ++i) {
    const double d = c[i * c_step];
    const double* xi = x + i * x_step;
    a0 += d * LOCALMEAN_LOAD4(xi);
    a1 += d * LOCALMEAN_LOAD4(xi + 4);
    a2 += d * LOCALMEAN_LOAD4(xi + 8);
    a3 += d * LOCALMEAN_LOAD4(xi + 12);
  }
  LOCALMEAN_STORE4(y, a0);
  LOCALMEAN_STORE4(y + 4, a1);
  LOCALMEAN_STORE4(y + 8, a2);
  LOCALMEAN_STORE4(y + 12, a3);
}
#endif
// Their last use: a header must not leak its macros.
#undef LOCALMEAN_LOAD4
#undef LOCALMEAN_STORE4

// Back through the output layer for ng targets: dl (ng x V) the loss gradient of the logits,
// h (ng x D) the representations, wo (V x D). Adds dl' h to gwo, the column sums of dl to gbo and
// dl wo to dh (ng x D), the running sums kept in vector registers across targets (for gwo) or
// across rows of wo (for dh); every sum still runs in a fixed order.
LOCALMEAN_INLINE void output_backward(const double* wo, const double* dl, std::size_t V,
                                      std::size_t D, const double* h, std::size_t ng,
                                      double* gwo, double* gbo, double* dh) {
  std::size_t c_vec = 0;
#if defined(__GNUC__)
  c_vec = D / 16 * 16;  // columns 16 at a time
  for (std::size_t r = 0; r < V; ++r)
    for (std::size_t c0 = 0; c0 < c_vec; c0 += 16)
      add_scaled_rows16(gwo + r * D + c0, dl + r, V, h + c0, D, ng);
  constexpr std::size_t kRows = 128;  // rows of wo per pass, kept in cache across targets
  for (std::size_t r0 = 0; r0 < V; r0 += kRows) {
    const std::size_t r1 = std::min(V, r0 + kRows);
    for (std::size_t i = 0; i < ng; ++i)
      for (std::size_t c0 = 0; c0 < c_vec; c0 += 16)
        add_scaled_rows16(dh + i * D + c0, dl + i * V + r0, 1, wo + r0 * D + c0, D, r1 - r0);
  }
#endif
  for (std::size_t r = 0; r < V; ++r) {
    double gb = 0.0;
    for (std::size_t i = 0; i < ng; ++i) {
      const double d = dl[i * V + r];
      gb += d;
      for (std::size_t c = c_vec; c < D; ++c) {
        gwo[r * D + c] += d * h[i * D + c];
        dh[i * D + c] += d * wo[r * D + c];
      }
    }
    gbo[r] += gb;
  }
}

// Smallest probability in the loss: a target of probability 0 costs -log(1e-300), not infinity.
constexpr double kMinProb = 1e-300;

// The positions [lo, hi) of layer l's output (l = 0: the embeddings) that the targets of [a, b)
// need in a sequence of n: each layer looks window - 1 positions further back (and ahead).
inline void layer_range(const QkvShape& sh, std::size_t a, std::size_t b, std::size_t n,
                        std::size_t l, std::size_t* lo, std::size_t* hi) {
  const std::size_t reach = (sh.layers - l) * (sh.window - 1);
  *lo = a > reach ? a - reach : 0;
  *hi = sh.two_sided ? std::min(n, b + reach) : b;
}

// The keys of query t: `count` of them, key j (j < count) at position first + j (two-sided) or
// t - j (causal), its time-kernel weight at index base + j.
struct KeySpan {
  std::size_t first, count, base;
  KeySpan(const QkvShape& sh, std::size_t t, std::size_t n) {
    const std::size_t W = sh.window;
    first = t + 1 > W ? t + 1 - W : 0;
    if (sh.two_sided) {
      count = std::min(n - 1, t + W - 1) - first + 1;
      base = first + W - 1 - t;
    } else {
      count = t - first + 1;
      base = 0;
    }
  }
  std::size_t key(const QkvShape& sh, std::size_t t, std::size_t j) const {
    return sh.two_sided ? first + j : t - j;
  }
};

// The local means of one layer, every head: for the output positions t in [lw.out, lw.out_end),
// the weights of their keys go to lw.a (row (t - out) * heads + h, by time-kernel index) and the
// heads' means, side by side, to lw.o. Queries, keys and values are rows p - lw.in of lw.q, lw.k,
// lw.v for position p.
LOCALMEAN_INLINE void attention_forward(const QkvShape& sh, const double* lag, QkvLayerWork& lw) {
  const std::size_t D = sh.dim, K = sh.lags, NH = sh.heads, dh = sh.head_dim();
  const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(dh));
  const std::size_t n_out = lw.out_end - lw.out;
  lw.a.assign(n_out * NH * K, 0.0);
  lw.o.assign(n_out * D, 0.0);
  for (std::size_t t = lw.out; t < lw.out_end; ++t) {
    const KeySpan ks(sh, t, lw.n);
    const double* q0 = &lw.q[(t - lw.in) * D];
    for (std::size_t h = 0; h < NH; ++h) {
      double* a = &lw.a[((t - lw.out) * NH + h) * K + ks.base];
      const double* lg = lag + h * K + ks.base;
      for (std::size_t j = 0; j < ks.count; ++j)
        a[j] = dot(q0 + h * dh, &lw.k[(ks.key(sh, t, j) - lw.in) * D + h * dh], dh) * inv_sqrt +
               lg[j];
      softmax_in_place(a, ks.count);
      double* o = &lw.o[(t - lw.out) * D + h * dh];
      for (std::size_t j = 0; j < ks.count; ++j) {
        const double* vs = &lw.v[(ks.key(sh, t, j) - lw.in) * D + h * dh];
        for (std::size_t c = 0; c < dh; ++c) o[c] += a[j] * vs[c];
      }
    }
  }
}

// Back through attention_forward() for the gradient dout of lw.o: with score_j the log weight of
// lag j, d score_j = a_j (g . v_j - sum_r a_r g . v_r). Adds to dq, dk, dv (rows as lw.q) and
// the lag weights' gradient dlag.
LOCALMEAN_INLINE void attention_backward(const QkvShape& sh, const QkvLayerWork& lw,
                                         const double* dout, double* dq, double* dk, double* dv,
                                         double* dlag, double* da) {
  const std::size_t D = sh.dim, K = sh.lags, NH = sh.heads, dh = sh.head_dim();
  const double inv_sqrt = 1.0 / std::sqrt(static_cast<double>(dh));
  for (std::size_t t = lw.out; t < lw.out_end; ++t) {
    const KeySpan ks(sh, t, lw.n);
    const std::size_t r = t - lw.in;
    for (std::size_t h = 0; h < NH; ++h) {
      const double* a = &lw.a[((t - lw.out) * NH + h) * K + ks.base];
      const double* g = dout + (t - lw.out) * D + h * dh;
      const double* q = &lw.q[r * D + h * dh];
      double mean = 0.0;
      for (std::size_t j = 0; j < ks.count; ++j) {
        const std::size_t rk = ks.key(sh, t, j) - lw.in;
        da[j] = dot(g, &lw.v[rk * D + h * dh], dh);
        mean += a[j] * da[j];
        double* dvs = dv + rk * D + h * dh;
        for (std::size_t c = 0; c < dh; ++c) dvs[c] += a[j] * g[c];
      }
      for (std::size_t j = 0; j < ks.count; ++j) {
        const std::size_t rk = ks.key(sh, t, j) - lw.in;
        const double ds = a[j] * (da[j] - mean);
        dlag[h * K + ks.base + j] += ds;
        const double* kj = &lw.k[rk * D + h * dh];
        double* dks = dk + rk * D + h * dh;
        double* dqs = dq + r * D + h * dh;
        for (std::size_t c = 0; c < dh; ++c) {
          dqs[c] += ds * inv_sqrt * kj[c];
          dks[c] += ds * inv_sqrt * q[c];
        }
      }
    }
  }
}

// Layer l (1-based) forward from its input x (rows: positions [lw.in, lw.in_end)) to its output
// lw.x (positions [lw.out, lw.out_end)).
LOCALMEAN_INLINE void layer_forward(const QkvShape& sh, const double* th, std::size_t l,
                                    const double* x, QkvLayerWork& lw, std::vector<double>& tmp) {
  const std::size_t D = sh.dim, F = sh.hidden, i = l - 1;
  const std::size_t n_in = lw.in_end - lw.in, n_out = lw.out_end - lw.out, skip = lw.out - lw.in;
  lw.xhat1.resize(n_in * D);
  lw.rstd1.resize(n_in);
  lw.y1.resize(n_in * D);
  layer_norm(x, n_in, D, th + sh.ln1_gain + i * D, th + sh.ln1_bias + i * D, lw.xhat1.data(),
             lw.rstd1.data(), lw.y1.data());
  lw.q.resize(n_in * D);
  lw.k.resize(n_in * D);
  lw.v.resize(n_in * D);
  affine(lw.y1.data(), n_in, D, th + sh.wq + i * D * D, D, nullptr, lw.q.data());
  affine(lw.y1.data(), n_in, D, th + sh.wk + i * D * D, D, nullptr, lw.k.data());
  affine(lw.y1.data(), n_in, D, th + sh.wv + i * D * D, D, nullptr, lw.v.data());
  attention_forward(sh, th + sh.lag + i * sh.heads * sh.lags, lw);
  lw.x1.resize(n_out * D);
  affine(lw.o.data(), n_out, D, th + sh.wo + i * D * D, D, nullptr, lw.x1.data());
  for (std::size_t e = 0; e < n_out * D; ++e) lw.x1[e] += x[skip * D + e];
  if (F == 0) {
    lw.x = lw.x1;
    return;
  }
  lw.xhat2.resize(n_out * D);
  lw.rstd2.resize(n_out);
  lw.y2.resize(n_out * D);
  layer_norm(lw.x1.data(), n_out, D, th + sh.ln2_gain + i * D, th + sh.ln2_bias + i * D,
             lw.xhat2.data(), lw.rstd2.data(), lw.y2.data());
  lw.z.resize(n_out * F);
  affine(lw.y2.data(), n_out, D, th + sh.w1 + i * D * F, F, th + sh.c1 + i * F, lw.z.data());
  tmp.resize(n_out * F);
  for (std::size_t e = 0; e < n_out * F; ++e) tmp[e] = std::max(0.0, lw.z[e]);
  lw.x.resize(n_out * D);
  affine(tmp.data(), n_out, F, th + sh.w2 + i * F * D, D, th + sh.c2 + i * D, lw.x.data());
  for (std::size_t e = 0; e < n_out * D; ++e) lw.x[e] += lw.x1[e];
}

// Back through layer l for the gradient ws.dx of its output (rows from lw.out): leaves the
// gradient of its input (rows from lw.in) in ws.dx and adds the parameters' gradients to grad.
LOCALMEAN_INLINE void layer_backward(const QkvShape& sh, const double* th, std::size_t l,
                                     const QkvLayerWork& lw, double* grad, QkvWork& ws) {
  const std::size_t D = sh.dim, F = sh.hidden, K = sh.lags, i = l - 1;
  const std::size_t n_in = lw.in_end - lw.in, n_out = lw.out_end - lw.out, skip = lw.out - lw.in;
  ws.dx1 = ws.dx;  // the residual: x(l) = x1 + ...
  if (F > 0) {
    ws.tmp.resize(n_out * F);
    for (std::size_t e = 0; e < n_out * F; ++e) ws.tmp[e] = std::max(0.0, lw.z[e]);
    ws.dr.assign(n_out * F, 0.0);
    affine_backward(ws.tmp.data(), n_out, F, th + sh.w2 + i * F * D, D, ws.dx.data(),
                    grad + sh.w2 + i * F * D, grad + sh.c2 + i * D, ws.dr.data());
    for (std::size_t e = 0; e < n_out * F; ++e) ws.dr[e] = lw.z[e] > 0.0 ? ws.dr[e] : 0.0;
    ws.dy.assign(n_out * D, 0.0);
    affine_backward(lw.y2.data(), n_out, D, th + sh.w1 + i * D * F, F, ws.dr.data(),
                    grad + sh.w1 + i * D * F, grad + sh.c1 + i * F, ws.dy.data());
    layer_norm_backward(ws.dy.data(), n_out, D, th + sh.ln2_gain + i * D, lw.xhat2.data(),
                        lw.rstd2.data(), grad + sh.ln2_gain + i * D, grad + sh.ln2_bias + i * D,
                        ws.dx1.data());
  }
  ws.dnext.assign(n_in * D, 0.0);
  for (std::size_t e = 0; e < n_out * D; ++e) ws.dnext[skip * D + e] = ws.dx1[e];
  ws.dout.assign(n_out * D, 0.0);
  affine_backward(lw.o.data(), n_out, D, th + sh.wo + i * D * D, D, ws.dx1.data(),
                  grad + sh.wo + i * D * D, nullptr, ws.dout.data());
  ws.dq.assign(n_in * D, 0.0);
  ws.dk.assign(n_in * D, 0.0);
  ws.dv.assign(n_in * D, 0.0);
  ws.tmp.resize(K);
  attention_backward(sh, lw, ws.dout.data(), ws.dq.data(), ws.dk.data(), ws.dv.data(),
                     grad + sh.lag + i * sh.heads * K, ws.tmp.data());
  ws.dy.assign(n_in * D, 0.0);
  affine_backward(lw.y1.data(), n_in, D, th + sh.wq + i * D * D, D, ws.dq.data(),
                  grad + sh.wq + i * D * D, nullptr, ws.dy.data());
  affine_backward(lw.y1.data(), n_in, D, th + sh.wk + i * D * D, D, ws.dk.data(),
                  grad + sh.wk + i * D * D, nullptr, ws.dy.data());
  affine_backward(lw.y1.data(), n_in, D, th + sh.wv + i * D * D, D, ws.dv.data(),
                  grad + sh.wv + i * D * D, nullptr, ws.dy.data());
  layer_norm_backward(ws.dy.data(), n_in, D, th + sh.ln1_gain + i * D, lw.xhat1.data(),
                      lw.rstd1.data(), grad + sh.ln1_gain + i * D, grad + sh.ln1_bias + i * D,
                      ws.dnext.data());
  ws.dx.swap(ws.dnext);
}

// Loss (summed) of the targets of the positions [a, b) of text (ws.targets counts them). With
// grad not null, adds the gradient of the summed loss. With probs not null (predict), writes the
// probabilities at position b - 1 instead (no loss; text.target may be null). Every layer's
// attention weights stay in ws (layer l's for its positions from layer_range()).
LOCALMEAN_INLINE double qkv_segment_body(const QkvShape& sh, const double* th, const QkvText& text,
                                         std::size_t a, std::size_t b, double* grad, QkvWork& ws,
                                         double* probs) {
  const std::size_t D = sh.dim, V = sh.vocab, L = sh.layers, nt = b - a;
  const int* tok = text.input;
  std::size_t p0, p1;
  layer_range(sh, a, b, text.n, 0, &p0, &p1);
  ws.x0.resize((p1 - p0) * D);
  for (std::size_t p = p0; p < p1; ++p)
    std::copy(th + sh.embed + tok[p] * D, th + sh.embed + (tok[p] + 1) * D, &ws.x0[(p - p0) * D]);
  ws.layer.resize(L);
  const double* x = ws.x0.data();
  for (std::size_t l = 1; l <= L; ++l) {
    QkvLayerWork& lw = ws.layer[l - 1];
    lw.n = text.n;
    layer_range(sh, a, b, text.n, l - 1, &lw.in, &lw.in_end);
    layer_range(sh, a, b, text.n, l, &lw.out, &lw.out_end);
    layer_forward(sh, th, l, x, lw, ws.tmp);
    x = lw.x.data();
  }
  ws.xhatf.resize(nt * D);
  ws.rstdf.resize(nt);
  ws.yf.resize(nt * D);
  layer_norm(x, nt, D, th + sh.final_gain, th + sh.final_bias, ws.xhatf.data(), ws.rstdf.data(),
             ws.yf.data());
  const double* hout = ws.yf.data();

  // Output layer, in groups of targets that share each row of Out while it is in cache.
  constexpr std::size_t kGroup = 48;
  double loss = 0.0;
  ws.targets = 0;
  ws.logits.resize(kGroup * V);
  if (grad) ws.dy.assign(nt * D, 0.0);
  for (std::size_t g0 = 0; g0 < nt; g0 += kGroup) {
    const std::size_t ng = std::min(kGroup, nt - g0);
    // The group's representations transposed (zero-padded): the inner loop runs over the
    // targets, which vectorises while each logit still sums over coordinates in order.
    ws.tmp.resize(kGroup * D);
    double* hT = ws.tmp.data();
    for (std::size_t c = 0; c < D; ++c)
      for (std::size_t i = 0; i < kGroup; ++i)
        hT[c * kGroup + i] = i < ng ? hout[(g0 + i) * D + c] : 0.0;
    for (std::size_t r = 0; r < V; ++r) {
      const double* wr = th + sh.out + r * D;
      double lg[kGroup];
      for (std::size_t i = 0; i < kGroup; ++i) lg[i] = 0.0;
      for (std::size_t c = 0; c < D; ++c) {
        const double w = wr[c];
        for (std::size_t i = 0; i < kGroup; ++i) lg[i] += w * hT[c * kGroup + i];
      }
      for (std::size_t i = 0; i < ng; ++i) ws.logits[i * V + r] = lg[i] + th[sh.out_bias + r];
    }
    for (std::size_t i = 0; i < ng; ++i) {
      double* lg = &ws.logits[i * V];
      softmax_in_place(lg, V);
      if (probs) {
        if (g0 + i == nt - 1) std::copy(lg, lg + V, probs);
        continue;
      }
      const int y = text.target[a + g0 + i];
      if (y < 0) {  // no target here: nothing to learn
        std::fill(lg, lg + V, 0.0);
        continue;
      }
      ++ws.targets;
      loss -= std::log(std::max(lg[y], kMinProb));
      lg[y] -= 1.0;  // now d loss / d logits
    }
    if (!grad) continue;
    output_backward(th + sh.out, ws.logits.data(), V, D, hout + g0 * D, ng, grad + sh.out,
                    grad + sh.out_bias, &ws.dy[g0 * D]);
  }
  if (!grad) return loss;

  ws.dx.assign(nt * D, 0.0);
  layer_norm_backward(ws.dy.data(), nt, D, th + sh.final_gain, ws.xhatf.data(), ws.rstdf.data(),
                      grad + sh.final_gain, grad + sh.final_bias, ws.dx.data());
  for (std::size_t l = L; l >= 1; --l) layer_backward(sh, th, l, ws.layer[l - 1], grad, ws);
  for (std::size_t p = p0; p < p1; ++p) {
    double* ge = grad + sh.embed + tok[p] * D;
    for (std::size_t c = 0; c < D; ++c) ge[c] += ws.dx[(p - p0) * D + c];
  }
  return loss;
}

inline double qkv_segment(const QkvShape& sh, const double* th, const QkvText& text,
                          std::size_t a, std::size_t b, double* grad, QkvWork& ws,
                          double* probs = nullptr) {
  return best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    return qkv_segment_body(sh, th, text, a, b, grad, ws, probs);
  });
}

// Adam on n parameters: the gradient is the sum of `shards` buffers (stride P), in order, times
// scale. Separate pointers that do not alias let the loop vectorise.
inline void adam_step(const double* __restrict grads, std::size_t P,
                                    std::size_t shards, std::size_t n, double scale,
                                    const QkvSettings& set, double lr, double* __restrict m1,
                                    double* __restrict m2, double* __restrict theta) {
  const double b1 = set.beta1, b2 = set.beta2, eps = set.eps;
  for (std::size_t e = 0; e < n; ++e) {
    double g = 0.0;
    for (std::size_t s = 0; s < shards; ++s) g += grads[s * P + e];
    g *= scale;
    m1[e] = b1 * m1[e] + (1.0 - b1) * g;
    m2[e] = b2 * m2[e] + (1.0 - b2) * g * g;
    theta[e] -= lr * m1[e] / (std::sqrt(m2[e]) + eps);
  }
}

}  // namespace detail

// Summed loss of the targets of text (validation), over fixed pieces in parallel.
inline double qkv_loss(const QkvShape& sh, const double* theta, const QkvText& text,
                       const ParallelFor& parallel_for = serial_for) {
  const std::size_t span = sh.span(text.n);
  if (span == 0) return 0.0;
  constexpr std::size_t kPieces = 64;  // fixed, so that the sum does not depend on the threads
  const std::size_t pieces = std::min(kPieces, span);
  std::vector<double> part(pieces, 0.0);
  parallel_for(0, pieces, [&](std::size_t b, std::size_t e) {
    detail::QkvWork ws;
    for (std::size_t s = b; s < e; ++s)
      part[s] = detail::qkv_segment(sh, theta, text, span * s / pieces, span * (s + 1) / pieces,
                                    nullptr, ws);
  });
  double sum = 0.0;
  for (double v : part) sum += v;
  return sum;
}

// Summed loss of the targets of text, and its gradient added to grad (size sh.size).
inline double qkv_gradient(const QkvShape& sh, const double* theta, const QkvText& text,
                           double* grad) {
  if (sh.span(text.n) == 0) return 0.0;
  detail::QkvWork ws;
  return detail::qkv_segment(sh, theta, text, 0, sh.span(text.n), grad, ws);
}

// The probabilities (vocab) of the token at position `at` of text (causal: the next token after
// the inputs up to `at`; two-sided: the token behind the mask there).
inline void qkv_predict(const QkvShape& sh, const double* theta, const QkvText& text,
                        std::size_t at, double* probs) {
  detail::QkvWork ws;
  detail::qkv_segment(sh, theta, text, at, at + 1, nullptr, ws, probs);
}

// The attention weights of head `head` (0-based) of layer `layer` (1-based) over the inputs of
// text, from the same forward pass as training and prediction: weights (n x n, row-major) gets
// in row t how much position t draws on each position s (zero outside the window).
inline void qkv_attention(const QkvShape& sh, const double* theta, const QkvText& text,
                          std::size_t layer, std::size_t head, double* weights) {
  const std::size_t n = text.n;
  std::fill(weights, weights + n * n, 0.0);
  if (n == 0) return;
  detail::QkvWork ws;
  std::vector<double> probs(sh.vocab);
  detail::qkv_segment(sh, theta, text, 0, n, nullptr, ws, probs.data());
  // For the positions [0, n) every layer's output covers them all.
  const std::vector<double>& by_lag = ws.layer[layer - 1].a;
  const std::size_t K = sh.lags, NH = sh.heads;
  for (std::size_t t = 0; t < n; ++t) {
    const detail::KeySpan ks(sh, t, n);
    for (std::size_t j = 0; j < ks.count; ++j)
      weights[t * n + ks.key(sh, t, j)] = by_lag[(t * NH + head) * K + ks.base + j];
  }
}

// Adam on mini-batches of `set.batch` consecutive positions, visited in the order given per
// epoch (order: epochs x n_batches, from the caller's random numbers); epoch e reads texts[e %
// texts.size()] (for two-sided models each epoch has its own masks). Each batch is cut into a
// fixed number of shards whose gradients are summed in shard order, so a result does not depend
// on the number of threads. theta is updated in place; valid (valid.n 0: none) gets a loss per
// epoch.
inline bool qkv_train(const QkvShape& sh, double* theta, const std::vector<QkvText>& texts,
                      const QkvText& valid, const int* order, const QkvSettings& set,
                      QkvTrace& trace, const ParallelFor& parallel_for = serial_for,
                      const Monitor& monitor = {}) {
  constexpr std::size_t kShards = 4;  // per batch, whatever the number of threads
  const std::size_t P = sh.size, targets = sh.span(texts[0].n);
  const std::size_t n_batches = (targets + set.batch - 1) / set.batch;
  std::vector<double> grads(kShards * P), m1(P, 0.0), m2(P, 0.0), shard_loss(kShards);
  std::vector<std::size_t> shard_count(kShards);
  std::vector<detail::QkvWork> work(kShards);
  std::size_t step = 0;
  trace.batch_loss.clear();
  trace.epoch_loss.clear();
  trace.valid_loss.clear();
  std::size_t valid_count = 0;
  for (std::size_t p = 0; p < valid.n; ++p) valid_count += valid.target[p] >= 0;
  for (std::size_t ep = 0; ep < set.epochs; ++ep) {
    const QkvText& text = texts[ep % texts.size()];
    double epoch_sum = 0.0;
    std::size_t epoch_count = 0;
    for (std::size_t bi = 0; bi < n_batches; ++bi) {
      const std::size_t batch = static_cast<std::size_t>(order[ep * n_batches + bi]);
      const std::size_t a = batch * set.batch, b = std::min(targets, a + set.batch);
      parallel_for(0, kShards, [&](std::size_t s0, std::size_t s1) {
        for (std::size_t s = s0; s < s1; ++s) {
          double* g = &grads[s * P];
          std::fill(g, g + P, 0.0);
          const std::size_t sa = a + (b - a) * s / kShards, sb = a + (b - a) * (s + 1) / kShards;
          shard_loss[s] = sa < sb ? detail::qkv_segment(sh, theta, text, sa, sb, g, work[s]) : 0.0;
          shard_count[s] = sa < sb ? work[s].targets : 0;
        }
      });
      double loss = 0.0;
      std::size_t count = 0;
      for (std::size_t s = 0; s < kShards; ++s) loss += shard_loss[s], count += shard_count[s];
      epoch_sum += loss;
      epoch_count += count;
      if (monitor && !monitor(ep * n_batches + bi + 1, set.epochs * n_batches)) return false;
      if (count == 0) continue;  // no target in the batch (possible with masks): no step
      trace.batch_loss.push_back(loss / static_cast<double>(count));
      ++step;
      const double scale = 1.0 / static_cast<double>(count);
      const double c1 = 1.0 - std::pow(set.beta1, static_cast<double>(step));
      const double c2 = 1.0 - std::pow(set.beta2, static_cast<double>(step));
      const double lr = set.lr * set.schedule(ep * n_batches + bi, set.epochs * n_batches) *
                        std::sqrt(c2) / c1;
      parallel_for(0, P, [&](std::size_t e0, std::size_t e1) {
        detail::adam_step(grads.data() + e0, P, kShards, e1 - e0, scale, set, lr, m1.data() + e0,
                          m2.data() + e0, theta + e0);
      });
    }
    trace.epoch_loss.push_back(epoch_sum / static_cast<double>(std::max<std::size_t>(1, epoch_count)));
    if (valid_count > 0)
      trace.valid_loss.push_back(qkv_loss(sh, theta, valid, parallel_for) /
                                 static_cast<double>(valid_count));
  }
  return true;
}

}  // namespace localmean
