# Tests with local models: the bootstrap that every test shares (multipliers drawn in the calling
# session, replicate responses smoothed by the fit's engine object, many per engine call), the
# specification test of a parametric regression against a local polynomial, and the two-sample
# test of kernel density estimates. Results are `htest` objects (class `local_test`).

# ---- The bootstrap foundation ----------------------------------------------------------------

# B must allow a p-value at the 5% level: (1 + 0) / (B + 1) <= 0.05 needs B >= 19.
check_replicates <- function(B, call = rlang::caller_env()) {
  if (!is.numeric(B) || length(B) != 1L || !is.finite(B) || B != round(B) || B < 19) {
    abort("{.arg B} must be a whole number of at least 19 (the bootstrap replicates).",
          call = call)
  }
  as.integer(B)
}

# Wild-bootstrap multipliers (n x B, mean 0, variance 1), drawn here in the calling session so
# that set.seed() fixes them whatever the thread count or the future plan: Mammen's two-point
# law (third moment 1 too, which keeps the residuals' skewness) or Rademacher signs.
wild_multipliers <- function(n, B, type = c("mammen", "rademacher", "normal")) {
  type <- match.arg(type)
  if (type == "normal") return(matrix(stats::rnorm(n * B), n, B))
  if (type == "rademacher") {
    return(matrix(2 * stats::rbinom(n * B, 1L, 0.5) - 1, n, B))
  }
  root5 <- sqrt(5)
  low <- stats::runif(n * B) < (root5 + 1) / (2 * root5)
  matrix(c((1 + root5) / 2, (1 - root5) / 2)[low + 1L], n, B)
}

# Fitted values at the data points of the linear smoother `spec` (a least-squares specification
# of a fit, at its fixed bandwidth) for every column of `Y` (n x B), see replicate_blocks().
smooth_replicates <- function(spec, Y, n_threads = spec$n_threads, verbose = FALSE,
                              cells = 2e6) {
  n <- nrow(Y)
  fitted_block <- function(spec, threads) {
    f <- fit_at_data(spec, n_threads = threads, keep_fits = TRUE)
    matrix(f$fitted, n)
  }
  replicate_blocks(spec, Y, fitted_block, n_threads, verbose, cells = cells)
}

# `per_block(spec, n_threads)` of the specification `spec` with each block of the columns of `Y`
# (n x B) as its values, the results (a matrix with one column per replicate) bound by column.
# One engine call handles a block of replicate columns at once, the blocks on the user's future
# plan when one is set. The replicates get an engine object of their own (so that the fit's stays
# as it is for predict()), which builds its data once and then takes each block's values in
# place of the last (engine_set_values()). A block holds at most `cells` values and `columns`
# columns (the engine's sums of a query's moments over the block's columns then stay in the
# processor's fastest cache: 64 columns took a fifth less time than 399 at n = 500), and its
# size does not depend on the threads or the plan, so neither do the results. `progress`: a
# cli progress bar to advance (else one of its own with `verbose`).
replicate_blocks <- function(spec, Y, per_block, n_threads = spec$n_threads, verbose = FALSE,
                             progress = NULL, cells = 2e6, columns = 64L) {
  n <- nrow(Y)
  B <- ncol(Y)
  spec$engine <- engine_handle()
  block <- max(1L, min(B, columns, floor(cells / n)))
  blocks <- split(seq_len(B), ceiling(seq_len(B) / block))
  run <- function(cols, threads) {
    spec$values <- Y[, cols, drop = FALSE]
    engine_set_values(spec)
    per_block(spec, threads)
  }
  if (future_plan_active() && length(blocks) > 1L) {
    parts <- future.apply::future_lapply(blocks, run, threads = 1L, future.seed = NULL)
    if (!is.null(progress)) cli::cli_progress_update(inc = B, id = progress)
    return(do.call(cbind, parts))
  }
  if (verbose && is.null(progress)) {
    progress <- cli::cli_progress_bar("bootstrap replicates", total = B, clear = TRUE)
  }
  parts <- vector("list", length(blocks))
  for (k in seq_along(blocks)) {
    parts[[k]] <- run(blocks[[k]], n_threads)
    if (!is.null(progress)) cli::cli_progress_update(inc = length(blocks[[k]]), id = progress)
  }
  do.call(cbind, parts)
}

# The bootstrap p-value (1 + #{T* >= T}) / (B + 1), which is exact under exchangeability.
bootstrap_p_value <- function(statistic, replicates) {
  (1 + sum(replicates >= statistic, na.rm = TRUE)) / (1 + sum(!is.na(replicates)))
}

# A classed error for two inputs that do not belong together (models of different responses,
# rows or weights; samples of different dimensions).
abort_mismatch <- function(message, call = rlang::caller_env()) {
  cli::cli_abort(message, class = c("localmean_error_mismatch", "localmean_error"), call = call,
                 .envir = parent.frame())
}

# An htest with the package's class: print shows the method, data, statistic, B and p-value.
new_local_test <- function(statistic, p_value, method, data_name, alternative, B = NULL,
                           estimate = NULL, replicates = NULL, models = NULL) {
  structure(list(statistic = statistic, parameter = if (!is.null(B)) c(B = B),
                 p.value = p_value, estimate = estimate, method = method,
                 data.name = data_name, alternative = alternative, replicates = replicates,
                 models = models),
            class = c("local_test", "htest"))
}

#' @export
print.local_test <- function(x, digits = getOption("digits"), ...) {
  check_dots(...)
  NextMethod()
  if (!is.null(x$models)) {
    print(x$models, digits = 4L)
    cat("\n")
  }
  invisible(x)
}

#' Tidy summaries of a test
#'
#' One row per test, with the columns of broom's `htest` tidier: the
#' statistic, its p-value, the bootstrap replicates `B` (`NA` for a test
#' without a bootstrap), the method and the alternative; `estimate` where the
#' test has one. `glance()` gives the same row.
#'
#' @param x A test from [spec_test()] (or `anova()` of a local fit) or
#'   [kde_test()].
#' @param ... Must be empty.
#' @return A tibble (or data frame without tibble) with one row.
#' @family inference
#' @export
#' @examples
#' fit <- local_poly(dist ~ speed, cars, bandwidth = 5)
#' tidy(spec_test(fit, lm(dist ~ speed, cars), B = 99, verbose = FALSE))
tidy.local_test <- function(x, ...) {
  check_dots(...)
  glance_row(estimate = if (!is.null(x$estimate)) unname(x$estimate[1L]),
             statistic = unname(x$statistic), p.value = x$p.value,
             B = if (is.null(x$parameter)) NA_integer_ else as.integer(x$parameter[["B"]]),
             method = x$method, alternative = x$alternative)
}

#' @rdname tidy.local_test
#' @export
glance.local_test <- function(x, ...) tidy.local_test(x, ...)

# ---- Is the parametric model right? ----------------------------------------------------------

