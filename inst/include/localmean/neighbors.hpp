// Exact neighbour search: a kd-tree that keeps the data in tree order, so that every leaf is a
// contiguous block that the engine can sweep like a block of the exact strategy, and blocked
// brute force for high dimension, where a kd-tree visits almost every leaf. The k nearest
// neighbours (knn_graph), the distance to the k-th (knn_radius) and the nearest point
// (nearest_index) all go through nearest_neighbours(), which picks the search by dimension.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "parallel.hpp"
#include "simd.hpp"

namespace localmean {

class KdTree {
public:
  struct Node {
    std::size_t begin, end;  // the node's points: positions [begin, end) in tree order
    int left, right;         // children, -1 for a leaf
  };

  // x: n x d column-major. The tree copies the points into tree order (column-major, n x d).
  // `spread` (null: 1 each) divides each variable's width where a node chooses the variable to
  // split: a tree built once in a fixed standardisation serves every later rescale().
  KdTree(const double* x, std::size_t n, std::size_t d, std::size_t leaf_size = 32,
         const double* spread = nullptr)
      : n_(n), d_(d), leaf_size_(std::max<std::size_t>(leaf_size, 1)), order_(n),
        inv_spread_(d, 1.0) {
    if (spread)
      for (std::size_t j = 0; j < d; ++j)
        if (spread[j] > 0.0) inv_spread_[j] = 1.0 / spread[j];
    std::iota(order_.begin(), order_.end(), std::size_t(0));
    if (n > 0) build(x, 0, n);
    points_.resize(n * d);
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t i = 0; i < n; ++i) points_[j * n + i] = x[j * n + order_[i]];
  }

  // The same tree over the points x (in the caller's order, as given to the constructor) divided
  // by per-variable scales: the points and boxes are x / scale exactly as a tree built on the
  // scaled points would hold them; only the choice of split variables stays the constructor's.
  void rescale(const double* x, const double* scale) {
    if (raw_lo_.empty()) {
      raw_lo_ = lo_;
      raw_hi_ = hi_;
    }
    for (std::size_t j = 0; j < d_; ++j)
      for (std::size_t i = 0; i < n_; ++i) points_[j * n_ + i] = x[j * n_ + order_[i]] / scale[j];
    for (std::size_t k = 0; k < lo_.size(); ++k) {
      lo_[k] = raw_lo_[k] / scale[k % d_];
      hi_[k] = raw_hi_[k] / scale[k % d_];
    }
  }

  std::size_t size() const { return n_; }
  std::size_t dim() const { return d_; }
  // Original index of the point at tree position i.
  const std::vector<std::size_t>& order() const { return order_; }
  // Points in tree order, column-major n x d.
  const double* points() const { return points_.data(); }

  // Squared distance from q to the node's bounding box.
  double box_distance2(int node, const double* q) const {
    double s = 0.0;
    const double* lo = &lo_[node * d_];
    const double* hi = &hi_[node * d_];
    for (std::size_t j = 0; j < d_; ++j) {
      const double t = q[j] < lo[j] ? lo[j] - q[j] : (q[j] > hi[j] ? q[j] - hi[j] : 0.0);
      s += t * t;
    }
    return s;
  }

  // Squared distance from q to the farthest corner of the node's bounding box.
  double box_far_distance2(int node, const double* q) const {
    double s = 0.0;
    const double* lo = &lo_[node * d_];
    const double* hi = &hi_[node * d_];
    for (std::size_t j = 0; j < d_; ++j) {
      const double t = std::max(q[j] - lo[j], hi[j] - q[j]);
      s += t * t;
    }
    return s;
  }

  // Calls leaf(begin, end, near2, far2) for every leaf that may hold points within `radius` of q
  // (all leaves for an infinite radius), in a fixed (depth-first, left-first) order; near2 and
  // far2 bound the squared distances from q to the leaf's points. Nodes of at most `group`
  // points count as leaves (fewer calls, coarser pruning).
  template <class F>
  void visit_ball(const double* q, double radius, F&& leaf, std::size_t group = 0) const {
    if (n_ == 0) return;
    const double r2 = radius * radius;
    int stack[kMaxDepth];
    int top = 0;
    stack[top++] = 0;
    while (top > 0) {
      const int node = stack[--top];
      const double near2 = box_distance2(node, q);
      if (near2 > r2) continue;
      const Node& nd = nodes_[node];
      if (nd.left < 0 || nd.end - nd.begin <= group) {
        leaf(nd.begin, nd.end, near2, box_far_distance2(node, q));
      } else {
        stack[top++] = nd.right;
        stack[top++] = nd.left;
      }
    }
  }

