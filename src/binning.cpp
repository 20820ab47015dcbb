// Glue for the density bandwidth selectors: linear binning of weighted points (the core's
// linear_bin(), as the binned engine uses it) and the Gaussian pair sums of the plug-in
// functionals.
#include "r_policies.h"

#include <localmean/binning.hpp>

using namespace Rcpp;

// Masses of the points x (n values per variable, d = length(lo) = 1 or 2 variables, column by
// column) linearly binned on the grid of gridsize[j] nodes from lo[j] to hi[j]: each point's
// weight (1 when `weights` is empty) is shared between the corners of its cell; points off the
// grid are dropped. A vector of prod(gridsize) masses, the first variable varying fastest.
// [[Rcpp::export]]
NumericVector cpp_linear_bin(NumericVector x, NumericVector weights, NumericVector lo,
                             NumericVector hi, IntegerVector gridsize) {
  const std::size_t d = lo.size();
  if (d < 1 || d > 2 || hi.size() != lo.size() || gridsize.size() != lo.size())
    stop("linear binning takes 1 or 2 variables");
  const std::size_t n = x.size() / d;
  if (weights.size() != 0 && static_cast<std::size_t>(weights.size()) != n)
    stop("`weights` must have one value per point");
  std::vector<std::size_t> size(gridsize.begin(), gridsize.end());
  const localmean::Grid grid = localmean::make_grid(d, lo.begin(), hi.begin(), size.data());
  std::vector<double> counts, sums;
  localmean::linear_bin(grid, x.begin(), n, nullptr, 0, weights.size() ? weights.begin() : nullptr,
                        counts, sums, localmean::serial_for);
  return NumericVector(counts.begin(), counts.end());
}

// For every row r of `orders` (q x d, even total order), the sum over all ordered pairs (i, j)
// of w_i w_j prod_k He_{r_k}(u_k) exp(-|u|^2 / 2) with u = (z_i - z_j) / g and He the
// probabilists' Hermite polynomials. The summand is even in u, so each pair i < j is visited
// once and counted twice. Memory is O(n q), time O(n^2 (d max(r) + q d)); every row's sum is
// computed on its own and the rows are added in order, so the threads do not change the result.
// [[Rcpp::export]]
NumericVector cpp_hermite_pair_sums(NumericMatrix z, NumericVector w, double g,
                                    IntegerMatrix orders, int n_threads) {
  const std::size_t n = z.nrow(), d = z.ncol(), nq = orders.nrow();
  if (static_cast<std::size_t>(orders.ncol()) != d || static_cast<std::size_t>(w.size()) != n)
    stop("`orders` needs one column per variable and `w` one weight per point");
  if (orders.size() && *std::min_element(orders.begin(), orders.end()) < 0)
    stop("`orders` must not be negative");
  const int top = orders.size() ? *std::max_element(orders.begin(), orders.end()) : 0;
  const std::size_t rmax = static_cast<std::size_t>(top);
  // Plain copies for the workers: z / g point by point, the weights, the orders row by row.
  std::vector<double> u(n * d), wt(w.begin(), w.end());
  std::vector<int> ord(nq * d);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < d; ++k) u[i * d + k] = z(i, k) / g;
  for (std::size_t q = 0; q < nq; ++q)
    for (std::size_t k = 0; k < d; ++k) ord[q * d + k] = orders(q, k);
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
      const double base = factor * wt[j] * std::exp(-r2 / 2.0);
      for (std::size_t q = 0; q < nq; ++q) {
        double term = base;
        for (std::size_t k = 0; k < d; ++k) term *= he[k * (rmax + 1) + ord[q * d + k]];
        acc[q] += term;
      }
    };
    for (std::size_t i = begin; i < end; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      add_pair(i, i, 1.0);
      for (std::size_t j = i + 1; j < n; ++j) add_pair(i, j, 2.0);
      for (std::size_t q = 0; q < nq; ++q) rows[i * nq + q] = wt[i] * acc[q];
    }
  };
  localmean_r::Monitor monitor(false, static_cast<double>(n), "pair sums");
  // a first chunk of rows of about 2e7 pair visits (rows hold n / 2 pairs on average)
  localmean::run_chunked(n, localmean::chunk_size(n / 2 + 1), localmean_r::parallel_for(n_threads),
                         monitor.callback(), fn);
  monitor.finish();
  NumericVector total(nq);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t q = 0; q < nq; ++q) total[q] += rows[i * nq + q];
  return total;
}