#' Test a parametric regression against a local polynomial
#'
#' Tests the null hypothesis that the regression function has the form of a
#' linear model `parametric` (fitted by [stats::lm()]) against the
#' nonparametric alternative of a local polynomial fit `local` of the same
#' response on the same rows, by default by the approximate F statistic of a
#' linear smoother (Hastie and Tibshirani 1990, section 3.9; or, with
#' `statistic = "kernel"`, by the kernel statistic of Zheng 1996, below),
#' \deqn{F = \frac{(RSS_0 - RSS_1) / (\nu - p)}{RSS_1 / (n - \nu)},}{F =
#' ((RSS0 - RSS1) / (nu - p)) / (RSS1 / (n - nu)),}
#' with \eqn{RSS_0}{RSS0} the parametric and \eqn{RSS_1}{RSS1} the local fit's
#' residual sum of squares (weighted by the prior weights), \eqn{p}{p} the
#' linear model's coefficients and \eqn{\nu = tr L}{nu = tr L} the local fit's
#' degrees of freedom (the trace of its smoother matrix). At one bandwidth F
#' orders data sets as the pseudo-likelihood ratio
#' \eqn{(RSS_0 - RSS_1) / RSS_1}{(RSS0 - RSS1) / RSS1} of Bowman and Azzalini
#' (1997, chapter 5; the test of `sm::sm.regression(model = )`) does, so
#' the two give the same p-value; across bandwidths F stays on one scale
#' (about 1 under the null), where the ratio grows steeply as the bandwidth
#' shrinks, which matters when each replicate chooses its own bandwidth
#' (below). Its null
#' distribution comes from a wild bootstrap (Hardle and Mammen 1993) with a
#' smoothed variance: the responses
#' \eqn{y^*_i = \hat m_0(x_i) + \hat\sigma(x_i) V_i}{y*_i = m0(x_i) +
#' sigma(x_i) V_i}, with \eqn{\hat m_0}{m0} the parametric fit, independent
#' multipliers \eqn{V_i}{V_i} of mean 0 and variance 1 and
#' \eqn{\hat\sigma^2(x)}{sigma^2(x)} the local mean of the parametric fit's
#' squared residuals (each over its expectation factor \eqn{1 - h_{ii}}{1 -
#' h_ii}; the fit's kernel, a bandwidth chosen by cross-validation), give `B`
#' responses generated under the null hypothesis with the data's variance
#' function; both models are fitted to each (the linear model through its QR
#' decomposition, the local fit by its engine object), and the p-value is
#' \eqn{(1 + \#\{F^* \ge F\}) / (B + 1)}{(1 + #(F* >= F)) / (B + 1)}.
#' Heteroscedastic errors are allowed. The classical wild bootstrap
#' multiplies each point's own residual, which gives the replicates a far
#' rougher variance than the data's; a bandwidth selector then chose small
#' bandwidths more often in the replicates than in data of the null, and the
#' test with a selected bandwidth rejected a true null at 0.5% instead of 5%.
#'
#' A bandwidth fixed in advance (a number given to `local_poly()`) is kept in
#' every replicate. A bandwidth that a selector chose from the same data
#' (`bandwidth = "cv"`, the default of `local_poly()`, or `"gcv"`, `"aicc"`)
#' is chosen again for each replicate (`reselect = TRUE`, the default then),
#' so that the bootstrap reproduces the selection: each response, the
#' observed one included, gets the candidate bandwidth of lowest score among
#' those of the fit's own search, extended up to the search's upper limit
#' (without the search's refinement between candidates, so the observed
#' statistic may use a bandwidth near, not at, the fit's). Other selectors
#' refit each replicate with the selector (slower). With `reselect = FALSE`
#' the chosen bandwidth is treated as fixed, which ignores the selection: the
#' test is then liberal. In the package's simulations (n = 200,
#' heteroscedastic normal errors, a linear null, 500 data sets, B = 199) the
#' defaults at the CV bandwidth rejected at 6.0% at the 5% level; the CV
#' bandwidth kept fixed rejected at 8.8%
#' (with the classical wild bootstrap). Under the alternative of those
#' simulations (a sine wave of amplitude 0.3 added) the defaults rejected
#' 79% of the data sets, a bandwidth fixed in advance (0.15) 94% at a size of
#' 4.6%: when the scale of the departures that matter is known, a fixed
#' bandwidth gives the more powerful test.
#'
#' **The kernel statistic** (`statistic = "kernel"`) is the test of Zheng
#' (1996), Li and Wang (1998) and Hsiao, Li and Racine (2007), the statistic
#' of `np::npcmstest()`: with the linear model's residuals \eqn{e_i}{e_i}
#' (times the square roots of the prior weights) and the local fit's kernel
#' \eqn{K_{ij}}{K_ij} between data points \eqn{i}{i} and \eqn{j}{j},
#' \deqn{J = \frac{\sum_i \sum_{j \ne i} K_{ij} e_i e_j}{\sqrt{2 \sum_i
#' \sum_{j \ne i} K_{ij}^2 e_i^2 e_j^2}},}{J = sum_i sum_(j != i) K_ij e_i e_j /
#' sqrt(2 sum_i sum_(j != i) K_ij^2 e_i^2 e_j^2),}
#' a weighted sum of products of neighbouring residuals, about standard normal
#' under the null and large when residuals of nearby points share their sign.
#' It uses the local fit's bandwidth when the user gave it, else (a bandwidth
#' that a selector chose) the bandwidth that cross-validation chooses for a
#' local constant fit of the response with the fit's kernel, as
#' `np::npcmstest()` does; either is kept in every replicate. The bootstrap
#' is the classical wild bootstrap: \eqn{y^*_i = \hat m_0(x_i) + e_i V_i}{y*_i =
#' m0(x_i) + e_i V_i} with Mammen's multipliers by default (np's), the linear
#' model refitted to each, and J computed from the replicate's residuals as
#' from the data's (each over its own variance estimate, as np's default
#' `pivot = TRUE`): with `set.seed(s)` the replicates are those of
#' `npcmstest(random.seed = s)` at the same bandwidth. The statistic needs no
#' local fit of the replicates, only kernel sums of their residuals, which
#' makes it the faster test. In the package's simulations (as above; n = 200,
#' 500 data sets, B = 199) it rejected a true null at 5.2% with the
#' cross-validated bandwidth (np's test: 6.2%) and 3.6% at a bandwidth of
#' 0.15, and the sine-wave alternative at 90.8% and 92.2%.
#'
#' `anova(local, parametric)` calls this test (`anova(local)` alone tests
#' the relevance of each predictor, see [relevance_test()]). The other order,
#' `anova(parametric, local)`, is [stats::anova.lm()], which compares the two
#' fits in an F table as if the local fit were a linear model with
#' fractional degrees of freedom (no bootstrap); `spec_test()` accepts both
#' orders.
#'
#' The multipliers are drawn in the calling R session before any fit, so
#' `set.seed()` gives the same p-value for any number of threads and under
#' any `future` plan.
#'
#' @param local A [local_poly()] fit with the Gaussian family (least
#'   squares) and a bandwidth of its own (numeric or a selector's; not `nn()`
#'   or a weight matrix), or a local likelihood fit of the binomial or Poisson
#'   family (see "Generalized linear models").
#' @param parametric An [stats::lm()] fit of the same response on the same
#'   rows, with the same weights; for a local likelihood fit, a
#'   [stats::glm()] of its family and link.
#' @param B Number of bootstrap replicates, a whole number of at least 19
#'   (for `anova()`, `NULL`: 199 for a specification test, 399 for relevance
#'   tests).
#' @param statistic The test statistic: "F" (the approximate F statistic of
#'   the two fits) or "kernel" (the kernel statistic of Zheng 1996, see
#'   below).
#' @param multipliers The law of the wild-bootstrap multipliers: "normal"
#'   (standard normal; `spec_test()` only), "rademacher" (random signs) or
#'   "mammen" (Mammen's two-point law). In `spec_test()` by default "normal"
#'   with the F statistic and "mammen" with the kernel statistic.
#' @param reselect Whether each replicate's local fit chooses its bandwidth
#'   again by the selector that chose `local`'s; `NULL` (the default): when
#'   a selector chose it (the F statistic of a linear model; the kernel
#'   statistic and the test of a `glm()` keep the bandwidth: `NULL` or
#'   `FALSE`).
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show a progress bar.
#' @param ... For `spec_test()`, must be empty. For `anova()`, the
#'   parametric fit.
#' @return An object of class `c("local_test", "htest")`: `statistic`
#'   (F or J), `parameter` (B), `p.value`, `method`, `data.name`,
#'   `alternative`, `replicates` (the bootstrap statistics) and, for F,
#'   `models` (a table of both fits' residual degrees of freedom and sums of
#'   squares) or, for J, `bandwidth` (the kernel statistic's).
#' @references
#' Bowman, A. W. and Azzalini, A. (1997). *Applied Smoothing Techniques for
#' Data Analysis*. Oxford University Press.
#'
#' Hastie, T. J. and Tibshirani, R. J. (1990). *Generalized Additive Models*.
#' Chapman and Hall.
#'
#' Hardle, W. and Mammen, E. (1993). Comparing nonparametric versus
#' parametric regression fits. *The Annals of Statistics*, 21, 1926-1947.
#'
#' Hsiao, C., Li, Q. and Racine, J. S. (2007). A consistent model
#' specification test with mixed discrete and continuous data. *Journal of
#' Econometrics*, 140, 802-826.
#'
#' Li, Q. and Wang, S. (1998). A simple consistent bootstrap test for a
#' parametric regression function. *Journal of Econometrics*, 87, 145-165.
#'
#' Mammen, E. (1993). Bootstrap and wild bootstrap for high dimensional
#' linear models. *The Annals of Statistics*, 21, 255-285.
#'
#' Zheng, J. X. (1996). A consistent test of functional form via
#' nonparametric estimation techniques. *Journal of Econometrics*, 75,
#' 263-289.
#' @family inference
#' @export
#' @examples
#' fit <- local_poly(dist ~ speed, cars, bandwidth = 5)
#' set.seed(1)
#' spec_test(fit, lm(dist ~ speed, cars), B = 99, verbose = FALSE)
#' # the same test through anova()
#' set.seed(1)
#' anova(fit, lm(dist ~ speed, cars), B = 99, verbose = FALSE)
#' # the kernel statistic (np's npcmstest())
#' spec_test(fit, lm(dist ~ speed, cars), B = 99, statistic = "kernel",
#'           verbose = FALSE)
spec_test <- function(local, parametric, B = 199, statistic = c("F", "kernel"),
                      multipliers = c("normal", "rademacher", "mammen"),
                      reselect = NULL, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  statistic <- match_choice(statistic, c("F", "kernel"))
  if (missing(multipliers)) multipliers <- NULL
  names <- c(local = deparse1(substitute(local)), parametric = deparse1(substitute(parametric)))
  if (inherits(local, "lm") && inherits(parametric, "local_poly")) {
    swap <- local
    local <- parametric
    parametric <- swap
    names <- rev(names)
  }
  data_name <- paste(names[2L], "vs", names[1L])
  specification_test(local, parametric, B, statistic, multipliers, reselect, n_threads, verbose,
                     data_name)
}