  // Depth-first from the root, the nearer child first. node(begin, end, near2, far2) is asked
  // about every node and returns true when it has accounted for the node's points itself; the
  // other leaves reached go to leaf(begin, end, near2, far2).
  template <class N, class L>
  void visit_nearest_first(const double* q, N&& node, L&& leaf) const {
    if (n_ == 0) return;
    std::pair<double, int> stack[kMaxDepth];
    int depth = 0;
    stack[depth++] = {box_distance2(0, q), 0};
    while (depth > 0) {
      const auto top = stack[--depth];
      const Node& nd = nodes_[top.second];
      const double far2 = box_far_distance2(top.second, q);
      if (node(nd.begin, nd.end, top.first, far2)) continue;
      if (nd.left < 0) {
        leaf(nd.begin, nd.end, top.first, far2);
        continue;
      }
      const double dl = box_distance2(nd.left, q), dr = box_distance2(nd.right, q);
      if (dl <= dr) {
        stack[depth++] = {dr, nd.right};
        stack[depth++] = {dl, nd.left};
      } else {
        stack[depth++] = {dl, nd.left};
        stack[depth++] = {dr, nd.right};
      }
    }
  }

  // The k nearest points to q (k >= 1; points at distance 0 count) as (squared distance,
  // original index) pairs, nearest first; ties go to the lower index.
  std::vector<std::pair<double, std::size_t>> nearest(const double* q, std::size_t k) const {
    std::priority_queue<std::pair<double, std::size_t>> best;  // the k nearest so far
    auto beyond = [&](double near2) { return best.size() == k && near2 > best.top().first; };
    visit_nearest_first(q, [&](std::size_t, std::size_t, double near2, double) {
      return beyond(near2);
    }, [&](std::size_t begin, std::size_t end, double, double) {
      for (std::size_t i = begin; i < end; ++i) {
        double s = 0.0;
        for (std::size_t j = 0; j < d_; ++j) {
          const double t = points_[j * n_ + i] - q[j];
          s += t * t;
        }
        const std::pair<double, std::size_t> cand(s, order_[i]);
        if (best.size() < k) {
          best.push(cand);
        } else if (cand < best.top()) {
          best.pop();
          best.push(cand);
        }
      }
    });
    std::vector<std::pair<double, std::size_t>> out(best.size());
    for (std::size_t r = out.size(); r-- > 0; best.pop()) out[r] = best.top();
    return out;
  }

  // Distance from q to its k-th nearest point; `index` receives that point's original index.
  double kth_distance(const double* q, std::size_t k, std::size_t* index = nullptr) const {
    const auto best = nearest(q, k);
    if (index) *index = best.back().second;
    return std::sqrt(best.back().first);
  }

private:
  // Depth-first stacks hold at most one pending sibling per level plus the current node; the
  // tree halves every node, so its depth stays far below this bound.
  static constexpr int kMaxDepth = 256;
  std::size_t n_, d_, leaf_size_;
  std::vector<std::size_t> order_;
  std::vector<double> points_;
  std::vector<Node> nodes_;
  std::vector<double> lo_, hi_;
  std::vector<double> inv_spread_, raw_lo_, raw_hi_;  // see the constructor and rescale()

