# The losses of the local decision: the local likelihood (local polynomial fits of a generalized
# linear model's linear predictor, solved by IRLS per query), M-estimation (Huber, bisquare) and
# the check loss of quantiles, all from the loss registry of the C++ core (losses.hpp, solved in
# iterative.hpp).

#' The loss registry
#'
#' `local_poly(family =)` fits the local polynomial that minimises
#' \eqn{\sum_i K(x^*, x_i) w_i \ell(y_i, \beta'\phi(x_i - x^*))}{sum_i K(x^*, x_i) w_i
#' l(y_i, beta' phi(x_i - x^*))} at every query point \eqn{x^*}{x^*}, for any loss of this
#' registry (the localization trick). The registry is one table of the C++ core; R reads every
#' fact of a loss from it.
#'
#' * **Likelihood families** (`"gaussian"`, `"binomial"`, `"quasibinomial"`, `"poisson"`,
#'   `"quasipoisson"`, `"Gamma"`): the negative log-likelihood of a generalized linear model
#'   with the given link, fitted by iteratively reweighted least squares (Fisher scoring, which
#'   is Newton-Raphson for canonical links) from the local mean. The Gamma family uses the log
#'   link (not R's default inverse link), so that every mean is positive.
#' * **M-estimation** (`"huber"`, `"bisquare"`): \eqn{\rho(r / s)}{rho(r / s)} with Huber's
#'   \eqn{\rho}{rho} (tuning constant \eqn{k}{k}, default 1.345) or Tukey's bisquare
#'   (\eqn{c}{c}, default 4.685), both 95% efficient at the normal. At each query the scale
#'   \eqn{s}{s} is the kernel-weighted median absolute residual of the window divided by 0.6745,
#'   re-estimated at every step, and the fit is iteratively reweighted least squares with the
#'   weights \eqn{\psi(r/s) / (r/s)}{psi(r/s) / (r/s)} from the local least-squares fit: the
#'   estimator of `MASS::rlm(weights = K, wt.method = "case")` applied to each window.
#' * **Quantiles** (`"quantile"`): the check loss \eqn{\rho_\tau(r) = r(\tau - [r < 0])}{rho_tau(r)
#'   = r (tau - [r < 0])} of the `tau` quantile (default the median), minimised exactly: after a
#'   few reweighted least-squares steps the fit moves between interpolations of window points
#'   (simplex pivots, Barrodale and Roberts 1973) until the optimality condition holds, so that it
#'   equals a linear-programming solution such as `quantreg::rq(weights = K)` per window.
#' * `"multinomial"`: the local baseline-category logit of [local_classify()].
#'
#' Every iterative fit stops when its criterion changes by less than `local_control(tol =)`
#' relative to it (the deviance for likelihood families, also the linear predictor for
#' non-canonical links; the window's residuals for M-estimation), within
#' `local_control(max_iter =)` steps (M-estimation: 4 `max_iter` reweighting steps, which
#' converge linearly; quantiles: `max_iter` times the window size in pivots); query points that
#' do not converge are `NA`, with one warning that counts them.
#'
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A data frame with one row per loss: `loss` (the name `family =` takes), `kind`
#'   (`"least squares"`, `"likelihood"`, `"M-estimation"`, `"quantile"`, `"multinomial"`),
#'   `link`, `variance` (the variance function), `canonical` (whether the link is canonical),
#'   `y_lower`, `y_upper`, `y_open` (the valid range of the response; `y_open`: the bounds
#'   themselves are excluded), `scale` (how the dispersion or scale is estimated: `"fixed"` at 1,
#'   `"pearson"`, `"residual"` variance, `"local MAD"`, `"none"`) and `tuning` (the default
#'   tuning constant: Huber's k, the bisquare's c, the quantile's tau).
#' @references
#' Barrodale, I. and Roberts, F. D. K. (1973). An improved algorithm for discrete L1 linear
#' approximation. *SIAM Journal on Numerical Analysis* 10, 839-848.
#'
#' Huber, P. J. (1964). Robust estimation of a location parameter. *Annals of Mathematical
#' Statistics* 35, 73-101.
#'
#' Koenker, R. and Bassett, G. (1978). Regression quantiles. *Econometrica* 46, 33-50.
#'
#' Loader, C. (1999). *Local Regression and Likelihood*. Springer.
#' @family regression
#' @export
#' @examples
#' losses()
#' x <- seq(0, 1, length.out = 200)
#' y <- sin(2 * pi * x) + rt(200, df = 2) / 4
#' robust <- local_poly(x, y, family = "huber", bandwidth = 0.1)
#' upper <- local_poly(x, y, family = "quantile", tau = 0.9, bandwidth = 0.1)
losses <- function(...) {
  check_dots(...)
  loss_table()[c("loss", "kind", "link", "variance", "canonical", "y_lower", "y_upper",
                 "y_open", "scale", "tuning")]
}

