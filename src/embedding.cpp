// Glue between R and the embedding core: neighbour graphs, principal components, LLE, TriMap's
// triplets and the triplet optimiser.
#include "r_policies.h"

#include <localmean/embedding.hpp>

using namespace Rcpp;

namespace {

List graph_list(const localmean::KnnGraph& g) {
  IntegerMatrix index(g.n, g.k);
  NumericMatrix dist(g.n, g.k);
  for (std::size_t i = 0; i < g.n; ++i)
    for (std::size_t r = 0; r < g.k; ++r) {
      index[r * g.n + i] = g.index[i * g.k + r] + 1;
      dist[r * g.n + i] = g.dist[i * g.k + r];
    }
  return List::create(_["index"] = index, _["distance"] = dist);
}

localmean::KnnGraph graph_from(IntegerMatrix index, NumericMatrix dist) {
  localmean::KnnGraph g;
  g.n = index.nrow();
  g.k = index.ncol();
  g.index.resize(g.n * g.k);
  g.dist.resize(g.n * g.k);
  for (std::size_t i = 0; i < g.n; ++i)
    for (std::size_t r = 0; r < g.k; ++r) {
      g.index[i * g.k + r] = index[r * g.n + i] - 1;
      g.dist[i * g.k + r] = dist.size() ? dist[r * g.n + i] : 0.0;
    }
  return g;
}

localmean::KnnGraph find_neighbours(NumericMatrix x, NumericMatrix queries, int k, bool self,
                                    int n_threads, bool verbose) {
  localmean::KnnGraph g;
  localmean_r::Monitor monitor(verbose, queries.nrow(), "neighbours");
  const bool done = localmean::knn_graph(x.begin(), x.nrow(), x.ncol(), queries.begin(),
                                         queries.nrow(), static_cast<std::size_t>(k), self, g,
                                         localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return g;
}

}  // namespace

// The k nearest data points (rows of x) of every query row; with self = TRUE the queries are x
// and each point is left out of its own list. Indices are 1-based.
// [[Rcpp::export]]
List cpp_knn_graph(NumericMatrix x, NumericMatrix queries, int k, bool self, int n_threads,
                   bool verbose) {
  return graph_list(find_neighbours(x, queries, k, self, n_threads, verbose));
}

// Leading principal axes of x: centre, rotation (d x ndim) and variances.
// [[Rcpp::export]]
List cpp_principal_axes(NumericMatrix x, int ndim, int n_threads) {
  const std::size_t d = x.ncol();
  localmean::Principal pc;
  localmean_r::Monitor monitor(false, 0, "principal axes");  // interrupts only
  const bool done = localmean::principal_axes(x.begin(), x.nrow(), d,
                                              static_cast<std::size_t>(ndim), pc,
                                              localmean_r::parallel_for(n_threads),
                                              monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  NumericMatrix rotation(d, ndim);
  std::copy(pc.axes.begin(), pc.axes.end(), rotation.begin());
  return List::create(_["center"] = wrap(pc.centre), _["rotation"] = rotation,
                      _["variance"] = wrap(pc.variance));
}

// LLE of x on its k nearest neighbours: layout, eigenvalues, neighbours and weights.
// [[Rcpp::export]]
List cpp_lle(NumericMatrix x, int k, int ndim, double reg, int n_threads, bool verbose) {
  const std::size_t n = x.nrow(), d = x.ncol();
  const localmean::KnnGraph g = find_neighbours(x, x, k, true, n_threads, verbose);
  NumericMatrix weights(k, n);  // row-major n x k seen from C++
  localmean_r::Monitor monitor(verbose, n, "LLE weights");
  const bool done = localmean::lle_weights(x.begin(), n, d, x.begin(), n, g, reg, weights.begin(),
                                           localmean_r::parallel_for(n_threads),
                                           monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  localmean_r::Monitor solver(false, 0, "LLE layout");  // interrupts only
  const localmean::LleResult res =
      localmean::lle_layout(g, weights.begin(), ndim, solver.callback());
  solver.finish();
  if (res.stopped) stop("the computation was stopped");
  if (!res.converged) stop("the eigen-solver did not converge");
  NumericMatrix layout(n, ndim);
  std::copy(res.layout.begin(), res.layout.end(), layout.begin());
  return List::create(_["layout"] = layout, _["eigenvalues"] = wrap(res.eigenvalues),
                      _["neighbours"] = graph_list(g)["index"], _["weights"] = transpose(weights));
}

// New points placed by LLE's reconstruction weights from their k nearest training points.
// [[Rcpp::export]]
NumericMatrix cpp_lle_transform(NumericMatrix x, NumericMatrix layout, NumericMatrix newdata,
                                int k, double reg, int n_threads) {
  const std::size_t m = newdata.nrow(), ndim = layout.ncol(), n = x.nrow();
  const localmean::KnnGraph g = find_neighbours(x, newdata, k, false, n_threads, false);
  std::vector<double> w(m * k);
  localmean_r::Monitor monitor(false, m, "LLE weights");  // interrupts only
  const bool done = localmean::lle_weights(x.begin(), n, x.ncol(), newdata.begin(), m, g, reg,
                                           w.data(), localmean_r::parallel_for(n_threads),
                                           monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  NumericMatrix out(m, ndim);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t a = 0; a < ndim; ++a) {
      double s = 0.0;
      for (int r = 0; r < k; ++r) s += w[i * k + r] * layout[a * n + g.index[i * k + r]];
      out[a * m + i] = s;
    }
  return out;
}

// TriMap's triplets and weights from the (preprocessed) data and its neighbour graph.
// Triplets come back as a 3 x T integer matrix of 0-based indices.
// [[Rcpp::export]]
List cpp_trimap_triplets(NumericMatrix x, IntegerMatrix index, NumericMatrix dist, int n_inliers,
                         int n_outliers, int n_random, double weight_temp, double seed,
                         int n_threads) {
  localmean::TrimapSettings set;
  set.n_inliers = n_inliers;
  set.n_outliers = n_outliers;
  set.n_random = n_random;
  set.weight_temp = weight_temp;
  set.seed = static_cast<std::uint64_t>(seed);
  localmean::TripletSet ts;
  localmean_r::Monitor monitor(false, x.nrow(), "triplets");  // interrupts only
  const bool done = localmean::trimap_triplets(x.begin(), x.nrow(), x.ncol(),
                                               graph_from(index, dist), set, ts,
                                               localmean_r::parallel_for(n_threads),
                                               monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  IntegerMatrix triplets(3, ts.size());
  std::copy(ts.triplets.begin(), ts.triplets.end(), triplets.begin());
  return List::create(_["triplets"] = triplets, _["weights"] = wrap(ts.weights));
}

// Optimises the layout `init` (n x ndim) for the triplets (3 x T, 0-based) and their weights.
// [[Rcpp::export]]
List cpp_optimise_triplets(NumericMatrix init, IntegerMatrix triplets, NumericVector weights,
                           std::string loss, double lr, int n_iters, double l2, int n_threads,
                           bool verbose) {
  const std::size_t n = init.nrow(), ndim = init.ncol();
  if (ndim > 8) stop("at most 8 output dimensions are supported");
  NumericMatrix layout = clone(init);
  localmean::TripletSettings set;
  set.loss = loss == "tste" ? localmean::TripletLoss::tste : localmean::TripletLoss::trimap;
  set.lr = lr;
  set.n_iters = static_cast<std::size_t>(n_iters);
  set.l2 = l2;
  localmean::TripletTrace trace;
  localmean_r::Monitor monitor(verbose, static_cast<double>(n_iters), "TriMap optimisation");
  const bool done = localmean::optimise_triplets(
      layout.begin(), n, ndim, triplets.begin(), weights.begin(), weights.size(), set, trace,
      localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return List::create(_["layout"] = layout, _["loss"] = wrap(trace.loss),
                      _["violated"] = trace.violated);
}

// Scores of the rows of x on principal axes (centre, rotation d x ndim).
// [[Rcpp::export]]
NumericMatrix cpp_principal_scores(NumericMatrix x, NumericVector center, NumericMatrix rotation,
                                   int n_threads) {
  localmean::Principal pc;
  pc.centre.assign(center.begin(), center.end());
  pc.axes.assign(rotation.begin(), rotation.end());
  pc.variance.resize(rotation.ncol());
  std::vector<double> s;
  localmean_r::Monitor monitor(false, 0, "principal scores");  // interrupts only
  const bool done =
      localmean::principal_scores(pc, x.begin(), x.nrow(), x.ncol(), s,
                                  localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  NumericMatrix out(x.nrow(), rotation.ncol());
  std::copy(s.begin(), s.end(), out.begin());
  return out;
}

// Neighbourhood agreement of layout y with data x at the 1-based `rows` (see rank_agreement()).
// [[Rcpp::export]]
List cpp_rank_agreement(NumericMatrix x, NumericMatrix y, IntegerVector rows, int k,
                        int n_threads, bool verbose) {
  std::vector<int> at(rows.begin(), rows.end());
  for (int& r : at) --r;
  localmean::RankAgreement res;
  localmean_r::Monitor monitor(verbose, at.size(), "neighbour ranks");
  const bool done = localmean::rank_agreement(
      x.begin(), x.ncol(), y.begin(), y.ncol(), x.nrow(), at, static_cast<std::size_t>(k), res,
      localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  IntegerMatrix nn(at.size(), k);
  for (std::size_t r = 0; r < at.size(); ++r)
    for (int c = 0; c < k; ++c) nn[c * at.size() + r] = res.layout_nn[r * k + c] + 1;
  return List::create(_["data_excess"] = wrap(res.data_excess),
                      _["layout_excess"] = wrap(res.layout_excess),
                      _["shared"] = wrap(res.shared), _["layout_nn"] = nn);
}
