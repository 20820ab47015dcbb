# Bootstrap bands: `predict(interval = "bootstrap")` of local polynomial and local likelihood
# fits (wild and model-based bootstraps) and of kernel density estimates (the smoothed
# bootstrap). Every band covers the expectation of the estimator (its variability), as the
# tube-formula bands do: the replicates are centred at their bootstrap mean, so the smoothing
# bias is neither estimated nor corrected. The random draws are made up front in the calling
# session, so that set.seed() fixes the band for any thread count and future plan.

# ---- Draws ------------------------------------------------------------------------------------

# The families the bootstrap can redraw: least squares (wild bootstrap), binomial and Poisson
# (responses drawn from the fitted model).
bootstrap_families <- c("gaussian", "binomial", "poisson")

# A classed error for a fit or estimate that the bootstrap cannot redraw.
abort_bootstrap <- function(message, call = rlang::caller_env()) {
  cli::cli_abort(message, class = c("localmean_error_bootstrap", "localmean_error"), call = call,
                 .envir = parent.frame())
}

check_bootstrap_fit <- function(object, call = rlang::caller_env()) {
  family <- (object$family %||% stats::gaussian())$family
  if (!family %in% bootstrap_families || !is.null(object$robust)) {
    robust <- if (!is.null(object$robust)) " with robust iterations" else ""
    abort_bootstrap(c("{.code interval = \"bootstrap\"} is for the {.val {bootstrap_families}}
                       families without robust iterations.",
                      x = "This fit has the {.val {family}} family{robust}."), call = call)
  }
  if (is.null(object$spec)) {
    abort_bootstrap("{.code interval = \"bootstrap\"} needs a kernel fit, not a weight matrix.",
                    call = call)
  }
  family
}

# The data of the replicates (n x B), drawn in the calling session:
# - least squares: the noise of the wild bootstrap, s_i V_ib, with V Rademacher signs and
#   s_i^2 = pilot_variance() / p_i, the variance of y_i (s_i >= 0 carries no sign, so skewed
#   multipliers such as Mammen's would skew every band the same way); the replicate fits are then
#   l(x)'(s V_b), the deviations of the smoother from its mean;
# - binomial and Poisson: responses drawn from the fitted means (the model-based bootstrap),
#   binomial with the prior weights as the numbers of trials.
bootstrap_draws <- function(object, B, family, call = rlang::caller_env()) {
  n <- length(object$y)
  p <- object$weights %||% rep(1, n)
  if (family == "gaussian") {
    s <- sqrt(pilot_variance(object) / p)
    s[!is.finite(s)] <- 0
    return(s * wild_multipliers(n, B, "rademacher"))
  }
  mu <- object$fitted
  mu[!is.finite(mu)] <- 0
  if (family == "poisson") return(matrix(as.double(stats::rpois(n * B, mu)), n, B))
  if (any(abs(p - round(p)) > 1e-8)) {
    abort_bootstrap("The binomial bootstrap needs whole numbers of trials as {.arg weights}.",
                    call = call)
  }
  matrix(stats::rbinom(n * B, round(p), mu), n, B) / pmax(round(p), 1)
}

# The residual variance at the data points, sigma^2(x_i), for the wild bootstrap: the local mean
# of the squared residuals, each divided by its expectation factor 1 - 2 L_ii + p_i v_i (as in
# local_variance()), at `widen` times the fit's bandwidth. Each point's own squared residual
# (the classical wild bootstrap) makes the band's scale as noisy as a variance estimated from
# the few points of one window, and simultaneous bands then cover too little (84% for 95% in
# bench/README.md); the wider pilot keeps the variance's trend and loses most of that noise.
# (With nn() bandwidths the windows keep their k points.)
pilot_variance <- function(object, widen = 3) {
  spec <- object$spec
  p <- object$weights %||% rep(1, length(object$y))
  data_fit <- fit_at_data(spec, want_var = TRUE)
  expected <- 1 - 2 * object$leverage + p * data_fit$fit$var[, 1L]
  usable <- is.finite(object$residuals) & is.finite(expected) & expected > 1e-8 & p > 0
  spec$values <- matrix(ifelse(usable, p * object$residuals^2 / expected, 0))
  spec$prior <- p * usable
  spec$degree <- 0L
  spec <- with_scale(spec, spec$scale * widen)
  spec$engine <- engine_handle()
  pmax(fit_at_data(spec)$fitted[, 1L], 0)
}

# ---- Replicate fits ---------------------------------------------------------------------------

