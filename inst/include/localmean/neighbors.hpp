// Exact neighbour search: a kd-tree that keeps the data in tree order, so that every leaf is a
// contiguous block that the engine can sweep like a block of the exact strategy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

namespace localmean {

class KdTree {
public:
  struct Node {
    std::size_t begin, end;  // the node's points: positions [begin, end) in tree order
    int left, right;         // children, -1 for a leaf
  };

  // x: n x d column-major. The tree copies the points into tree order (column-major, n x d).
  KdTree(const double* x, std::size_t n, std::size_t d, std::size_t leaf_size = 32)
      : n_(n), d_(d), leaf_size_(std::max<std::size_t>(leaf_size, 1)), order_(n) {
    std::iota(order_.begin(), order_.end(), std::size_t(0));
    if (n > 0) build(x, 0, n);
    points_.resize(n * d);
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t i = 0; i < n; ++i) points_[j * n + i] = x[j * n + order_[i]];
  }

  std::size_t size() const { return n_; }
  std::size_t dim() const { return d_; }
  // Original index of the point at tree position i.
  const std::vector<std::size_t>& order() const { return order_; }
  // Points in tree order, column-major n x d.
  const double* points() const { return points_.data(); }
  const std::vector<Node>& nodes() const { return nodes_; }

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
      if (hi - lo > width) {
        width = hi - lo;
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

}  // namespace localmean
