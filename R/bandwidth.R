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
#' **Windows on tied data.** A local polynomial with \eqn{p}{p} coefficients
#' (\eqn{p = 1}{p = 1} for the local mean, \eqn{p = 2}{p = 2} for local linear in one
#' predictor) needs data at \eqn{p}{p} distinct places with positive weight.
#' With a compact kernel the window therefore reaches the k-th neighbour or,
#' on tied data, farther: the uniform kernel to the \eqn{p}{p}-th different
#' distance from the query, the other compact kernels, which vanish at the
#' edge of their support, to the \eqn{(p + 1)}{(p + 1)}-th, so that points at
#' \eqn{p}{p} different distances lie strictly inside (where the data hold
#' fewer different distances, the radius is twice the farthest distance).
#' Untied windows are unchanged, the local mean with the uniform kernel is
#' exactly k-nearest-neighbour averaging, and a fit exists at every data point
#' whose window is not degenerate in several predictors (e.g. all points on
#' one line). Kernels with unbounded support use the k-th distance as their
#' scale.
#'
#' **Choosing k.** `nn("cv")` chooses k by leave-one-out cross-validation:
#' about 20 log-spaced candidates from \eqn{p + 1}{p + 1} to \eqn{n / 2}{n / 2} (extended
#' to \eqn{n - 1}{n - 1} when the best is the largest), then every whole number
#' between the best candidate's neighbours is narrowed down. The
#' leave-one-out residuals use the leverage identity with the windows of the
#' full data (leaving a point out does not move the other windows), as for
#' the spans of `loess()`. The fit records the chosen k and the scores
#' (`cv_curve`).
#'
#' @param k Number of neighbours, at least 1 and less than the number of
#'   observations, or `"cv"` to choose it by leave-one-out cross-validation.
#' @param scale Standardise the predictors before computing distances.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return An object of class `local_nn`.
#' @family regression
#' @export
#' @examples
#' fit <- local_mean(dist ~ speed, cars, kernel = "uniform", bandwidth = nn(5))
#' predict(fit, data.frame(speed = 10))
#' loess_like <- local_poly(dist ~ speed, cars, kernel = "tricube", bandwidth = nn("cv"))
#' loess_like$nn$k
nn <- function(k, scale = TRUE, ...) {
  check_dots(...)
  if (is.character(k)) {
    if (!identical(k, "cv")) {
      abort("{.arg k} must be a whole number or {.val cv}, not {.val {k}}.")
    }
  } else {
    k <- check_count(k)
  }
  structure(list(k = k, scale = check_flag(scale)), class = "local_nn")
}

#' @export
print.local_nn <- function(x, ...) {
  check_dots(...)
  cat("<nn bandwidth: k = ", x$k, if (x$scale) ", standardised" else "", ">\n", sep = "")
  invisible(x)
}

# Per-query radii of an nn(k) specification (in its standardising scales), widened by rounding
# error so that points at the radius count; distances equal up to a relative 1e-9 are ties.
# The engine specification of an `nn()` bandwidth, with k chosen by leave-one-out CV for
# nn("cv"): list(spec, how, curve). `spec_for(h, nn)` builds a specification of the fit.
resolve_nn <- function(bandwidth, x, spec_for, verbose, call = rlang::caller_env()) {
  n <- nrow(x)
  scale <- if (bandwidth$scale) apply(x, 2L, stats::sd) else rep(1, ncol(x))
  nn <- list(k = bandwidth$k, scale = scale, standardise = bandwidth$scale)
  nn$memo <- bandwidth$memo
  if (!identical(bandwidth$k, "cv")) {
    if (bandwidth$k >= n) {
      abort("{.code nn(k)} needs k < n: k = {bandwidth$k}, n = {n}.", call = call)
    }
    return(list(spec = spec_for(NULL, nn), how = "nn", curve = NULL))
  }
  nn$k <- 1L
  spec <- spec_for(NULL, nn)
  terms <- choose(ncol(x) + spec$degree, spec$degree)
  if (n < terms + 2L) {
    abort("{.code nn(\"cv\")} needs at least {terms + 2} observations for degree {spec$degree}.",
          call = call)
  }
  sel <- select_nn_k(spec, terms + 1L, verbose)
  if (is.null(sel)) {
    abort(c("No k gives a usable leave-one-out score for {.code nn(\"cv\")}.",
            i = "Use a kernel with unbounded support or a lower degree."), call = call)
  }
  spec$nn$k <- sel$k
  list(spec = spec, how = "cv", curve = sel$curve)
}

