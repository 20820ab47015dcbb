// Mode seeking by iterated local means, a client of the local-moment engine. Mean shift moves a
// point x to the local mean m(x) of the data around it (gradient ascent on the kernel density);
// the principal-component shift (subspace-constrained mean shift) moves it only along the
// directions of least local variance, so that it settles on a density ridge of dimension ndim.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
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

struct ShiftSettings {
  int max_iter = 500;
  double tol = 1e-8;  // a point stops when its step is shorter (scaled units)
  int ndim = -1;      // principal-component shift onto ndim-dimensional ridges; -1: mean shift
  bool keep_path = false;
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
  cov.assign(d * d, 0.0);
  std::size_t t = d;
  for (std::size_t j = 0; j < d; ++j)
    for (std::size_t k = j; k < d; ++k, ++t)
      cov[j * d + k] = cov[k * d + j] = mean[t] - mean[j] * mean[k];
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

// Moves each of the m points (m x d column-major, scaled coordinates, overwritten) by local
// means of `data` (whose values are shift_values of its points) until its step is shorter than
// tol or max_iter steps. Each point climbs on its own, so results do not depend on threads.
inline bool shift_points(const LocalData& data, double* points, std::size_t m,
                         const EngineSettings& set, const ShiftSettings& shift,
                         const ShiftOutput& out, const ParallelFor& parallel_for = serial_for,
                         const Monitor& monitor = {}) {
  const std::size_t d = data.d(), nv = data.nv();
  const Basis basis(static_cast<int>(d), 0);
  const Reach how(set);
  auto fn = [&](std::size_t begin, std::size_t end) {
    with_kernel(set.kernel, [&](auto kern) {
      using K = decltype(kern);
      Moments mo(1, nv, false);
      std::vector<double> x(d), next(d), mean(nv), cov, values, vectors;
      double s00, wsum;
      int status = kOk;
      EngineOutput one;
      one.coef = mean.data();
      one.s00 = &s00;
      one.wsum = &wsum;
      one.status = &status;
      for (std::size_t i = begin; i < end; ++i) {
        for (std::size_t j = 0; j < d; ++j) x[j] = points[j * m + i];
        std::vector<double>* path = shift.keep_path ? &(*out.paths)[i] : nullptr;
        if (path) path->assign(x.begin(), x.end());
        int iter = 0;
        double last_wsum = 0.0;
        status = kOk;
        while (iter < shift.max_iter) {
          mo.reset();
          accumulate_query<K>(data, basis, x.data(), nullptr, 1.0, how, mo);
          solve_moments(mo, 0, 1, one);
          last_wsum = wsum;
          if (status != kOk) break;
          detail::shift_step(x.data(), mean.data(), d, shift.ndim, cov, values, vectors,
                             next.data());
          ++iter;
          double step2 = 0.0;
          for (std::size_t j = 0; j < d; ++j) step2 += (next[j] - x[j]) * (next[j] - x[j]);
          x.swap(next);
          if (path) path->insert(path->end(), x.begin(), x.end());
          if (step2 < shift.tol * shift.tol) break;
        }
        // The density where the point stopped (one more sum if it moved since the last one).
        if (status == kOk && iter > 0) {
          mo.reset();
          accumulate_query<K>(data, basis, x.data(), nullptr, 1.0, how, mo);
          last_wsum = mo.S[0];
        }
        for (std::size_t j = 0; j < d; ++j) points[j * m + i] = x[j];
        if (out.wsum) out.wsum[i] = last_wsum;
        if (out.iterations) out.iterations[i] = iter;
        if (out.status) out.status[i] = status;
      }
      return 0;
    });
  };
  return run_chunked(m, std::max<std::size_t>(1, chunk_size(data.n()) / 16), parallel_for,
                     monitor, fn);
}

}  // namespace localmean
