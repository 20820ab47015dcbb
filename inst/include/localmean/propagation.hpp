// Label propagation (relaxation labeling): every unlabelled row's class distribution becomes the
// local mean of the distributions over its kernel window, all rows at once (Jacobi sweeps), the
// labelled rows fixed. The graph comes from the engine's windows (engine_windows() in R).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

namespace localmean {

// The windows of the free (unlabelled) rows in compressed rows: free row f is data row row[f];
// its edges e = start[f] .. start[f + 1] - 1 go to data row to[e] with kernel weight weight[e];
// wsum[f] is the window's weight sum. Rows with no weight keep their distribution.
struct PropagationGraph {
  std::vector<std::size_t> row, start, to;
  std::vector<double> weight, wsum;
};

struct PropagationResult {
  int iterations = 0;
  double change = 0.0;  // largest change of a probability in the last sweep
  bool stopped = false;
};

// Sweeps `prob` (n x k, column-major) until no probability changes by more than tol, or
// max_iter sweeps. `keep_going(iteration)` is asked after every sweep (progress, interrupts).
inline PropagationResult propagate_labels(const PropagationGraph& g, std::size_t n,
                                          std::size_t k, double* prob, int max_iter, double tol,
                                          const std::function<bool(int)>& keep_going) {
  const std::size_t nf = g.row.size();
  std::vector<double> next(nf * k);
  PropagationResult res;
  res.change = nf ? HUGE_VAL : 0.0;
  while (res.iterations < max_iter && res.change > tol) {
    for (std::size_t f = 0; f < nf; ++f) {
      for (std::size_t c = 0; c < k; ++c) {
        double s = 0.0;
        for (std::size_t e = g.start[f]; e < g.start[f + 1]; ++e)
          s += g.weight[e] * prob[c * n + g.to[e]];
        next[c * nf + f] = g.wsum[f] > 0 ? s / g.wsum[f] : prob[c * n + g.row[f]];
      }
    }
    double change = 0.0;
    for (std::size_t c = 0; c < k; ++c)
      for (std::size_t f = 0; f < nf; ++f) {
        double& p = prob[c * n + g.row[f]];
        change = std::max(change, std::fabs(next[c * nf + f] - p));
        p = next[c * nf + f];
      }
    res.change = change;
    ++res.iterations;
    if (!keep_going(res.iterations)) {
      res.stopped = true;
      break;
    }
  }
  return res;
}

}  // namespace localmean