# Leave-one-out choice of k for an nn specification: log-spaced candidates from k_min to n / 2
# (extended to n - 1 when the best is the largest), then narrowed between the best candidate's
# neighbours until every whole number there is scored. list(k, curve), NULL when no k scores.
select_nn_k <- function(spec, k_min, verbose = FALSE, n_candidates = 20L) {
  n <- NROW(spec$x)
  memo <- new.env(parent = emptyenv())
  tick <- search_progress(verbose)
  score_ks <- function(ks) {
    for (k in setdiff(ks, as.integer(names(memo)))) {
      spec$nn$k <- k
      memo[[as.character(k)]] <- spec_score("cv", spec)
      tick()
    }
  }
  evaluated <- function() {
    ks <- sort(as.integer(names(memo)))
    list(k = ks, score = vapply(as.character(ks), function(k) memo[[k]], 1, USE.NAMES = FALSE))
  }
  log_spaced <- function(lo, hi, m) {
    unique(as.integer(round(exp(seq(log(lo), log(hi), length.out = m)))))
  }
  top <- max(k_min, min(n - 1L, ceiling(n / 2)))
  score_ks(log_spaced(k_min, top, n_candidates))
  ev <- evaluated()
  if (!any(is.finite(ev$score))) return(NULL)
  if (which.min(ev$score) == length(ev$k) && top < n - 1L) {
    score_ks(log_spaced(top, n - 1L, n_candidates %/% 2L))
  }
  repeat {
    ev <- evaluated()
    best <- which.min(ev$score)
    span <- ev$k[max(best - 1L, 1L)]:ev$k[min(best + 1L, length(ev$k))]
    todo <- setdiff(span, ev$k)
    if (length(todo) == 0L) break
    if (length(todo) > 8L) todo <- todo[unique(round(seq(1, length(todo), length.out = 6)))]
    score_ks(todo)
  }
  list(k = ev$k[best], curve = data.frame(k = ev$k, score = ev$score))
}

# Normal-reference rule of thumb: 1.06 s n^(-1/(4 + d)) per variable for the Gaussian, with the
# robust spread s = min(sd, IQR / 1.349) (1.349: the IQR of the standard normal), converted to
# `kernel` by the ratio of canonical bandwidths.
bw_rot <- function(x, kernel) {
  n <- nrow(x)
  spread <- apply(x, 2L, scaled_robust_scale, iqr_divisor = 1.349)
  1.06 * spread * n^(-1 / (4 + ncol(x))) * kernel_scale_factor(kernel)
}

# robust_scale() of v computed on v / max|v|: the squares in the standard deviation of data
# near the smallest doubles (say 1e-300) underflow to zero, and near the largest overflow.
scaled_robust_scale <- function(v, iqr_divisor) {
  size <- max(abs(v))
  if (!(size > 0) || !is.finite(size)) return(robust_scale(v, iqr_divisor))
  size * robust_scale(v / size, iqr_divisor)
}

# Leave-one-out, GCV and AICc scores of a linear smoother from the summaries of its fits at the
# data (fit_sums(), engine_data_fit()); Inf when a fit is missing.
smoother_score <- function(criterion, sums) {
  if (sum(sums$status[-1L]) > 0L) return(Inf)
  n <- sums$count
  rss <- sums$rss
  df <- sums$trace
  switch(criterion,
    cv = if (sums$near_one) Inf else sums$loo / sums$weight,
    gcv = if (df >= n) Inf else n * rss / (n - df)^2,
    aicc = if (df + 2 >= n) Inf else log(rss / n) + 1 + 2 * (df + 1) / (n - df - 2)
  )
}

# Fits at the data points with their leverages L_ii = w_ii [S^-1]_00, w_ii the point's weight in
# its own window (see self_weight()), and the number of points per engine status
# (`status_counts`). Binned least squares takes one pass over the grid's fits
# (engine_data_fit()), which also gives the summaries (`sums`) and, with `keep_residuals`, the
# residuals, with `keep_nodes` the grid's node fits (`nodes`, see engine_run()); `keep_fits = FALSE`
# returns the summaries alone there. Otherwise the engine fits at
# every point (`fit`, with `status` per point).
fit_at_data <- function(spec, n_threads = spec$n_threads, verbose = FALSE, want_var = FALSE,
                        keep_fits = TRUE, keep_residuals = FALSE, keep_nodes = FALSE) {
  if (one_pass_fit(spec, want_var)) {
    res <- engine_data_fit(spec, keep_fits, keep_residuals, n_threads, verbose, keep_nodes)
    res$status_counts <- res$sums$status
    return(res)
  }
  n <- NROW(spec$x)
  if (!want_var && n > 0L && identical(spec$family, "gaussian") && one_call(spec, n) &&
      (is.null(spec$prior) || length(spec$prior) == n)) {
    return(engine_fit_at_data(spec, n_threads, verbose))
  }
  res <- engine_run(spec, spec$x, want_var = want_var, n_threads = n_threads, verbose = verbose,
                    query_codes = spec$categorical$codes)
  fitted <- matrix(res$coef[, 1L, ], nrow = NROW(spec$x))
  leverage <- self_weight(spec) * res$s00
  # (least squares: the Newton weight is 1)
  family <- spec$family
  if (!is.null(family) && family != "gaussian") leverage <- leverage * newton_weight(family, fitted[, 1L])
  list(fitted = fitted, leverage = leverage, status = res$status,
       status_counts = status_counts(res$status), fit = res)
}

# Points per engine status (0 ok, 1 no weight, 2 singular, 3 no likelihood maximum).
status_counts <- function(status) tabulate(status + 1L, nbins = 4L)

