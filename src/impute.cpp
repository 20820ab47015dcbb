// Glue between R and the imputation and denoising core: tables arrive transposed (p x n, so
// that rows are contiguous) and go back the same way.
#include "r_policies.h"

#include <localmean/impute.hpp>

using namespace Rcpp;

namespace {

localmean::IncompleteTable table_of(const NumericMatrix& xt, const NumericMatrix& obs_t) {
  return localmean::IncompleteTable{xt.begin(), obs_t.begin(), static_cast<std::size_t>(xt.ncol()),
                                    static_cast<std::size_t>(xt.nrow())};
}

}  // namespace

// The k nearest rows on shared entries of every row with query[i] TRUE. xt: the data transposed
// (p x n) with 0 at missing entries; obs_t: 1 where observed. Returns k x n 1-based indices (0:
// none) and squared distances.
// [[Rcpp::export]]
List cpp_shared_neighbours(NumericMatrix xt, NumericMatrix obs_t, LogicalVector query, int k,
                           int n_threads, bool verbose) {
  const localmean::IncompleteTable t = table_of(xt, obs_t);
  std::vector<unsigned char> q(t.n);
  for (std::size_t i = 0; i < t.n; ++i) q[i] = query[i] == TRUE;
  localmean::RowNeighbours g;
  const double groups = std::ceil(std::count(q.begin(), q.end(), 1) / 8.0);  // work items: groups of 8 rows
  localmean_r::Monitor monitor(verbose, groups,
                               "neighbour rows");
  const bool done = localmean::shared_neighbours(t, q.data(), static_cast<std::size_t>(k), g,
                                                 localmean_r::parallel_for(n_threads),
                                                 monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  IntegerMatrix index(k, t.n);
  NumericMatrix dist2(k, t.n);
  for (std::size_t a = 0; a < g.index.size(); ++a) {
    index[a] = g.index[a] + 1;
    dist2[a] = g.dist2[a];
  }
  return List::create(_["index"] = index, _["dist2"] = dist2);
}

// Iterates the two layers. xt: starting values transposed (p x n); obs_t: 1 where observed;
// active: rows to impute; index: k x n 1-based candidate rows (0: none); links: list(start,
// feature (0-based), weight, slope, centre, scale). Returns the completed values (p x n), the
// change per iteration and both layers at the missing entries (in column order of xt).
// [[Rcpp::export]]
List cpp_impute(NumericMatrix xt, NumericMatrix obs_t, LogicalVector active, IntegerMatrix index,
                List links, std::string kernel, bool use_sample, bool use_feature,
                double imputed_weight, int nn_rank, double bandwidth, double mix, int max_iter,
                double tol, double scale, int n_threads, bool verbose) {
  const std::size_t p = xt.nrow(), n = xt.ncol();
  NumericMatrix out = clone(xt);
  const localmean::IncompleteTable t{out.begin(), obs_t.begin(), n, p};
  std::vector<unsigned char> act(n);
  for (std::size_t i = 0; i < n; ++i) act[i] = active[i] == TRUE;
  const localmean::MissingEntries miss = localmean::missing_entries(t, act.data());
  localmean::RowNeighbours g;
  g.n = n;
  g.k = index.nrow();
  g.index.resize(index.size());
  for (R_xlen_t a = 0; a < index.size(); ++a) g.index[a] = index[a] - 1;
  localmean::FeatureLinks fl;
  fl.start = as<std::vector<std::size_t>>(links["start"]);
  fl.feature = as<std::vector<int>>(links["feature"]);
  fl.weight = as<std::vector<double>>(links["weight"]);
  fl.slope = as<std::vector<double>>(links["slope"]);
  fl.centre = as<std::vector<double>>(links["centre"]);
  fl.scale = as<std::vector<double>>(links["scale"]);
  if (fl.start.size() != p + 1) stop("feature links do not match the columns");
  localmean::ImputeSettings set;
  set.kernel = localmean_r::kernel_type(kernel);
  set.use_sample = use_sample;
  set.use_feature = use_feature;
  set.imputed_weight = imputed_weight;
  set.nn_rank = static_cast<std::size_t>(nn_rank);
  set.bandwidth = bandwidth;
  set.mix = mix;
  set.max_iter = static_cast<std::size_t>(max_iter);
  set.tol = tol;
  set.scale = scale;
  std::vector<double> change, s, f;
  localmean_r::Monitor monitor(verbose, static_cast<double>(max_iter), "imputation");
  const bool done =
      localmean::impute_iterate(out.begin(), obs_t.begin(), n, p, miss, g, fl, set, change, &s,
                                &f, localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  // Positions of the missing entries (1-based, in the p x n matrix) to match s and f.
  NumericVector pos(miss.size());
  for (std::size_t r = 0; r < miss.rows.size(); ++r)
    for (std::size_t e = miss.row_start[r]; e < miss.row_start[r + 1]; ++e)
      pos[e] = static_cast<double>(miss.rows[r] * p + miss.column[e]) + 1.0;
  return List::create(_["x"] = out, _["change"] = wrap(change), _["sample"] = wrap(s),
                      _["feature"] = wrap(f), _["position"] = pos);
}

// Spatial links of a rows x cols image (pixel (r, c) is feature r * cols + c, 0-based).
// [[Rcpp::export]]
List cpp_spatial_links(int rows, int cols, double h, double radius, std::string kernel) {
  const localmean::FeatureLinks fl =
      localmean::spatial_links(rows, cols, h, radius, localmean_r::kernel_type(kernel));
  return List::create(_["start"] = wrap(fl.start), _["feature"] = wrap(fl.feature),
                      _["weight"] = wrap(fl.weight), _["slope"] = wrap(fl.slope),
                      _["centre"] = wrap(fl.centre), _["scale"] = wrap(fl.scale));
}

// Non-local means of an image given transposed (width x height, so rows are contiguous).
// [[Rcpp::export]]
NumericMatrix cpp_nl_means(NumericMatrix img_t, int half_patch, int half_search, double h,
                           double sigma, std::string kernel, int n_threads, bool verbose) {
  const std::size_t width = img_t.nrow(), height = img_t.ncol();
  const localmean::NlmSettings set{half_patch, half_search, h, localmean_r::kernel_type(kernel),
                                  sigma};
  NumericMatrix out(width, height);
  localmean_r::Monitor monitor(verbose, static_cast<double>((height + 7) / 8), "denoising");
  const bool done = localmean::nl_means(img_t.begin(), height, width, set, out.begin(),
                                        localmean_r::parallel_for(n_threads), monitor.callback());
  monitor.finish();
  if (!done) stop("the computation was stopped");
  return out;
}
