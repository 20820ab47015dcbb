// Embeddings: principal components, locally linear embedding (every
// point a local mean of its neighbours with least-squares weights) and the triplet optimiser
// shared by TriMap and ordinal embedding (hyperkernels on triplets). Needs Eigen and Spectra.
#pragma once

#include <Eigen/Dense>
#include <Eigen/Sparse>
#include <Spectra/SymEigsShiftSolver.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "neighbors.hpp"

namespace localmean {

// ---------------------------------------------------------------------------------------------
// Neighbourhood agreement between data and layout (the quality measures of an embedding)

// For every point i of `rows`, against all n points (i itself excluded, ties ranked by index):
// the excess ranks sum max(rank - k, 0) in the data of its k layout neighbours (trustworthiness)
// and in the layout of its k data neighbours (continuity), how many of the two neighbour lists
// agree, and its k layout neighbours, nearest first (row-major). Exact distances.
struct RankAgreement {
  std::vector<double> data_excess, layout_excess;
  std::vector<int> shared, layout_nn;
};

namespace detail {

constexpr std::size_t kRankBlock = 8;
typedef double Double4 __attribute__((vector_size(32)));

// Squared distances from kRankBlock points of x (n x d, column-major; their coordinates in
// `centres`, [d][8]) to all points, out[l][b] (n x 8). Tiles of 256 points keep the
// accumulators in L1; each coordinate of a point is loaded once for the whole block.
LOCALMEAN_INLINE void block_distances_body(const double* x, std::size_t n, std::size_t d,
                                           const double* centres, double* out) {
  constexpr std::size_t kTile = 256;
  std::fill(out, out + n * kRankBlock, 0.0);
  for (std::size_t l0 = 0; l0 < n; l0 += kTile) {
    const std::size_t l1 = std::min(n, l0 + kTile);
    for (std::size_t j = 0; j < d; ++j) {
      const double* col = x + j * n;
      Double4 c0, c1;
      std::memcpy(&c0, centres + j * kRankBlock, sizeof c0);
      std::memcpy(&c1, centres + j * kRankBlock + 4, sizeof c1);
      for (std::size_t l = l0; l < l1; ++l) {
        double* o = out + l * kRankBlock;
        Double4 a0, a1;
        std::memcpy(&a0, o, sizeof a0);
        std::memcpy(&a1, o + 4, sizeof a1);
        const Double4 t0 = col[l] - c0, t1 = col[l] - c1;
        a0 += t0 * t0;
        a1 += t1 * t1;
        std::memcpy(o, &a0, sizeof a0);
        std::memcpy(o + 4, &a1, sizeof a1);
      }
    }
  }
}

// Squared distances from the points ids[0..8) to all points, out[l][b].
inline void block_distances(const double* x, std::size_t n, std::size_t d, const int* ids,
                            std::vector<double>& centres, std::vector<double>& out) {
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t b = 0; b < kRankBlock; ++b) centres[j * kRankBlock + b] = x[j * n + ids[b]];
  best_build([&]() LOCALMEAN_LAMBDA_INLINE {
    block_distances_body(x, n, d, centres.data(), out.data());
  });
}

// Column b of a block of distances, with the point itself at +inf (nobody's neighbour).
inline void distances_of(const std::vector<double>& block, std::size_t b, std::size_t self,
                         std::vector<double>& out) {
  for (std::size_t l = 0; l < out.size(); ++l) out[l] = block[l * kRankBlock + b];
  out[self] = std::numeric_limits<double>::infinity();
}

// The k nearest by (distance, index), nearest first.
inline void nearest_by_rank(const std::vector<double>& d2, std::size_t k, std::vector<int>& order,
                            std::vector<int>& out) {
  auto before = [&d2](int a, int b) { return d2[a] < d2[b] || (d2[a] == d2[b] && a < b); };
  std::iota(order.begin(), order.end(), 0);
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  out.assign(order.begin(), order.begin() + k);
  std::sort(out.begin(), out.end(), before);
}

// Sum over `points` outside `own` of (their rank by d2) - k; ranks start at 1.
inline double excess_rank(const std::vector<double>& d2, const std::vector<int>& points,
                          const std::vector<int>& own, std::size_t k) {
  double excess = 0.0;
  for (int j : points) {
    if (std::find(own.begin(), own.end(), j) != own.end()) continue;
    std::size_t rank = 1;
    for (std::size_t l = 0; l < d2.size(); ++l)
      rank += d2[l] < d2[j] || (d2[l] == d2[j] && static_cast<int>(l) < j);
    excess += static_cast<double>(rank - k);
  }
  return excess;
}

}  // namespace detail

