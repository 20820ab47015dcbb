// Bandwidth-selector computations that need their own loop over pairs of points: the
// Gaussian-derivative pair sums of the multivariate plug-in functionals.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "parallel.hpp"

namespace localmean {

// For every row q of `orders` (nq x d, row-major, even total order), the sum over all ordered
// pairs (i, j) of w_i w_j prod_k He_{r_qk}(u_ik - u_jk) exp(-|u_i - u_j|^2 / 2), with u (n x d,
// row-major) the points divided by the pilot bandwidth and He the probabilists' Hermite
// polynomials. The summand is even in u_i - u_j, so each pair i < j is visited once and counted
// twice. Memory is O(n nq), time O(n^2 (d max(r) + nq d)); every row's sum is computed on its
// own and the rows are added in order, so the threads never change the result. Returns false if
// the monitor stopped it.
inline bool hermite_pair_sums(const double* u, const double* w, std::size_t n, std::size_t d,
                              const int* orders, std::size_t nq, double* total,
                              const ParallelFor& parallel_for = serial_for,
                              const Monitor& monitor = {}) {
  const std::size_t rmax =
      nq ? static_cast<std::size_t>(*std::max_element(orders, orders + nq * d)) : 0;
  std::vector<double> rows(n * nq, 0.0);
  auto fn = [&](std::size_t begin, std::size_t end) {
    std::vector<double> he(d * (rmax + 1)), acc(nq);
    // adds factor * w_j * prod_k He_{r_k}(u_k) exp(-|u|^2 / 2) at u = u_i - u_j to acc
    auto add_pair = [&](std::size_t i, std::size_t j, double factor) {
      double r2 = 0.0;
      for (std::size_t k = 0; k < d; ++k) {
        const double v = u[i * d + k] - u[j * d + k];
        double* h = &he[k * (rmax + 1)];
        h[0] = 1.0;
        if (rmax >= 1) h[1] = v;
        for (std::size_t m = 1; m < rmax; ++m) h[m + 1] = v * h[m] - m * h[m - 1];
        r2 += v * v;
      }
      const double base = factor * w[j] * std::exp(-r2 / 2.0);
      for (std::size_t q = 0; q < nq; ++q) {
        double term = base;
        for (std::size_t k = 0; k < d; ++k) term *= he[k * (rmax + 1) + orders[q * d + k]];
        acc[q] += term;
      }
    };
    for (std::size_t i = begin; i < end; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      add_pair(i, i, 1.0);
      for (std::size_t j = i + 1; j < n; ++j) add_pair(i, j, 2.0);
      for (std::size_t q = 0; q < nq; ++q) rows[i * nq + q] = w[i] * acc[q];
    }
  };
  // a first chunk of rows of about 2e7 pair visits (rows hold n / 2 pairs on average)
  if (!run_chunked(n, chunk_size(n / 2 + 1), parallel_for, monitor, fn)) return false;
  std::fill(total, total + nq, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t q = 0; q < nq; ++q) total[q] += rows[i * nq + q];
  return true;
}

}  // namespace localmean