# Every fact of the C++ loss table (losses.hpp), read once per session; `family` names R's family
# function of the same model (NA for the other losses).
loss_table <- function() {
  if (is.null(loss_cache$table)) loss_cache$table <- cpp_loss_table()
  loss_cache$table
}
loss_cache <- new.env(parent = emptyenv())

# The registry's row of one loss, as a list (kept: every fit and prediction asks several times).
loss_row <- function(loss) {
  loss_cache$rows[[loss]] %||% {
    tab <- loss_table()
    loss_cache$rows[[loss]] <- as.list(tab[tab$loss == loss, ])
  }
}

# The losses that local_poly() fits (every row but the multinomial logit's), read once.
poly_losses <- function() {
  loss_cache$poly %||% {
    tab <- loss_table()
    loss_cache$poly <- tab$loss[tab$kind != "multinomial"]
  }
}

# Whether a loss (name) is fitted by M-estimation or the check loss (identity link, no
# likelihood: no deviance, leverages or standard errors).
is_m_loss <- function(loss) loss_row(loss)$kind %in% c("M-estimation", "quantile")

# A family object (as stats' family objects) of a loss of the registry: R's family for likelihood
# families (with the registry's link), else one whose functions evaluate the registry's, with the
# tuning constant `loss_param`.
family_of <- function(loss, loss_param = NA_real_) {
  # without a tuning constant the object depends on the loss alone: made once per session
  if (is.na(loss_param)) {
    return(loss_cache$families[[loss]] %||%
             (loss_cache$families[[loss]] <- make_family(loss, loss_param)))
  }
  make_family(loss, loss_param)
}

make_family <- function(loss, loss_param) {
  row <- loss_row(loss)
  if (!is.na(row$family)) {
    family <- get(row$family, envir = asNamespace("stats"), mode = "function")(link = row$link)
  } else {
    eval_loss <- function(what) {
      force(what)
      function(x) cpp_loss_eval(loss, what, as.double(x), numeric(0), loss_param)
    }
    family <- structure(list(family = loss, link = row$link, linkfun = eval_loss("linkfun"),
                             linkinv = eval_loss("linkinv"), mu.eta = eval_loss("mu.eta"),
                             variance = eval_loss("variance"), rho = eval_loss("rho"),
                             psi = eval_loss("psi")), class = "family")
  }
  family$loss_param <- loss_param
  family
}

# A family object from `family` (a loss name of the registry, or a stats family object or
# function of one of its likelihood families, with the registry's link); `tuning` (NULL: the
# registry's default) and `tau` set the tuning constant of M-estimation and quantile losses.
check_family <- function(family, tuning = NULL, tau = 0.5, call = rlang::caller_env()) {
  fitted_by_poly <- poly_losses()
  if (is.character(family) && length(family) == 1L && family %in% fitted_by_poly) {
    return(family_of(family, loss_param(family, tuning, tau, call)))
  }
  if (is.function(family)) family <- family()
  if (!inherits(family, "family") || !family$family %in% loss_table()$family) {
    abort("{.arg family} must be one of {.val {fitted_by_poly}} (a name, or a {.pkg stats}
           family object of a likelihood family).", call = call)
  }
  row <- loss_row(family$family)
  if (family$link != row$link) {
    which <- if (row$canonical) "its canonical link" else "the link"
    abort(c("{.arg family} {.val {family$family}} is fitted with {which} {.val {row$link}} only.",
            x = "Got link {.val {family$link}}."), call = call)
  }
  family_of(family$family)
}

# The tuning constant of a loss: tau for quantiles, `tuning` (default the registry's) for
# M-estimation, NA otherwise.
loss_param <- function(loss, tuning, tau, call) {
  row <- loss_row(loss)
  if (row$kind == "quantile") {
    if (!is.numeric(tau) || length(tau) != 1L || !is.finite(tau) || tau <= 0 || tau >= 1) {
      abort("{.arg tau} must be a number strictly between 0 and 1.", call = call)
    }
    return(as.double(tau))
  }
  if (row$kind != "M-estimation") return(NA_real_)
  if (is.null(tuning)) return(row$tuning)
  if (!is.numeric(tuning) || length(tuning) != 1L || !is.finite(tuning) || tuning <= 0) {
    abort("{.arg tuning} must be a positive number.", call = call)
  }
  as.double(tuning)
}

# The engine's name of a family (the registry's loss name).
engine_family <- function(family) family$family