# A formula bandwidth (rule of thumb, plug-in) widened by factors of 1.5 until the fit exists at
# every data point (or the search's upper limit): formulas assume well-spread data, and on a
# skewed predictor they leave the sparse tail's windows without enough points.
widen_to_fit <- function(spec, h, step = 1.5) {
  bounds <- bandwidth_bounds(spec, tie_floor = FALSE)
  upper <- bounds[2L, ]
  # a formula bandwidth of zero (no spread) is widened from the lower search limit
  h <- pmax(h, bounds[1L, ])
  for (i in seq_len(search_limits$steps)) {
    f <- fit_at_data(with_scale(spec, h, lambda = spec$categorical$lambda), keep_fits = FALSE)
    # (local likelihood fits that do not exist because the classes separate stay NA)
    if (sum(f$status_counts[2:3]) == 0L || all(h >= upper)) return(h)
    h <- pmin(h * step, upper)
  }
  h
}

# ---- The cv, gcv and aicc search -----------------------------------------------------------
#
# 1. A grid of candidate bandwidths (rows), by default multiples of the rule of thumb (one common
#    multiplier): its scores are the curve of plot(which = "bandwidth").
# 2. With the default candidates, the grid extends itself by factors of 1.5 upwards while no
#    candidate scores or the best is the largest, and downwards while the best is the smallest,
#    within the search limits below (skewed predictors need bandwidths far beyond the rule of
#    thumb for their sparse tails).
# 3. With `refine`: one predictor, a golden-section search between the best candidate's
#    neighbours; several, a joint search of every bandwidth (joint_search()).
# With categorical predictors only there is no grid of bandwidths: select_lambdas().

# Search limits and the smoothed-out threshold, in multiples of each predictor's range, on the
# Gaussian kernel's scale (times kernel_scale_factor() for other kernels). At 3 ranges Gaussian
# weights vary by less than 6% across the data: the fit is nearly global (polynomial) in that
# predictor, which is then irrelevant to the local fit. At 10 ranges they vary by 0.5%.
bandwidth_limits <- list(lower = 1e-3, upper = 10, smoothed_out = 3)

# Bounds of the search loops: `steps` extensions of the grid by factors of 1.5 each way (1.5^40 is
# 1e7, beyond the 1e4 between the search limits) and `candidates` rows of a grid (each a fit).
search_limits <- list(steps = 40L, candidates = 1000L)

# Per-predictor bandwidth bounds of the search (2 x d: lower, upper) from the numeric
# predictors' ranges; with `tie_floor` (the data-driven searches), on tied or rounded data none
# below the resolution (tie_floor()); formula bandwidths keep the plain lower limit.
bandwidth_bounds <- function(spec, tie_floor = TRUE) {
  unit <- spec$span[seq_len(spec$numeric_vars)] * kernel_scale_factor(spec$kernel)
  lower <- bandwidth_limits$lower * unit
  if (tie_floor) lower <- pmax(lower, tie_floor(spec$x, spec$kernel, spec$numeric_vars))
  rbind(lower, bandwidth_limits$upper * unit, deparse.level = 0)
}

# Which numeric predictors a bandwidth smooths out (h beyond bandwidth_limits$smoothed_out
# ranges) and which categorical ones (lambda at its upper bound).
smoothed_out <- function(spec, h, lambda = NULL) {
  numeric_vars <- seq_len(spec$numeric_vars)
  out <- h >= bandwidth_limits$smoothed_out * spec$span[numeric_vars] *
    kernel_scale_factor(spec$kernel)
  c(stats::setNames(out, colnames(spec$x)[numeric_vars]),
    lambda >= (1 - 1e-3) * lambda_upper_of(spec))
}

# The upper bounds of a specification's categorical lambdas (see lambda_upper()).
lambda_upper_of <- function(spec) {
  cat <- spec$categorical
  if (is.null(cat)) return(numeric(0))
  stats::setNames(ifelse(cat$ordered, 1, (cat$levels - 1) / cat$levels), colnames(cat$codes))
}

# The score of a selector as a function of the bandwidths (and categorical lambdas), remembering
# every score it computed (the searches revisit points). The search scores on its own strategy
# (see binned_min_n).
# `h` may also be a matrix of candidate rows: their scores, computed together where
# candidate_scores() can.
bandwidth_scorer <- function(criterion, spec, tick = function() NULL) {
  memo <- new.env(parent = emptyenv())
  key_of <- function(h, lambda) paste(format(c(h, lambda), digits = 17), collapse = ",")
  function(h, threads = spec$n_threads, lambda = spec$categorical$lambda) {
    if (!is.matrix(h)) {
      key <- key_of(h, lambda)
      if (is.null(memo[[key]])) {
        memo[[key]] <- if (one_pass_applies(spec, length(h))) {
          candidate_scores(criterion, spec, matrix(h, nrow = 1L), lambda, threads)
        } else {
          spec_score(criterion, with_scale(spec, h, lambda = lambda, search = TRUE), threads)
        }
        tick()
      }
      return(memo[[key]])
    }
    rows <- h
    keys <- vapply(seq_len(nrow(rows)), function(i) key_of(rows[i, ], lambda), "")
    todo <- which(vapply(keys, function(k) is.null(memo[[k]]), TRUE, USE.NAMES = FALSE))
    if (length(todo)) {
      new <- candidate_scores(criterion, spec, rows[todo, , drop = FALSE], lambda, threads)
      for (i in seq_along(todo)) {
        memo[[keys[todo[i]]]] <- new[i]
        tick()
      }
    }
    vapply(keys, function(k) memo[[k]], 1, USE.NAMES = FALSE)
  }
}

