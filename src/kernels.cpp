// Kernels of the user's own: registration of a tabulated radial profile as a run-time row of
// the kernel registry (see KernelProfile in kernels.hpp and user_kernel() in R/kernels.R).
#include <Rcpp.h>

#include <memory>
#include <string>

#include "localmean/kernels.hpp"

using namespace Rcpp;

// Registers (or replaces) under `name` the profile tabulated at equally spaced nodes of the
// distance on [0, upper], or of the squared distance on [0, upper^2], and returns its registry
// row.
// [[Rcpp::export]]
List cpp_register_kernel(std::string name, NumericVector values, double upper, bool compact,
                         bool squared) {
  if (values.size() < 5) stop("a tabulated kernel needs at least 5 nodes");
  localmean::KernelType type;
  if (localmean::kernel_from_name(name, &type) && !localmean::is_tabulated(type))
    stop("'%s' names a registry kernel", name);
  type = localmean::register_profile(
      std::unique_ptr<localmean::KernelProfile>(new localmean::KernelProfile(
          name, values.begin(), values.size(), upper, compact, squared)));
  const localmean::KernelInfo& info = localmean::kernel_info(type);
  return List::create(_["kernel"] = name, _["compact"] = info.compact, _["cutoff"] = info.cutoff,
                      _["constant"] = info.constant, _["mu2"] = info.mu2,
                      _["roughness"] = info.roughness, _["multivariate"] = info.multivariate,
                      _["reach"] = info.reach, _["quartile"] = info.quartile);
}

// The profile of a registered kernel at squared scaled distances r2 (without its constant).
// [[Rcpp::export]]
NumericVector cpp_kernel_shape(std::string name, NumericVector r2) {
  localmean::KernelType type;
  if (!localmean::kernel_from_name(name, &type)) stop("unknown kernel '%s'", name);
  NumericVector out(r2.size());
  for (R_xlen_t i = 0; i < r2.size(); ++i) out[i] = localmean::kernel_shape(type, r2[i]);
  return out;
}

// The kernel's distribution function on the line at scaled distances u (kernel_cdf()).
// [[Rcpp::export]]
NumericVector cpp_kernel_cdf(std::string name, NumericVector u) {
  localmean::KernelType type;
  if (!localmean::kernel_from_name(name, &type)) stop("unknown kernel '%s'", name);
  NumericVector out(u.size());
  for (R_xlen_t i = 0; i < u.size(); ++i) out[i] = localmean::kernel_cdf(type, u[i]);
  return out;
}
