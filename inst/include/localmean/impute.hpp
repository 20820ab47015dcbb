// Imputation and denoising by local means.
//
// Imputation is a two-layer (hierarchical) local model on an n x p table with missing entries:
//   sample layer:  S_ic = sum_j K(d_ij / h_i) a_jc x_jc / sum_j K(d_ij / h_i) a_jc over the rows j
//                  most similar to row i on their shared entries;
//   feature layer: F_ic = mu_c + s_c sum_l w_cl a_il b_cl z_il / sum_l w_cl a_il over the features l
//                  linked to c (pixels near c, or columns correlated with c), z = (x - mu) / s;
// a = 1 for observed entries and `imputed_weight` for current imputations. The missing entries
// become mix S + (1 - mix) F, all at once from the previous values (so the result does not depend
// on the order of the rows or on the number of threads), until the change is below tol.
//
// Denoising is non-local means: every pixel is the local mean of the pixels of its search window,
// weighted by a registry kernel (the Gaussian by default) on the distance between their
// surrounding patches.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "engine.hpp"

namespace localmean {

// Row-major n x p table: values (any finite number at missing entries) and observed flags.
struct IncompleteTable {
  const double* x;
  const double* observed;  // 1 observed, 0 missing
  std::size_t n, p;
};

// For every row, up to k candidate neighbours (0-based, -1 past the end) and squared distances.
struct RowNeighbours {
  std::size_t n = 0, k = 0;
  std::vector<int> index;
  std::vector<double> dist2;
};

namespace detail {

// Weighted squared distance and weight total of rows a and b: sum_c wa wb (xa - xb)^2 and
// sum_c wa wb, in 8 fixed lanes (two 4-wide vectors where the compiler has vector extensions)
// so that the sum is the same on every path.
#if defined(__GNUC__)
typedef double lanes4 __attribute__((vector_size(32)));
#endif

template <bool Weighted>
LOCALMEAN_INLINE void pair_moments(const double* xa, const double* wa, const double* xb,
                                   const double* wb, std::size_t p, double* num, double* den) {
  double sn[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sd[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t c = 0;
#if defined(__GNUC__)
  lanes4 n0 = {0, 0, 0, 0}, n1 = n0, d0 = n0, d1 = n0;
  for (; c + 8 <= p; c += 8) {
    // Unaligned loads by memcpy; no function returns a vector (that would change the ABI).
    lanes4 wa0, wa1, wb0, wb1, xa0, xa1, xb0, xb1;
    std::memcpy(&wa0, wa + c, sizeof(lanes4));
    std::memcpy(&wa1, wa + c + 4, sizeof(lanes4));
    std::memcpy(&wb0, wb + c, sizeof(lanes4));
    std::memcpy(&wb1, wb + c + 4, sizeof(lanes4));
    std::memcpy(&xa0, xa + c, sizeof(lanes4));
    std::memcpy(&xa1, xa + c + 4, sizeof(lanes4));
    std::memcpy(&xb0, xb + c, sizeof(lanes4));
    std::memcpy(&xb1, xb + c + 4, sizeof(lanes4));
    const lanes4 m0 = wa0 * wb0, m1 = wa1 * wb1;
    const lanes4 e0 = xa0 - xb0, e1 = xa1 - xb1;
    n0 += m0 * e0 * e0;
    n1 += m1 * e1 * e1;
    d0 += m0;
    d1 += m1;
  }
  for (int l = 0; l < 4; ++l) {
    sn[l] = n0[l];
    sn[l + 4] = n1[l];
    sd[l] = d0[l];
    sd[l + 4] = d1[l];
  }
#else
  for (; c + 8 <= p; c += 8)
    for (int l = 0; l < 8; ++l) {
      const double m = wa[c + l] * wb[c + l];
      const double d = xa[c + l] - xb[c + l];
      sn[l] += m * d * d;
      sd[l] += m;
    }
#endif
  for (int l = 0; c + l < p; ++l) {
    const double m = wa[c + l] * wb[c + l];
    const double d = xa[c + l] - xb[c + l];
    sn[l] += m * d * d;
    sd[l] += m;
  }
  *num = ((sn[0] + sn[1]) + (sn[2] + sn[3])) + ((sn[4] + sn[5]) + (sn[6] + sn[7]));
  *den = ((sd[0] + sd[1]) + (sd[2] + sd[3])) + ((sd[4] + sd[5]) + (sd[6] + sd[7]));
}

// Squared distances of the query rows qs[0..nq) to every row, rescaled for the share of common
// entries: p * sum_c o_qc o_jc (x_qc - x_jc)^2 / sum_c o_qc o_jc, infinite when nothing is
// shared; out is nq x n. Each data row is read once for the whole group of queries, which keeps
// the sweep from being bound by memory traffic.
LOCALMEAN_INLINE void shared_distances_body(const IncompleteTable& t, const std::size_t* qs,
                                            std::size_t nq, double* out) {
  for (std::size_t j = 0; j < t.n; ++j) {
    const double* xj = t.x + j * t.p;
    const double* oj = t.observed + j * t.p;
    for (std::size_t a = 0; a < nq; ++a) {
      double num, den;
      pair_moments<true>(t.x + qs[a] * t.p, t.observed + qs[a] * t.p, xj, oj, t.p, &num, &den);
      out[a * t.n + j] = den > 0.0 ? static_cast<double>(t.p) * num / den : kInf;
    }
  }
}

inline void shared_distances(const IncompleteTable& t, const std::size_t* qs, std::size_t nq,
                             double* out) {
  best_build([&]() LOCALMEAN_LAMBDA_INLINE { shared_distances_body(t, qs, nq, out); });
}

}  // namespace detail

// The k nearest rows (shared-entry distance, the row itself excluded, ties by index) of every
// row with `query[i]` set; rows sharing no entry with it are never neighbours. Query rows go in
// groups of kQueryRows that share each pass over the table; the first chunk of work is about
// kFirstWork entry visits (0.05 s or so on one core).
constexpr std::size_t kQueryRows = 8;
constexpr double kFirstWork = 5e7;

inline bool shared_neighbours(const IncompleteTable& t, const unsigned char* query, std::size_t k,
                              RowNeighbours& g, const ParallelFor& parallel_for = serial_for,
                              const Monitor& monitor = {}) {
  g.n = t.n;
  g.k = k;
  g.index.assign(t.n * k, -1);
  g.dist2.assign(t.n * k, kInf);
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < t.n; ++i)
    if (query[i]) rows.push_back(i);
  const std::size_t group = kQueryRows;
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> d(group * t.n);
    std::vector<std::pair<double, int>> cand;
    for (std::size_t r0 = begin * group; r0 < std::min(end * group, rows.size()); r0 += group) {
      const std::size_t nq = std::min(group, rows.size() - r0);
      detail::shared_distances(t, rows.data() + r0, nq, d.data());
      for (std::size_t a = 0; a < nq; ++a) {
        const std::size_t i = rows[r0 + a];
        const double* di = d.data() + a * t.n;
        cand.clear();
        for (std::size_t j = 0; j < t.n; ++j)
          if (j != i && di[j] < kInf) cand.emplace_back(di[j], static_cast<int>(j));
        const std::size_t kk = std::min(k, cand.size());
        std::partial_sort(cand.begin(), cand.begin() + kk, cand.end());
        for (std::size_t b = 0; b < kk; ++b) {
          g.index[i * k + b] = cand[b].second;
          g.dist2[i * k + b] = cand[b].first;
        }
      }
    }
  };
  // Work items are groups of `group` query rows.
  return run_chunked((rows.size() + group - 1) / group, chunk_size(group * t.n * t.p, kFirstWork),
                     parallel_for, monitor, fn);
}

// Feature links in compressed form: the features linked to feature c are
// feature[start[c]] ... feature[start[c + 1] - 1], with kernel weights and slopes.
struct FeatureLinks {
  std::vector<std::size_t> start;
  std::vector<int> feature;
  std::vector<double> weight, slope;
  std::vector<double> centre, scale;  // per feature: z = (x - centre) / scale
};

struct ImputeSettings {
  KernelType kernel = KernelType::gaussian;
  bool use_sample = true, use_feature = true;
  double imputed_weight = 0.1;  // weight of current imputations inside both layers
  std::size_t nn_rank = 10;     // sample layer: h_i = distance to this candidate (1-based) ...
  double bandwidth = 0.0;       // ... or this fixed bandwidth when nn_rank == 0
  double mix = 0.5;             // share of the sample layer in the combined estimate
  std::size_t max_iter = 20;
  double tol = 1e-4;
  double scale = 1.0;           // change is measured relative to this (sd of observed values)
};

// The missing entries of the rows being imputed, in row order.
struct MissingEntries {
  std::vector<std::size_t> row_start;  // entries of row rows[r]: row_start[r] .. row_start[r+1]-1
  std::vector<std::size_t> rows;
  std::vector<int> column;
  std::size_t size() const { return column.size(); }
};

inline MissingEntries missing_entries(const IncompleteTable& t, const unsigned char* active) {
  MissingEntries m;
  m.row_start.push_back(0);
  for (std::size_t i = 0; i < t.n; ++i) {
    if (!active[i]) continue;
    for (std::size_t c = 0; c < t.p; ++c)
      if (t.observed[i * t.p + c] == 0.0) m.column.push_back(static_cast<int>(c));
    m.rows.push_back(i);
    m.row_start.push_back(m.column.size());
  }
  return m;
}

// Both layers at every missing entry from the current values x (row-major n x p) and entry
// weights a (1 observed, imputed_weight otherwise). NaN marks a layer with no information.
inline void impute_layers(const double* x, const double* a, std::size_t p,
                          const MissingEntries& miss, const RowNeighbours& g,
                          const FeatureLinks& links, const ImputeSettings& set, double* sample,
                          double* feature, const ParallelFor& parallel_for = serial_for) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> d2(g.k), w(g.k), sorted(g.k);
    for (std::size_t r = begin; r < end; ++r) {
      const std::size_t i = miss.rows[r];
      const double* xi = x + i * p;
      const double* ai = a + i * p;
      std::size_t found = 0;
      if (set.use_sample) {
        // Distances to the candidates on the current values, imputed entries down-weighted.
        for (std::size_t b = 0; b < g.k; ++b) {
          const int j = g.index[i * g.k + b];
          if (j < 0) break;
          double num, den;
          detail::pair_moments<true>(xi, ai, x + j * p, a + j * p, p, &num, &den);
          d2[b] = den > 0.0 ? static_cast<double>(p) * num / den : kInf;
          ++found;
        }
        double h2 = set.bandwidth * set.bandwidth;
        if (set.nn_rank > 0 && found > 0) {
          std::copy(d2.begin(), d2.begin() + found, sorted.begin());
          const std::size_t rank = std::min(set.nn_rank, found) - 1;
          std::nth_element(sorted.begin(), sorted.begin() + rank, sorted.begin() + found);
          h2 = sorted[rank];
        }
        listed_kernel_weights(set.kernel, d2.data(), found, h2, w.data());
      }
      const int* nb = g.index.data() + i * g.k;
      for (std::size_t e = miss.row_start[r]; e < miss.row_start[r + 1]; ++e) {
        const int c = miss.column[e];
        double s = nan, f = nan;
        if (set.use_sample) {
          // The neighbour rows' entries in column c, weighted by how much they are observed.
          s = listed_local_mean(w.data(), found,
                                [&](std::size_t b) { return a[nb[b] * p + c]; },
                                [&](std::size_t b) { return x[nb[b] * p + c]; });
        }
        if (set.use_feature) {
          // The row's standardised entries in the linked columns, times the links' slopes.
          const std::size_t l0 = links.start[c];
          const int* linked = links.feature.data() + l0;
          const double z = listed_local_mean(
              links.weight.data() + l0, links.start[c + 1] - l0,
              [&](std::size_t l) { return ai[linked[l]]; },
              [&](std::size_t l) {
                const int f2 = linked[l];
                return links.slope[l0 + l] * (xi[f2] - links.centre[f2]) / links.scale[f2];
              });
          if (!std::isnan(z)) f = links.centre[c] + links.scale[c] * z;
        }
        sample[e] = s;
        feature[e] = f;
      }
    }
  };
  parallel_for(0, miss.rows.size(), fn);
}