  int build(const double* x, std::size_t begin, std::size_t end) {
    const int id = static_cast<int>(nodes_.size());
    nodes_.push_back({begin, end, -1, -1});
    lo_.resize(lo_.size() + d_);
    hi_.resize(hi_.size() + d_);
    std::size_t widest = 0;
    double width = -1.0;
    for (std::size_t j = 0; j < d_; ++j) {
      double lo = x[j * n_ + order_[begin]], hi = lo;
      for (std::size_t i = begin + 1; i < end; ++i) {
        const double v = x[j * n_ + order_[i]];
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      lo_[id * d_ + j] = lo;
      hi_[id * d_ + j] = hi;
      if ((hi - lo) * inv_spread_[j] > width) {
        width = (hi - lo) * inv_spread_[j];
        widest = j;
      }
    }
    if (end - begin <= leaf_size_ || width <= 0.0) return id;
    // Left halves hold a multiple of 8 points, so that leaves fill whole blocks of the sweep.
    const std::size_t half = (end - begin) / 2;
    const std::size_t mid = begin + std::max<std::size_t>(8, (half + 4) / 8 * 8);
    const double* col = x + widest * n_;
    // Ties are broken by index so that the tree does not depend on the sort's internals.
    std::nth_element(order_.begin() + begin, order_.begin() + mid, order_.begin() + end,
                     [col](std::size_t a, std::size_t b) {
                       return col[a] < col[b] || (col[a] == col[b] && a < b);
                     });
    const int left = build(x, begin, mid);
    const int right = build(x, mid, end);
    nodes_[id].left = left;
    nodes_[id].right = right;
    return id;
  }
};

// ---------------------------------------------------------------------------------------------
// k nearest neighbours of many queries

// Dimensions up to this use the kd-tree; above it, blocked brute force. Beyond about 8 variables
// a kd-tree's bounding boxes no longer prune (most leaves lie within the k-th distance of a
// query), and the brute force, which runs at the speed of a matrix product, wins.
constexpr std::size_t kTreeMaxDim = 8;

// Candidates of one query: (squared distance, original index), nearest first.
using Candidates = std::vector<std::pair<double, std::size_t>>;

namespace detail {

inline double squared_distance(const double* x, std::size_t n, std::size_t d, std::size_t a,
                               const double* q, std::size_t m, std::size_t b) {
  double s = 0.0;
  for (std::size_t j = 0; j < d; ++j) {
    const double t = x[j * n + a] - q[j * m + b];
    s += t * t;
  }
  return s;
}

// Keeps the k smallest (value, index) pairs seen, sorted; insertion is rare once it is full.
class TopK {
public:
  explicit TopK(std::size_t k) : k_(k) { items_.reserve(k + 1); }
  void clear() { items_.clear(); }
  float bound() const {
    return items_.size() < k_ ? std::numeric_limits<float>::infinity() : items_.back().first;
  }
  void push(float value, int index) {
    const std::pair<float, int> item(value, index);
    items_.insert(std::upper_bound(items_.begin(), items_.end(), item), item);
    if (items_.size() > k_) items_.pop_back();
  }
  const std::vector<std::pair<float, int>>& items() const { return items_; }

private:
  std::size_t k_;
  std::vector<std::pair<float, int>> items_;
};

// Brute force works on panels of 8 points ([d][8] floats), groups of 4 queries ([d][4]) and at
// most kDataPanels panels at a time (their dot products stay in L1).
constexpr std::size_t kPanel = 8, kGroup = 4, kDataPanels = 32;
// Queries per work item of the brute force (they share each pass over the data).
constexpr std::size_t kQueryBlock = 128;
// Multiply-adds in the first chunk of brute-force work (about 0.05 s on one core).
constexpr double kBruteChunkWork = 2e8;
// A tree query visits about this many coordinates per neighbour and dimension: a rough guess
// that sizes only the first chunk of work (run_chunked resizes the next ones).
constexpr double kTreeWorkPerNeighbour = 64.0;
// Spare candidates kept by the brute force absorb single-precision rank swaps at the k-th place.
constexpr std::size_t kSpareCandidates = 4;

typedef float Float8 __attribute__((vector_size(32)));

// Inner products of a group of 4 queries ([d][4]) with `panels` panels of 8 points ([d][8]
// each, at most kDataPanels): out[r][c] for query r and point c, rows of kDataPanels * 8. Four
// vector accumulators stay in registers; on AVX2 every step is one load, four broadcasts, four
// FMAs.
LOCALMEAN_INLINE void group_dots_body(const float* group, const float* packed, std::size_t panels,
                                      std::size_t d, float* out) {
  constexpr std::size_t stride = kDataPanels * kPanel;
  for (std::size_t p = 0; p < panels; ++p) {
    const float* panel = packed + p * d * kPanel;
    Float8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (std::size_t j = 0; j < d; ++j) {
      Float8 v;
      std::memcpy(&v, panel + j * kPanel, sizeof v);
      const float* q = group + j * kGroup;
      a0 += q[0] * v;
      a1 += q[1] * v;
      a2 += q[2] * v;
      a3 += q[3] * v;
    }
    std::memcpy(out + p * kPanel, &a0, sizeof a0);
    std::memcpy(out + stride + p * kPanel, &a1, sizeof a1);
    std::memcpy(out + 2 * stride + p * kPanel, &a2, sizeof a2);
    std::memcpy(out + 3 * stride + p * kPanel, &a3, sizeof a3);
  }
}

inline void group_dots(const float* group, const float* packed, std::size_t panels,
                       std::size_t d, float* out) {
  best_build([&]() LOCALMEAN_LAMBDA_INLINE { group_dots_body(group, packed, panels, d, out); });
}

// The data centred and packed for the brute force, in single precision: points in panels of 8
// ([d][8] floats) with their squared norms; padding points lie infinitely far away.
struct PackedPoints {
  std::vector<double> centre;
  std::vector<float> packed, norm;
  std::size_t panels;
  PackedPoints(const double* x, std::size_t n, std::size_t d)
      : centre(d, 0.0), panels((n + kPanel - 1) / kPanel) {
    for (std::size_t j = 0; j < d; ++j) {
      for (std::size_t i = 0; i < n; ++i) centre[j] += x[j * n + i];
      centre[j] /= static_cast<double>(n);
    }
    packed.assign(panels * d * kPanel, 0.0f);
    norm.assign(panels * kPanel, std::numeric_limits<float>::infinity());
    for (std::size_t i = 0; i < n; ++i) {
      float s = 0.0f;
      for (std::size_t j = 0; j < d; ++j) {
        const float v = static_cast<float>(x[j * n + i] - centre[j]);
        packed[(i / kPanel) * d * kPanel + j * kPanel + i % kPanel] = v;
        s += v * v;
      }
      norm[i] = s;
    }
  }
};

// The `keep` nearest points of queries [q0, q0 + qn) (qn <= kQueryBlock) into top[], ranked in
// single precision (|q|^2 + |x|^2 - 2 q.x, blocked for registers and cache).
inline void brute_force_block(const PackedPoints& pts, std::size_t d, const double* queries,
                              std::size_t m, std::size_t q0, std::size_t qn,
                              std::vector<float>& group, std::vector<float>& dots,
                              std::vector<float>& qnorm, std::vector<TopK>& top) {
  for (auto& t : top) t.clear();
  for (std::size_t g0 = 0; g0 < qn; g0 += kGroup) {
    // Absent queries of a last, partial group repeat its first one and are ignored.
    for (std::size_t r = 0; r < kGroup; ++r) {
      const std::size_t i = q0 + std::min(g0 + r, qn - 1);
      float s = 0.0f;
      for (std::size_t j = 0; j < d; ++j) {
        const float v = static_cast<float>(queries[j * m + i] - pts.centre[j]);
        group[j * kGroup + r] = v;
        s += v * v;
      }
      if (g0 + r < qn) qnorm[g0 + r] = s;
    }
    const std::size_t rows = std::min(kGroup, qn - g0);
    for (std::size_t p0 = 0; p0 < pts.panels; p0 += kDataPanels) {
      const std::size_t pn = std::min(kDataPanels, pts.panels - p0);
      group_dots(group.data(), &pts.packed[p0 * d * kPanel], pn, d, dots.data());
      const float* xn = &pts.norm[p0 * kPanel];
      for (std::size_t r = 0; r < rows; ++r) {
        TopK& t = top[g0 + r];
        float bound = t.bound();
        const float* dr = &dots[r * kDataPanels * kPanel];
        for (std::size_t c = 0; c < pn * kPanel; ++c) {
          const float d2 = qnorm[g0 + r] + xn[c] - 2.0f * dr[c];
          if (d2 < bound) {
            t.push(d2, static_cast<int>(p0 * kPanel + c));
            bound = t.bound();
          }
        }
      }
    }
  }
}

}  // namespace detail

// Calls found(i, best) for every query i (queries m x d and data x n x d, column-major) with its
// `want` nearest data points (fewer when n < want), nearest first by exact double-precision
// distance, ties by index. found() runs on worker threads and must touch only query i's output.
// The kd-tree serves up to kTreeMaxDim variables; above, brute force ranks candidates in single
// precision, keeping kSpareCandidates more than wanted, then computes their exact distances.
// Every query is processed on its own, in blocks fixed by its position, so results do not depend
// on threads. Progress is reported in queries.
template <class Found>
bool nearest_neighbours(const double* x, std::size_t n, std::size_t d, const double* queries,
                        std::size_t m, std::size_t want, Found&& found,
                        const ParallelFor& parallel_for = serial_for,
                        const Monitor& monitor = {}) {
  if (d <= kTreeMaxDim) {
    const KdTree tree(x, n, d);
    auto fn = [&](std::size_t begin, std::size_t end) {
      std::vector<double> q(d);
      for (std::size_t i = begin; i < end; ++i) {
        for (std::size_t j = 0; j < d; ++j) q[j] = queries[j * m + i];
        found(i, tree.nearest(q.data(), want));
      }
    };
    return run_chunked(m, chunk_size(detail::kTreeWorkPerNeighbour * want * d), parallel_for,
                       monitor, fn);
  }
  using detail::kDataPanels;
  using detail::kGroup;
  using detail::kPanel;
  using detail::kQueryBlock;
  const detail::PackedPoints pts(x, n, d);
  const std::size_t keep = std::min(n, want + detail::kSpareCandidates);
  const std::size_t blocks = (m + kQueryBlock - 1) / kQueryBlock;
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<float> group(d * kGroup), dots(kGroup * kDataPanels * kPanel), qnorm(kQueryBlock);
    std::vector<detail::TopK> top(kQueryBlock, detail::TopK(keep));
    Candidates best;
    for (std::size_t b = begin; b < end; ++b) {
      const std::size_t q0 = b * kQueryBlock, qn = std::min(kQueryBlock, m - q0);
      detail::brute_force_block(pts, d, queries, m, q0, qn, group, dots, qnorm, top);
      for (std::size_t r = 0; r < qn; ++r) {
        best.clear();
        for (const auto& c : top[r].items())
          best.emplace_back(detail::squared_distance(x, n, d, c.second, queries, m, q0 + r),
                            static_cast<std::size_t>(c.second));
        std::sort(best.begin(), best.end());
        if (best.size() > want) best.resize(want);
        found(q0 + r, best);
      }
    }
  };
  const Monitor in_queries = [&](std::size_t done, std::size_t) {
    return !monitor || monitor(std::min(m, done * kQueryBlock), m);
  };
  const double per_block = static_cast<double>(kQueryBlock) * n * d;
  return run_chunked(blocks,
                     static_cast<std::size_t>(std::max(1.0, detail::kBruteChunkWork / std::max(per_block, 1.0))),
                     parallel_for, in_queries, fn);
}

