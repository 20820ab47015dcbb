// The loss registry: every loss of the local decision argmin_beta sum_i W_i l(y_i, phi_i' beta)
// with what its solver needs. One row per loss in kLossTable (R reads it through losses()):
// - likelihood families (as R's glm() families): the link, its inverse and derivative, the
//   variance function, the unit deviance, the valid range of the response and of the mean, and
//   whether the link is canonical (then Newton-Raphson and Fisher scoring coincide);
// - M-estimation losses (identity link): the loss rho, its influence function psi and the IRLS
//   working weight psi(r) / r of the standardised residual r, with the tuning constant's
//   default; the scale is the local weighted MAD of the residuals, re-estimated every step;
// - the check loss of quantile regression (tau), solved exactly (see quantile_solve());
// - the multinomial logit, with its own Newton steps (multinomial_solve()).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

namespace localmean {

enum class Loss {
  gaussian,
  binomial,
  quasibinomial,
  poisson,
  quasipoisson,
  gamma,
  multinomial,
  huber,
  bisquare,
  quantile
};

// How a loss is solved: least squares in one solve; the likelihood by IRLS (Fisher scoring);
// M-estimation by iteratively reweighted moments; the check loss by IRLS and exact pivots; the
// multinomial logit by its own Newton steps.
enum class LossKind { least_squares, likelihood, robust, quantile, multinomial };
enum class Link { identity, logit, log };
enum class Variance { constant, binomial, mu, mu_squared };
// The dispersion (scale) of a fit: fixed at 1, Pearson's estimate (quasi families and the
// Gamma, as summary.glm()), the residual variance (least squares), or the local MAD.
enum class Dispersion { fixed, pearson, residual, local_mad, none };

struct LossInfo {
  const char* name;
  Loss loss;
  LossKind kind;
  Link link;
  Variance variance;
  bool canonical;
  // Response range [y_lower, y_upper]; y_open: the bounds themselves are excluded.
  double y_lower, y_upper;
  bool y_open;
  Dispersion dispersion;
  double tuning;     // the tuning constant's default (NaN: none)
  const char* family;  // R's family function of the same model ("" when none)
};

constexpr double kNoTuning = std::numeric_limits<double>::quiet_NaN();
constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// Huber's k = 1.345 and Tukey's c = 4.685 give 95% efficiency at the normal (MASS::rlm's
// defaults); the check loss's tau defaults to the median.
constexpr LossInfo kLossTable[] = {
    {"gaussian", Loss::gaussian, LossKind::least_squares, Link::identity, Variance::constant,
     true, -kUnbounded, kUnbounded, false, Dispersion::residual, kNoTuning, "gaussian"},
    {"binomial", Loss::binomial, LossKind::likelihood, Link::logit, Variance::binomial, true, 0.0,
     1.0, false, Dispersion::fixed, kNoTuning, "binomial"},
    {"quasibinomial", Loss::quasibinomial, LossKind::likelihood, Link::logit, Variance::binomial,
     true, 0.0, 1.0, false, Dispersion::pearson, kNoTuning, "quasibinomial"},
    {"poisson", Loss::poisson, LossKind::likelihood, Link::log, Variance::mu, true, 0.0,
     kUnbounded, false, Dispersion::fixed, kNoTuning, "poisson"},
    {"quasipoisson", Loss::quasipoisson, LossKind::likelihood, Link::log, Variance::mu, true, 0.0,
     kUnbounded, false, Dispersion::pearson, kNoTuning, "quasipoisson"},
    {"Gamma", Loss::gamma, LossKind::likelihood, Link::log, Variance::mu_squared, false, 0.0,
     kUnbounded, true, Dispersion::pearson, kNoTuning, "Gamma"},
    {"multinomial", Loss::multinomial, LossKind::multinomial, Link::logit, Variance::binomial,
     true, 0.0, 1.0, false, Dispersion::fixed, kNoTuning, ""},
    {"huber", Loss::huber, LossKind::robust, Link::identity, Variance::constant, false,
     -kUnbounded, kUnbounded, false, Dispersion::local_mad, 1.345, ""},
    {"bisquare", Loss::bisquare, LossKind::robust, Link::identity, Variance::constant, false,
     -kUnbounded, kUnbounded, false, Dispersion::local_mad, 4.685, ""},
    {"quantile", Loss::quantile, LossKind::quantile, Link::identity, Variance::constant, false,
     -kUnbounded, kUnbounded, false, Dispersion::none, 0.5, ""},
};
constexpr std::size_t kLossCount = sizeof(kLossTable) / sizeof(kLossTable[0]);
static_assert(static_cast<std::size_t>(Loss::quantile) + 1 == kLossCount,
              "kLossTable has one row per Loss, in enum order");

inline const LossInfo* loss_table(std::size_t* size) {
  *size = kLossCount;
  return kLossTable;
}
inline const LossInfo& loss_info(Loss loss) { return kLossTable[static_cast<std::size_t>(loss)]; }

// The row of a loss name; false when there is none.
inline bool find_loss(const char* name, Loss* loss) {
  for (const LossInfo& row : kLossTable)
    if (std::strcmp(row.name, name) == 0) {
      *loss = row.loss;
      return true;
    }
  return false;
}

// ---- Likelihood families -----------------------------------------------------------------

inline double link_inverse(Link link, double eta) {
  switch (link) {
    case Link::logit: return 1.0 / (1.0 + std::exp(-eta));
    case Link::log: return std::exp(eta);
    default: return eta;
  }
}

inline double link_function(Link link, double mu) {
  switch (link) {
    case Link::logit: return std::log(mu / (1.0 - mu));
    case Link::log: return std::log(mu);
    default: return mu;
  }
}

// d mu / d eta at the mean mu.
inline double link_derivative(Link link, double mu) {
  switch (link) {
    case Link::logit: return mu * (1.0 - mu);
    case Link::log: return mu;
    default: return 1.0;
  }
}

// d^2 mu / d eta^2 at the mean mu.
inline double link_second_derivative(Link link, double mu) {
  switch (link) {
    case Link::logit: return mu * (1.0 - mu) * (1.0 - 2.0 * mu);
    case Link::log: return mu;
    default: return 0.0;
  }
}

// d v / d mu at the mean mu.
inline double variance_derivative(Variance variance, double mu) {
  switch (variance) {
    case Variance::binomial: return 1.0 - 2.0 * mu;
    case Variance::mu: return 1.0;
    case Variance::mu_squared: return 2.0 * mu;
    default: return 0.0;
  }
}

inline double variance_function(Variance variance, double mu) {
  switch (variance) {
    case Variance::binomial: return mu * (1.0 - mu);
    case Variance::mu: return mu;
    case Variance::mu_squared: return mu * mu;
    default: return 1.0;
  }
}

// y log(y / mu), taken as 0 at y = 0.
inline double y_log_ratio(double y, double mu) { return y > 0.0 ? y * std::log(y / mu) : 0.0; }

// The unit deviance of one observation (R's dev.resids with weight 1).
inline double unit_deviance(Variance variance, double y, double mu) {
  switch (variance) {
    case Variance::binomial: return 2.0 * (y_log_ratio(y, mu) + y_log_ratio(1.0 - y, 1.0 - mu));
    case Variance::mu: return 2.0 * (y_log_ratio(y, mu) - (y - mu));
    case Variance::mu_squared: return -2.0 * (std::log(y / mu) - (y - mu) / mu);
    default: return (y - mu) * (y - mu);
  }
}

// Whether a mean is a valid starting value (inside the family's open range).
inline bool valid_mean(Variance variance, double mu) {
  switch (variance) {
    case Variance::binomial: return mu > 0.0 && mu < 1.0;
    case Variance::mu:
    case Variance::mu_squared: return mu > 0.0;
    default: return std::isfinite(mu);
  }
}

// ---- M-estimation and the check loss ------------------------------------------------------

// rho(r) of a standardised residual r with tuning constant c (tau for the check loss).
inline double loss_rho(Loss loss, double r, double c) {
  const double a = std::fabs(r);
  switch (loss) {
    case Loss::huber: return a <= c ? 0.5 * r * r : c * (a - 0.5 * c);
    case Loss::bisquare: {
      if (a >= c) return c * c / 6.0;
      const double t = 1.0 - (r / c) * (r / c);
      return c * c / 6.0 * (1.0 - t * t * t);
    }
    case Loss::quantile: return r * (r < 0.0 ? c - 1.0 : c);
    default: return 0.5 * r * r;
  }
}

// The influence function psi = rho'.
inline double loss_psi(Loss loss, double r, double c) {
  switch (loss) {
    case Loss::huber: return std::fabs(r) <= c ? r : (r > 0.0 ? c : -c);
    case Loss::bisquare: {
      if (std::fabs(r) >= c) return 0.0;
      const double t = 1.0 - (r / c) * (r / c);
      return r * t * t;
    }
    case Loss::quantile: return r < 0.0 ? c - 1.0 : c;
    default: return r;
  }
}

// The IRLS working weight psi(r) / r (its limit at r = 0; for the check loss, where it is
// unbounded at 0, at |r| >= floor).
inline double loss_weight(Loss loss, double r, double c, double floor = 0.0) {
  switch (loss) {
    case Loss::huber: return std::fabs(r) <= c ? 1.0 : c / std::fabs(r);
    case Loss::bisquare: {
      if (std::fabs(r) >= c) return 0.0;
      const double t = 1.0 - (r / c) * (r / c);
      return t * t;
    }
    case Loss::quantile: return (r < 0.0 ? 1.0 - c : c) / std::fmax(std::fabs(r), floor);
    default: return 1.0;
  }
}

}  // namespace localmean
