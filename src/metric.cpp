// Glue for the learned metric and the leave-one-out score with its gradient (localmean/metric.hpp).
#include "r_policies.h"

#include <localmean/metric.hpp>

using namespace Rcpp;

// Leave-one-out squared error of the `kernel` fit of `degree` (0 or 1) under the metric
// x -> A x, with its gradient with respect to A: list(loss, gradient (d x d), failed = the
// points without a leave-one-out fit, whose loss is then Inf; gap = the smallest 1 - L_ii over
// the others). `x` is n x d, `prior` empty or length n, `categorical` as for cpp_engine_fit
// (lambdas held fixed), `cutoff` the kernel's truncation radius (0: the registry's), `min_gap`
// the smallest 1 - L_ii of a point that counts (L_ii: its leverage in the full fit).
// `diagonal`: A is diagonal and only the diagonal of the gradient is computed (the others 0);
// `lambda_gradient`: also `lambda_gradient`, dL/dlambda per categorical variable; `kernel`: a
// registry kernel's name.
// [[Rcpp::export]]
List cpp_metric_loss(NumericMatrix x, NumericVector y, NumericVector prior, NumericMatrix A,
                     int degree, List categorical, double cutoff, double min_gap,
                     int n_threads, bool verbose, bool diagonal = false,
                     bool lambda_gradient = false, std::string kernel = "gaussian") {
  const std::size_t n = x.nrow(), d = x.ncol();
  const bool bad_prior = prior.size() && static_cast<std::size_t>(prior.size()) != n;
  if (static_cast<std::size_t>(y.size()) != n || static_cast<std::size_t>(A.nrow()) != d ||
      static_cast<std::size_t>(A.ncol()) != d || bad_prior)
    stop("cpp_metric_loss: inconsistent dimensions");
  if (degree != 0 && degree != 1) stop("cpp_metric_loss: degree must be 0 or 1");
  localmean::KernelType type;
  if (!localmean::kernel_from_name(kernel, &type) || localmean::is_tabulated(type))
    stop("cpp_metric_loss: '%s' is no registry kernel", kernel);
  std::vector<int> codes;
  const localmean::CategoricalVars cat = localmean_r::categorical_vars(categorical, codes);
  localmean::MetricProblem problem;
  problem.x = x.begin();
  problem.n = n;
  problem.d = d;
  problem.y = y.begin();
  problem.prior = prior.size() ? prior.begin() : nullptr;
  problem.categorical = cat.count ? &cat : nullptr;
  problem.degree = degree;
  problem.kernel = type;
  problem.cutoff = cutoff;
  problem.min_gap = min_gap;
  problem.diagonal = diagonal;
  problem.lambda_gradient = lambda_gradient;
  localmean::MetricLoss out;
  localmean_r::Monitor monitor(verbose, static_cast<double>(n), "metric loss");
  localmean::metric_loo_loss(problem, A.begin(), out, localmean_r::parallel_for(n_threads),
                             monitor.callback());
  monitor.finish();
  NumericMatrix gradient(d, d);
  std::copy(out.gradient.begin(), out.gradient.end(), gradient.begin());
  return List::create(_["loss"] = out.loss, _["gradient"] = gradient,
                      _["failed"] = static_cast<double>(out.failed), _["gap"] = out.gap,
                      _["lambda_gradient"] = NumericVector(out.lambda_gradient.begin(),
                                                           out.lambda_gradient.end()));
}