// The combined estimate: mix S + (1 - mix) F, the other layer alone where one has no
// information, `fallback` where neither has.
inline double combine_layers(double s, double f, double mix, double fallback) {
  const bool hs = !std::isnan(s), hf = !std::isnan(f);
  if (hs && hf) return mix * s + (1.0 - mix) * f;
  if (hs) return s;
  if (hf) return f;
  return fallback;
}

// Iterates the two layers from the current x (row-major, missing entries filled with starting
// values), updating the missing entries of the rows in `miss` in place. change[t] is the
// root-mean-square change of the missing entries at iteration t over set.scale.
inline bool impute_iterate(double* x, const double* observed, std::size_t n, std::size_t p,
                           const MissingEntries& miss, const RowNeighbours& g,
                           const FeatureLinks& links, const ImputeSettings& set,
                           std::vector<double>& change, std::vector<double>* sample_out = nullptr,
                           std::vector<double>* feature_out = nullptr,
                           const ParallelFor& parallel_for = serial_for,
                           const Monitor& monitor = {}) {
  std::vector<double> a(n * p);
  for (std::size_t k = 0; k < n * p; ++k) a[k] = observed[k] != 0.0 ? 1.0 : set.imputed_weight;
  std::vector<double> s(miss.size()), f(miss.size());
  change.clear();
  for (std::size_t it = 0; it < set.max_iter; ++it) {
    impute_layers(x, a.data(), p, miss, g, links, set, s.data(), f.data(), parallel_for);
    double ss = 0.0;
    for (std::size_t r = 0; r < miss.rows.size(); ++r) {
      const std::size_t i = miss.rows[r];
      for (std::size_t e = miss.row_start[r]; e < miss.row_start[r + 1]; ++e) {
        double& v = x[i * p + miss.column[e]];
        const double nv = combine_layers(s[e], f[e], set.mix, v);
        ss += (nv - v) * (nv - v);
        v = nv;
      }
    }
    const double rms = miss.size() ? std::sqrt(ss / static_cast<double>(miss.size())) : 0.0;
    change.push_back(rms / set.scale);
    if (monitor && !monitor(it + 1, set.max_iter)) return false;
    if (change.back() < set.tol) break;
  }
  if (sample_out) sample_out->swap(s);
  if (feature_out) feature_out->swap(f);
  return true;
}

