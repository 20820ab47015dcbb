# The specification test of a generalized linear model against a local likelihood fit
# (spec_test() and anova() of a local_poly() fit of the binomial or Poisson family and a glm()):
# the deviance difference of the two fits, its null distribution from the parametric bootstrap
# of the glm, both models refitted to every replicate (the glm by glm.fit(), the local fit by
# its engine object at its bandwidth, as the bootstrap bands refit local likelihood replicates).

#' @section Generalized linear models:
#' With a local likelihood fit `local` (`local_poly(family = "binomial")` or
#' `"poisson"`, whose links are the canonical logit and log) and a
#' [stats::glm()] `parametric` of the same family and link, response, rows
#' and prior weights (for binomial proportions, the numbers of trials),
#' `spec_test()` and `anova()` test the glm's linear predictor against the
#' local alternative by the pseudo-likelihood-ratio test of Bowman and
#' Azzalini (1997, chapter 5; the test of `sm::sm.binomial.bootstrap()` and
#' `sm::sm.poisson.bootstrap()`). The statistic is the deviance difference
#' \eqn{D_0 - D_1}{D0 - D1}, \eqn{D_0}{D0} the glm's deviance and
#' \eqn{D_1 = \sum_i d(y_i, \hat\mu_1(x_i))}{D1 = sum_i d(y_i, mu1(x_i))}
#' the deviance of the local fit at the data points (its unit deviances
#' \eqn{d}{d} with the prior weights; points where the local fit has no
#' finite value are left out of both). The binomial and Poisson dispersions
#' are 1, so the difference needs no scale. Its null distribution comes from
#' the parametric bootstrap: `B` responses drawn from the glm's fitted means
#' (binomial with the prior weights as trials, Poisson), both models refitted
#' to each (the glm from its coefficients, the local fit at its bandwidth by
#' its engine object; sm keeps the data's glm fit in the replicates, which
#' makes its p-values larger), and the p-value is
#' \eqn{(1 + \#\{T^* \ge T\}) / (B + 1)}{(1 + #(T* >= T)) / (B + 1)}. A
#' replicate whose local fit has no maximum at some data point (the response
#' separates in a window) is left out, with a warning that counts them. The
#' responses are drawn in the calling R session before any fit, so
#' `set.seed()` gives the same p-value for any number of threads and under
#' any `future` plan.
#'
#' The bandwidth is kept in every replicate (`reselect` must be `NULL` or
#' `FALSE`): the test is one for a bandwidth fixed in advance. A bandwidth
#' that a selector chose from the same data (`bandwidth = "cv"`, the default
#' of `local_poly()`) is kept too, with a warning (none with
#' `reselect = FALSE`): the selection is then not repeated in the replicates,
#' and the test rejects a true model too often. In the package's simulations
#' (n = 200, a logistic model linear in x on \[0, 1\], B = 199) the test at a
#' bandwidth fixed in advance (0.2) rejected a true model in 4.8% of
#' 500 data sets at the 5% level, and a quadratic logit (6 (x - 0.5)^2 added)
#' in 74% of 500; with each data set's likelihood-CV bandwidth kept, it
#' rejected a true model in 9.8% of 500. Choose the bandwidth in advance, at the
#' scale of the departures from the glm that matter.
#'
#' The result's `statistic` is the deviance difference (the arguments
#' `statistic` and `multipliers` do not apply), and its `models` table gives
#' both fits' residual degrees of freedom (for the local fit, the number of
#' points less the trace of its influence matrix) and residual deviances.
#' @rdname spec_test
#' @name spec_test
#' @examples
#' # a logistic regression against a local logistic fit
#' am_fit <- local_poly(am ~ hp, mtcars, family = "binomial", bandwidth = 50)
#' set.seed(1)
#' spec_test(am_fit, glm(am ~ hp, binomial, mtcars), B = 99, verbose = FALSE)
NULL

# The families whose glm the test can redraw from (the model-based bootstrap of
# bootstrap_draws()); their local fits use the canonical links, as glm()'s defaults.
glm_test_families <- c("binomial", "poisson")

