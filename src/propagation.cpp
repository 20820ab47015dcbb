// Glue of label propagation (inst/include/localmean/propagation.hpp; label_propagation() in R).
#include <Rcpp.h>

#include <cstddef>

#include "localmean/propagation.hpp"

using namespace Rcpp;

// Sweeps the class probabilities `prob` (n x k) over the windows of the free rows `row`
// (1-based), given as edges from free row index `from` (1-based, nondecreasing) to data row `to`
// (1-based) with weights `weight`, and the windows' weight sums `wsum`.
// [[Rcpp::export]]
List cpp_propagate_labels(NumericMatrix prob, IntegerVector row, IntegerVector from,
                          IntegerVector to, NumericVector weight, NumericVector wsum,
                          int max_iter, double tol) {
  const std::size_t n = prob.nrow(), k = prob.ncol(), nf = row.size(), ne = from.size();
  localmean::PropagationGraph g;
  g.row.resize(nf);
  for (std::size_t f = 0; f < nf; ++f) g.row[f] = row[f] - 1;
  g.start.assign(nf + 1, 0);
  for (std::size_t e = 0; e < ne; ++e) ++g.start[from[e]];
  for (std::size_t f = 0; f < nf; ++f) g.start[f + 1] += g.start[f];
  g.to.resize(ne);
  for (std::size_t e = 0; e < ne; ++e) g.to[e] = to[e] - 1;
  g.weight.assign(weight.begin(), weight.end());
  g.wsum.assign(wsum.begin(), wsum.end());
  NumericMatrix out = clone(prob);
  const localmean::PropagationResult res = localmean::propagate_labels(
      g, n, k, out.begin(), max_iter, tol, [&](int iteration) {
        if (iteration % 64 == 0) Rcpp::checkUserInterrupt();
        return true;
      });
  return List::create(_["prob"] = out, _["iterations"] = res.iterations,
                      _["change"] = res.change);
}
