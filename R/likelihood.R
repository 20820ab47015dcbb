# The local likelihood: local polynomial fits of a generalized linear model's linear predictor
# (the local decision with the negative log-likelihood as its loss), solved by Newton steps per
# query in the engine (see likelihood_solve() in engine.hpp).

# Families of the local likelihood, with their canonical links and the engine's family.
likelihood_families <- c(gaussian = "gaussian", binomial = "binomial", poisson = "poisson",
                         quasibinomial = "binomial", quasipoisson = "poisson")

# A stats family object from `family` (a name, a family function or object), with a canonical
# link.
check_family <- function(family, call = rlang::caller_env()) {
  if (is.character(family) && length(family) == 1L && family %in% names(likelihood_families)) {
    family <- get(family, envir = asNamespace("stats"), mode = "function")
  }
  if (is.function(family)) family <- family()
  if (!inherits(family, "family") || !family$family %in% names(likelihood_families)) {
    abort("{.arg family} must be one of {.val {names(likelihood_families)}} (a name or a
           {.pkg stats} family object).", call = call)
  }
  canonical <- c(gaussian = "identity", binomial = "logit", poisson = "log",
                 quasibinomial = "logit", quasipoisson = "log")[[family$family]]
  if (family$link != canonical) {
    abort(c("{.arg family} {.val {family$family}} is fitted with its canonical link
             {.val {canonical}} only.", x = "Got link {.val {family$link}}."), call = call)
  }
  family
}

# The engine's name of a family ("gaussian", "binomial", "poisson").
engine_family <- function(family) likelihood_families[[family$family]]

# The response of a family as glm() takes it: for binomial families 0/1, logical, a factor (the
# first level is failure) or proportions with the trials as weights, or a two-column matrix of
# successes and failures; for Poisson families non-negative counts. Returns list(y, weights).
family_response <- function(y, weights, family, n, call = rlang::caller_env()) {
  binomial <- engine_family(family) == "binomial"
  if (binomial && is.matrix(y) && ncol(y) == 2L) {
    trials <- y[, 1L] + y[, 2L]
    y <- ifelse(trials > 0, y[, 1L] / trials, 0)
    weights <- (weights %||% 1) * trials
  } else if (binomial && (is.factor(y) || is.logical(y))) {
    if (is.factor(y) && nlevels(y) != 2L) {
      abort("{.arg y} must have two levels for the {.val binomial} family.", call = call)
    }
    y <- if (is.factor(y)) as.integer(y) - 1L else as.integer(y)
  }
  y <- check_response(y, n, call = call)
  if (binomial && any(y < 0 | y > 1)) {
    abort("{.arg y} must lie in [0, 1] for the {.val binomial} family (or be counts of
           successes and failures as a two-column matrix).", call = call)
  }
  if (engine_family(family) == "poisson" && any(y < 0)) {
    abort("{.arg y} must be non-negative counts for the {.val poisson} family.", call = call)
  }
  list(y = y, weights = weights)
}

# Response-scale fits, residuals and the summaries of a local likelihood fit: deviance, effective
# degrees of freedom (the trace of the influence matrix), dispersion (1, or Pearson's estimate
# for quasi families) and the leave-one-out deviance of the one-step approximation.
add_likelihood_statistics <- function(fit) {
  family <- fit$family
  w <- fit$weights %||% rep(1, length(fit$y))
  eta <- fit$fitted
  ok <- is.finite(eta)
  mu <- family$linkinv(eta)
  fit$linear.predictors <- eta
  fit$fitted <- mu
  fit$residuals <- fit$y - mu
  fit$df <- sum(fit$leverage[ok])
  n <- sum(w > 0 & ok)
  fit$deviance <- sum(family$dev.resids(fit$y[ok], mu[ok], w[ok]))
  fit$null.deviance <- sum(family$dev.resids(fit$y[ok], sum(w[ok] * fit$y[ok]) / sum(w[ok]),
                                             w[ok]))
  fit$df.residual <- n - fit$df
  fit$dispersion <- if (family$family %in% c("binomial", "poisson")) 1 else
    sum((w * (fit$y - mu)^2 / family$variance(mu))[ok]) / fit$df.residual
  fit$sigma <- sqrt(fit$dispersion)
  fit$cv <- likelihood_cv(fit$y[ok], eta[ok], fit$leverage[ok], w[ok], family)
  fit
}

# Selector scores of a local likelihood fit (linear predictors eta at the data, leverages):
# "cv" the mean leave-one-out deviance (likelihood_cv()); "gcv" n D / (n - df)^2 and "aicc"
# (D + 2 df + 2 df (df + 1) / (n - df - 1)) / n, with the deviance D in place of the residual
# sum of squares and of -2 log-likelihood (Loader 1999, ch. 4).
likelihood_score <- function(criterion, y, eta, leverage, prior, family) {
  if (any(!is.finite(eta)) || any(!is.finite(leverage))) return(Inf)
  w <- prior %||% rep(1, length(y))
  if (criterion == "cv") return(likelihood_cv(y, eta, leverage, w, family))
  n <- sum(w > 0)
  dev <- sum(family$dev.resids(y, family$linkinv(eta), w))
  df <- sum(leverage)
  switch(criterion,
    gcv = if (df >= n) Inf else n * dev / (n - df)^2,
    aicc = if (df + 1 >= n) Inf else (dev + 2 * df + 2 * df * (df + 1) / (n - df - 1)) / n
  )
}

# Mean leave-one-out deviance, each point left out by one Newton step from the full fit: for a
# canonical link, eta_-i = eta_i - L_ii / (1 - L_ii) (y_i - mu_i) / v(mu_i).
likelihood_cv <- function(y, eta, leverage, w, family) {
  if (length(eta) == 0L || any(!is.finite(eta)) || any(leverage[w > 0] >= 1 - 1e-10)) return(Inf)
  mu <- family$linkinv(eta)
  eta_out <- eta - leverage / (1 - leverage) * (y - mu) / family$variance(mu)
  sum(family$dev.resids(y, family$linkinv(eta_out), w)) / sum(w)
}

# The variance function at a linear predictor eta of the engine's family: a point's Newton
# weight relative to its kernel weight, which makes its leverage.
newton_weight <- function(family, eta) {
  switch(family,
    binomial = stats::dlogis(eta),
    poisson = exp(eta),
    rep(1, length(eta))
  )
}