# Scores of candidate rows of bandwidths (with categorical `lambda`): in one engine pass
# (engine_candidate_sums()) for least squares in one numeric predictor, alone, on the exact or
# tree strategy; else one fit at the data per row (spec_score()). Both score the same fits.
candidate_scores <- function(criterion, spec, rows, lambda, threads) {
  specs <- lapply(seq_len(nrow(rows)), function(i) {
    with_scale(spec, rows[i, ], lambda = lambda, search = TRUE)
  })
  methods <- vapply(specs, `[[`, "", "method")
  if (!one_pass_scoring(spec, rows, methods)) {
    return(vapply(specs, function(s) spec_score(criterion, s, threads), 1))
  }
  # (the tree strategy reaches from the nearest point, here the query itself)
  sums <- engine_candidate_sums(spec, rows[, 1L], sweep_reach(spec, methods), threads)
  vapply(sums, function(s) smoother_score(criterion, s), 1)
}

# The progress of a bandwidth search: a function that counts one more score. How many scores a
# search needs is not known in advance (the grid extends itself, the joint search runs until it
# converges), so the bar shows the count and the time taken, and no ETA. It ends when the
# function that created it (`.envir`) returns; future workers do not tick.
search_progress <- function(verbose, .envir = parent.frame()) {
  if (!isTRUE(verbose)) return(function() NULL)
  id <- cli::cli_progress_bar("bandwidth search (scores computed)", total = NA, .envir = .envir)
  pid <- Sys.getpid()
  function() {
    if (Sys.getpid() == pid) cli::cli_progress_update(id = id, .envir = .envir)
    NULL
  }
}

# The selector's score of a specification: the exact leave-one-out deviance for the local
# multinomial logit (multinomial_cv()), else the score of its fits at the data (fit_score()).
spec_score <- function(criterion, spec, n_threads = spec$n_threads, verbose = FALSE) {
  if (identical(spec$family, "multinomial")) return(multinomial_cv(spec, n_threads, verbose))
  if (is_m_loss(spec$family %||% "gaussian")) return(loss_cv(spec, n_threads, verbose))
  fit_score(criterion, spec, fit_at_data(spec, n_threads, verbose, keep_fits = FALSE))
}

# The selector's score of fits at the data: of the linear smoother for least squares, of the
# deviance for the local likelihood (see likelihood_score()).
fit_score <- function(criterion, spec, f) {
  family <- spec$family %||% "gaussian"
  if (family == "gaussian") {
    sums <- f$sums %||% fit_sums(spec$values, f$fitted, f$leverage, spec$prior, spec$n_threads)
    return(smoother_score(criterion, sums))
  }
  likelihood_score(criterion, spec$values[, 1L], f$fitted[, 1L], f$leverage, spec$prior,
                   family_of(family))
}

# Whether candidate_scores() scores the candidate rows in one engine pass: least squares in
# one numeric predictor alone, on the exact or tree strategy (`methods`: the rows' strategies,
# by default those with_scale() chooses), while the pass's fits (points x values x candidates)
# stay within one_pass_max_values (else one candidate at a time keeps the memory bounded).
one_pass_scoring <- function(spec, rows, methods = NULL) {
  if (!one_pass_applies(spec, ncol(rows))) return(FALSE)
  if (as.double(NROW(spec$x)) * NCOL(spec$values) * nrow(rows) > one_pass_max_values) {
    return(FALSE)
  }
  methods <- methods %||% vapply(rows[, 1L], function(h) with_scale(spec, h, search = TRUE)$method,
                                 "")
  all(methods %in% c("exact", "tree"))
}

one_pass_max_values <- 5e7  # 400 MB of fits

# The conditions of one_pass_scoring() but the strategies, for rows of `d` bandwidths.
one_pass_applies <- function(spec, d) {
  spec$numeric_vars == 1L && d == 1L && is.null(spec$categorical) && is.null(spec$nn) &&
    is.null(spec$point_scale) && !is.null(spec$values) &&
    identical(spec$family %||% "gaussian", "gaussian")
}

# Scores of the candidate rows, on the user's future plan when one is set (unless one engine
# pass scores them all, see one_pass_scoring(): its scores do not depend on the plan).
score_candidates <- function(score_of, candidates, spec) {
  if (nrow(candidates) > 1L && future_plan_active() && !one_pass_scoring(spec, candidates)) {
    rows <- lapply(seq_len(nrow(candidates)), function(i) candidates[i, ])
    return(unlist(future.apply::future_lapply(rows, score_of, threads = 1L, future.seed = NULL)))
  }
  score_of(candidates)
}