inline bool rank_agreement(const double* x, std::size_t d, const double* y, std::size_t p,
                           std::size_t n, const std::vector<int>& rows, std::size_t k,
                           RankAgreement& out, const ParallelFor& parallel_for = serial_for,
                           const Monitor& monitor = {}) {
  const std::size_t m = rows.size();
  out.data_excess.assign(m, 0.0);
  out.layout_excess.assign(m, 0.0);
  out.shared.assign(m, 0);
  out.layout_nn.assign(m * k, 0);
  // Blocks of 8 rows; a last, partial block repeats its last row and ignores the copies.
  const std::size_t blocks = (m + detail::kRankBlock - 1) / detail::kRankBlock;
  auto fn = [&](std::size_t begin, std::size_t end) {
    using detail::kRankBlock;
    std::vector<double> bx(n * kRankBlock), by(n * kRankBlock), cx(d * kRankBlock),
        cy(p * kRankBlock), dx(n), dy(n);
    std::vector<int> order(n), nx, ny, ids(kRankBlock);
    for (std::size_t blk = begin; blk < end; ++blk) {
      const std::size_t r0 = blk * kRankBlock, rn = std::min(kRankBlock, m - r0);
      for (std::size_t b = 0; b < kRankBlock; ++b) ids[b] = rows[r0 + std::min(b, rn - 1)];
      detail::block_distances(x, n, d, ids.data(), cx, bx);
      detail::block_distances(y, n, p, ids.data(), cy, by);
      for (std::size_t b = 0; b < rn; ++b) {
        const std::size_t r = r0 + b;
        detail::distances_of(bx, b, ids[b], dx);
        detail::distances_of(by, b, ids[b], dy);
        detail::nearest_by_rank(dx, k, order, nx);
        detail::nearest_by_rank(dy, k, order, ny);
        out.data_excess[r] = detail::excess_rank(dx, ny, nx, k);
        out.layout_excess[r] = detail::excess_rank(dy, nx, ny, k);
        for (int j : ny) out.shared[r] += std::find(nx.begin(), nx.end(), j) != nx.end();
        std::copy(ny.begin(), ny.end(), out.layout_nn.begin() + r * k);
      }
    }
  };
  const Monitor in_rows = [&](std::size_t done, std::size_t) {
    return !monitor || monitor(std::min(m, done * detail::kRankBlock), m);
  };
  return run_chunked(blocks, chunk_size(n * (d + p)), parallel_for, in_rows, fn);
}

// ---------------------------------------------------------------------------------------------
// Principal components

// The leading `ndim` principal axes of x (n x d, column-major): the centre (d), the axes
// (d x ndim, column-major) and the variances along them. The covariance is formed column block
// by column block, each block on its own, so the result does not depend on threads.
struct Principal {
  std::vector<double> centre, axes, variance;
};

