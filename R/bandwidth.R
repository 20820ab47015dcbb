# Bandwidths: nn(k) adaptive bandwidths, the rule of thumb, the direct plug-in, and the
# cross-validation, GCV and AICc selectors, all computed with the engine.

#' Nearest-neighbour bandwidths
#'
#' `nn(k)` makes the bandwidth at every query point the distance to its
#' `k`-th nearest data point (a point at the query itself counts), so that
#' `kernel = "uniform", bandwidth = nn(k)` is exactly k-nearest-neighbour
#' regression or classification. With several predictors, distances are
#' computed after dividing every column by its standard deviation
#' (`scale = TRUE`) or on the raw columns (`scale = FALSE`).
#'
#' @param k Number of neighbours, at least 1 and less than the number of
#'   observations.
#' @param scale Standardise the predictors before computing distances.
#' @return An object of class `nn_bandwidth`.
#' @family regression
#' @export
#' @examples
#' fit <- local_mean(dist ~ speed, cars, kernel = "uniform", bandwidth = nn(5))
#' predict(fit, data.frame(speed = 10))
nn <- function(k, scale = TRUE) {
  structure(list(k = check_count(k), scale = check_flag(scale)), class = "nn_bandwidth")
}

#' @export
print.nn_bandwidth <- function(x, ...) {
  cat("<nn bandwidth: k = ", x$k, if (x$scale) ", standardised" else "", ">\n", sep = "")
  invisible(x)
}

# Normal-reference rule of thumb: 1.06 s n^(-1/(4 + d)) per variable for the Gaussian, with the
# robust spread s = min(sd, IQR / 1.349) (1.349: the IQR of the standard normal), converted to
# `kernel` by the ratio of canonical bandwidths.
bw_rot <- function(x, kernel) {
  n <- nrow(x)
  spread <- apply(x, 2L, robust_scale, iqr_divisor = 1.349)
  1.06 * spread * n^(-1 / (4 + ncol(x))) * kernel_scale_factor(kernel)
}

# Leave-one-out, GCV and AICc scores of a linear smoother from its fits and leverages.
smoother_score <- function(criterion, values, fitted, leverage, prior) {
  if (any(!is.finite(fitted)) || any(!is.finite(leverage))) return(Inf)
  w <- prior %||% rep(1, nrow(values))
  n <- sum(w > 0)
  rss <- sum(w * (values - fitted)^2)
  df <- sum(leverage)
  switch(criterion,
    cv = {
      if (any(leverage[w > 0] >= 1 - 1e-10)) return(Inf)
      sum(w * ((values - fitted) / (1 - leverage))^2) / sum(w)
    },
    gcv = if (df >= n) Inf else n * rss / (n - df)^2,
    aicc = if (df + 2 >= n) Inf else log(rss / n) + 1 + 2 * (df + 1) / (n - df - 2)
  )
}

# Fits at the data points with their leverages L_ii = w_ii [S^-1]_00, w_ii the point's weight in
# its own window (see self_weight()).
fit_at_data <- function(spec, n_threads = spec$n_threads, verbose = FALSE, want_var = FALSE) {
  res <- engine_run(spec, spec$x, want_var = want_var, n_threads = n_threads, verbose = verbose,
                    query_codes = spec$categorical$codes)
  fitted <- matrix(res$coef[, 1L, ], nrow = NROW(spec$x))
  leverage <- self_weight(spec) * res$s00 * newton_weight(spec$family %||% "gaussian", fitted[, 1L])
  list(fitted = fitted, leverage = leverage, status = res$status, fit = res)
}

# Grid search of a selector over candidate bandwidths (rows of `candidates`), then a golden-
# section refinement of the common multiplier between the best candidate's neighbours.
select_bandwidth <- function(criterion, spec, candidates, refine, verbose) {
  score_of <- function(h, threads = spec$n_threads) {
    f <- fit_at_data(with_scale(spec, h), threads)
    smoother_score(criterion, spec$values, f$fitted, f$leverage, spec$prior)
  }
  rows <- lapply(seq_len(nrow(candidates)), function(i) candidates[i, ])
  scores <- if (length(rows) > 1L && future_plan_active()) {
    unlist(future.apply::future_lapply(rows, score_of, threads = 1L, future.seed = NULL))
  } else {
    out <- numeric(length(rows))
    if (verbose) cli::cli_progress_bar("Bandwidth search", total = length(rows))
    for (i in seq_along(rows)) {
      out[i] <- score_of(rows[[i]])
      if (verbose) cli::cli_progress_update()
    }
    out
  }
  if (!any(is.finite(scores))) {
    abort(c("No candidate bandwidth gives a usable {.val {criterion}} score.",
            i = "The candidates may be too small: every window must hold enough points."),
          call = NULL)
  }
  best <- which.min(scores)
  h <- candidates[best, ]
  chosen <- h
  if (refine && best > 1L && best < nrow(candidates)) {
    base <- candidates[best, ]
    ratio <- candidates[c(best - 1L, best + 1L), 1L] / base[1L]
    opt <- stats::optimize(function(lr) score_of(base * exp(lr)), log(ratio),
                           tol = 1e-3)
    if (opt$objective < scores[best]) chosen <- base * exp(opt$minimum)
  }
  curve <- data.frame(candidates, score = scores)
  names(curve) <- c(colnames(spec$x), "score")
  list(bandwidth = chosen, curve = curve, score = min(scores, score_of(chosen)))
}