# Extends a grid of common multiples (rows of `candidates`, increasing) by factors of `step`:
# upwards while no candidate scores or the best is the largest, until every bandwidth reaches its
# upper bound; downwards while the best is the smallest and scores, until one reaches its lower
# bound. Returns the grid and its scores.
extend_candidates <- function(score_of, candidates, scores, bounds, step = 1.5) {
  grow <- function(row, factor) {
    candidates <<- if (factor > 1) rbind(candidates, row) else rbind(row, candidates)
    scores <<- if (factor > 1) c(scores, score_of(row)) else c(score_of(row), scores)
  }
  for (i in seq_len(search_limits$steps)) {
    last <- candidates[nrow(candidates), ]
    stuck <- !any(is.finite(scores)) || which.min(scores) == length(scores)
    if (!stuck || all(last >= bounds[2L, ])) break
    grow(pmin(last * step, bounds[2L, ]), step)
  }
  for (i in seq_len(search_limits$steps)) {
    first <- candidates[1L, ]
    if (which.min(scores) != 1L || !is.finite(scores[1L]) || any(first <= bounds[1L, ])) break
    grow(pmax(first / step, bounds[1L, ]), 1 / step)
  }
  rownames(candidates) <- NULL
  list(candidates = candidates, scores = scores)
}

# The cv, gcv or aicc search (see above): list(bandwidth, curve, score, smoothed_out), the
# score being the search's own at the chosen bandwidth (binned from binned_min_n$search points).
select_bandwidth <- function(criterion, spec, candidates, refine, verbose, extend = FALSE) {
  tick <- search_progress(verbose)
  score_of <- bandwidth_scorer(criterion, spec, tick)
  scores <- score_candidates(score_of, candidates, spec)
  bounds <- bandwidth_bounds(spec)
  if (extend) {
    grid <- extend_candidates(score_of, candidates, scores, bounds)
    candidates <- grid$candidates
    scores <- grid$scores
  }
  if (!any(is.finite(scores))) {
    abort(c("No candidate bandwidth gives a usable {.val {criterion}} score.",
            i = "The candidates may be too small: every window must hold enough points."),
          call = NULL)
  }
  best <- which.min(scores)
  chosen <- candidates[best, ]
  lambda <- spec$categorical$lambda
  if (refine && (ncol(candidates) > 1L || length(lambda))) {
    gradient <- if (gradient_search_applies(criterion, spec)) loo_gradient_scorer(spec, tick)
    joint <- joint_search(score_of, chosen, lambda, bounds, spec, gradient)
    chosen <- joint$h
    lambda <- joint$lambda
  } else if (refine && best > 1L && best < nrow(candidates)) {
    base <- candidates[best, ]
    ratio <- candidates[c(best - 1L, best + 1L), 1L] / base[1L]
    opt <- golden_refine(function(lr) finite_or_max(score_of(base * exp(lr))), log(ratio),
                         scores[best + c(-1L, 0L, 1L)])
    if (opt$objective < scores[best]) chosen <- base * exp(opt$minimum)
  }
  curve <- data.frame(candidates, score = scores)
  names(curve) <- c(colnames(spec$x), "score")
  list(bandwidth = chosen, lambda = lambda, curve = curve,
       score = score_of(chosen, lambda = lambda),
       smoothed_out = smoothed_out(spec, chosen, lambda))
}

# The golden-section search (stats::optimize(), tolerance `tol`) of f on `interval` (about 0,
# the best grid point, with the grid's scores at the ends and at 0 in `scores`): first on a third
# of the interval about the vertex of the parabola through the three scores, which the smooth
# score's minimum lies close to; where that search ends at its bracket's edge (within 3 tol),
# on the whole interval. Either finds the minimum to the same tolerance.
golden_refine <- function(f, interval, scores, tol = 1e-3) {
  a <- interval[1L]
  c <- interval[2L]
  da <- scores[2L] - scores[1L]
  dc <- scores[2L] - scores[3L]
  denom <- a * dc - c * da
  vertex <- if (all(is.finite(scores)) && denom != 0) 0.5 * (a^2 * dc - c^2 * da) / denom
  if (is.null(vertex) || !is.finite(vertex) || vertex <= a || vertex >= c) {
    return(stats::optimize(f, interval, tol = tol))
  }
  half <- (c - a) / 6
  bracket <- c(max(a, vertex - half), min(c, vertex + half))
  opt <- stats::optimize(f, bracket, tol = tol)
  at_edge <- (opt$minimum - bracket[1L] < 3 * tol && bracket[1L] > a) ||
    (bracket[2L] - opt$minimum < 3 * tol && bracket[2L] < c)
  if (at_edge) opt <- stats::optimize(f, interval, tol = tol)
  opt
}