// Returns false, with `out` incomplete, if the monitor stopped it.
inline bool principal_axes(const double* x, std::size_t n, std::size_t d, std::size_t ndim,
                           Principal& out, const ParallelFor& parallel_for = serial_for,
                           const Monitor& monitor = {}) {
  out.centre.assign(d, 0.0);
  for (std::size_t j = 0; j < d; ++j) {
    for (std::size_t i = 0; i < n; ++i) out.centre[j] += x[j * n + i];
    out.centre[j] /= static_cast<double>(n);
  }
  Eigen::MatrixXf xc(n, d);
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t i = 0; i < n; ++i) xc(i, j) = static_cast<float>(x[j * n + i] - out.centre[j]);
  Eigen::MatrixXd cov(d, d);
  constexpr std::size_t kCols = 32;
  // The first chunk holds two blocks, one per thread of a typical machine.
  const bool done = run_chunked(
      (d + kCols - 1) / kCols, 2, parallel_for, monitor, [&](std::size_t begin, std::size_t end) {
        for (std::size_t b = begin; b < end; ++b) {
          const std::size_t c0 = b * kCols, cn = std::min(kCols, d - c0);
          const Eigen::MatrixXf part = xc.transpose() * xc.middleCols(c0, cn);
          cov.middleCols(c0, cn) =
              part.cast<double>() / static_cast<double>(std::max<std::size_t>(n - 1, 1));
        }
      });
  if (!done) return false;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);
  out.axes.resize(d * ndim);
  out.variance.resize(ndim);
  for (std::size_t a = 0; a < ndim; ++a) {
    const Eigen::Index col = static_cast<Eigen::Index>(d - 1 - a);  // eigenvalues ascend
    out.variance[a] = std::max(0.0, eig.eigenvalues()[col]);
    // Sign convention: the largest loading of each axis is positive.
    Eigen::Index arg;
    eig.eigenvectors().col(col).cwiseAbs().maxCoeff(&arg);
    const double sign = eig.eigenvectors()(arg, col) < 0 ? -1.0 : 1.0;
    for (std::size_t j = 0; j < d; ++j) out.axes[a * d + j] = sign * eig.eigenvectors()(j, col);
  }
  return true;
}

// Scores (m x ndim, column-major) of points x (m x d) on the principal axes, in blocks of rows
// between which the monitor may stop the work (then `out` is incomplete and false returned).
// Every score sums over the variables in their order, so the blocks never change a result.
inline bool principal_scores(const Principal& pc, const double* x, std::size_t m, std::size_t d,
                             std::vector<double>& out,
                             const ParallelFor& parallel_for = serial_for,
                             const Monitor& monitor = {}) {
  const std::size_t ndim = pc.variance.size();
  constexpr std::size_t kRows = 256;
  out.assign(m * ndim, 0.0);
  return run_chunked(
      (m + kRows - 1) / kRows, chunk_size(kRows * d * ndim, 5e7), parallel_for, monitor,
      [&](std::size_t begin, std::size_t end) {
        std::vector<double> centred(kRows);
        for (std::size_t b = begin; b < end; ++b) {
          const std::size_t r0 = b * kRows, rn = std::min(kRows, m - r0);
          for (std::size_t j = 0; j < d; ++j) {
            const double* xj = x + j * m + r0;
            for (std::size_t i = 0; i < rn; ++i) centred[i] = xj[i] - pc.centre[j];
            for (std::size_t a = 0; a < ndim; ++a) {
              const double w = pc.axes[a * d + j];
              double* oa = out.data() + a * m + r0;
              for (std::size_t i = 0; i < rn; ++i) oa[i] += centred[i] * w;
            }
          }
        }
      });
}

// ---------------------------------------------------------------------------------------------
// Locally linear embedding

// Reconstruction weights of every query from its k neighbours in the data (row-major m x k,
// rows summing to 1): w minimises |q - sum_j w_j x_j|^2 subject to sum w = 1, through the local
// Gram matrix C = Z Z' (Z: neighbours minus q) regularised by reg * trace(C), or by reg alone
// when C vanishes (all neighbours on q), which keeps duplicated points solvable.
inline bool lle_weights(const double* x, std::size_t n, std::size_t d, const double* queries,
                        std::size_t m, const KnnGraph& graph, double reg, double* weights,
                        const ParallelFor& parallel_for = serial_for,
                        const Monitor& monitor = {}) {
  const std::size_t k = graph.k;
  // One solve costs about k^2 (d + k) operations.
  return run_chunked(m, chunk_size(k * k * (d + k)), parallel_for, monitor,
                     [&](std::size_t begin, std::size_t end) {
    Eigen::MatrixXd z(k, d), gram(k, k);
    const Eigen::VectorXd ones = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(k));
    for (std::size_t i = begin; i < end; ++i) {
      for (std::size_t r = 0; r < k; ++r) {
        const std::size_t nb = static_cast<std::size_t>(graph.index[i * k + r]);
        for (std::size_t j = 0; j < d; ++j) z(r, j) = x[j * n + nb] - queries[j * m + i];
      }
      gram.noalias() = z * z.transpose();
      const double trace = gram.trace();
      gram.diagonal().array() += trace > 0.0 ? reg * trace : reg;
      Eigen::VectorXd w = gram.ldlt().solve(ones);
      w /= w.sum();
      for (std::size_t r = 0; r < k; ++r) weights[i * k + r] = w[r];
    }
  });
}