# The response of a family as glm() takes it: for binomial families 0/1, logical, a factor (the
# first level is failure) or proportions with the trials as weights, or a two-column matrix of
# successes and failures; otherwise numbers within the registry's range of the family's
# responses. Returns list(y, weights).
family_response <- function(y, weights, family, n, call = rlang::caller_env()) {
  row <- loss_row(engine_family(family))
  binomial <- row$variance == "mu(1-mu)"
  if (binomial && is.matrix(y) && ncol(y) == 2L) {
    trials <- y[, 1L] + y[, 2L]
    y <- ifelse(trials > 0, y[, 1L] / trials, 0)
    weights <- (weights %||% 1) * trials
  } else if (binomial && (is.factor(y) || is.logical(y))) {
    if (is.factor(y) && nlevels(y) != 2L) {
      abort("{.arg y} must have two levels for the {.val {row$loss}} family.", call = call)
    }
    y <- if (is.factor(y)) as.integer(y) - 1L else as.integer(y)
  }
  y <- check_response(y, n, call = call)
  # y is finite: its range decides, and no pass is needed where both bounds are infinite
  # (elementwise comparisons allocate three vectors of n: at n = 1e6 they tripled the time of a
  # binned fit).
  outside <- FALSE
  if ((is.finite(row$y_lower) || is.finite(row$y_upper)) && length(y)) {
    extent <- range(y)
    outside <- if (row$y_open) extent[1L] <= row$y_lower || extent[2L] >= row$y_upper else
      extent[1L] < row$y_lower || extent[2L] > row$y_upper
  }
  if (outside) {
    range <- sprintf("%s%s, %s%s", if (row$y_open) "(" else "[", format(row$y_lower),
                     format(row$y_upper), if (row$y_open || is.infinite(row$y_upper)) ")" else "]")
    what <- if (binomial) " (or be counts of successes and failures as a two-column matrix)" else
      if (row$y_lower == 0 && !row$y_open) ": non-negative" else ""
    abort("{.arg y} must lie in {range} for the {.val {row$loss}} family{what}.", call = call)
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
  fit$dispersion <- if (loss_row(family$family)$scale == "fixed") 1 else
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

# Mean leave-one-out deviance, each point left out by one Fisher scoring step from the full fit:
# eta_-i = eta_i - L_ii / (1 - L_ii) (y_i - mu_i) / g'(mu_i), g' = d mu / d eta (v(mu_i) for a
# canonical link).
likelihood_cv <- function(y, eta, leverage, w, family) {
  if (length(eta) == 0L || any(!is.finite(eta)) || any(leverage[w > 0] >= 1 - 1e-10)) return(Inf)
  mu <- family$linkinv(eta)
  eta_out <- eta - leverage / (1 - leverage) * (y - mu) / link_slope(family, eta, mu)
  sum(family$dev.resids(y, family$linkinv(eta_out), w)) / sum(w)
}

# d mu / d eta at eta (mu = g^-1(eta)): the variance function for canonical links, as the engine
# takes it.
link_slope <- function(family, eta, mu = family$linkinv(eta)) {
  if (loss_row(family$family)$canonical) family$variance(mu) else family$mu.eta(eta)
}

# A point's working weight relative to its kernel weight at a linear predictor eta of the
# engine's family (a loss name), g'(mu)^2 / v(mu), which makes its leverage; NA for M-estimation
# and quantile losses, whose fits have no leverages.
newton_weight <- function(family, eta) {
  row <- loss_row(family)
  if (row$kind %in% c("M-estimation", "quantile")) return(rep(NA_real_, length(eta)))
  # (the multinomial logit's engine gives the leverage factor itself)
  if (row$kind %in% c("least squares", "multinomial")) return(rep(1, length(eta)))
  f <- family_of(family)
  slope <- f$mu.eta(eta)
  if (row$canonical) slope else slope^2 / f$variance(f$linkinv(eta))
}

# Response-scale fits, residuals and summaries of an M-estimation or quantile fit: the loss at
# the fit (`loss`: sum_i w_i rho_tau(r_i) for quantiles, sum_i w_i s^2 rho(r_i / s) for
# M-estimation with s the weighted MAD of the residuals, also the fit's `sigma`).
add_loss_statistics <- function(fit) {
  family <- fit$family
  w <- fit$weights %||% rep(1, length(fit$y))
  ok <- is.finite(fit$fitted)
  fit$linear.predictors <- fit$fitted
  fit$residuals <- fit$y - fit$fitted
  r <- fit$residuals[ok]
  fit$df <- NA_real_
  if (loss_row(family$family)$kind == "quantile") {
    fit$loss <- sum(w[ok] * family$rho(r))
  } else {
    s <- weighted_mad(r, w[ok])
    fit$loss <- sum(w[ok] * s^2 * family$rho(r / s))
    fit$sigma <- s
  }
  fit
}

# The weighted median of |r| divided by 0.6745 (MASS::rlm's scale for case weights).
weighted_mad <- function(r, w) {
  if (length(r) == 0L) return(NA_real_)
  o <- order(abs(r))
  a <- abs(r)[o]
  p <- cumsum(w[o]) / sum(w)
  k <- sum(p < 0.5)
  if (p[k + 1L] > 0.5) a[k + 1L] / 0.6745 else (a[k + 1L] + a[k + 2L]) / (2 * 0.6745)
}

# The leave-one-out score of an M-estimation or quantile specification, from exact leave-one-out
# fits (each data point left out of its own window): the mean check loss of the left-out
# residuals for quantiles, their mean absolute value for M-estimation (L1 cross-validation, which
# outliers do not dominate).
loss_cv <- function(spec, n_threads = spec$n_threads, verbose = FALSE) {
  n <- NROW(spec$x)
  res <- engine_run(spec, spec$x, n_threads = n_threads, verbose = verbose,
                    query_codes = spec$categorical$codes, leave_out = seq_len(n))
  r <- spec$values[, 1L] - res$coef[, 1L, 1L]
  w <- spec$prior %||% rep(1, n)
  if (anyNA(r[w > 0])) return(Inf)
  f <- family_of(spec$family, spec$loss_param)
  loss <- if (loss_row(spec$family)$kind == "quantile") f$rho(r) else abs(r)
  sum(w * loss) / sum(w)
}

# A loss with its tuning constant, for print().
loss_label <- function(family) {
  row <- loss_row(family$family)
  name <- switch(row$kind, quantile = "tau", `M-estimation` = "tuning", NULL)
  if (is.null(name)) return(family$family)
  sprintf("%s (%s = %s)", family$family, name, format(family$loss_param))
}

# Least-squares local polynomial fits with n_robust robustness iterations (Cleveland, 1979; loess's
# family = "symmetric"): each refits with the prior weights times the bisquare robustness
# weights of the last fit's residuals, at the first fit's bandwidth.
robust_iterations <- function(x, y, kernel, bandwidth, degree, family, n_robust, weights, method,
                              n_threads, verbose, control, call = rlang::caller_env()) {
  if (!identical(check_family(family, call = call)$family, "gaussian")) {
    abort("{.arg n_robust} applies to least squares ({.code family = \"gaussian\"}); use the
           {.val huber} or {.val bisquare} family for local M-estimation.", call = call)
  }
  refit <- function(bandwidth, weights) {
    local_poly.default(x, y, kernel = kernel, bandwidth = bandwidth, degree = degree,
                       weights = weights, method = method, n_threads = n_threads,
                       verbose = verbose, control = control)
  }
  # nn() radii depend on the data's x alone: searched once, kept for every iteration
  memo <- new.env(parent = emptyenv())
  if (inherits(bandwidth, "local_nn")) bandwidth$memo <- memo
  first <- refit(bandwidth, weights)
  fixed <- first$bandwidth
  if (!is.null(first$nn)) {
    fixed <- nn(first$nn$k, first$nn$standardise)
    fixed$memo <- memo
  }
  fit <- first
  for (iter in seq_len(n_robust)) {
    robust <- robustness_weights(fit$residuals)
    fit <- refit(fixed, (weights %||% 1) * robust)
  }
  if (!is.null(fit$nn)) {
    fit$nn$memo <- NULL
    fit$spec$nn$memo <- NULL
  }
  fit$weights <- weights
  fit$robustness_weights <- robust
  fit$n_robust <- as.integer(n_robust)
  fit$bandwidth_method <- first$bandwidth_method
  fit$cv_curve <- first$cv_curve
  fit
}

# The bisquare robustness weights of residuals r: B(|r| / (6 m)) with m the median of |r|, 1
# within 0.001 of that scale and 0 beyond 0.999 of it (as lowess and loess compute them); 1 where
# a residual is missing, and for all when m vanishes.
robustness_weights <- function(r) {
  a <- abs(r)
  ok <- is.finite(a)
  cmad <- 6 * stats::median(a[ok])
  if (!is.finite(cmad) || cmad < .Machine$double.xmin) return(rep(1, length(r)))
  w <- (1 - (a / cmad)^2)^2
  w[a <= 0.001 * cmad] <- 1
  w[a > 0.999 * cmad] <- 0
  w[!ok] <- 1
  w
}