# Runs fun(columns) over blocks of the B replicates (a matrix each, columns the replicates' fits),
# on the user's future plan when one is set, with a progress bar otherwise. The blocks do not
# depend on the threads or the plan, and the draws are made before, so neither do the results.
run_replicate_blocks <- function(B, block, fun, verbose) {
  blocks <- split(seq_len(B), ceiling(seq_len(B) / block))
  if (future_plan_active() && length(blocks) > 1L) {
    parts <- future.apply::future_lapply(blocks, fun, threads = 1L, future.seed = NULL)
    return(do.call(cbind, parts))
  }
  if (verbose) cli::cli_progress_bar("bootstrap replicates", total = B, clear = TRUE)
  parts <- vector("list", length(blocks))
  for (k in seq_along(blocks)) {
    parts[[k]] <- fun(blocks[[k]], threads = NULL)
    if (verbose) cli::cli_progress_update(inc = length(blocks[[k]]))
  }
  if (verbose) cli::cli_progress_done()
  do.call(cbind, parts)
}

# Deviations D (m x B) of the replicate estimates of coefficient `col` at the queries from their
# bootstrap mean (replicate_fits() centred; least squares: already deviations).
replicate_deviations <- function(object, queries, draws, col, family, n_threads, verbose,
                                 cells = 2e6) {
  D <- replicate_fits(object, queries, draws, col, family, n_threads, verbose, cells)
  if (family == "gaussian") return(D)
  D - rowMeans(D, na.rm = TRUE)
}

# The replicate estimates (m x B) of coefficient `col` at the queries. Least squares: the
# smoother is linear, l(x)'(y + e V) - l(x)'y = l(x)'(e V), so one engine call smooths a block of
# noise columns and gives the deviations, of mean zero exactly. Binomial and Poisson: each
# replicate response (a column of `draws`) is refitted (link scale) at the fit's bandwidth. The
# replicates use an engine object of their own, which builds the data once and then takes each
# replicate's values in place of the last (engine_set_values()).
replicate_fits <- function(object, queries, draws, col, family, n_threads, verbose,
                           cells = 2e6) {
  spec <- object$spec
  spec$engine <- engine_handle()
  x <- metric_transform(object, queries$x)
  n_threads <- n_threads(if (is.null(n_threads)) object$n_threads else n_threads)
  n <- nrow(draws)
  B <- ncol(draws)
  fits <- function(cols, threads = NULL) {
    spec$values <- draws[, cols, drop = FALSE]
    engine_set_values(spec)
    coef <- engine_run(spec, x, n_threads = threads %||% n_threads, verbose = FALSE,
                       query_codes = queries$codes)$coef
    matrix(coef[, col, ], nrow(x), length(cols))
  }
  if (family == "gaussian") {
    return(run_replicate_blocks(B, max(1L, floor(cells / max(n, nrow(x)))), fits, verbose))
  }
  refits <- function(cols, threads = NULL) {
    do.call(cbind, lapply(cols, fits, threads = threads))
  }
  run_replicate_blocks(B, max(1L, ceiling(B / 20)), refits, verbose)
}

# ---- Bands from the deviations ----------------------------------------------------------------

# The k-th smallest of the finite values of v, k = ceiling(prob (B + 1)) within 1..B: the
# bootstrap quantile whose tail holds at most 1 - prob of the (B + 1) ordered values.
order_quantile <- function(v, prob) {
  v <- sort(v[is.finite(v)])
  if (!length(v)) return(NA_real_)
  v[min(length(v), max(1L, ceiling(prob * (length(v) + 1L))))]
}

# The band about `fit` (a vector at the m queries) from the deviations D (m x B).
# Pointwise: the basic bootstrap interval [fit - q_hi(x), fit - q_lo(x)], q the (1 +- level) / 2
# quantiles of D(x), or with `percentile` the percentile interval [fit + q_lo(x), fit + q_hi(x)]
# (model-based replicates of local likelihood: a replicate that separates a window has a huge
# link value, which the basic interval would throw into the other tail). Simultaneous: fit +- c s(x), s(x) the root mean square of D(x) and c the
# level quantile of max_x |D_b(x)| / s(x) over the evaluation points (the max-t statistic).
bootstrap_band <- function(fit, D, level, simultaneous, percentile = FALSE) {
  failed <- sum(colSums(!is.finite(D[is.finite(fit), , drop = FALSE])) > 0)
  if (failed) {
    warn("{failed} of the {ncol(D)} bootstrap replicate{?s} had no fit at some point (an empty
          window, or a local likelihood without a finite maximum, as under separation) and
          {cli::qty(failed)}{?was/were} left out there.",
         class = "localmean_bootstrap_failures")
  }
  s <- sqrt(rowMeans(D^2, na.rm = TRUE))
  if (!simultaneous) {
    alpha <- 1 - level
    lo <- apply(D, 1L, order_quantile, prob = alpha / 2)
    hi <- apply(D, 1L, order_quantile, prob = 1 - alpha / 2)
    band <- if (percentile) {
      cbind(fit = fit, lwr = fit + lo, upr = fit + hi)
    } else {
      cbind(fit = fit, lwr = fit - hi, upr = fit - lo)
    }
    return(list(band = band, critical = NA_real_, sd = s))
  }
  usable <- is.finite(s) & s > 0 & is.finite(fit)
  # (a replicate without a fit at some point has no maximum: NA, left out by order_quantile())
  t_max <- apply(abs(D[usable, , drop = FALSE]) / s[usable], 2L, max)
  crit <- order_quantile(t_max, level)
  band <- cbind(fit = fit, lwr = fit - crit * s, upr = fit + crit * s)
  list(band = band, critical = crit, sd = s)
}