// Thrown through Spectra when the monitor stops an eigen-solve.
struct SolveStopped {};

// (M - sigma I)^{-1} v for Spectra's shift-and-invert mode, by a sparse Cholesky factorisation.
// Every product (one per Lanczos step) first asks the monitor whether to go on.
class SparseShiftSolve {
public:
  SparseShiftSolve(const Eigen::SparseMatrix<double>& mat, const Monitor& monitor)
      : mat_(mat), monitor_(monitor) {}
  Eigen::Index rows() const { return mat_.rows(); }
  Eigen::Index cols() const { return mat_.cols(); }
  void set_shift(double sigma) {
    Eigen::SparseMatrix<double> identity(mat_.rows(), mat_.cols());
    identity.setIdentity();
    solver_.compute(mat_ - sigma * identity);
    ok_ = solver_.info() == Eigen::Success;
  }
  bool ok() const { return ok_; }
  void perform_op(const double* in, double* out) const {
    if (monitor_ && !monitor_(0, 0)) throw SolveStopped();
    const Eigen::Map<const Eigen::VectorXd> v(in, mat_.rows());
    Eigen::Map<Eigen::VectorXd>(out, mat_.rows()) = solver_.solve(v);
  }

private:
  const Eigen::SparseMatrix<double>& mat_;
  const Monitor& monitor_;
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> solver_;
  bool ok_ = false;
};

struct LleResult {
  std::vector<double> layout;      // n x ndim, column-major
  std::vector<double> eigenvalues;  // ndim + 1, the first belongs to the constant vector
  bool converged = false;
  bool stopped = false;  // by the monitor
};

// Shift-and-invert settings of lle_layout. Shifts are in units of the mean diagonal of M: the
// smallest first (nearest the bottom eigenvalues, so the fastest convergence), then a hundred
// times larger while the factorisation or the Lanczos iterations fail.
constexpr double kFirstShift = 1e-10, kLastShift = 1e-4, kShiftGrowth = 100.0;
constexpr int kLanczosMaxIter = 1000;
constexpr double kLanczosTol = 1e-10;
// Lanczos basis size: Spectra's minimum 2 nev + 1, but at least 20, which converges in fewer
// restarts for the few vectors an embedding needs.
constexpr Eigen::Index kMinLanczosBasis = 20;