// Row-major n x k neighbour indices (0-based) and distances, nearest first, ties by index.
struct KnnGraph {
  std::size_t n = 0, k = 0;
  std::vector<int> index;
  std::vector<double> dist;
};

// The k nearest data points of every query: queries (m x d) and data (n x d) column-major; when
// `self` is true the queries are the data and each point is left out of its own list.
inline bool knn_graph(const double* x, std::size_t n, std::size_t d, const double* queries,
                      std::size_t m, std::size_t k, bool self, KnnGraph& out,
                      const ParallelFor& parallel_for = serial_for, const Monitor& monitor = {}) {
  out.n = m;
  out.k = k;
  out.index.assign(m * k, 0);
  out.dist.assign(m * k, 0.0);
  // Writes query i's list, dropping the query itself (or, when it ties with duplicates beyond
  // the list, the last candidate: a self query always asks for k + 1).
  auto store = [&](std::size_t i, const Candidates& best) {
    std::size_t r = 0;
    for (const auto& c : best) {
      if (r == k) break;
      if (self && c.second == i) continue;
      out.index[i * k + r] = static_cast<int>(c.second);
      out.dist[i * k + r] = std::sqrt(c.first);
      ++r;
    }
  };
  return nearest_neighbours(x, n, d, queries, m, k + (self ? 1 : 0), store, parallel_for,
                            monitor);
}

