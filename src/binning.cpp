// Glue for the density bandwidth selectors: linear binning of weighted points (the core's
// linear_bin(), as the binned engine uses it) and the Gaussian pair sums of the plug-in
// functionals (bandwidth.hpp).
#include "r_policies.h"

#include <localmean/bandwidth.hpp>
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

// The Gaussian-derivative pair sums of the plug-in functionals (bandwidth.hpp): z (n x d) divided
// by the pilot g, one sum per row of `orders` (q x d).
// [[Rcpp::export]]
NumericVector cpp_hermite_pair_sums(NumericMatrix z, NumericVector w, double g,
                                    IntegerMatrix orders, int n_threads) {
  const std::size_t n = z.nrow(), d = z.ncol(), nq = orders.nrow();
  if (static_cast<std::size_t>(orders.ncol()) != d || static_cast<std::size_t>(w.size()) != n)
    stop("`orders` needs one column per variable and `w` one weight per point");
  if (orders.size() && *std::min_element(orders.begin(), orders.end()) < 0)
    stop("`orders` must not be negative");
  // Row-major copies for the core: z / g point by point, the orders row by row.
  std::vector<double> u(n * d);
  std::vector<int> ord(nq * d);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < d; ++k) u[i * d + k] = z(i, k) / g;
  for (std::size_t q = 0; q < nq; ++q)
    for (std::size_t k = 0; k < d; ++k) ord[q * d + k] = orders(q, k);
  NumericVector total(nq);
  localmean_r::Monitor monitor(false, static_cast<double>(n), "pair sums");
  const bool done = localmean::hermite_pair_sums(u.data(), w.begin(), n, d, ord.data(), nq,
                                                 total.begin(),
                                                 localmean_r::parallel_for(n_threads),
                                                 monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return total;
}