// Spatial feature links of an image with `rows` x `cols` pixels, pixel (r, c) in feature
// r * cols + c: Gaussian kernel weights exp(-dist^2 / (2 h^2)) of the other pixels within
// `radius` (in pixels).
inline FeatureLinks spatial_links(std::size_t rows, std::size_t cols, double h, double radius,
                                  KernelType kernel = KernelType::gaussian) {
  FeatureLinks links;
  const std::size_t p = rows * cols;
  links.start.push_back(0);
  const long reach = static_cast<long>(std::floor(radius));
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      for (long dr = -reach; dr <= reach; ++dr)
        for (long dc = -reach; dc <= reach; ++dc) {
          const long r2 = static_cast<long>(r) + dr, c2 = static_cast<long>(c) + dc;
          const double dist2 = static_cast<double>(dr * dr + dc * dc);
          if ((dr == 0 && dc == 0) || r2 < 0 || c2 < 0 || r2 >= static_cast<long>(rows) ||
              c2 >= static_cast<long>(cols) || dist2 > radius * radius)
            continue;
          const double w =
              with_kernel(kernel, [&](auto k) { return decltype(k)::exact(dist2 / (h * h)); });
          if (w <= 0.0) continue;
          links.feature.push_back(static_cast<int>(r2 * static_cast<long>(cols) + c2));
          links.weight.push_back(w);
          links.slope.push_back(1.0);
        }
      links.start.push_back(links.feature.size());
    }
  links.centre.assign(p, 0.0);
  links.scale.assign(p, 1.0);
  return links;
}

