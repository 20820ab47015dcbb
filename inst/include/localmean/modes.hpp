// Mode seeking by iterated local means, a client of the local-moment engine. Mean shift moves a
// point x to the local mean m(x) of the data around it (gradient ascent on the kernel density);
// the principal-component shift (subspace-constrained mean shift) moves it only along the
// directions of least local variance, so that it settles on a density ridge of dimension ndim.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "engine.hpp"

namespace localmean {

// Eigen-decomposition of a symmetric d x d matrix (row-major, overwritten) by cyclic Jacobi
// rotations: values[k] with eigenvector column k of `vectors` (row-major d x d).
inline void symmetric_eigen(std::vector<double>& a, std::size_t d, std::vector<double>& values,
                            std::vector<double>& vectors) {
  vectors.assign(d * d, 0.0);
  for (std::size_t i = 0; i < d; ++i) vectors[i * d + i] = 1.0;
  for (int sweep = 0; sweep < 64; ++sweep) {
    double off = 0.0, total = 0.0;
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < d; ++j) {
        total += a[i * d + j] * a[i * d + j];
        if (i != j) off += a[i * d + j] * a[i * d + j];
      }
    if (off <= 1e-30 * total || off == 0.0) break;
    for (std::size_t p = 0; p < d; ++p)
      for (std::size_t q = p + 1; q < d; ++q) {
        const double apq = a[p * d + q];
        if (apq == 0.0) continue;
        const double theta = (a[q * d + q] - a[p * d + p]) / (2.0 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (std::size_t k = 0; k < d; ++k) {  // columns p and q
          const double akp = a[k * d + p], akq = a[k * d + q];
          a[k * d + p] = c * akp - s * akq;
          a[k * d + q] = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < d; ++k) {  // rows p and q
          const double apk = a[p * d + k], aqk = a[q * d + k];
          a[p * d + k] = c * apk - s * aqk;
          a[q * d + k] = s * apk + c * aqk;
        }
        for (std::size_t k = 0; k < d; ++k) {
          const double vkp = vectors[k * d + p], vkq = vectors[k * d + q];
          vectors[k * d + p] = c * vkp - s * vkq;
          vectors[k * d + q] = s * vkp + c * vkq;
        }
      }
  }
  values.resize(d);
  for (std::size_t i = 0; i < d; ++i) values[i] = a[i * d + i];
}

// The values the shift averages: the coordinates (n x d), and for the principal-component shift
// also their products x_j x_k, j <= k, for the local covariance.
inline std::vector<double> shift_values(const double* x, std::size_t n, std::size_t d,
                                        bool products) {
  std::vector<double> v(x, x + n * d);
  if (products)
    for (std::size_t j = 0; j < d; ++j)
      for (std::size_t k = j; k < d; ++k)
        for (std::size_t i = 0; i < n; ++i) v.push_back(x[j * n + i] * x[k * n + i]);
  return v;
}

// The local covariance (row-major d x d) from the local means `mean` of the coordinates and of
// their products x_j x_k, j <= k (the values of shift_values()).
inline void local_covariance(const double* mean, std::size_t d, std::vector<double>& cov) {
  cov.assign(d * d, 0.0);
  std::size_t t = d;
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t k = j; k < d; ++k, ++t)
      cov[j * d + k] = cov[k * d + j] = mean[t] - mean[j] * mean[k];
}