# The test itself (see spec_test()): `local` a local_poly() fit, `parametric` a glm.
glm_spec_test <- function(local, parametric, B, reselect, n_threads, verbose, data_name,
                          call = rlang::caller_env()) {
  B <- check_replicates(B, call = call)
  check_flag(verbose, call = call)
  n_threads <- n_threads(n_threads)
  if (!is.null(reselect) && !identical(check_flag(reselect, call = call), FALSE)) {
    abort(c("{.code reselect = TRUE} is for the test of a linear model: the test of a
             {.fn glm} keeps the local fit's bandwidth in every replicate.",
            i = "Use {.code reselect = NULL} or {.code FALSE}."), call = call)
  }
  pair <- check_glm_pair(local, parametric, call)
  if (is.null(reselect) && !local$bandwidth_method %in% c("user", "nn")) {
    warn(c("The bandwidth of {.arg local} was chosen by {.val {local$bandwidth_method}} from the
            same data and is kept in every replicate: the test then rejects a true model too
            often.",
           i = "Give {.fn local_poly} a bandwidth fixed in advance, or pass
                {.code reselect = FALSE} to keep the chosen one."),
         class = "localmean_warning_selected_bandwidth")
  }
  family <- local$family
  y <- pair$y
  w <- pair$w
  n <- length(y)
  eta1 <- local$linear.predictors
  used <- is.finite(eta1) & w > 0
  deviance_at <- function(y, mu, rows) sum(family$dev.resids(y[rows], mu[rows], w[rows]))
  mu0 <- as.double(stats::fitted(parametric))
  dev0 <- deviance_at(y, mu0, used)
  dev1 <- deviance_at(y, family$linkinv(eta1), used)
  statistic <- dev0 - dev1
  # Responses drawn from the glm's fitted means (binomial: the prior weights are the trials), in
  # this session before any fit; both models refitted to each.
  draws <- bootstrap_draws(list(y = y, weights = local$weights, fitted = mu0), B,
                           family$family, call)
  refit0 <- glm_refits(parametric, draws)
  queries <- list(x = local$x, codes = local$categorical$codes)
  eta_star <- replicate_fits(local, queries, draws, 1L, family$family, n_threads, verbose)
  replicates <- vapply(seq_len(B), function(b) {
    if (any(!is.finite(eta_star[used, b])) || anyNA(refit0[, b])) return(NA_real_)
    deviance_at(draws[, b], refit0[, b], used) -
      deviance_at(draws[, b], family$linkinv(eta_star[, b]), used)
  }, 0)
  failed <- sum(is.na(replicates))
  if (failed) {
    warn("{failed} of the {B} bootstrap replicate{?s} had no local fit at some data point (a
          local likelihood without a finite maximum, as under separation) and
          {cli::qty(failed)}{?was/were} left out of the p-value.",
         class = "localmean_bootstrap_failures")
  }
  models <- data.frame(Resid.Df = c(sum(used) - parametric$rank, sum(used) - local$df),
                       Resid.Dev = c(dev0, dev1), row.names = c("parametric", "local"))
  new_local_test(statistic = c(`Deviance difference` = statistic),
                 p_value = bootstrap_p_value(statistic, replicates),
                 method = paste0("Specification test of a generalized linear model (",
                                 family$family, ") against a local likelihood fit ",
                                 "(deviance difference, parametric bootstrap)"),
                 data_name = data_name,
                 alternative = "the linear predictor is not of the parametric form",
                 B = B, replicates = replicates, models = models)
}

# The glm refitted to each column of `draws` (n x B responses on its scale: proportions for the
# binomial), from its own coefficients: the fitted means (n x B), a column of NA where
# glm.fit() fails. The draws come from the model's means, so warnings of fitted probabilities
# of 0 or 1 are not repeated for every replicate.
glm_refits <- function(parametric, draws) {
  X <- stats::model.matrix(parametric)
  start <- stats::coef(parametric)
  keep <- !is.na(start)
  X <- X[, keep, drop = FALSE]
  start <- start[keep]
  w <- parametric$prior.weights
  offset <- parametric$offset
  refit <- function(y) {
    g <- tryCatch(suppressWarnings(
      stats::glm.fit(X, y, weights = w, start = start, offset = offset,
                     family = parametric$family, control = parametric$control)),
      error = function(e) NULL)
    if (is.null(g) || !g$converged) return(rep(NA_real_, length(y)))
    g$fitted.values
  }
  matrix(vapply(seq_len(ncol(draws)), function(b) refit(draws[, b]), numeric(nrow(draws))),
         nrow(draws))
}

# A glm and a local likelihood fit that the test can compare: a local_poly() fit of a family
# with a glm counterpart and a bandwidth of its own (no weight matrix), and a glm of the same
# family and link, response, rows and prior weights. Returns list(y, w).
check_glm_pair <- function(local, parametric, call) {
  if (!inherits(local, "local_poly")) {
    abort("{.arg local} must be a {.fn local_poly} fit.", call = call)
  }
  fam <- (local$family %||% stats::gaussian())$family
  if (identical(fam, "gaussian")) {
    abort(c("{.arg parametric} must be an {.fn lm} fit for a least-squares local fit.",
            i = "Refit the linear model with {.fn lm}, or fit {.arg local} with the
                 {.arg family} of the {.fn glm}."), call = call)
  }
  if (!fam %in% glm_test_families) {
    cli::cli_abort(c("{.arg local} has the {.val {fam}} family, which has no parametric
                      bootstrap for {.fn spec_test}.",
                     i = "The test of a {.fn glm} is for local fits of the
                          {.val {glm_test_families}} families."),
                   class = c("localmean_error_family", "localmean_error"), call = call)
  }
  if (is.null(local$spec) || !is.null(local$robust)) {
    abort("{.arg local} must be a local likelihood fit with a fixed, selected or {.fn nn}
           bandwidth (not a weight matrix).", call = call)
  }
  gfam <- parametric$family
  if (!identical(gfam$family, fam) || !identical(gfam$link, local$family$link)) {
    abort_mismatch(c("{.arg parametric} must be a {.fn glm} of the family of {.arg local}
                      ({.val {fam}}, link {.val {local$family$link}}).",
                     x = "It has the {.val {gfam$family}} family with link
                          {.val {gfam$link}}."), call = call)
  }
  if (any(parametric$offset %||% 0 != 0)) {
    abort_mismatch(c("{.arg parametric} has an offset, which the local fit does not have.",
                     i = "Test a {.fn glm} without an offset."), call = call)
  }
  y <- as.double(local$y)
  y0 <- as.double(parametric$y)
  if (length(y) != length(y0)) {
    abort_mismatch(c("{.arg local} and {.arg parametric} were fitted to different rows.",
                     i = "{length(y)} and {length(y0)} observations."), call = call)
  }
  if (max(abs(y - y0)) > 1e-8 * max(1, max(abs(y)))) {
    abort_mismatch("{.arg local} and {.arg parametric} model different responses (or the same
                    response on rows in a different order).", call = call)
  }
  w <- local$weights %||% rep(1, length(y))
  w0 <- parametric$prior.weights %||% rep(1, length(y))
  if (max(abs(w - w0)) > 1e-8 * max(w)) {
    abort_mismatch("{.arg local} and {.arg parametric} have different weights (binomial: the
                    numbers of trials).", call = call)
  }
  list(y = y, w = w)
}