// Distance from every query to its k-th nearest data point (the nn(k) bandwidth; the farthest
// point when k > n).
inline bool knn_radius(const double* x, std::size_t n, std::size_t d, const double* queries,
                       std::size_t m, std::size_t k, double* radius,
                       const ParallelFor& parallel_for = serial_for, const Monitor& monitor = {}) {
  auto store = [&](std::size_t i, const Candidates& best) {
    radius[i] = std::sqrt(best.back().first);
  };
  return nearest_neighbours(x, n, d, queries, m, k, store, parallel_for, monitor);
}

// Distances within this relative gap of the nearest of their group count as one distance (a
// tie up to the rounding of scaled coordinates).
constexpr double kTieTolerance = 1e-9;

// Radius of the ball about every query that holds its k nearest data points and reaches the
// `distinct`-th different distance from it (groups of distances within kTieTolerance count as
// one): the k-th distance, or, where the data are tied, the first distance of that group times
// (1 + slack) (slack >= kTieTolerance takes in the whole group); infinite when the data have
// fewer different distances. Queries short of `distinct` groups among their `want` nearest
// points ask again with twice as many, until the data run out.
inline bool knn_distinct_radius(const double* x, std::size_t n, std::size_t d,
                                const double* queries, std::size_t m, std::size_t k,
                                std::size_t distinct, double slack, double* radius,
                                const ParallelFor& parallel_for = serial_for,
                                const Monitor& monitor = {}) {
  const double tie2 = (1.0 + kTieTolerance) * (1.0 + kTieTolerance);
  std::vector<std::size_t> pending(m);
  std::iota(pending.begin(), pending.end(), std::size_t(0));
  std::vector<char> unresolved(m);
  std::vector<double> sub;
  std::size_t want = k;
  bool first = true;
  while (!pending.empty()) {
    const std::size_t p = pending.size();
    sub.resize(p * d);
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t r = 0; r < p; ++r) sub[j * p + r] = queries[j * m + pending[r]];
    auto store = [&](std::size_t r, const Candidates& best) {
      const double kth = std::sqrt(best[std::min(k, best.size()) - 1].first);
      double group = -1.0;  // squared distance of the current group's nearest point
      std::size_t count = 0;
      for (std::size_t a = 0; a < best.size() && count < distinct; ++a) {
        if (count == 0 || best[a].first > group * tie2) {
          group = best[a].first;
          ++count;
        }
      }
      const bool found = count == distinct;
      const bool exhausted = best.size() < want || want >= n;
      unresolved[r] = !found && !exhausted;
      const double level = std::sqrt(group);
      radius[pending[r]] = !found ? std::numeric_limits<double>::infinity()
                                  : (level > kth ? level * (1.0 + slack) : kth);
    };
    // Later passes (tied data only) report the progress as complete and still poll interrupts.
    const Monitor later = [&](std::size_t, std::size_t) { return !monitor || monitor(m, m); };
    if (!nearest_neighbours(x, n, d, sub.data(), p, want, store, parallel_for,
                            first ? monitor : later))
      return false;
    std::size_t kept = 0;
    for (std::size_t r = 0; r < p; ++r)
      if (unresolved[r]) pending[kept++] = pending[r];
    pending.resize(kept);
    want = std::min(n, 2 * want);
    first = false;
  }
  return true;
}

// Original index of the nearest data point of every query (the lower index among ties).
inline bool nearest_index(const double* x, std::size_t n, std::size_t d, const double* queries,
                          std::size_t m, std::size_t* index,
                          const ParallelFor& parallel_for = serial_for,
                          const Monitor& monitor = {}) {
  auto store = [&](std::size_t i, const Candidates& best) { index[i] = best.front().second; };
  return nearest_neighbours(x, n, d, queries, m, 1, store, parallel_for, monitor);
}

}  // namespace localmean