// ---- Non-local means ----

struct NlmSettings {
  int half_patch = 3;    // patch (2 half_patch + 1)^2
  int half_search = 10;  // search window (2 half_search + 1)^2
  double h = 0.1;        // filtering parameter
  KernelType kernel = KernelType::gaussian;  // weights shape(2 excess / h^2), see nl_means
  double sigma = 0.0;    // noise sd: patch distances are reduced by 2 sigma^2 (Buades et al.)
};

namespace detail {

// Mirror index into [0, n) (the edge pixel is repeated: -1 -> 0, n -> n - 1).
inline long mirror(long i, long n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - i - 1;
  return i;
}

// Non-local means of image rows [r0, r1) from the mirror-padded image `pad` (row-major, row
// length wp, margin half_patch + half_search). Every pixel sums its own patch differences in a
// fixed order, so any split of the rows gives the same result. shapes(r2, len, w) gives the
// kernel's profile (GaussianRowShapes or OtherRowShapes).
template <class Shapes>
LOCALMEAN_INLINE void nlm_rows_body(const Shapes& shapes, const double* pad, std::size_t wp,
                                    std::size_t width, const NlmSettings& set, std::size_t r0,
                                    std::size_t r1, double* out) {
  const long hp = set.half_patch, hs = set.half_search, margin = hp + hs;
  const std::size_t rows = r1 - r0, drows = rows + 2 * hp, dcols = width + 2 * hp;
  const double inv_np = 1.0 / static_cast<double>((2 * hp + 1) * (2 * hp + 1));
  const double offset = 2.0 * set.sigma * set.sigma, inv_h2 = 2.0 / (set.h * set.h);
  std::vector<double> diff(drows * dcols), hsum(drows * width), num(rows * width, 0.0),
      den(rows * width, 0.0), weight(width);
  for (long dy = -hs; dy <= hs; ++dy)
    for (long dx = -hs; dx <= hs; ++dx) {
      // Squared differences over the block and its patch margin.
      for (std::size_t a = 0; a < drows; ++a) {
        const double* p0 = pad + (r0 + margin - hp + a) * wp + (margin - hp);
        const double* p1 = p0 + dy * static_cast<long>(wp) + dx;
        double* d = diff.data() + a * dcols;
        for (std::size_t b = 0; b < dcols; ++b) d[b] = (p0[b] - p1[b]) * (p0[b] - p1[b]);
      }
      // Patch sums: horizontal then vertical, each a fixed-order sum of 2 hp + 1 terms.
      for (std::size_t a = 0; a < drows; ++a) {
        const double* d = diff.data() + a * dcols;
        double* hrow = hsum.data() + a * width;
        for (std::size_t b = 0; b < width; ++b) {
          double s = 0.0;
          for (long t = 0; t <= 2 * hp; ++t) s += d[b + t];
          hrow[b] = s;
        }
      }
      for (std::size_t a = 0; a < rows; ++a) {
        const double* p1 = pad + (r0 + margin + a + dy) * wp + margin + dx;
        double* nu = num.data() + a * width;
        double* de = den.data() + a * width;
        // The row's weights together (the Gaussian's exponentials side by side: kernel_shapes).
        double* w = weight.data();
        for (std::size_t b = 0; b < width; ++b) {
          double s = 0.0;
          for (long t = 0; t <= 2 * hp; ++t) s += hsum[(a + t) * width + b];
          const double excess = std::max(0.0, s * inv_np - offset);
          w[b] = excess * inv_h2;
        }
        shapes(w, width, w);
        for (std::size_t b = 0; b < width; ++b) {
          nu[b] += w[b] * p1[b];
          de[b] += w[b];
        }
      }
    }
  for (std::size_t k = 0; k < rows * width; ++k) out[r0 * width + k] = num[k] / den[k];
}

// The profile of a row of weights: the Gaussian's inline (the default kernel, and the slowest
// profile), every other kernel's through one out-of-line loop per kernel (kernel_shapes_of()),
// shared by both builds: the rows are compiled twice per build, not once per kernel.
struct GaussianRowShapes {
  LOCALMEAN_INLINE void operator()(const double* r2, std::size_t len, double* w) const {
    kernel_shapes(Gaussian{}, r2, len, w);
  }
};
struct OtherRowShapes {
  KernelType kernel;
  LOCALMEAN_INLINE void operator()(const double* r2, std::size_t len, double* w) const {
    kernel_shapes_of(kernel, r2, len, w);
  }
};

// Non-local means of rows [r0, r1) with the settings' kernel, in the best build (simd.hpp).
inline void nlm_rows(const double* pad, std::size_t wp, std::size_t width, const NlmSettings& set,
                     std::size_t r0, std::size_t r1, double* out) {
  const auto rows_with = [&](const auto& shapes) {
    best_build([&]() LOCALMEAN_LAMBDA_INLINE {
      nlm_rows_body(shapes, pad, wp, width, set, r0, r1, out);
    });
  };
  if (set.kernel == KernelType::gaussian)
    rows_with(GaussianRowShapes{});
  else
    rows_with(OtherRowShapes{set.kernel});
}

}  // namespace detail

