// Exponential families of the local likelihood, each with its canonical link, as R's glm()
// families: the mean from the linear predictor, the variance function, the link and the
// deviance contribution of one observation. With a canonical link, Newton-Raphson and Fisher
// scoring (IRLS) coincide.
#pragma once

#include <cmath>

namespace localmean {

// multinomial: the baseline-category logit of one-hot class indicators, solved by its own
// Newton steps (multinomial_solve() in engine.hpp); the scalar functions below do not apply.
enum class Family { gaussian, binomial, poisson, multinomial };

inline double family_mean(Family family, double eta) {
  switch (family) {
    case Family::binomial: return 1.0 / (1.0 + std::exp(-eta));
    case Family::poisson: return std::exp(eta);
    default: return eta;
  }
}

inline double family_link(Family family, double mu) {
  switch (family) {
    case Family::binomial: return std::log(mu / (1.0 - mu));
    case Family::poisson: return std::log(mu);
    default: return mu;
  }
}

inline double family_variance(Family family, double mu) {
  switch (family) {
    case Family::binomial: return mu * (1.0 - mu);
    case Family::poisson: return mu;
    default: return 1.0;
  }
}

// y log(y / mu), taken as 0 at y = 0.
inline double y_log_ratio(double y, double mu) { return y > 0.0 ? y * std::log(y / mu) : 0.0; }

inline double family_deviance(Family family, double y, double mu) {
  switch (family) {
    case Family::binomial: return 2.0 * (y_log_ratio(y, mu) + y_log_ratio(1.0 - y, 1.0 - mu));
    case Family::poisson: return 2.0 * (y_log_ratio(y, mu) - (y - mu));
    default: return (y - mu) * (y - mu);
  }
}

// Whether a mean is a valid starting value (inside the family's open range).
inline bool family_valid_mean(Family family, double mu) {
  switch (family) {
    case Family::binomial: return mu > 0.0 && mu < 1.0;
    case Family::poisson: return mu > 0.0;
    default: return std::isfinite(mu);
  }
}

}  // namespace localmean