// The bottom eigenvectors of M = (I - W)'(I - W) for the reconstruction weights W of the data on
// their own neighbours: the constant vector is dropped, the next ndim are the layout. Solved by
// Lanczos iterations in shift-and-invert mode (Spectra) about a small negative shift, where
// M - sigma I is positive definite.
inline LleResult lle_layout(const KnnGraph& graph, const double* weights, std::size_t ndim,
                            const Monitor& monitor = {}) {
  const std::size_t n = graph.n, k = graph.k;
  std::vector<Eigen::Triplet<double>> entries;
  entries.reserve(n * (k + 1));
  for (std::size_t i = 0; i < n; ++i) {
    entries.emplace_back(static_cast<int>(i), static_cast<int>(i), 1.0);
    for (std::size_t r = 0; r < k; ++r)
      entries.emplace_back(static_cast<int>(i), graph.index[i * k + r], -weights[i * k + r]);
  }
  Eigen::SparseMatrix<double> residual(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  residual.setFromTriplets(entries.begin(), entries.end());
  const Eigen::SparseMatrix<double> mat = Eigen::SparseMatrix<double>(residual.transpose()) * residual;
  const double scale = mat.diagonal().mean();
  LleResult out;
  const Eigen::Index nev = static_cast<Eigen::Index>(ndim + 1);
  const Eigen::Index ncv = std::min<Eigen::Index>(static_cast<Eigen::Index>(n),
                                                  std::max(2 * nev + 1, kMinLanczosBasis));
  for (double shift = kFirstShift; shift <= kLastShift && !out.converged; shift *= kShiftGrowth) {
    SparseShiftSolve op(mat, monitor);
    Spectra::SymEigsShiftSolver<double, Spectra::LARGEST_MAGN, SparseShiftSolve> eigs(
        &op, nev, ncv, -shift * scale);
    if (!op.ok()) continue;
    eigs.init();
    try {
      eigs.compute(kLanczosMaxIter, kLanczosTol, Spectra::SMALLEST_ALGE);
    } catch (const SolveStopped&) {
      out.stopped = true;
      return out;
    }
    if (eigs.info() != Spectra::SUCCESSFUL) continue;
    const Eigen::VectorXd values = eigs.eigenvalues();
    const Eigen::MatrixXd vectors = eigs.eigenvectors();
    out.eigenvalues.assign(values.data(), values.data() + values.size());
    out.layout.resize(n * ndim);
    for (std::size_t a = 0; a < ndim; ++a) {
      // Sign convention: the largest coordinate of each axis is positive.
      Eigen::Index arg;
      vectors.col(a + 1).cwiseAbs().maxCoeff(&arg);
      const double sign = vectors(arg, a + 1) < 0 ? -1.0 : 1.0;
      for (std::size_t i = 0; i < n; ++i) out.layout[a * n + i] = sign * vectors(i, a + 1);
    }
    out.converged = true;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Triplets: TriMap's sampling and the optimiser shared with ordinal embedding

// SplitMix64: a small generator seeded per anchor point, so that sampling does not depend on how
// the points are spread over threads.
class SplitMix {
public:
  SplitMix(std::uint64_t seed, std::uint64_t stream) : state_(seed ^ (stream * 0x9E3779B97F4A7C15ULL)) {
    next();
  }
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

private:
  std::uint64_t state_;
};

struct TripletSet {
  std::vector<int> triplets;  // 3 x T, column-major: (anchor, closer, farther)
  std::vector<double> weights;
  std::size_t size() const { return weights.size(); }
};

struct TrimapSettings {
  std::size_t n_inliers = 12, n_outliers = 4, n_random = 3;
  double weight_temp = 0.5;
  std::uint64_t seed = 1;
};

// TriMap's triplets (Amid and Warmuth 2019) from the data x (n x d) and its neighbour graph:
// scales sigma_i (mean distance to the 4th-6th neighbours), similarities on the scaled squared
// distances d2_ij / (sigma_i sigma_j), the n_inliers most similar neighbours of every anchor, each
// with n_outliers uniform non-neighbours, and n_random uniform pairs per anchor; log-weights
// sd2_ik - sd2_ij (random ones times 0.1) with every triplet ordered so that the weight is
// positive, shifted to start at 0 and passed through the tempered log with temperature t.
// Returns false, with `out` incomplete, if the monitor stopped it.
inline bool trimap_triplets(const double* x, std::size_t n, std::size_t d, const KnnGraph& graph,
                            const TrimapSettings& set, TripletSet& out,
                            const ParallelFor& parallel_for = serial_for,
                            const Monitor& monitor = {}) {
  // TriMap's constants: sigma_i averages the distances to the 4th-6th points of a list that
  // starts with the point itself, positions [kSigmaFrom, kSigmaTo) of our list without it,
  // floored at kMinSigma; random triplets weigh kRandomWeight; the tempered log is the plain
  // log within kLogTemperature of t = 1.
  constexpr std::size_t kSigmaFrom = 2, kSigmaTo = 5;
  constexpr double kMinSigma = 1e-10, kRandomWeight = 0.1, kLogTemperature = 1e-5;
  const std::size_t ke = graph.k, m = set.n_inliers, o = set.n_outliers, r = set.n_random;
  std::vector<double> sig(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t lo = std::min(kSigmaFrom, ke - 1), hi = std::min(kSigmaTo, ke);
    double s = 0.0;
    for (std::size_t c = lo; c < hi; ++c) s += graph.dist[i * ke + c];
    sig[i] = std::max(s / static_cast<double>(hi - lo), kMinSigma);
  }
  auto scaled_d2 = [&](std::size_t a, std::size_t b) {
    return detail::squared_distance(x, n, d, a, x, n, b) / (sig[a] * sig[b]);
  };
  const std::size_t per_anchor = m * o + r;
  out.triplets.resize(3 * n * per_anchor);
  out.weights.resize(n * per_anchor);
  // An anchor costs about a sort of its ke neighbours and per_anchor distances.
  const bool done = run_chunked(n, chunk_size(ke * 8 + per_anchor * d), parallel_for, monitor,
                                [&](std::size_t begin, std::size_t end) {
    std::vector<std::pair<double, int>> ranked(ke);
    std::vector<int> rejects, picked;
    for (std::size_t i = begin; i < end; ++i) {
      for (std::size_t c = 0; c < ke; ++c) {
        const double dist = graph.dist[i * ke + c];
        const int nb = graph.index[i * ke + c];
        ranked[c] = {dist * dist / (sig[i] * sig[nb]), nb};
      }
      std::sort(ranked.begin(), ranked.end());
      rejects.assign(1, static_cast<int>(i));
      for (std::size_t c = 0; c < m; ++c) rejects.push_back(ranked[c].second);
      std::sort(rejects.begin(), rejects.end());
      SplitMix rng(set.seed, i);
      auto put = [&](std::size_t t, int a, int b, double w) {
        const bool flip = w < 0;
        out.triplets[3 * t] = static_cast<int>(i);
        out.triplets[3 * t + 1] = flip ? b : a;
        out.triplets[3 * t + 2] = flip ? a : b;
        out.weights[t] = std::abs(w);
      };
      std::size_t t = i * per_anchor;
      for (std::size_t c = 0; c < m; ++c) {
        picked.clear();
        while (picked.size() < o) {
          const int cand = static_cast<int>(rng.below(n));
          if (std::binary_search(rejects.begin(), rejects.end(), cand) ||
              std::find(picked.begin(), picked.end(), cand) != picked.end())
            continue;
          picked.push_back(cand);
          put(t++, ranked[c].second, cand, scaled_d2(i, cand) - ranked[c].first);
        }
      }
      for (std::size_t c = 0; c < r; ++c) {
        std::size_t a, b;
        do a = rng.below(n); while (a == i);
        do b = rng.below(n); while (b == i || b == a);
        put(t++, static_cast<int>(a), static_cast<int>(b),
            kRandomWeight * (scaled_d2(i, b) - scaled_d2(i, a)));
      }
    }
  });
  if (!done) return false;
  const double lowest = *std::min_element(out.weights.begin(), out.weights.end());
  const double t = set.weight_temp;
  for (double& w : out.weights) {
    const double v = 1.0 + w - lowest;
    w = std::abs(t - 1.0) < kLogTemperature ? std::log(v)
                                             : (std::pow(v, 1.0 - t) - 1.0) / (1.0 - t);
  }
  return true;
}

enum class TripletLoss {
  trimap,  // w * s_ik / (s_ij + s_ik), Student-t similarities s = 1 / (1 + |y_a - y_b|^2)
  tste     // -w * log(s_ij / (s_ij + s_ik)) (t-STE with one degree of freedom)
};

struct TripletSettings {
  TripletLoss loss = TripletLoss::trimap;
  double lr = 0.1;       // step size (TriMap scales it by n / T before the call)
  std::size_t n_iters = 400;
  double l2 = 0.0;       // penalty l2 * |Y|^2 on the layout
  std::size_t switch_iter = 250;  // momentum 0.5 before, 0.8 after
};

struct TripletTrace {
  std::vector<double> loss;  // mean weighted loss at every iteration
  double violated = 0.0;     // share of triplets with the farther point nearer, at the end
};

namespace detail {

// Gradient of the summed triplet loss at y (n x ndim, column-major) over triplets [begin, end),
// added into grad; returns the summed loss and counts the violated triplets.
inline double triplet_gradient(const std::vector<double>& y, std::size_t n, std::size_t ndim,
                               const int* tri, const double* w, std::size_t begin,
                               std::size_t end, TripletLoss loss, double* grad,
                               std::size_t* violated) {
  double total = 0.0;
  double yij[8], yik[8];
  for (std::size_t t = begin; t < end; ++t) {
    const std::size_t i = tri[3 * t], j = tri[3 * t + 1], k = tri[3 * t + 2];
    double a = 1.0, b = 1.0;  // 1 + squared distances to the closer and the farther point
    for (std::size_t c = 0; c < ndim; ++c) {
      yij[c] = y[c * n + i] - y[c * n + j];
      yik[c] = y[c * n + i] - y[c * n + k];
      a += yij[c] * yij[c];
      b += yik[c] * yik[c];
    }
    if (a > b) ++*violated;
    double gs, go;  // d loss / d y_ij and d loss / d y_ik, per unit vector
    if (loss == TripletLoss::trimap) {
      total += w[t] * a / (a + b);
      const double f = 2.0 * w[t] / ((a + b) * (a + b));
      gs = f * b;
      go = -f * a;
    } else {
      total += w[t] * (std::log(a + b) - std::log(b));
      gs = 2.0 * w[t] / (a + b);
      go = 2.0 * w[t] * (1.0 / (a + b) - 1.0 / b);
    }
    for (std::size_t c = 0; c < ndim; ++c) {
      grad[c * n + i] += gs * yij[c] + go * yik[c];
      grad[c * n + j] -= gs * yij[c];
      grad[c * n + k] -= go * yik[c];
    }
  }
  return total;
}

}  // namespace detail

// Full-batch delta-bar-delta descent with momentum (TriMap's optimiser): the gradient at
// y + gamma * v, per-coordinate gains that grow by 0.2 while the direction holds and shrink by
// 0.8 when it turns (at least 0.01), v <- gamma v - lr * gain * grad. The triplets are cut into a
// fixed number of slices, each with its own gradient buffer, summed in slice order: the result
// does not depend on the number of threads. y: n x ndim, column-major, updated in place.
inline bool optimise_triplets(double* y, std::size_t n, std::size_t ndim, const int* tri,
                              const double* w, std::size_t n_triplets, const TripletSettings& set,
                              TripletTrace& trace, const ParallelFor& parallel_for = serial_for,
                              const Monitor& monitor = {}) {
  constexpr std::size_t kSlices = 8;
  const std::size_t size = n * ndim;
  std::vector<double> vel(size, 0.0), gain(size, 1.0), ahead(size), grad(size);
  std::vector<double> buffers(kSlices * size);
  std::vector<double> slice_loss(kSlices);
  std::vector<std::size_t> slice_violated(kSlices);
  trace.loss.assign(set.n_iters, 0.0);
  const double mean_weight = 1.0 / std::max<std::size_t>(n_triplets, 1);
  auto sign = [](double v) { return (v > 0.0) - (v < 0.0); };
  for (std::size_t it = 0; it < set.n_iters; ++it) {
    const double gamma = it > set.switch_iter ? 0.8 : 0.5;
    for (std::size_t e = 0; e < size; ++e) ahead[e] = y[e] + gamma * vel[e];
    parallel_for(0, kSlices, [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) {
        double* buf = &buffers[s * size];
        std::fill(buf, buf + size, 0.0);
        slice_violated[s] = 0;
        slice_loss[s] = detail::triplet_gradient(ahead, n, ndim, tri, w, n_triplets * s / kSlices,
                                                 n_triplets * (s + 1) / kSlices, set.loss, buf,
                                                 &slice_violated[s]);
      }
    });
    double loss = 0.0;
    std::size_t violated = 0;
    for (std::size_t s = 0; s < kSlices; ++s) {
      loss += slice_loss[s];
      violated += slice_violated[s];
    }
    parallel_for(0, size, [&](std::size_t begin, std::size_t end) {
      for (std::size_t e = begin; e < end; ++e) {
        double g = 2.0 * set.l2 * ahead[e];
        for (std::size_t s = 0; s < kSlices; ++s) g += buffers[s * size + e];
        gain[e] = sign(vel[e]) != sign(g) ? gain[e] + 0.2 : std::max(gain[e] * 0.8, 0.01);
        vel[e] = gamma * vel[e] - set.lr * gain[e] * g;
        y[e] += vel[e];
      }
    });
    for (std::size_t e = 0; e < size; ++e) loss += set.l2 * ahead[e] * ahead[e];
    trace.loss[it] = loss * mean_weight;
    trace.violated = static_cast<double>(violated) * mean_weight;
    if (monitor && !monitor(it + 1, set.n_iters)) return false;
  }
  return true;
}

}  // namespace localmean