#' @rdname spec_test
#' @param object A [local_poly()] fit (the local model).
#' @export
anova.local_poly <- function(object, ..., B = NULL, statistic = c("F", "kernel"),
                             multipliers = c("normal", "rademacher", "mammen"),
                             reselect = NULL, n_threads = NULL, verbose = interactive()) {
  dots <- list(...)
  named <- nzchar(names(dots) %||% character(length(dots)))
  if (any(named)) {
    do.call(check_dots, c(dots[named], list(.own = names(formals(anova.local_poly)),
                                            .call = environment())))
  }
  if (sum(!named) == 0L) {
    if (!missing(statistic)) {
      abort("{.arg statistic} chooses the statistic of a specification test: give
             {.fn anova} a parametric model too.")
    }
    if (missing(multipliers)) multipliers <- "rademacher"
    return(relevance_table(object, NULL, B %||% 399, multipliers, n_threads, verbose,
                           deparse1(substitute(object))))
  }
  if (sum(!named) != 1L) {
    abort(c("{.fn anova} of a local fit takes one parametric model to test against, or none.",
            i = "Call {.code anova(local_fit, lm_fit)}, or {.code anova(local_fit)} for the
                 relevance of each predictor."))
  }
  model <- as.list(substitute(list(...)))[-1L][!named][[1L]]
  data_name <- paste(deparse1(model), "vs", deparse1(substitute(object)))
  statistic <- match_choice(statistic, c("F", "kernel"))
  if (missing(multipliers)) multipliers <- NULL
  specification_test(object, dots[!named][[1L]], B %||% 199, statistic, multipliers, reselect,
                     n_threads, verbose, data_name)
}

# The specification test with the chosen statistic; `multipliers` NULL: the statistic's default
# law (normal for F, Mammen's for the kernel statistic).
specification_test <- function(local, parametric, B, statistic, multipliers, reselect, n_threads,
                               verbose, data_name, call = rlang::caller_env()) {
  if (inherits(parametric, "glm")) {
    if (statistic != "F") {
      abort("{.code statistic = \"kernel\"} tests a linear model: the test of a {.fn glm} uses
             the deviance difference.", call = call)
    }
    if (!is.null(multipliers)) {
      abort("{.arg multipliers} does not apply to the test of a {.fn glm}: its replicates are
             drawn from the fitted model.", call = call)
    }
    return(glm_spec_test(local, parametric, B, reselect, n_threads, verbose, data_name, call))
  }
  if (statistic == "kernel") {
    return(kernel_spec_test(local, parametric, B, multipliers %||% "mammen", reselect,
                            n_threads, verbose, data_name, call = call))
  }
  plr_test(local, parametric, B, multipliers %||% "normal", reselect, n_threads, verbose,
           data_name, call = call)
}

plr_test <- function(local, parametric, B, multipliers, reselect, n_threads, verbose, data_name,
                     call = rlang::caller_env()) {
  B <- check_replicates(B, call = call)
  multipliers <- match_choice(multipliers, c("normal", "rademacher", "mammen"), call = call)
  check_flag(verbose, call = call)
  n_threads <- n_threads(n_threads)
  pair <- check_model_pair(local, parametric, call)
  selected <- !identical(local$bandwidth_method, "user")
  reselect <- if (is.null(reselect)) selected else check_flag(reselect, call = call)
  if (reselect && !selected) {
    abort("{.code reselect = TRUE} needs a fit whose bandwidth a selector chose (e.g.
           {.code bandwidth = \"cv\"}).", call = call)
  }
  y <- pair$y
  w <- pair$w
  used <- is.finite(local$fitted)
  rss <- function(Y, F) colSums(w * (Y - F)^2 * used, na.rm = TRUE)
  fit0 <- stats::fitted(parametric)
  res0 <- y - fit0
  rss0 <- rss(matrix(y), matrix(fit0))
  rss1 <- rss(matrix(y), matrix(local$fitted))
  trace1 <- sum(local$leverage[used])
  # Responses under the null, refitted by both models (sqrt(w) scales the weighted QR).
  scale <- null_error_scale(local, parametric, res0, w, n_threads)
  Y <- fit0 + scale * wild_multipliers(length(y), B, multipliers)
  root_w <- sqrt(w)
  offset <- parametric$offset %||% 0  # not part of the least-squares projection
  F0 <- offset + qr.fitted(parametric$qr, root_w * (Y - offset)) / root_w
  on_grid <- reselect && grid_reselection_applies(local)
  if (on_grid) {
    selected <- grid_reselected_rss(local, Y, w, n_threads, verbose)
    rss1 <- selected$rss[1L]
    trace1 <- selected$trace[1L]
    rss1_star <- selected$rss[-1L]
    trace_star <- selected$trace[-1L]
  } else if (reselect) {
    refits <- reselected_fits(local, Y, n_threads, verbose)
    rss1_star <- rss(Y, refits[-1L, , drop = FALSE])
    trace_star <- refits[1L, ]
  } else {
    spec <- local$spec
    spec$values <- NULL
    rss1_star <- rss(Y, smooth_replicates(spec, Y, n_threads = n_threads, verbose = verbose))
    trace_star <- trace1
  }
  rss0_star <- rss(Y, F0)
  n <- sum(w > 0 & used)
  p <- parametric$rank
  statistic <- approximate_f(rss0, rss1, trace1, n, p)
  replicates <- approximate_f(rss0_star, rss1_star, trace_star, n, p)
  models <- data.frame(Res.Df = c(stats::df.residual(parametric), n - trace1),
                       RSS = c(rss0, rss1),
                       row.names = c("parametric", "local"))
  new_local_test(statistic = c(F = statistic), p_value = bootstrap_p_value(statistic, replicates),
                 method = paste0("Specification test of a linear model against a local ",
                                 "polynomial (approximate F, wild bootstrap",
                                 if (reselect) ", bandwidth reselected per replicate", ")"),
                 data_name = data_name,
                 alternative = "the regression function is not of the parametric form",
                 B = B, replicates = replicates, models = models)
}

# The approximate F statistic of a linear model (p coefficients, residual sum of squares rss0)
# against a linear smoother of trace tr L (rss1) on n points: the reduction of the residual sum
# of squares per degree of freedom over the smoother's residual variance,
# ((rss0 - rss1) / (tr L - p)) / (rss1 / (n - tr L)). At one bandwidth it orders the data as
# (rss0 - rss1) / rss1; across bandwidths it is on one scale (about 1 under the null), where
# (rss0 - rss1) / rss1 grows steeply as the bandwidth shrinks.
approximate_f <- function(rss0, rss1, trace, n, p) {
  ((rss0 - rss1) / pmax(trace - p, 1e-12)) / (rss1 / (n - trace))
}

# The standard deviation of each response under the null, sqrt(sigma^2(x_i) / w_i): sigma^2 the
# local mean (the fit's kernel, degree 0, bandwidth by cross-validation) of the parametric fit's
# weighted squared residuals, each divided by its expectation factor 1 - h_ii (h the linear
# model's leverages). The classical wild bootstrap's scale, each point's own residual |e_i|,
# gives every replicate a variance as rough as one squared residual per point: a selector then
# chose small bandwidths more often in the replicates than in data of the null, and the test
# with reselection was conservative (0.5% at the 5% level in the package's simulations).
null_error_scale <- function(local, parametric, res0, w, n_threads) {
  leverage <- stats::hatvalues(parametric)
  r2 <- w * res0^2 / pmax(1 - leverage, 1e-8)
  predictors <- c(list(x = local$x, categorical = local$categorical), local$predictors)
  pilot <- withCallingHandlers(
    fit_local_model(predictors, matrix(r2), NULL, 0L, local$kernel, "cv",
                    local$spec$requested_method, n_threads, FALSE, local$control,
                    max_degree = 3L)$fitted,
    localmean_warning = function(w) invokeRestart("muffleWarning"))
  pilot <- as.double(pilot)
  pilot[!is.finite(pilot)] <- mean(r2)
  sqrt(pmax(pilot, 0) / w)
}

# Whether grid_reselected_rss() can repeat the selection of `local`'s bandwidth: a score of the
# linear smoother (cv, gcv, aicc) searched over numeric bandwidths.
grid_reselection_applies <- function(local) {
  local$bandwidth_method %in% c("cv", "gcv", "aicc") && !is.null(local$cv_curve) &&
    local$spec$numeric_vars > 0L && is.null(local$metric)
}

# The candidate bandwidths (rows) of the reselection: those of the fit's own search, extended by
# factors of 1.5 up to the search's upper bound (where the score of a linear null keeps falling).
reselection_grid <- function(local) {
  curve <- local$cv_curve
  grid <- as.matrix(curve[setdiff(names(curve), "score")])
  grid <- grid[, seq_len(local$spec$numeric_vars), drop = FALSE]
  upper <- bandwidth_bounds(local$spec)[2L, ]
  while (any(grid[nrow(grid), ] < upper)) {
    grid <- rbind(grid, pmin(grid[nrow(grid), ] * 1.5, upper))
  }
  unname(grid)
}

# The residual sums of squares `rss` and the smoother's traces `trace` of the local fit of the
# observed response (first) and of each column of `Y` (n x B), each at the candidate of reselection_grid() where the fit's selector scores it
# lowest: the selection of the observed fit, repeated for every replicate (without the search's
# refinement between candidates, in the data and the replicates alike). Per candidate, one
# smoothing of all the replicate columns (smooth_replicates()); the leverages, which do not
# depend on the response, come with the observed fit. Categorical lambdas stay the fit's.
grid_reselected_rss <- function(local, Y, w, n_threads, verbose) {
  criterion <- local$bandwidth_method
  grid <- reselection_grid(local)
  values <- cbind(as.double(local$y), Y)
  best <- rep(Inf, ncol(values))
  rss1 <- rep(NA_real_, ncol(values))
  trace <- rep(NA_real_, ncol(values))
  if (verbose) cli::cli_progress_bar("bootstrap replicates, bandwidth reselected",
                                     total = nrow(grid), clear = TRUE)
  for (g in seq_len(nrow(grid))) {
    spec <- with_scale(local$spec, grid[g, ])
    observed <- fit_at_data(spec, n_threads)
    spec$values <- NULL
    fitted <- cbind(observed$fitted[, 1L], smooth_replicates(spec, Y, n_threads = n_threads))
    scored <- smoother_scores(criterion, values, fitted, observed$leverage, w,
                              observed$status_counts)
    better <- which(scored$score < best)
    best[better] <- scored$score[better]
    rss1[better] <- scored$rss[better]
    trace[better] <- sum(observed$leverage)
    if (verbose) cli::cli_progress_update()
  }
  list(rss = rss1, trace = trace)
}

# smoother_score() of each column of `values` (n x k) with its fits `fitted` and the leverages,
# with the residual sums of squares.
smoother_scores <- function(criterion, values, fitted, leverage, w, status_counts) {
  squares <- (values - fitted)^2
  w <- rep_len(w, nrow(values))
  rss <- drop(crossprod(w, squares))
  loo <- drop(crossprod(w / (1 - leverage)^2, squares))
  near_one <- any(leverage[w > 0] >= 1 - 1e-10)
  # (smoother_score()'s formulas hold elementwise for vectors of rss and loo)
  score <- smoother_score(criterion, list(status = status_counts, count = sum(w > 0),
                                          weight = sum(w), rss = rss, trace = sum(leverage),
                                          loo = loo, near_one = near_one))
  list(score = rep_len(score, length(rss)), rss = rss)
}

# The smoother's trace (row 1) and the fitted values at the data points (rows 2 to n + 1) of
# `local` refitted to every column of `Y` (n x B), each with
# the bandwidth its selector chooses for that column (the fit's selector, kernel, degree,
# weights and settings), on the user's future plan when one is set. The selector's warnings
# (a minimum at the search's edge, say) are not repeated for every replicate.
reselected_fits <- function(local, Y, n_threads, verbose) {
  predictors <- c(list(x = local$x, categorical = local$categorical), local$predictors)
  refit <- function(b, threads) {
    fit <- withCallingHandlers(
      fit_local_model(predictors, Y[, b, drop = FALSE], local$weights, local$degree,
                      local$kernel, local$bandwidth_method, local$spec$requested_method,
                      threads, FALSE, local$control, max_degree = 3L),
      localmean_warning = function(w) invokeRestart("muffleWarning"))
    c(sum(fit$leverage[is.finite(fit$fitted)]), fit$fitted)
  }
  B <- ncol(Y)
  if (future_plan_active()) {
    parts <- future.apply::future_lapply(seq_len(B), refit, threads = 1L, future.seed = NULL)
    return(matrix(unlist(parts, use.names = FALSE), nrow(Y) + 1L, B))
  }
  if (verbose) cli::cli_progress_bar("bootstrap replicates, bandwidth reselected", total = B,
                                     clear = TRUE)
  out <- matrix(NA_real_, nrow(Y) + 1L, B)
  for (b in seq_len(B)) {
    out[, b] <- refit(b, n_threads)
    if (verbose) cli::cli_progress_update()
  }
  out
}

# The two models of a specification test must share the response, the rows and the weights; the
# local fit must be a least-squares local polynomial with its own engine specification.
check_model_pair <- function(local, parametric, call) {
  if (!inherits(local, "local_poly")) {
    abort("{.arg local} must be a {.fn local_poly} fit.", call = call)
  }
  if (!inherits(parametric, "lm") || inherits(parametric, "glm")) {
    abort("{.arg parametric} must be an {.fn lm} fit (generalized linear models are not
           supported yet).", call = call)
  }
  if (!identical((local$family %||% stats::gaussian())$family, "gaussian") ||
      is.null(local$spec) || !is.null(local$spec$nn) || !is.null(local$robust)) {
    abort("{.arg local} must be a least-squares ({.val gaussian}) local polynomial with a fixed
           or selected bandwidth (not {.fn nn}, a weight matrix or robust iterations).",
          call = call)
  }
  y <- as.double(local$y)
  y0 <- as.double(stats::fitted(parametric) + stats::residuals(parametric))
  if (length(y) != length(y0)) {
    abort_mismatch(c("{.arg local} and {.arg parametric} were fitted to different rows.",
                     i = "{length(y)} and {length(y0)} observations."), call = call)
  }
  scale <- max(1, max(abs(y)))
  if (max(abs(y - y0)) > 1e-8 * scale) {
    abort_mismatch("{.arg local} and {.arg parametric} model different responses (or the same
                    response on rows in a different order).", call = call)
  }
  w <- local$weights %||% rep(1, length(y))
  w0 <- stats::weights(parametric) %||% rep(1, length(y))
  if (max(abs(w - w0)) > 1e-8 * max(w)) {
    abort_mismatch("{.arg local} and {.arg parametric} have different weights.", call = call)
  }
  if (any(w <= 0)) abort("The weights must be positive for {.fn spec_test}.", call = call)
  list(y = y, w = w)
}

# ---- The kernel statistic of the specification test --------------------------------------------

# The specification test by the kernel statistic of Zheng (1996), Li and Wang (1998) and Hsiao,
# Li and Racine (2007): the linear model's residuals u_i = sqrt(w_i) e_i and the kernel K of the
# local fit give S = sum_i sum_(j != i) K_ij u_i u_j and its variance estimate
# V = 2 sum_i sum_(j != i) K_ij^2 u_i^2 u_j^2, the statistic J = S / sqrt(V) (the kernel in units
# of its value at the point itself, K_ii = 1 for numeric predictors: J does not depend on them).
# The bandwidth is the local fit's when the user gave it, else a local constant fit's by
# cross-validation of the response (as np::npcmstest() chooses it); it is kept in the replicates.
# Replicates: the wild bootstrap of the residuals, y* = m0 + e v (np's), the linear model refitted
# by its QR decomposition, J* computed as J (np's `pivot = TRUE`): every replicate's kernel sums
# from one engine pass over all columns (kernel_forms()), their variances from a second one with
# the squared kernel. With set.seed(s) and Mammen's multipliers the replicates are np's with
# `random.seed = s` (the same uniform draws, column by column).
kernel_spec_test <- function(local, parametric, B, multipliers, reselect, n_threads, verbose,
                             data_name, call = rlang::caller_env()) {
  B <- check_replicates(B, call = call)
  multipliers <- match_choice(multipliers, c("normal", "rademacher", "mammen"), call = call)
  check_flag(verbose, call = call)
  if (!is.null(reselect) && !identical(check_flag(reselect, call = call), FALSE)) {
    abort(c("{.arg reselect} must be {.code FALSE} or {.code NULL} with
             {.code statistic = \"kernel\"}.",
            i = "The kernel statistic keeps its bandwidth in every replicate."), call = call)
  }
  n_threads <- n_threads(n_threads)
  pair <- check_model_pair(local, parametric, call)
  y <- pair$y
  w <- pair$w
  spec <- kernel_statistic_spec(local, y, n_threads)
  fit0 <- stats::fitted(parametric)
  res0 <- y - fit0
  root_w <- sqrt(w)
  # Replicate residuals: the linear model refitted to y* = m0 + e v, through its (weighted) QR.
  u <- root_w * res0
  U <- qr.resid(parametric$qr, u * wild_multipliers(length(y), B, multipliers))
  S <- kernel_forms(spec, cbind(u, U), n_threads, verbose)
  # each statistic over its own variance estimate (np's `pivot = TRUE`)
  V <- 2 * kernel_square_forms(spec, cbind(u, U)^2, n_threads)
  J <- S / sqrt(V)
  statistic <- J[1L]
  replicates <- J[-1L]
  h <- signif(spec$bandwidth, 3L)
  res <- new_local_test(statistic = c(J = statistic),
                 p_value = bootstrap_p_value(statistic, replicates),
                 method = paste0("Specification test of a linear model against a kernel ",
                                 "alternative (kernel statistic, wild bootstrap, bandwidth ",
                                 paste(format(h), collapse = ", "), ")"),
                 data_name = data_name,
                 alternative = "the regression function is not of the parametric form",
                 B = B, replicates = replicates)
  res$bandwidth <- spec$bandwidth
  res
}

# The engine specification of the kernel statistic: the local fit's predictors, kernel and
# categorical lambdas at degree 0, without values or prior weights, at the local fit's bandwidth
# when the user gave it (or a local constant fit's selector chose it), else at a local constant
# fit's cross-validated bandwidth of the response `y`. Its own engine object, never binned.
kernel_statistic_spec <- function(local, y, n_threads) {
  spec <- local$spec
  if (!identical(local$bandwidth_method, "user") &&
      !(local$degree == 0L && identical(local$bandwidth_method, "cv"))) {
    predictors <- c(list(x = local$x, categorical = local$categorical), local$predictors)
    spec <- withCallingHandlers(
      fit_local_model(predictors, matrix(y), local$weights, 0L, local$kernel, "cv",
                      local$spec$requested_method, n_threads, FALSE, local$control,
                      max_degree = 3L)$spec,
      localmean_warning = function(w) invokeRestart("muffleWarning"))
  }
  spec["values"] <- list(NULL)
  spec["prior"] <- list(NULL)
  spec$degree <- 0L
  spec$engine <- engine_handle()
  # (exact kernel sums: the statistic removes each point's own term, which binning blurs)
  spec$binnable <- FALSE
  if (identical(spec$requested_method, "binned")) spec$requested_method <- "auto"
  with_scale(spec, spec$scale)
}

# The forms sum_i v_i sum_(j != i) K_ij v_j of every column v of `V` (n x k) at the data points
# of the degree-0 specification `spec` (K in units of K_ii), from the local means of every column
# at once (replicate_blocks()): a local mean times the weight sum, K_ii / leverage, less the
# point's own term, gives each point's kernel sum.
kernel_forms <- function(spec, V, n_threads, verbose = FALSE) {
  per_block <- function(spec, threads) {
    f <- fit_at_data(spec, n_threads = threads, keep_fits = TRUE)
    v <- spec$values
    matrix(colSums(v * (matrix(f$fitted, nrow(v)) / f$leverage - v)), 1L)
  }
  as.vector(replicate_blocks(spec, V, per_block, n_threads, verbose))
}

# sum_i a_i sum_(j != i) (K_ij / K_ii)^2 a_j for every column a of `A` (n x k) at the data points
# of `spec`: kernel_forms() with the square of the kernel's profile (a user kernel, tabulated
# once per session), or with categorical predictors (whose level weights squared are no kernel
# of theirs) from the kernel windows of the data points, as a sparse matrix.
kernel_square_forms <- function(spec, A, n_threads) {
  if (is.null(spec$categorical)) {
    spec$kernel <- squared_kernel(spec$kernel)
    spec$engine <- engine_handle()
    spec <- with_scale(spec, spec$scale)
    return(kernel_forms(spec, A, n_threads))
  }
  win <- engine_windows(spec, spec$x, spec$categorical$codes, n_threads = n_threads,
                        verbose = FALSE)
  i <- rep.int(seq_len(nrow(A)), win$size)
  j <- unlist(win$rows, use.names = FALSE)
  k <- unlist(win$weights, use.names = FALSE) / self_weight(spec)
  off <- i != j
  K2 <- Matrix::sparseMatrix(i[off], j[off], x = k[off]^2, dims = c(nrow(A), nrow(A)))
  colSums(A * as.matrix(K2 %*% A))
}

# The kernel whose profile is the square of `kernel`'s (scaled to 1 at distance 0), a user
# kernel registered under a name of its own the first time it is asked for.
squared_kernel <- function(kernel) {
  name <- paste0(".squared_", as.character(kernel))
  # (a user kernel's square is made again when the user kernel of that name changed)
  source <- (attr(kernel, "user_kernel") %||% registry$user[[as.character(kernel)]])$values
  known <- registry$user[[name]]
  if (!is.null(known) && identical(known$source, source)) return(kernel_handle(known))
  peak <- kernel_value(0, kernel)
  profile <- function(u) (kernel_value(u, kernel) / peak)^2
  squared <- make_user_kernel(profile, name, "kernel", rlang::caller_env())
  squared$source <- source
  registry$user[[name]] <- squared
  kernel_handle(squared)
}

# ---- Is this predictor relevant? -------------------------------------------------------------

#' Test whether each predictor of a local fit is relevant
#'
#' Tests, for each predictor of a least-squares [local_poly()] fit, the null
#' hypothesis that the regression function does not depend on it, by the
#' bootstrap tests of Racine (1997) for numeric predictors and Racine, Hart
#' and Li (2006) for categorical ones, the tests of `np::npsigtest()`.
#'
#' **Statistics.** For a numeric predictor \eqn{x_j}{x_j}, the mean over the
#' data points of the squared partial derivative of the fit,
#' \eqn{T_j = n^{-1} \sum_i (\partial \hat m(x_i) / \partial x_j)^2}{T_j = mean_i
#' (d mhat(x_i) / d x_j)^2}, the local polynomial's slope at each point (so the
#' fit needs degree 1 or more). For a categorical predictor \eqn{z_j}{z_j}
#' with levels \eqn{0, \dots, c - 1}{0, ..., c - 1} (0 the first), the mean
#' over the data points of the squared differences the level makes,
#' \eqn{I_j = n^{-1} \sum_i \sum_{l = 1}^{c - 1} (\hat m(x_i, z_j = l) -
#' \hat m(x_i, z_j = 0))^2}{I_j = mean_i sum_(l = 1..c-1) (mhat(x_i, z_j = l) -
#' mhat(x_i, z_j = 0))^2}, the other predictors at their observed values.
#' These effects are np's statistics without studentising
#' (`np::npsigtest(pivot = FALSE)`; np's categorical one compares each
#' point's own level with the first, where this one compares every level at
#' every point, as Racine, Hart and Li write it). The test statistic divides
#' the effect by the fit's residual variance,
#' \eqn{T_j = I_j / \hat\sigma^2}{T_j = I_j / sigmahat^2} with
#' \eqn{\hat\sigma^2 = RSS / (n - tr L)}{sigmahat^2 = RSS / (n - tr L)},
#' recomputed for every replicate: without it the bootstrap's p-values
#' depend on how well the residuals estimate the error variance (the test
#' rejected a true null at 9% instead of 5% with np's residuals, in the
#' package's simulations).
#'
#' **Bootstrap.** Under the null the regression function is estimated by the
#' fit with the tested predictor held at its median (numeric) or its most
#' frequent level (categorical), \eqn{\hat m_0}{mhat0}; its residuals
#' \eqn{y_i - \hat m_0(x_i)}{y_i - mhat0(x_i)}, centred and rescaled to the
#' fit's residual standard error \eqn{\hat\sigma}{sigmahat} (so that a relevant
#' predictor does not inflate them), give the wild-bootstrap responses
#' \eqn{y^*_i = \hat m_0(x_i) + e_i v_i}{y*_i = mhat0(x_i) + e_i v_i} with
#' multipliers \eqn{v_i}{v_i} of mean 0 and variance 1, as np does (by
#' default random signs, whose fourth moment 1 keeps the spread of the
#' replicates' quadratic statistics; Mammen's law, with fourth moment 2, made
#' the test conservative: a size of 2.2% against 3.2% at the 5% level in the
#' package's simulations). Each
#' replicate is smoothed with the fit's kernel and bandwidths (kept fixed), its
#' statistic computed as the observed one, and the p-value is
#' \eqn{(1 + \#\{T^* \ge T\}) / (B + 1)}{(1 + #(T* >= T)) / (B + 1)}. The
#' replicates run through one engine object per predictor, many per engine
#' call; the multipliers are drawn in the calling R session before any fit,
#' so `set.seed()` gives the same p-values for any number of threads and
#' under any `future` plan. A bandwidth chosen by cross-validation is kept
#' fixed in the replicates, as in np's default test (its `boot.type = "I"`).
#'
#' `anova(fit)` of a single local fit runs these tests, as [stats::anova()]
#' of a single linear model gives a table of its terms.
#'
#' @param fit A [local_poly()] fit with the Gaussian family (least squares)
#'   and a bandwidth of its own (numeric or a selector's; not `nn()`, a
#'   learned metric, a weight matrix or robustness iterations).
#' @param which The predictors to test: names (as `fit` names them, e.g.
#'   `"factor(cyl)"`) or positions; by default all.
#' @param B Number of bootstrap replicates per predictor, a whole number of
#'   at least 19.
#' @param ... Must be empty.
#' @inheritParams spec_test
#' @return An object of class `c("local_relevance", "anova", "data.frame")`,
#'   an anova-style table with one row per tested predictor and the columns
#'   `Effect` (I), `T`, `B` and `Pr(>T)` (the bootstrap p-value), printed
#'   under a heading that names the test. Its attribute `"tests"` holds one
#'   `c("local_test", "htest")` result per predictor (`statistic` T,
#'   `estimate` I, its bootstrap statistics as `replicates`); `tidy()` gives
#'   one row per predictor.
#' @references
#' Racine, J. S. (1997). Consistent significance testing for nonparametric
#' regression. *Journal of Business and Economic Statistics*, 15, 369-379.
#'
#' Racine, J. S., Hart, J. and Li, Q. (2006). Testing the significance of
#' categorical predictor variables in nonparametric regression models.
#' *Econometric Reviews*, 25, 523-544.
#' @family inference
#' @export
#' @examples
#' fit <- local_poly(mpg ~ wt + hp + factor(am), data = mtcars,
#'                   bandwidth = c(1, 60, 0.2))
#' set.seed(1)
#' relevance_test(fit, B = 99, verbose = FALSE)
#' # one predictor, as a test
#' set.seed(1)
#' tests <- relevance_test(fit, which = "hp", B = 99, verbose = FALSE)
#' attr(tests, "tests")$hp
relevance_test <- function(fit, which = NULL, B = 399,
                           multipliers = c("rademacher", "mammen"), n_threads = NULL,
                           verbose = interactive(), ...) {
  check_dots(...)
  relevance_table(fit, which, B, multipliers, n_threads, verbose, deparse1(substitute(fit)))
}

relevance_table <- function(fit, which, B, multipliers, n_threads, verbose, data_name,
                            call = rlang::caller_env()) {
  B <- check_replicates(B, call = call)
  multipliers <- match_choice(multipliers, c("rademacher", "mammen"), call = call)
  check_flag(verbose, call = call)
  n_threads <- n_threads(n_threads)
  check_relevance_fit(fit, call)
  tested <- tested_predictors(fit, which, call)
  n <- length(fit$y)
  # every multiplier drawn here, before any fit, one n x B matrix per predictor in turn
  multiplier_sets <- lapply(tested, function(name) wild_multipliers(n, B, multipliers))
  progress <- if (verbose) {
    cli::cli_progress_bar("relevance tests", total = B * length(tested), clear = TRUE)
  }
  tests <- Map(function(name, v) {
    relevance_one(fit, name, v, n_threads, progress, data_name)
  }, tested, multiplier_sets)
  names(tests) <- tested
  table <- data.frame(Effect = vapply(tests, function(t) unname(t$estimate), 0),
                      T = vapply(tests, function(t) unname(t$statistic), 0),
                      B = B, p = vapply(tests, `[[`, 0, "p.value"),
                      row.names = tested, check.names = FALSE)
  names(table)[4L] <- "Pr(>T)"
  structure(table, heading = relevance_heading(data_name, B, multipliers), tests = tests,
            class = c("local_relevance", "anova", "data.frame"))
}

relevance_heading <- function(data_name, B, multipliers) {
  law <- if (multipliers == "mammen") "Mammen" else "Rademacher"
  c(paste0("Relevance tests of the predictors of ", data_name,
           " (Racine 1997; Racine, Hart and Li 2006)\n"),
    paste0("Effect: mean squared partial derivative (numeric) or level difference ",
           "(categorical)\nT: Effect over the residual variance of the fit\n",
           "Pr(>T): wild bootstrap under each predictor's null, B = ", B, " (", law,
           " multipliers)\n"))
}

# The relevance test of one predictor (relevance_test()): its statistic, the null model's
# bootstrap responses with the multipliers `v` (n x B), their statistics.
relevance_one <- function(fit, name, v, n_threads, progress, data_name) {
  contrast <- predictor_contrast(fit, name)
  spec <- fit$spec
  y <- as.double(fit$y)
  # T: the mean squared effect over the residual variance of the fit, RSS / (n - tr L)
  studentise <- function(parts) parts[1L, ] / (parts[2L, ] / (length(y) - fit$df))
  observed_parts <- contrast$statistic(spec, n_threads)  # (its values are y)
  observed <- studentise(observed_parts)
  held <- engine_run(fit$spec, contrast$held$x, n_threads = n_threads, verbose = FALSE,
                     query_codes = contrast$held$codes)$coef[, 1L, 1L]
  Y <- held + null_residuals(fit, y, held) * v
  spec$values <- NULL
  replicates <- studentise(replicate_blocks(spec, Y, contrast$statistic, n_threads,
                                            progress = progress))
  kind <- if (contrast$numeric) "partial derivative" else "level differences"
  new_local_test(statistic = c(T = observed), p_value = bootstrap_p_value(observed, replicates),
                 estimate = c(effect = observed_parts[1L, 1L]),
                 method = paste0("Relevance test of a predictor (mean squared ", kind,
                                 ", wild bootstrap)"),
                 data_name = paste(name, "in", data_name),
                 alternative = paste("the regression function depends on", name),
                 B = ncol(v), replicates = replicates)
}

# The residuals of the null model, centred and rescaled to the fit's residual standard error
# sigma (the residual sum of squares over n - tr L): under the alternative the tested predictor
# would inflate them.
null_residuals <- function(fit, y, held) {
  e <- y - held
  (e - mean(e)) / stats::sd(e) * fit$sigma
}

# What the test of predictor `name` evaluates: `parts(spec, n_threads)`, for every value column
# of `spec` the mean squared effect (row 1) and the residual sum of squares of the fit (row 2,
# prior weights applied), and `held`, the data with the predictor at its median or most
# frequent level (the queries of the null model).
predictor_contrast <- function(fit, name) {
  x <- fit$x
  codes <- fit$categorical$codes
  w <- fit$weights %||% 1
  parts <- function(effect, fitted, spec) {
    rbind(colMeans(effect, na.rm = TRUE),
          colSums(w * (spec$values - fitted)^2, na.rm = TRUE))
  }
  if (name %in% colnames(x)) {
    j <- match(name, colnames(x))
    column <- deriv_columns(basis_powers(ncol(x), fit$degree), 1L)[j]
    held <- x
    held[, j] <- stats::median(x[, j])
    statistic <- function(spec, n_threads) {
      res <- engine_run(spec, x, n_threads = n_threads, verbose = FALSE, query_codes = codes)
      slopes <- matrix(res$coef[, column, ], nrow(x))
      parts(slopes^2, matrix(res$coef[, 1L, ], nrow(x)), spec)
    }
    return(list(numeric = TRUE, statistic = statistic, held = list(x = held, codes = codes)))
  }
  j <- match(name, colnames(codes))
  levels <- length(fit$categorical$levels[[j]])
  at_level <- function(level) {
    codes[, j] <- level
    codes
  }
  statistic <- function(spec, n_threads) {
    fit_at <- function(level) {
      res <- engine_run(spec, x, n_threads = n_threads, verbose = FALSE,
                        query_codes = at_level(level))
      matrix(res$coef[, 1L, ], nrow(x))
    }
    base <- fit_at(1L)
    own <- base
    total <- 0
    for (level in seq_len(levels)[-1L]) {
      fits <- fit_at(level)
      total <- total + (fits - base)^2
      at <- codes[, j] == level
      own[at, ] <- fits[at, ]
    }
    parts(total, own, spec)
  }
  mode <- which.max(tabulate(codes[, j], levels))
  list(numeric = FALSE, statistic = statistic, held = list(x = x, codes = at_level(mode)))
}

# A relevance test needs a least-squares local polynomial with an engine specification of its
# own in the original predictors.
check_relevance_fit <- function(fit, call) {
  if (!inherits(fit, "local_poly")) abort("{.arg fit} must be a {.fn local_poly} fit.", call = call)
  if (!identical((fit$family %||% stats::gaussian())$family, "gaussian") ||
      is.null(fit$spec) || !is.null(fit$spec$nn) || !is.null(fit$robust) ||
      !is.null(fit$metric)) {
    abort("{.arg fit} must be a least-squares ({.val gaussian}) local polynomial with a fixed
           or selected bandwidth (not {.fn nn}, a learned metric, a weight matrix or robust
           iterations).", call = call)
  }
  invisible(fit)
}

# The names of the predictors to test (`which`: names or positions, NULL all); numeric ones need
# a local slope.
tested_predictors <- function(fit, which, call) {
  names <- fit$predictors$names %||% colnames(fit$x)
  if (is.null(which)) which <- names
  if (is.numeric(which) && length(which) && all(which %in% seq_along(names))) {
    which <- names[which]
  }
  if (!is.character(which) || !length(which) || anyDuplicated(which) ||
      !all(which %in% names)) {
    abort("{.arg which} must name predictors of {.arg fit} ({.val {names}}) or give their
           positions, each once.", call = call)
  }
  numeric <- intersect(which, colnames(fit$x))
  if (length(numeric) && fit$degree < 1L) {
    abort(c("The test of a numeric predictor needs a local slope: a fit of degree 1 or more.",
            i = "Refit with {.code degree = 1}, or test only categorical predictors with
                 {.arg which}."), call = call)
  }
  which
}

#' @export
print.local_relevance <- function(x, digits = max(getOption("digits") - 2L, 3L), ...) {
  check_dots(...)
  NextMethod(digits = digits)
}

#' @rdname relevance_test
#' @param x A result of `relevance_test()`.
#' @export
tidy.local_relevance <- function(x, ...) {
  check_dots(...)
  tests <- attr(x, "tests")
  as_tidy_frame(data.frame(
    term = names(tests), estimate = x$Effect, statistic = x$T, p.value = x[["Pr(>T)"]],
    B = as.integer(x$B),
    method = vapply(tests, `[[`, "", "method"),
    alternative = vapply(tests, `[[`, "", "alternative"), row.names = NULL,
    stringsAsFactors = FALSE))
}

# ---- Are two samples from the same density? --------------------------------------------------

#' Two-sample test of kernel density estimates
#'
#' Tests whether two samples come from the same density by the integrated
#' squared difference of their kernel density estimates, the statistic of
#' Duong, Goud and Schauer (2012) that `ks::kde.test()` computes: with
#' \eqn{\hat f_1, \hat f_2}{f1, f2} the Gaussian-kernel estimates of the two
#' samples at bandwidth matrices \eqn{H_1, H_2}{H1, H2},
#' \deqn{T = \bar{\hat f_1}(X_1) + \bar{\hat f_2}(X_2) - \bar{\hat f_1}(X_2) -
#' \bar{\hat f_2}(X_1),}{T = mean f1(X1) + mean f2(X2) - mean f1(X2) - mean f2(X1),}
#' (means over the samples, each point's own kernel included), centred by its
#' null mean \eqn{K(0) (|H_1|^{-1/2} / n_1 + |H_2|^{-1/2} / n_2)}{K(0) (|H1|^(-1/2) / n1 +
#' |H2|^(-1/2) / n2)} and scaled by the root of its asymptotic variance
#' \eqn{3 (n_1 v_1 + n_2 v_2) / (n_1 + n_2) (1 / n_1 + 1 / n_2)}{3 (n1 v1 + n2 v2) /
#' (n1 + n2) (1 / n1 + 1 / n2)}, \eqn{v_j}{vj} the delta-method variance
#' \eqn{\nabla f_j(\bar x_j)' S_j \nabla f_j(\bar x_j)}{grad fj(mean)' Sj grad fj(mean)}
#' of \eqn{f_j(X)}{fj(X)} (the gradient estimated at the sample mean with a
#' normal-scale bandwidth, \eqn{S_j}{Sj} the sample covariance). The
#' standardised statistic `z` is asymptotically standard normal under the null;
#' the p-value is its upper tail. The approximation is conservative at
#' moderate sample sizes in two dimensions (a size of about 1% at the 5% level
#' with 200 points per sample, in the package's simulations), close to the
#' nominal level in one; the permutation
#' p-value (`B`) holds its level in both and is then the more powerful.
#'
#' The bandwidths are [kde()]'s for each sample with the same `bandwidth`
#' argument (by default its rule of thumb; `"plugin"` is the closest to
#' `ks::kde.test()`'s own choice), or numbers, vectors or matrices given.
#'
#' @param x1,x2 The two samples: numeric vectors, or matrices (or data frames
#'   of numeric columns) with the same columns, in one to three dimensions
#'   in practice (any dimension [kde()] accepts).
#' @param bandwidth The bandwidth of both estimates as [kde()] takes it: a
#'   selector name ("rot", "plugin", "lscv", "scv", ...), a number, a vector
#'   (one per variable) or a bandwidth matrix; not `nn()`.
#' @param B `NULL` for the normal approximation, or a number of random
#'   permutations (a whole number of at least 19) for a permutation p-value
#'   of T: the sample labels are permuted, the bandwidths kept, and the
#'   p-value is \eqn{(1 + \#\{T^* \ge T\}) / (B + 1)}{(1 + #(T* >= T)) / (B + 1)}.
#'   The permutations are drawn in the calling session (`set.seed()` fixes
#'   them for any number of threads), and the kernel sums of all of them
#'   come from one engine pass per sample's bandwidth. Needs per-variable
#'   bandwidths (not a full matrix).
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show progress bars for long computations.
#' @param ... Must be empty.
#' @return An object of class `c("local_test", "htest")`: `statistic`
#'   (z), `parameter` (B, with permutations), `p.value`, `estimate` (T),
#'   `method`, `data.name`, `alternative`, `replicates` (the permuted T), and
#'   `bandwidths` (the two estimates' bandwidths as [kde()] records them).
#' @references
#' Duong, T., Goud, B. and Schauer, K. (2012). Closed-form density-based
#' framework for automatic detection of cellular morphology changes.
#' *Proceedings of the National Academy of Sciences*, 109, 8382-8387.
#' @family inference
#' @export
#' @examples
#' set.seed(1)
#' kde_test(rnorm(200), rnorm(150))
#' kde_test(rnorm(200), rnorm(150, mean = 0.5))
#' kde_test(rnorm(200), rnorm(150, mean = 0.5), B = 99)
#' # two dimensions: the sepals of two species of iris
#' sepals <- c("Sepal.Length", "Sepal.Width")
#' kde_test(iris[iris$Species == "versicolor", sepals],
#'          iris[iris$Species == "virginica", sepals])
kde_test <- function(x1, x2, bandwidth = "rot", B = NULL, n_threads = NULL,
                     verbose = interactive(), ...) {
  check_dots(...)
  data_name <- paste(deparse1(substitute(x1)), "and", deparse1(substitute(x2)))
  if (!is.null(B)) B <- check_replicates(B)
  n_threads <- n_threads(n_threads)
  check_flag(verbose)
  if (inherits(bandwidth, "local_nn")) {
    abort("{.arg bandwidth} must be fixed per sample, not {.fn nn}.")
  }
  fit1 <- kde_sample(x1, bandwidth, n_threads, verbose, "x1")
  fit2 <- kde_sample(x2, bandwidth, n_threads, verbose, "x2")
  if (fit1$d != fit2$d) {
    abort_mismatch("{.arg x1} and {.arg x2} must have the same number of columns ({fit1$d} and
                    {fit2$d}).")
  }
  p1 <- sample_matrix(fit1)
  p2 <- sample_matrix(fit2)
  at <- function(fit, points) {
    predict(fit, points, method = "exact", n_threads = n_threads, verbose = verbose)
  }
  psi11 <- mean(at(fit1, p1))
  psi22 <- mean(at(fit2, p2))
  psi12 <- mean(at(fit1, p2))
  psi21 <- mean(at(fit2, p1))
  estimate <- psi11 + psi22 - psi12 - psi21
  n1 <- fit1$n
  n2 <- fit2$n
  null_mean <- self_density(fit1) / n1 + self_density(fit2) / n2
  v1 <- density_value_variance(p1)
  v2 <- density_value_variance(p2)
  null_var <- 3 * (n1 * v1 + n2 * v2) / (n1 + n2) * (1 / n1 + 1 / n2)
  z <- (estimate - null_mean) / sqrt(null_var)
  method <- paste("Two-sample test of kernel density estimates",
                  "(Duong, Goud and Schauer 2012)")
  p_value <- stats::pnorm(z, lower.tail = FALSE)[[1L]]
  replicates <- NULL
  if (!is.null(B)) {
    permuted <- permuted_statistics(fit1, fit2, p1, p2, B, n_threads, verbose)
    replicates <- permuted$replicates
    p_value <- bootstrap_p_value(permuted$observed, replicates)
    method <- paste(method, "with a permutation p-value")
  }
  out <- new_local_test(statistic = c(z = z), p_value = p_value, method = method,
                        data_name = data_name, estimate = c(T = estimate), B = B,
                        replicates = replicates, alternative = "the two densities differ")
  out$bandwidths <- list(fit1$bandwidth, fit2$bandwidth)
  out
}

# A Gaussian kernel density estimate of one sample (no grid), its bandwidth kde()'s.
kde_sample <- function(x, bandwidth, n_threads, verbose, arg, call = rlang::caller_env()) {
  if (is.data.frame(x)) x <- as.matrix(x)
  if (!is.numeric(x) || length(x) < 2L) {
    abort("{.arg {arg}} must be a numeric vector or matrix of at least two points.", call = call)
  }
  if (any(!is.finite(x))) abort("{.arg {arg}} has missing or non-finite values.", call = call)
  if (is.matrix(x)) storage.mode(x) <- "double" else x <- as.double(x)
  kde(x, bandwidth = bandwidth, gridsize = 0, n_threads = n_threads, verbose = verbose)
}

sample_matrix <- function(fit) {
  x <- kde_data(fit)
  colnames(x) <- fit$vars
  x
}

# One point's own kernel in the estimate: K(0) / det(H)^(1/2) for the Gaussian kernel.
self_density <- function(fit) {
  volume <- switch(fit$bandwidth$type, scale = prod(fit$bandwidth$h),
                   matrix = abs(det(fit$bandwidth$root)))
  stats::dnorm(0)^fit$d / volume
}

# The delta-method variance of f(X), grad f(mu)' S grad f(mu), with the gradient of the Gaussian
# estimate at the sample mean at the normal-scale bandwidth for first derivatives,
# (4 / (n (d + 4)))^(2 / (d + 6)) S (the nuisance estimate of Duong et al. 2012, one point).
density_value_variance <- function(x) {
  n <- nrow(x)
  d <- ncol(x)
  S <- stats::var(x)
  H <- (4 / (n * (d + 4)))^(2 / (d + 6)) * S
  Hinv <- solve(H)
  diff <- sweep(x, 2L, colMeans(x), check.margin = FALSE)  # x_i - mean
  quad <- rowSums((diff %*% Hinv) * diff)
  kernel <- exp(-quad / 2) / sqrt((2 * pi)^d * det(H))
  # d/dm phi_H(m - x_i) = -H^-1 (m - x_i) phi_H = H^-1 (x_i - m) phi_H
  gradient <- drop(Hinv %*% colMeans(diff * kernel))
  drop(gradient %*% S %*% gradient)
}

# T for the observed labels and B random permutations of the pooled sample, at the two samples'
# fixed per-variable bandwidths. With a the indicator of sample 1 among the pooled points,
# b = 1 - a and K_j the kernel matrix at bandwidth j, T = a'K1 a / n1^2 + b'K2 b / n2^2 -
# (a'K1 b + b'K2 a) / (n1 n2): every quadratic form comes from K_j A for the label matrix A,
# one engine pass per bandwidth (the engine's kernel sums are the Gaussian profile's, hence the
# constants).
permuted_statistics <- function(fit1, fit2, p1, p2, B, n_threads, verbose,
                                call = rlang::caller_env()) {
  if (fit1$bandwidth$type != "scale" || fit2$bandwidth$type != "scale") {
    abort("A permutation p-value ({.arg B}) needs per-variable bandwidths, not a matrix.",
          call = call)
  }
  n1 <- fit1$n
  n2 <- fit2$n
  pooled <- rbind(p1, p2)
  N <- n1 + n2
  A <- matrix(0, N, B + 1L)
  A[seq_len(n1), 1L] <- 1
  for (b in seq_len(B)) A[sample.int(N, n1), b + 1L] <- 1
  kernel_products <- function(h) {
    spec <- engine_spec(pooled, "gaussian", scale = h, values = A, degree = 0L,
                        method = "exact", n_threads = n_threads, verbose = verbose)
    res <- engine_run(spec, pooled)
    constant <- stats::dnorm(0)^ncol(pooled) / prod(h)
    list(KA = constant * matrix(res$coef[, 1L, ], N) * res$wsum, K1 = constant * res$wsum)
  }
  k1 <- kernel_products(fit1$bandwidth$h)
  k2 <- kernel_products(fit2$bandwidth$h)
  Bm <- 1 - A
  statistic <- colSums(A * k1$KA) / n1^2 + colSums(Bm * (k2$K1 - k2$KA)) / n2^2 -
    (colSums(A * (k1$K1 - k1$KA)) + colSums(Bm * k2$KA)) / (n1 * n2)
  list(observed = statistic[1L], replicates = statistic[-1L])
}
