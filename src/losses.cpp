// R's view of the loss registry (inst/include/localmean/losses.hpp): its table, and its
// functions evaluated on vectors, so that R reads every loss fact from the one C++ table.
#include <Rcpp.h>

#include <string>

#include <localmean/losses.hpp>

using namespace Rcpp;

namespace {

const char* kind_name(localmean::LossKind kind) {
  switch (kind) {
    case localmean::LossKind::least_squares: return "least squares";
    case localmean::LossKind::likelihood: return "likelihood";
    case localmean::LossKind::robust: return "M-estimation";
    case localmean::LossKind::quantile: return "quantile";
    default: return "multinomial";
  }
}

const char* link_name(localmean::Link link) {
  switch (link) {
    case localmean::Link::logit: return "logit";
    case localmean::Link::log: return "log";
    default: return "identity";
  }
}

const char* variance_name(localmean::Variance variance) {
  switch (variance) {
    case localmean::Variance::binomial: return "mu(1-mu)";
    case localmean::Variance::mu: return "mu";
    case localmean::Variance::mu_squared: return "mu^2";
    default: return "constant";
  }
}

const char* dispersion_name(localmean::Dispersion dispersion) {
  switch (dispersion) {
    case localmean::Dispersion::fixed: return "fixed";
    case localmean::Dispersion::pearson: return "pearson";
    case localmean::Dispersion::residual: return "residual";
    case localmean::Dispersion::local_mad: return "local MAD";
    default: return "none";
  }
}

const localmean::LossInfo& loss_row(const std::string& name) {
  localmean::Loss loss;
  if (!localmean::find_loss(name.c_str(), &loss)) stop("unknown loss '%s'", name);
  return localmean::loss_info(loss);
}

}  // namespace

// The loss registry, one row per loss.
// [[Rcpp::export]]
DataFrame cpp_loss_table() {
  std::size_t size;
  const localmean::LossInfo* table = localmean::loss_table(&size);
  CharacterVector name(size), kind(size), link(size), variance(size), dispersion(size),
      family(size);
  LogicalVector canonical(size), y_open(size);
  NumericVector y_lower(size), y_upper(size), tuning(size);
  for (std::size_t i = 0; i < size; ++i) {
    const localmean::LossInfo& row = table[i];
    name[i] = row.name;
    kind[i] = kind_name(row.kind);
    link[i] = link_name(row.link);
    variance[i] = variance_name(row.variance);
    canonical[i] = row.canonical;
    y_lower[i] = row.y_lower;
    y_upper[i] = row.y_upper;
    y_open[i] = row.y_open;
    dispersion[i] = dispersion_name(row.dispersion);
    tuning[i] = row.tuning;
    family[i] = row.family[0] ? CharacterVector::create(row.family)[0] : NA_STRING;
  }
  return DataFrame::create(_["loss"] = name, _["kind"] = kind, _["link"] = link,
                           _["variance"] = variance, _["canonical"] = canonical,
                           _["y_lower"] = y_lower, _["y_upper"] = y_upper, _["y_open"] = y_open,
                           _["scale"] = dispersion, _["tuning"] = tuning, _["family"] = family,
                           _["stringsAsFactors"] = false);
}

// A function of the loss `name` at x (and y): "linkinv" (mu of eta = x), "linkfun" (eta of mu),
// "mu.eta" (d mu / d eta at eta = x), "variance" (of mu = x), "dev.resids" (unit deviance of y
// at mu = x), "rho", "psi", "weight" (of the standardised residual x with tuning constant
// `param`).
// [[Rcpp::export]]
NumericVector cpp_loss_eval(std::string name, std::string what, NumericVector x,
                            NumericVector y, double param) {
  const localmean::LossInfo& row = loss_row(name);
  const R_xlen_t n = x.size();
  NumericVector out(n);
  if (what == "dev.resids" && y.size() != n) stop("y must have the length of x");
  for (R_xlen_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (what == "linkinv") {
      out[i] = localmean::link_inverse(row.link, v);
    } else if (what == "linkfun") {
      out[i] = localmean::link_function(row.link, v);
    } else if (what == "mu.eta") {
      out[i] = localmean::link_derivative(row.link, localmean::link_inverse(row.link, v));
    } else if (what == "variance") {
      out[i] = localmean::variance_function(row.variance, v);
    } else if (what == "dev.resids") {
      out[i] = localmean::unit_deviance(row.variance, y[i], v);
    } else if (what == "rho") {
      out[i] = localmean::loss_rho(row.loss, v, param);
    } else if (what == "psi") {
      out[i] = localmean::loss_psi(row.loss, v, param);
    } else if (what == "weight") {
      out[i] = localmean::loss_weight(row.loss, v, param);
    } else {
      stop("unknown loss function '%s'", what);
    }
  }
  return out;
}