default_candidates <- function(x, kernel, n_candidates) {
  rot <- bw_rot(x, kernel)
  mult <- exp(seq(log(0.05), log(3), length.out = n_candidates))
  outer(mult, rot)
}

# Ruppert, Sheather and Wand (1995) direct plug-in bandwidth for 1-D local linear regression,
# on the Gaussian scale, then converted to `kernel`. Blocked quartic fits (the number of blocks
# chosen by Mallows' Cp) give the pilot quantities; binned local cubic fits estimate the
# curvature functional theta_22 and a local linear fit the error variance. The tuning constants
# are the defaults of KernSmooth::dpill() (Wand 2021, after Ruppert, Sheather and Wand 1995):
# trim 1% of the data at each end, ignore 5% of the grid at each end in theta_22, at most 5
# blocks and at least 20 points a block, a grid of 401 points.
bw_plugin <- function(x, y, kernel, n_threads, trim = 0.01, proptrun = 0.05, blockmax = 5,
                      divisor = 20, gridsize = 401L) {
  ord <- order(x)
  x <- x[ord]
  y <- y[ord]
  a <- x[1L]
  b <- x[length(x)]
  n0 <- length(x)
  keep <- (floor(trim * n0) + 1):(n0 - floor(trim * n0))
  x <- x[keep]
  y <- y[keep]
  n <- length(x)
  n_max <- max(min(floor(n / divisor), blockmax), 1)
  blocks <- lapply(seq_len(n_max), function(N) quartic_blocks(x, y, N))
  rss_max <- blocks[[n_max]]$rss
  cp <- vapply(seq_len(n_max), function(N) {
    blocks[[N]]$rss / (rss_max / (n - 5 * n_max)) - (n - 10 * N)
  }, 1)
  blk <- blocks[[which.min(cp)]]
  sigma2 <- blk$rss / (n - 5 * blk$N)
  gamma <- sigma2 * (b - a) / (abs(blk$th24) * n)
  gamma <- (if (blk$th24 < 0) 3 * gamma / (8 * sqrt(pi)) else 15 * gamma / (16 * sqrt(pi)))^(1 / 7)
  grid <- seq(a, b, length.out = gridsize)
  xm <- matrix(x, ncol = 1L)
  control <- local_control(gridsize = gridsize)
  local_spec <- function(degree, h) {
    engine_spec(xm, "gaussian", h, values = matrix(y), degree = degree, control = control,
                n_threads = n_threads)
  }
  curv <- engine_run(local_spec(3L, gamma), xm)
  m2 <- 2 * curv$coef[, 3L, 1L]
  trunc <- floor(proptrun * gridsize)
  inner <- x >= grid[trunc + 1L] & x <= grid[gridsize - trunc]
  th22 <- mean(m2[inner]^2, na.rm = TRUE)
  c3k <- (4 * (0.5 + 2 * sqrt(2) - 4 / 3 * sqrt(3)) / sqrt(2 * pi))^(1 / 9)
  lambda <- c3k * ((sigma2^2 * (b - a) / (th22 * n)^2)^(1 / 9))
  lin <- fit_at_data(local_spec(1L, lambda), want_var = TRUE)
  rss <- sum((y - lin$fitted)^2, na.rm = TRUE)
  df_resid <- n - 2 * sum(lin$leverage, na.rm = TRUE) + sum(lin$fit$var[, 1L], na.rm = TRUE)
  sigma2_ll <- rss / df_resid
  h <- (sigma2_ll * (b - a) / (2 * sqrt(pi) * th22 * n))^(1 / 5)
  h * kernel_scale_factor(kernel)
}

# Quartic least-squares fits on N blocks of consecutive x: residual sum of squares and the
# averages of m''^2 and m'' m'''' (theta_22 and theta_24).
quartic_blocks <- function(x, y, N) {
  size <- length(x) %/% N  # N - 1 blocks of `size` points, the last takes the rest
  idx <- split(seq_along(x), pmin(N, (seq_along(x) - 1L) %/% size + 1L))
  parts <- lapply(idx, function(i) {
    xi <- x[i]
    fit <- stats::lm.fit(cbind(1, xi, xi^2, xi^3, xi^4), y[i])
    cf <- fit$coefficients
    cf[is.na(cf)] <- 0
    d2 <- 2 * cf[3] + 6 * cf[4] * xi + 12 * cf[5] * xi^2
    d4 <- 24 * cf[5]
    c(rss = sum(fit$residuals^2), th22 = sum(d2^2), th24 = sum(d2 * d4))
  })
  tot <- Reduce(`+`, parts)
  list(N = N, rss = tot[["rss"]], th22 = tot[["th22"]] / length(x), th24 = tot[["th24"]] / length(x))
}