// Local principal axes: the eigenvalues of the local covariance, largest first (`variances`, d),
// and their unit eigenvectors (`axes`, column k for variances[k], column-major d x d), each
// signed so that its largest component is positive (a reproducible orientation).
inline void local_axes(const double* mean, std::size_t d, double* variances, double* axes) {
  std::vector<double> cov, values, vectors;
  local_covariance(mean, d, cov);
  symmetric_eigen(cov, d, values, vectors);
  std::vector<std::size_t> order(d);
  for (std::size_t k = 0; k < d; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  for (std::size_t r = 0; r < d; ++r) {
    const std::size_t k = order[r];
    variances[r] = values[k];
    std::size_t top = 0;
    for (std::size_t j = 1; j < d; ++j)
      if (std::fabs(vectors[j * d + k]) > std::fabs(vectors[top * d + k])) top = j;
    const double sign = vectors[top * d + k] < 0 ? -1.0 : 1.0;
    for (std::size_t j = 0; j < d; ++j) axes[r * d + j] = sign * vectors[j * d + k];
  }
}

struct ShiftSettings {
  int max_iter = 500;
  double tol = 1e-8;  // a point stops when its step is shorter (scaled units)
  int ndim = -1;      // principal-component shift onto ndim-dimensional ridges; -1: mean shift
  bool keep_path = false;
  // Mean shift only. accelerate: over-relaxed steps x + omega (m(x) - x), kept while the weight
  // sum (the density) rises (see climb_fast); meaningful for the Gaussian kernel alone, whose
  // mean shift is the density's own ascent. meet > 0: a climb stops once it comes within `meet`
  // (scaled units) of a mode where a climb of an earlier round converged, and takes that mode.
  bool accelerate = false;
  double meet = 0.0;
};

// Results per point: final position (in `points`, m x d), weight sum there (the unnormalised
// density), iterations, QueryStatus of the last local mean, and optionally the path.
struct ShiftOutput {
  double* wsum = nullptr;
  int* iterations = nullptr;
  int* status = nullptr;
  std::vector<std::vector<double>>* paths = nullptr;  // m paths, positions appended by step
};

namespace detail {

// The next position of x from the local means `mean` (coordinates, then products if pc shift).
inline void shift_step(const double* x, const double* mean, std::size_t d, int ndim,
                       std::vector<double>& cov, std::vector<double>& values,
                       std::vector<double>& vectors, double* next) {
  if (ndim < 0) {
    for (std::size_t j = 0; j < d; ++j) next[j] = mean[j];
    return;
  }
  local_covariance(mean, d, cov);
  symmetric_eigen(cov, d, values, vectors);
  // Project the mean-shift step onto the d - ndim directions of least local variance.
  std::vector<std::pair<double, std::size_t>> order(d);
  for (std::size_t k = 0; k < d; ++k) order[k] = {values[k], k};
  std::sort(order.begin(), order.end());
  for (std::size_t j = 0; j < d; ++j) next[j] = x[j];
  for (std::size_t r = 0; r + static_cast<std::size_t>(ndim) < d; ++r) {
    const std::size_t k = order[r].second;
    double along = 0.0;
    for (std::size_t j = 0; j < d; ++j) along += vectors[j * d + k] * (mean[j] - x[j]);
    for (std::size_t j = 0; j < d; ++j) next[j] += along * vectors[j * d + k];
  }
}

}  // namespace detail

namespace detail {

inline double squared_distance(const double* a, const double* b, std::size_t d) {
  double s = 0.0;
  for (std::size_t j = 0; j < d; ++j) s += (a[j] - b[j]) * (a[j] - b[j]);
  return s;
}

// Modes where earlier climbs converged, for the meeting test of climb_fast: a hash grid of cells
// 2 r wide, each mode filed under every cell that its ball of radius r overlaps (at most 2^d), so
// that a lookup reads one cell. Above kMeetFullDim dimensions a mode is filed under its own cell
// only: climbs then meet it only inside that cell (less often, never wrongly).
class MeetIndex {
public:
  static constexpr std::size_t kMeetFullDim = 8;
  MeetIndex(std::size_t d, double radius) : d_(d), radius_(radius) {}
  std::size_t size() const { return wsum_.size(); }
  const double* position(std::size_t k) const { return pos_.data() + k * d_; }
  double wsum(std::size_t k) const { return wsum_[k]; }
  // The first filed mode (in filing order) within the radius of x, or size() if none.
  std::size_t find(const double* x) const {
    const auto it = cells_.find(cell_of(x, 0));
    if (it == cells_.end()) return size();
    for (std::size_t k : it->second)
      if (squared_distance(position(k), x, d_) <= radius_ * radius_) return k;
    return size();
  }
  void add(const double* x, double wsum) {
    const std::size_t k = size();
    pos_.insert(pos_.end(), x, x + d_);
    wsum_.push_back(wsum);
    const std::size_t corners = d_ <= kMeetFullDim ? std::size_t(1) << d_ : 1;
    for (std::size_t c = 0; c < corners; ++c) cells_[cell_of(x, c)].push_back(k);
  }

private:
  // The cell of x, or with bit j of `corner` set, its neighbour along axis j on the side nearer
  // to x (the ball of radius r, half a cell, reaches no farther).
  std::vector<long long> cell_of(const double* x, std::size_t corner) const {
    std::vector<long long> cell(d_);
    for (std::size_t j = 0; j < d_; ++j) {
      // Clamped so that far-out coordinates stay representable (they then share a cell).
      const double u = std::max(-1e18, std::min(1e18, x[j] / (2.0 * radius_)));
      const double c = std::floor(u);
      cell[j] = static_cast<long long>(c);
      if ((corner >> j) & 1u) cell[j] += u - c < 0.5 ? -1 : 1;
    }
    return cell;
  }
  std::size_t d_;
  double radius_;
  std::vector<double> pos_, wsum_;
  std::map<std::vector<long long>, std::vector<std::size_t>> cells_;
};

// The local mean of the data at x for one point's climb: the mean (values, see shift_values), the
// weight sum and the QueryStatus. `reach` is the engine's reach, or while a fast climb is far
// from convergence a shorter one (see climb_fast); the final weight sum always uses `full`.
template <class K>
struct LocalMeanProbe {
  const LocalData& data;
  const Reach& full;
  const Reach* reach;
  Basis basis;
  Moments mo;
  std::vector<double> mean;
  double s00 = 0.0, wsum = 0.0;
  int status = kOk;
  EngineOutput out;
  LocalMeanProbe(const LocalData& data_, const Reach& full_)
      : data(data_), full(full_), reach(&full_), basis(static_cast<int>(data_.d()), 0),
        mo(1, data_.nv(), false), mean(data_.nv()) {
    out.coef = mean.data();
    out.s00 = &s00;
    out.wsum = &wsum;
    out.status = &status;
  }
  // The local mean at x (sets mean, wsum, status).
  void at(const double* x) {
    mo.reset();
    accumulate_query<K>(data, basis, x, nullptr, 1.0, *reach, mo);
    status = kOk;
    solve_moments(mo, 0, 1, out);
  }
  // The weight sum alone at x, with the full reach.
  double weight_at(const double* x) {
    mo.reset();
    accumulate_query<K>(data, basis, x, nullptr, 1.0, full, mo);
    return mo.S[0];
  }
};

// Where one climb ended: its position is written back by the caller.
struct ClimbEnd {
  double wsum = 0.0;
  int iterations = 0, status = kOk;
  bool converged = false;  // stopped by tol (not max_iter, not a failed local mean, not a meeting)
};

// The plain climb of one point x (overwritten): x <- m(x) (or the pc-shift step) until the step
// is shorter than tol or max_iter steps.
template <class K>
ClimbEnd climb_plain(LocalMeanProbe<K>& probe, std::vector<double>& x, const ShiftSettings& shift,
                     std::vector<double>* path) {
  const std::size_t d = x.size();
  std::vector<double> next(d), cov, values, vectors;
  ClimbEnd end;
  while (end.iterations < shift.max_iter) {
    probe.at(x.data());
    end.wsum = probe.wsum;
    end.status = probe.status;
    if (probe.status != kOk) break;
    shift_step(x.data(), probe.mean.data(), d, shift.ndim, cov, values, vectors, next.data());
    ++end.iterations;
    const double step2 = squared_distance(next.data(), x.data(), d);
    x.swap(next);
    if (path) path->insert(path->end(), x.begin(), x.end());
    if (step2 < shift.tol * shift.tol) {
      end.converged = true;
      break;
    }
  }
  // The density where the point stopped (one more sum if it moved since the last one).
  if (end.status == kOk && end.iterations > 0) end.wsum = probe.weight_at(x.data());
  return end;
}

// The mean-shift climb of one point x (overwritten) with the options of ShiftSettings.
// Acceleration (adaptive over-relaxation, as Salakhutdinov and Roweis's for bound optimisation):
// the trial point y = x + omega (m(x) - x) is kept when the weight sum there is no lower and the
// plain step at y turns by less than acos(kMinCosine) from the one at x (y overshot no crest,
// and the path was straight enough to extrapolate: where it bends, as near a saddle, a long
// step could leave the basin that the plain climb stays in), and omega then grows by half (at
// most kMaxOmega); otherwise the plain step m(x) is taken (the Gaussian mean shift never lowers
// the density) and omega halves. The fixed points are those of the plain climb, and it stops by
// the same rule: the plain step |m(x) - x| < tol, after which it moves to m(x). Every local mean
// counts as an iteration.
// `near` (null: none) is a shorter reach for the steps longer than kNearSwitch; the climb
// switches to the probe's full reach for the rest, so modes and densities are the full reach's.
// Meeting (modes not null): see ShiftSettings.
constexpr double kMaxOmega = 8.0, kMinCosine = 0.9, kNearSwitch = 1e-3;
template <class K>
ClimbEnd climb_fast(LocalMeanProbe<K>& probe, std::vector<double>& x, const ShiftSettings& shift,
                    const Reach* near, const MeetIndex* modes, std::vector<double>* path) {
  const std::size_t d = x.size();
  std::vector<double> mean(d), y(d), step(d);
  ClimbEnd end;
  double omega = 1.0;
  auto record = [&]() {
    if (path) path->insert(path->end(), x.begin(), x.end());
  };
  auto met = [&]() {  // takes the mode met, if any
    const std::size_t k = modes ? modes->find(x.data()) : 0;
    if (!modes || k == modes->size()) return false;
    x.assign(modes->position(k), modes->position(k) + d);
    record();
    end.wsum = modes->wsum(k);
    return true;
  };
  auto probe_at = [&](const double* p) {
    probe.at(p);
    ++end.iterations;
  };
  if (met()) return end;
  if (shift.max_iter == 0) {
    end.wsum = probe.weight_at(x.data());
    return end;
  }
  probe.reach = near ? near : &probe.full;
  probe_at(x.data());
  while (true) {
    end.wsum = probe.wsum;
    end.status = probe.status;
    if (probe.status != kOk) break;
    mean.assign(probe.mean.begin(), probe.mean.begin() + d);
    for (std::size_t j = 0; j < d; ++j) step[j] = mean[j] - x[j];
    const double step2 = squared_distance(mean.data(), x.data(), d);
    if (probe.reach != &probe.full && step2 < kNearSwitch * kNearSwitch) {
      probe.reach = &probe.full;  // the last steps with the full reach
      if (end.iterations >= shift.max_iter) break;
      probe_at(x.data());
      continue;
    }
    const bool converged = probe.reach == &probe.full && step2 < shift.tol * shift.tol;
    if (converged || end.iterations >= shift.max_iter) {
      x.swap(mean);  // the plain climb's last step
      record();
      end.converged = converged;
      end.wsum = probe.weight_at(x.data());
      break;
    }
    const double here = probe.wsum;
    bool moved = false;
    if (shift.accelerate && omega > 1.0) {
      for (std::size_t j = 0; j < d; ++j) y[j] = x[j] + omega * step[j];
      probe_at(y.data());
      double along = 0.0, next2 = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        const double next = probe.mean[j] - y[j];
        along += next * step[j];
        next2 += next * next;
      }
      moved = probe.status == kOk && probe.wsum >= here &&
              along >= kMinCosine * std::sqrt(next2 * step2);
      if (moved) {
        x.swap(y);
        omega = std::min(kMaxOmega, 1.5 * omega);
      } else {
        omega = std::max(1.0, 0.5 * omega);
        if (end.iterations >= shift.max_iter) {
          x.swap(mean);
          record();
          end.wsum = probe.weight_at(x.data());
          break;
        }
      }
    }
    if (!moved) {
      x.swap(mean);
      probe_at(x.data());
      if (shift.accelerate) omega = std::max(omega, 1.5);
    }
    record();
    if (met()) break;
  }
  probe.reach = &probe.full;
  return end;
}

// Climbs in rounds of consecutive points when climbs may meet earlier modes: a round sees only
// the modes of the rounds before it, filed in point order, so results do not depend on how the
// points of a round are shared among threads. Rounds grow from kFirstRound to kRoundCap points.
constexpr std::size_t kFirstRound = 16, kRoundCap = 256;

}  // namespace detail