# The search with categorical predictors only: no bandwidth, so no grid of bandwidths. One lambda
# is searched on a grid over [0, upper] (its ends included: 0 keeps the levels apart, the upper
# bound smooths the predictor out), refined by a golden-section search between the best grid
# point's neighbours; several lambdas jointly, from the rule of thumb (joint_search()).
# Returns what select_bandwidth() returns, with no bandwidth and the lambda grid as the curve.
select_lambdas <- function(criterion, spec, refine, verbose = FALSE, n_grid = 11L) {
  score_of <- bandwidth_scorer(criterion, spec, search_progress(verbose))
  lambda_score <- function(lambda) score_of(numeric(0), lambda = lambda)
  upper <- unname(lambda_upper_of(spec))
  lambda <- spec$categorical$lambda
  curve <- NULL
  if (length(upper) == 1L) {
    grid <- seq(0, upper, length.out = n_grid)
    scores <- vapply(grid, lambda_score, 1)
    if (any(is.finite(scores))) {
      best <- which.min(scores)
      lambda <- grid[best]
      if (refine) {
        around <- grid[c(max(best - 1L, 1L), min(best + 1L, n_grid))]
        opt <- stats::optimize(function(l) finite_or_max(lambda_score(l)), around,
                               tol = 1e-4 * upper)
        if (opt$objective < scores[best]) lambda <- opt$minimum
      }
    }
    curve <- stats::setNames(data.frame(grid, scores), c(colnames(spec$categorical$codes),
                                                          "score"))
  } else if (refine) {
    lambda <- joint_search(score_of, numeric(0), lambda, matrix(0, 2L, 0L), spec)$lambda
  }
  score <- lambda_score(lambda)
  if (!is.finite(score)) {
    abort(c("No {.val {criterion}} score is usable for any smoothing of the categorical
             predictors.", i = "Give {.arg bandwidth} as a number."), call = NULL)
  }
  list(bandwidth = numeric(0), lambda = lambda, curve = curve, score = score,
       smoothed_out = smoothed_out(spec, numeric(0), lambda))
}

# Default candidates: multiples of the rule of thumb (one common multiplier) up to 3, none below
# tie_floor(). For one numeric predictor, in steps that halve or quarter h^2, so that the
# one-pass scoring (candidate_scores()) gets the Gaussian's weights by squaring those of a larger
# candidate: 12 in steps of sqrt(2) from 3 * 2^(-11/2) = 0.066 for the Gaussian, 18 in steps of
# 2^(1/3) from 3 * 2^(-17/3) = 0.059 for the other kernels (whose scores, with jumps where points
# enter a window, the finer grid brackets better). Otherwise (or with `n_candidates`)
# n_candidates log-spaced from 0.05: by default 15 for several predictors, 7 where the joint
# search that follows the grid descends along the analytic gradient (`gradient`, see
# gradient_search_applies()) and only needs the grid for its start.
default_candidates <- function(x, kernel, n_candidates = NULL, gradient = FALSE) {
  mult <- if (ncol(x) == 1L && is.null(n_candidates)) {
    3 * if (identical(kernel, "gaussian")) 2^(-(11:0) / 2) else 2^(-(17:0) / 3)
  } else {
    exp(seq(log(0.05), log(3), length.out = n_candidates %||% if (gradient) 7L else 15L))
  }
  unique(pmax(outer(mult, bw_rot(x, kernel)), rep(tie_floor(x, kernel), each = length(mult))))
}

# ---- Joint search of every bandwidth ----------------------------------------------------------
#
# The parameters theta of the joint search: log h for each numeric predictor, then, for each
# categorical one, the logit of lambda / upper (upper = (c - 1) / c unordered, 1 ordered), so that
# every parameter is unbounded in principle and bounded in practice by `theta_bounds()`.

# The parameter layout of a specification: bounds of theta (2 x p) and the categorical upper
# limits. Categorical predictors add their logits in [-8, 8] (lambda from 3e-4 to 0.9997 of its
# upper bound; the search's widen_flat() step reaches the bound itself).
theta_layout <- function(spec, bounds) {
  lambda_upper <- unname(lambda_upper_of(spec))
  logit_bounds <- matrix(rep(c(-8, 8), length(lambda_upper)), nrow = 2L)
  list(numeric = spec$numeric_vars, lambda_upper = lambda_upper,
       bounds = cbind(log(bounds), logit_bounds))
}

# Bandwidths and lambdas of theta; a logit at its upper bound of 8 means lambda's upper bound,
# one at its lower bound of -8 a lambda of 0 (the levels kept apart).
theta_scales <- function(theta, layout) {
  num <- seq_len(layout$numeric)
  logit <- if (length(num)) theta[-num] else theta
  share <- ifelse(logit >= 8, 1, ifelse(logit <= -8, 0, stats::plogis(logit)))
  list(h = exp(theta[num]), lambda = layout$lambda_upper * share)
}

# Score of theta, clamped to its bounds.
theta_score <- function(score_of, layout) {
  function(theta) {
    theta <- pmin(pmax(theta, layout$bounds[1L, ]), layout$bounds[2L, ])
    s <- theta_scales(theta, layout)
    score_of(s$h, lambda = s$lambda)
  }
}

# Joint minimisation of the score over every bandwidth from the grid's best `start` (h), with
# bounds. With the analytic gradient of the score (`gradient`, see loo_gradient_scorer()):
# gradient_search(); for kernels other than the Gaussian followed by Nelder-Mead from its
# result, kept when better (their scores have kinks, at the edges of compact supports, where
# the descent stops early; see bench/README.md). Otherwise one coordinate sweep from it, which
# tries each predictor at a few multiples of its bandwidth and at its upper bound (so an
# irrelevant predictor can jump to a wide bandwidth), then Nelder-Mead from the sweep's result
# (never worse than the start), restarted once from its own result, as restarts help
# Nelder-Mead past early collapse of its simplex; then each lambda is tried at 0
# (lower_bounds_polish(), followed by Nelder-Mead when that helps).
# Returns the best bandwidths h and lambdas found (never worse than the start).
joint_search <- function(score_of, start, lambda, bounds, spec, gradient = NULL) {
  layout <- theta_layout(spec, bounds)
  score <- theta_score(score_of, layout)
  clamp <- function(theta) pmin(pmax(theta, layout$bounds[1L, ]), layout$bounds[2L, ])
  theta0 <- clamp(c(log(start), stats::qlogis(lambda / layout$lambda_upper)))
  nelder_mead <- function(theta) {
    # in units of 1/5 log: optim's first simplex steps 0.1, i.e. factors of exp(0.5)
    opt <- stats::optim(numeric(length(theta)), function(u) score(theta + 5 * u),
                        method = "Nelder-Mead",
                        control = list(reltol = 1e-4, maxit = 100L * length(theta)))
    list(theta = clamp(theta + 5 * opt$par), value = opt$value)
  }
  if (!is.null(gradient)) {
    theta <- gradient_search(gradient, theta0, layout)
    if (!identical(as.character(spec$kernel), "gaussian")) {
      polished <- nelder_mead(theta)
      if (polished$value < score(theta)) {
        theta <- widen_flat(score, polished$theta, polished$value, layout$bounds[2L, ])
      }
    }
    return(theta_scales(theta, layout))
  }
  sweep <- coordinate_sweep(score, theta0, layout$bounds)
  best <- list(theta = sweep, value = score(sweep))
  first <- nelder_mead(sweep)
  if (first$value < best$value) best <- first
  again <- nelder_mead(best$theta)
  if (again$value < best$value) best <- again
  # Nelder-Mead creeps towards a bound (a lambda of 0) without reaching it: try the lower bounds
  polished <- lower_bounds_polish(score, best$theta, best$value, layout)
  if (polished$value < best$value) {
    best <- polished
    again <- nelder_mead(best$theta)
    if (again$value < best$value) best <- again
  }
  theta <- widen_flat(score, best$theta, best$value, layout$bounds[2L, ])
  theta_scales(theta, layout)
}

# Moves each categorical parameter to its lower bound (lambda = 0: the levels kept apart) where
# that lowers the score, one at a time from `theta` with score `value`: a lambda whose optimum
# is 0 is only approached by a search on its logit. Returns list(theta, value).
lower_bounds_polish <- function(score, theta, value, layout) {
  for (j in setdiff(seq_along(theta), seq_len(layout$numeric))) {
    if (theta[j] <= layout$bounds[1L, j]) next
    low <- replace(theta, j, layout$bounds[1L, j])
    low_value <- score(low)
    if (low_value < value) {
      theta <- low
      value <- low_value
    }
  }
  list(theta = theta, value = value)
}

# ---- The gradient search ---------------------------------------------------------------------
#
# The leave-one-out "cv" score of the local mean or local linear fit is the loss of the learned
# metric (metric.hpp) at the diagonal metric A = diag(1 / h), which comes with its analytic
# gradient for every registry kernel with a slope (kernel_has_slope()): with respect to A (hence
# to log h: dL/dlog h_k = -A_kk dL/dA_kk) and to each categorical lambda. It is the engine's
# "cv" score (the same leave-one-out residuals, the same cut-off and the same rule for leverages
# within 1e-10 of 1), computed in one pass over the pairs of points together with its gradient.

# Whether the joint search of a selector can use that gradient: the "cv" criterion of least
# squares with one response, a kernel with a slope, degree 0 or 1, fixed per-variable bandwidths,
# on the exact or tree strategy (a search the strategy would bin keeps the derivative-free
# search on its binned scores).
gradient_search_applies <- function(criterion, spec) {
  identical(criterion, "cv") && identical(spec$family %||% "gaussian", "gaussian") &&
    kernel_has_slope(spec$kernel) && spec$degree <= 1L && is.null(spec$nn) &&
    is.null(spec$point_scale) && spec$numeric_vars >= 1L && NCOL(spec$values) == 1L &&
    spec$requested_method != "binned" &&
    (!spec$binnable || NROW(spec$x) < binned_min_n$search)
}

# The score and its gradient as a function of theta (see theta_layout()): list(value, gradient),
# the value Inf where a point has no leave-one-out fit. Remembers every theta it scored (optim()
# asks for the value and the gradient of the same theta in two calls).
loo_gradient_scorer <- function(spec, tick = function() NULL) {
  x <- matrix(spec$x, ncol = spec$numeric_vars)
  y <- spec$values[, 1L]
  prior <- spec$prior %||% numeric(0)
  categorical <- spec$categorical
  memo <- new.env(parent = emptyenv())
  function(theta, layout) {
    key <- paste(format(theta, digits = 17), collapse = ",")
    if (!is.null(memo[[key]])) return(memo[[key]])
    s <- theta_scales(theta, layout)
    if (!is.null(categorical)) categorical$lambda <- as.double(s$lambda)
    res <- metric_loss(x, y, prior, diag(1 / s$h, nrow = length(s$h)), spec$degree,
                       categorical %||% list(), spec$cutoff, 1e-10, spec$n_threads, FALSE,
                       TRUE, !is.null(categorical), spec$kernel)
    # dL/dlog h = dL/dA_kk dA_kk/dlog h = -dL/dA_kk / h; dL/dtheta = dL/dlambda upper p (1 - p)
    num <- seq_len(layout$numeric)
    share <- stats::plogis(theta[-num])
    grad <- c(-diag(res$gradient) / s$h,
              res$lambda_gradient * layout$lambda_upper * share * (1 - share))
    tick()
    memo[[key]] <- list(value = res$loss, gradient = grad)
  }
}

# L-BFGS-B on theta within its bounds from theta0, with the analytic gradient, then each lambda
# tried at 0 (a descent follows when that helps), then widen_flat(); after `first_maxit`
# iterations, each numeric bandwidth is tried at its upper bound. The score is divided by its value at theta0, so that optim()'s `factr` is a
# relative tolerance (its test divides by max(|f|, 1)): the search stops when a step gains less
# than factr * 2.2e-16 (2e-5 by default) of the score. An infinite score (a point without a
# leave-one-out fit) is replaced by a large finite one with a zero gradient, so that the line
# search steps back. Returns the best theta evaluated (never worse than theta0).
gradient_search <- function(loss_of, theta0, layout, factr = 1e11, maxit = 100L,
                            first_maxit = 4L) {
  best <- new.env(parent = emptyenv())
  best$theta <- theta0
  best$value <- loss_of(theta0, layout)$value
  unit <- abs(best$value)
  if (!is.finite(best$value) || unit == 0) {
    return(widen_flat(function(t) loss_of(t, layout)$value, theta0, best$value,
                      layout$bounds[2L, ]))
  }
  evaluate <- function(theta) {
    res <- loss_of(theta, layout)
    if (res$value < best$value) {
      best$theta <- theta
      best$value <- res$value
    }
    if (!is.finite(res$value)) return(list(value = 1e3, gradient = 0 * theta))
    list(value = res$value / unit, gradient = res$gradient / unit)
  }
  descend <- function(theta, iterations) {
    stats::optim(theta, function(t) evaluate(t)$value, function(t) evaluate(t)$gradient,
                 method = "L-BFGS-B", lower = layout$bounds[1L, ], upper = layout$bounds[2L, ],
                 control = list(factr = factr, maxit = iterations))
  }
  # A few steps bring the relevant bandwidths near their scale; then irrelevant predictors:
  # each numeric bandwidth moves to its upper bound where that lowers the score, so that the
  # descent does not creep there along a flat direction.
  descend(theta0, first_maxit)
  for (j in seq_len(layout$numeric)) {
    if (best$theta[j] >= layout$bounds[2L, j]) next
    evaluate(replace(best$theta, j, layout$bounds[2L, j]))
  }
  descend(best$theta, maxit)
  # a lambda whose optimum is 0 (its lower bound): moved there, then the others follow
  value <- function(t) loss_of(t, layout)$value
  polished <- lower_bounds_polish(value, best$theta, best$value, layout)
  if (polished$value < best$value) {
    evaluate(polished$theta)
    descend(best$theta, maxit)
  }
  widen_flat(value, best$theta, best$value, layout$bounds[2L, ])
}

# Moves each parameter to its upper bound when that costs at most a relative `tol` of the best
# score: the score is flat there (an irrelevant predictor, or one the local polynomial fits
# globally), and the simpler model is preferred. The total cost stays within `tol`.
widen_flat <- function(score, theta, value, upper, tol = 1e-4) {
  for (j in seq_along(theta)) {
    if (theta[j] >= upper[j]) next
    wide <- replace(theta, j, upper[j])
    if (score(wide) <= value * (1 + tol)) theta <- wide
  }
  theta
}

# One pass over the parameters, each moved to its best of a few steps and its upper bound.
coordinate_sweep <- function(score, theta, bounds, moves = c(-3, -2, -1.5, -1, -0.5, 0.5, 1, 2)) {
  for (j in seq_along(theta)) {
    steps <- pmin(pmax(c(theta[j] + moves, bounds[2L, j]), bounds[1L, j]), bounds[2L, j])
    tries <- lapply(steps, function(t) replace(theta, j, t))
    values <- vapply(tries, score, 1)
    if (min(values) < score(theta)) theta <- tries[[which.min(values)]]
  }
  theta
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