# The bootstrap band of predict.local_poly() at model_queries() `queries`: the link-scale (or
# derivative) estimates `fit` with the band's columns, the bootstrap standard deviation and the
# critical value of a simultaneous band.
bootstrap_predict_band <- function(object, queries, fit, col, mult, level, simultaneous, B,
                                   n_threads, verbose, call = rlang::caller_env()) {
  family <- check_bootstrap_fit(object, call)
  draws <- bootstrap_draws(object, B, family, call)
  D <- mult * replicate_deviations(object, queries, draws, col, family, n_threads, verbose)
  bootstrap_band(fit, D, level, simultaneous, percentile = family != "gaussian")
}

# The band that plots and tidiers draw about a local fit's predictions: the tube formula's
# (`interval = "confidence"`) or the bootstrap's (`"bootstrap"`, `B` replicates, no progress bar).
fit_band <- function(object, newdata, interval, level, B, simultaneous = FALSE) {
  if (interval == "bootstrap") {
    return(predict(object, newdata, interval = "bootstrap", level = level,
                   simultaneous = simultaneous, B = B, verbose = FALSE))
  }
  predict(object, newdata, interval = "confidence", level = level, simultaneous = simultaneous)
}

# ---- Density bands ------------------------------------------------------------------------

# The band of a kernel density estimate at `points` (a matrix, original units) by the smoothed
# bootstrap (Silverman 1986, section 6.4): B samples of n points drawn from the estimate itself
# (as simulate(): it resamples the data and adds kernel noise at the bandwidth), each estimated
# at the fit's bandwidth and kernel; the deviations from the replicates' mean give the band as
# bootstrap_band() does. Lower limits are cut at zero.
kde_bootstrap_band <- function(object, points, dens, level, simultaneous, B, n_threads,
                               verbose, call = rlang::caller_env()) {
  n <- object$n
  draws <- kde_bootstrap(object, n * B)
  n_threads <- n_threads(n_threads)
  estimates <- function(cols, threads = NULL) {
    # a matrix even for one point, where vapply() would give a vector
    matrix(vapply(cols, function(b) {
      replicate <- object
      replicate$x <- draws[(b - 1L) * n + seq_len(n), , drop = FALSE]
      replicate$weights <- NULL
      replicate$grid <- NULL
      replicate$range <- column_ranges(replicate$x)
      kde_at(replicate, points, "tree", threads %||% n_threads)
    }, numeric(nrow(points))), nrow(points))
  }
  D <- matrix(run_replicate_blocks(B, max(1L, ceiling(B / 20)), estimates, verbose),
              nrow(points), B)
  D <- D - rowMeans(D)
  out <- bootstrap_band(dens, D, level, simultaneous)
  out$band[, "lwr"] <- pmax(out$band[, "lwr"], 0)
  out
}

# predict(interval = "bootstrap") of a kde: the band at the complete points of `newdata` (rows
# of NA elsewhere).
predict_kde_band <- function(object, newdata, level, simultaneous, B, n_threads, verbose,
                             call = rlang::caller_env()) {
  if (!is.null(object$categorical) || object$bandwidth$type == "nn") {
    abort_bootstrap("{.code interval = \"bootstrap\"} needs numeric data and a fixed bandwidth
                     (a number, vector or matrix), not {.fn nn}.", call = call)
  }
  ok <- complete_points(newdata, object$d)
  if (!any(ok)) abort("{.arg newdata} has no complete point.", call = call)
  if (!all(ok)) newdata <- if (is.null(dim(newdata))) newdata[ok] else newdata[ok, , drop = FALSE]
  points <- kde_points(object, newdata, call = call)
  dens <- kde_at(object, points, "tree", n_threads)
  out <- kde_bootstrap_band(object, points, dens, level, simultaneous, B, n_threads, verbose,
                            call)
  expand_rows(out$band, ok)
}