// Non-local means of a row-major height x width image into out (same shape). The weight of
// pixel q in the search window of pixel p is the kernel's shape(2 max(d2 - 2 sigma^2, 0) / h^2),
// d2 the mean squared difference of their patches: for the Gaussian exp(-max(...) / h^2). The
// image is mirrored at its edges. Rows go in blocks of kNlmBlockRows, which share their squared
// differences; every pixel's sums are the same whatever the block (see nlm_rows_body), so the
// block size never changes the result.
constexpr std::size_t kNlmBlockRows = 8;
inline bool nl_means(const double* img, std::size_t height, std::size_t width,
                     const NlmSettings& set, double* out,
                     const ParallelFor& parallel_for = serial_for, const Monitor& monitor = {}) {
  const long margin = set.half_patch + set.half_search;
  const std::size_t hp = height + 2 * margin, wp = width + 2 * margin;
  std::vector<double> pad(hp * wp);
  for (std::size_t r = 0; r < hp; ++r) {
    const long sr = detail::mirror(static_cast<long>(r) - margin, static_cast<long>(height));
    for (std::size_t c = 0; c < wp; ++c) {
      const long sc = detail::mirror(static_cast<long>(c) - margin, static_cast<long>(width));
      pad[r * wp + c] = img[sr * width + sc];
    }
  }
  const std::size_t block = kNlmBlockRows, nblocks = (height + block - 1) / block;
  auto fn = [&](std::size_t begin, std::size_t end) {
    for (std::size_t b = begin; b < end; ++b) {
      const std::size_t r0 = b * block, r1 = std::min(height, r0 + block);
      detail::nlm_rows(pad.data(), wp, width, set, r0, r1, out);
    }
  };
  return run_chunked(nblocks, 2, parallel_for, monitor, fn);
}

}  // namespace localmean