// The reach of the long steps of a fast climb, in scales from the point: a Gaussian weight
// beyond it is below exp(-18) = 1.5e-8, so a local mean at x with weight sum W moves by at most
// N e^{-18} (6 + |m(x) - x|) / W scales when it leaves out the N points beyond (each moves it by
// its weight times its distance over W). At a data point W >= 1 (unweighted data), and W rises
// along a climb.
constexpr double kNearCutoff = 6.0;

// Moves each of the m points (m x d column-major, scaled coordinates, overwritten) by local
// means of `data` (whose values are shift_values of its points) until its step is shorter than
// tol or max_iter steps (see ShiftSettings for the mean-shift options). Results do not depend on
// the number of threads.
inline bool shift_points(const LocalData& data, double* points, std::size_t m,
                         const EngineSettings& set, const ShiftSettings& shift,
                         const ShiftOutput& out, const ParallelFor& parallel_for = serial_for,
                         const Monitor& monitor = {}) {
  const std::size_t d = data.d();
  const Reach how(set);
  ShiftSettings climb = shift;  // over-relaxation only where the weight sum is the objective
  climb.accelerate = shift.accelerate && shift.ndim < 0 && set.kernel == KernelType::gaussian;
  const bool meeting = shift.ndim < 0 && shift.meet > 0.0;
  const bool fast = climb.accelerate || meeting;
  detail::MeetIndex modes(d, shift.meet);
  // The Gaussian's long steps reach kNearCutoff scales from the point, not the engine's cut-off
  // from the nearest data point (unless the user set a cut-off).
  EngineSettings near_set = set;
  near_set.cutoff = kNearCutoff;
  const Reach near(near_set);
  const bool use_near = fast && set.use_tree && set.cutoff <= 0.0 &&
                        set.kernel == KernelType::gaussian;
  std::vector<char> converged(m, 0);
  std::vector<double> end_wsum(m);
  std::size_t round_begin = 0;
  check_sweep_kernel(data, set);
  auto fn = [&](std::size_t begin, std::size_t end) {
    with_sweep_kernel(set.kernel, [&](auto kern) {
      using K = decltype(kern);
      detail::LocalMeanProbe<K> probe(data, how);
      std::vector<double> x(d);
      for (std::size_t i = round_begin + begin; i < round_begin + end; ++i) {
        for (std::size_t j = 0; j < d; ++j) x[j] = points[j * m + i];
        std::vector<double>* path = shift.keep_path ? &(*out.paths)[i] : nullptr;
        if (path) path->assign(x.begin(), x.end());
        const detail::ClimbEnd res =
            fast ? detail::climb_fast(probe, x, climb, use_near ? &near : nullptr,
                                      meeting ? &modes : nullptr, path)
                 : detail::climb_plain(probe, x, climb, path);
        converged[i] = res.converged;
        end_wsum[i] = res.wsum;
        for (std::size_t j = 0; j < d; ++j) points[j * m + i] = x[j];
        if (out.wsum) out.wsum[i] = res.wsum;
        if (out.iterations) out.iterations[i] = res.iterations;
        if (out.status) out.status[i] = res.status;
      }
      return 0;
    });
  };
  const std::size_t first_chunk = std::max<std::size_t>(1, chunk_size(data.n()) / 16);
  std::size_t round = meeting ? detail::kFirstRound : m;
  while (round_begin < m) {
    const std::size_t len = std::min(round, m - round_begin);
    const std::size_t offset = round_begin;
    const Monitor round_monitor = [&](std::size_t done, std::size_t) {
      return !monitor || monitor(offset + done, m);
    };
    if (!run_chunked(len, first_chunk, parallel_for, round_monitor, fn)) return false;
    // File the round's new modes in point order (climbs that met a mode add nothing new).
    if (meeting)
      for (std::size_t i = round_begin; i < round_begin + len; ++i) {
        if (!converged[i]) continue;
        std::vector<double> mode(d);
        for (std::size_t j = 0; j < d; ++j) mode[j] = points[j * m + i];
        if (modes.find(mode.data()) == modes.size()) modes.add(mode.data(), end_wsum[i]);
      }
    round_begin += len;
    round = std::min(detail::kRoundCap, 2 * round);
  }
  return true;
}

}  // namespace localmean
