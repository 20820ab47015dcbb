# Conditional modes (modal regression) of a conditional density fit kde(y ~ x).
#
# At a point x* the x-weights w_i(x*) = p_i K_x(x*, x_i) (the engine's windows) are fixed, so
# f(y | x*) is a one-dimensional kernel density of the responses with prior weights w_i(x*).
# Its modes are found by the package's mean shift (engine_shift()) on the responses with those
# prior weights and the y-kernel's shadow (the kernel whose local means climb the density of
# the y-kernel: the Gaussian for the Gaussian, the uniform for the Epanechnikov, ...). One step
# on a fine grid of y brackets every mode and antimode by the sign of the step; a climb from
# each bracket gives the mode, bisection on the sign the antimodes, and every mode is reported
# with f(mode | x*) and the probability F gives its basin. At degree 1 the weights are the local
# linear fit's, of either sign: the slope's sign comes from the engine's local means of the
# positive and the negative weights apart, and bisection finds modes too (signed_crossings()).

#' Conditional modes of a conditional density
#'
#' Modal regression: every local mode of the conditional density
#' \eqn{\hat f(y \mid x)}{fhat(y | x)} of a fit made by `kde(y ~ x)` (see [kde-conditional]),
#' at each row of `newdata`, not only the largest. At a point \eqn{x}{x} the
#' predictors' kernel weights \eqn{w_i(x)}{w_i(x)} are fixed, and the modes are where
#' mean shift in \eqn{y}{y} under those weights stops,
#' \deqn{y \leftarrow \frac{\sum_i w_i(x)\, g((y - y_i) / h_y)\, y_i}{\sum_i w_i(x)\, g((y - y_i) / h_y)},}{
#'   y <- sum_i w_i(x) g((y - y_i) / h_y) y_i / sum_i w_i(x) g((y - y_i) / h_y),}
#' the localization method's local mean in \eqn{y}{y}, with \eqn{g}{g} the shadow of the
#' kernel in \eqn{y}{y} (see [kernels()]), so that each step climbs
#' \eqn{\hat f(y \mid x)}{fhat(y | x)}. One step on a grid of \eqn{y}{y} 1/32 of \eqn{h_y}{h_y} apart
#' across the responses that weigh at \eqn{x}{x} (with compact kernels also beside every kink
#' of the estimate) brackets each mode where the step turns from upwards to downwards, and
#' each antimode where it turns back; a climb from each bracket finds the mode, and bisection
#' on the step's sign the antimode. Climbs that end within `merge_tol` bandwidths of each other
#' share their mode. Modes so close to an antimode that no grid point lies between them (a
#' ripple narrower than \eqn{h_y / 32}{h_y / 32}) are missed.
#'
#' The kernel must have a shadow: "gaussian", "epanechnikov", "biweight" or
#' "triweight". With a local linear fit (`degree = 1`) the weights of the
#' estimate may be negative and mean shift would not climb it: each change of
#' sign of the slope of \eqn{\hat f(y \mid x)}{fhat(y | x)} on the same grid is located by
#' bisection to `tol` bandwidths instead, and local maxima where the estimate is not
#' positive (in a negative tail) are not reported.
#'
#' @param object A `local_cdens` object made by `kde(y ~ x)`.
#' @param newdata A data frame with the predictors; by default the data of the
#'   fit. A row with a missing predictor gets one row of `NA`.
#' @param max_iter Most mean-shift steps per climb.
#' @param tol A climb stops when its step is shorter than `tol` times the
#'   bandwidth of the response (at `degree = 1`: bisection stops within `tol`
#'   bandwidths).
#' @param merge_tol Modes closer than this (in bandwidths of the response)
#'   are one.
#' @inheritParams kde
#' @param ... Must be empty.
#' @return A data frame with one row per mode: `row` (the row of `newdata`),
#'   the numeric predictors and the levels of the categorical ones, `mode`,
#'   `density` (\eqn{\hat f(\mathrm{mode} \mid x)}{fhat(mode | x)}), `probability` (the
#'   conditional probability of the mode's basin: \eqn{\hat F(y \mid x)}{Fhat(y | x)} between the
#'   antimodes on either side, so that a row's probabilities sum to 1), `rank` (1 for the
#'   highest mode of the row) and `n_modes` (the row's number of modes).
#' @seealso [predict.local_cdens()] for densities and quantiles; [mean_shift()].
#' @family density
#' @export
#' @examples
#' fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.3, 4))
#' modes <- conditional_modes(fit, data.frame(eruptions = c(2, 3, 4.5)))
#' modes
#' # the highest mode of each row: the modal regression curve
#' grid <- data.frame(eruptions = seq(1.6, 5.1, by = 0.1))
#' all <- conditional_modes(fit, grid)
#' plot(waiting ~ eruptions, data = faithful, col = "grey")
#' points(all$eruptions, all$mode, pch = 20, col = ifelse(all$rank == 1, "navy", "orange"))
conditional_modes <- function(object, newdata = NULL, max_iter = 500, tol = 1e-10,
                              merge_tol = 0.01, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  if (!inherits(object, "local_cdens")) {
    abort("{.arg object} must be a conditional density made by {.code kde(y ~ x)}.")
  }
  if (cdens_discrete(object)) {
    abort("{.arg object} has a categorical response, whose conditional mode is its most probable
           level: see {.code predict(object, newdata)}.")
  }
  max_iter <- check_count(max_iter)
  tol <- check_positive(tol)
  merge_tol <- check_positive(merge_tol)
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  shadow <- kernel_row(object$kernel)$shadow
  if (is.na(shadow)) {
    abort(c("{.arg object} has the {.val {object$kernel}} kernel, which has no shadow kernel:
             mean shift cannot climb its conditional density.",
            i = "Fit with the {.val gaussian}, {.val epanechnikov}, {.val biweight} or
                 {.val triweight} kernel."))
  }
  points <- cdens_new_points(object, newdata, need_response = FALSE)
  m <- nrow(points$x)
  found <- if (m) cdens_climb(object, points, shadow, max_iter, tol, merge_tol, n_threads,
                                verbose) else
    list(query = integer(0), mode = numeric(0), bound = numeric(0))
  at <- function(values, type) {
    if (!length(values)) return(numeric(0))
    cdens_pairs(object, points$x[found$query, , drop = FALSE],
                points$codes[found$query, , drop = FALSE], values, type,
                n_threads = n_threads)[, 1L]
  }
  density <- at(found$mode, "density")
  # F at the upper end of each basin, less F at the upper end of the previous one
  upper <- ifelse(is.finite(found$bound), at(pmin(found$bound, .Machine$double.xmax),
                                             "distribution"), 1)
  first <- !duplicated(found$query)
  lower <- c(0, upper[-length(upper)])
  lower[first] <- 0
  found$probability <- upper - lower
  modes_frame(object, points, found$query, found$mode, density, found$probability)
}

# The modes of the weighted density of `y` that `spec` (the shadow kernel, bandwidth hy) climbs,
# and the antimodes between them: one mean-shift step on the grid of crossing_grid(), then a
# full climb from each grid point whose step is upwards while the next one's is not (a mode
# lies between them). Every mode whose rising and falling sides each hold a grid point is found,
# and each only once; climbs are few. Where a step downwards is followed by one that is not, an
# antimode (or a gap without data) lies between; bisection on the step's sign locates it to
# about 1e-10 bandwidths. list(modes, antimodes), both ascending.
climb_from_crossings <- function(spec, y, hy, max_iter, tol) {
  grid <- crossing_grid(y, hy, kernel_row(spec$kernel)$compact)
  sign_at <- function(at) step_sign(spec, at)
  rising <- sign_at(grid)
  up <- which(rising[-length(grid)] > 0 & rising[-1L] <= 0)
  if (!length(up)) return(list(modes = numeric(0), antimodes = numeric(0)))
  res <- engine_shift(spec, matrix(grid[up]), max_iter, tol, verbose = FALSE)
  down <- which(rising[-length(grid)] < 0 & rising[-1L] >= 0)
  list(modes = sort(res$points[res$wsum > 0, 1L]),
       antimodes = bisect_sign(sign_at, grid[down], grid[down + 1L], -1, 30L))
}

# A grid of y 1/32 of a bandwidth apart spanning the responses; with compact kernels also on
# either side of every kink of the density: its slope jumps where a response enters or leaves
# the window, at y_i -+ h_y, and a mode just beside such a kink is bracketed by points on either
# side of it.
crossing_grid <- function(y, hy, compact) {
  grid <- seq(min(y) - hy / 32, max(y) + hy / 32, by = hy / 32)
  if (!compact) return(grid)
  kinks <- unique(y) + rep(c(-1, 1), each = length(unique(y))) * hy
  sort(c(grid, kinks - 1e-7 * hy, kinks + 1e-7 * hy))
}

# The points where sign_at() changes within the brackets (lo, hi], sign_at(lo) == `side`, by
# `iterations` bisections.
bisect_sign <- function(sign_at, lo, hi, side, iterations) {
  for (iter in seq_len(if (length(lo)) iterations else 0L)) {
    mid <- (lo + hi) / 2
    same <- sign_at(mid) == side
    lo[same] <- mid[same]
    hi[!same] <- mid[!same]
  }
  (lo + hi) / 2
}

# The sign of the mean-shift step at `at` (0 where no data weigh).
step_sign <- function(spec, at) {
  step <- engine_shift(spec, matrix(at), 1L, 0, verbose = FALSE)
  ifelse(step$wsum > 0, sign(step$points[, 1L] - at), 0)
}

# The modes and antimodes of a local linear estimate f(y) = sum_b l_b k_hy(y - y_b), whose
# weights l may be negative, so that mean shift does not climb it. The slope of f has the sign
# of sum_b l_b g((y - y_b) / h_y) (y_b - y), g the shadow of k: the engine's local means of y
# under the shadow kernel (weight sums D and means N / D), for the positive and the negative
# weights apart (the engine's weights are nonnegative), give it as N+ - y D+ - (N- - y D-). Each
# change of sign on the grid of crossing_grid() is bisected to `tol` bandwidths: from rising to
# falling a mode, the other way an antimode. Local maxima where f is not positive (in a negative
# tail of the estimate) are not modes of a density and are dropped. list(modes, antimodes).
signed_crossings <- function(object, y, l, shadow, tol) {
  hy <- object$bandwidth$y
  parts <- lapply(c(1, -1), function(side) {
    keep <- side * l > 0
    if (any(keep)) {
      engine_spec(matrix(y[keep], dimnames = list(NULL, object$response)), shadow, hy,
                  values = matrix(y[keep]), prior = side * l[keep], method = "exact",
                  control = object$control, binnable = FALSE)
    }
  })
  sign_at <- function(at) {
    slope <- 0
    for (k in 1:2) {
      if (is.null(parts[[k]])) next
      res <- engine_run(parts[[k]], matrix(at), n_threads = 1L, verbose = FALSE)
      term <- res$wsum * (res$coef[, 1L, 1L] - at)
      slope <- slope + c(1, -1)[k] * ifelse(res$wsum > 0, term, 0)
    }
    sign(slope)
  }
  grid <- crossing_grid(y, hy, kernel_row(object$kernel)$compact)
  rising <- sign_at(grid)
  last <- length(grid)
  up <- which(rising[-last] > 0 & rising[-1L] <= 0)
  down <- which(rising[-last] < 0 & rising[-1L] >= 0)
  iterations <- max(1L, ceiling(log2(1 / (32 * tol))))
  modes <- bisect_sign(sign_at, grid[up], grid[up + 1L], 1, iterations)
  density <- drop(matrix(kernel_value(outer(modes, y, "-") / hy, object$kernel),
                         length(modes)) %*% l)
  list(modes = modes[density > 0],
       antimodes = bisect_sign(sign_at, grid[down], grid[down + 1L], -1, iterations))
}

# Mean shift in y at every query (at degree 1, signed_crossings()): list(query = the query of
# each mode, mode, bound = the upper end of each mode's basin, the antimode before the next mode
# (the lowest of several), Inf for the last).
cdens_climb <- function(object, points, shadow, max_iter, tol, merge_tol, n_threads, verbose) {
  windows <- cdens_point_weights(object, points, n_threads)
  if (verbose) bar <- cli::cli_progress_bar("conditional modes", total = nrow(points$x))
  hy <- object$bandwidth$y
  out <- lapply(seq_len(nrow(points$x)), function(j) {
    if (verbose) cli::cli_progress_update(id = bar)
    w <- windows$weights[[j]]
    keep <- w != 0
    if (!any(w > 0)) return(NULL)
    y <- object$y[windows$rows[[j]][keep]]
    w <- w[keep]
    found <- if (cdens_degree(object) == 1L) {
      signed_crossings(object, y, w, shadow, tol)
    } else {
      climb_spec <- engine_spec(matrix(y, dimnames = list(NULL, object$response)), shadow, hy,
                                prior = w / sum(w), method = "exact", control = object$control,
                                binnable = FALSE, n_threads = n_threads)
      climb_from_crossings(climb_spec, y, hy, max_iter, tol)
    }
    if (!length(found$modes)) return(NULL)
    groups <- group_within(matrix(found$modes / hy), merge_tol)
    modes <- sort(unname(vapply(split(found$modes, groups), mean, 1)))
    k <- length(modes)
    bound <- vapply(seq_len(k - 1L), function(i) {
      between <- found$antimodes[found$antimodes > modes[i] & found$antimodes < modes[i + 1L]]
      if (length(between) > 1L) {  # (a dropped mode between: the lowest antimode)
        dens <- matrix(kernel_value(outer(between, y, "-") / hy, object$kernel),
                       length(between)) %*% w
        between <- between[which.min(dens)]
      }
      if (length(between)) between[1L] else (modes[i] + modes[i + 1L]) / 2
    }, 1)
    cbind(modes, c(bound, Inf))
  })
  sizes <- vapply(out, NROW, 1L)
  out <- do.call(rbind, out) %||% matrix(numeric(0), 0L, 2L)
  list(query = rep.int(seq_along(sizes), sizes), mode = out[, 1L], bound = out[, 2L])
}

# The long data frame of modes: row, predictors, mode, density, probability, rank, n_modes; one
# NA row for
# each row of newdata without a complete set of predictors or without modes.
modes_frame <- function(object, points, query, mode, density, probability) {
  m <- nrow(points$x)
  rank <- stats::ave(-density, query, FUN = function(v) rank(v, ties.method = "first"))
  count <- tabulate(query, m)
  empty <- which(count == 0L)
  query <- c(query, empty)
  order <- order(query, c(rank, rep(1L, length(empty))))
  query <- query[order]
  values <- function(v) c(v, rep(NA, length(empty)))[order]
  rows <- which(points$ok)[query]
  frame <- cdens_predictor_frame(object, points$x[query, , drop = FALSE],
                                 points$codes[query, , drop = FALSE])
  out <- data.frame(row = rows, frame, mode = values(mode), density = values(density),
                    probability = values(probability), rank = as.integer(values(rank)),
                    n_modes = count[query],
                    check.names = FALSE)
  missing <- which(!points$ok)
  if (length(missing)) {
    pad <- out[rep(NA_integer_, length(missing)), , drop = FALSE]
    pad$row <- missing
    pad$n_modes <- 0L
    out <- rbind(out, pad)
    out <- out[order(out$row, out$rank), , drop = FALSE]
  }
  rownames(out) <- NULL
  out
}

# The predictors of query points as a data frame in the fit's order: numeric columns and the
# categorical ones' levels as values of their type.
cdens_predictor_frame <- function(object, x, codes) {
  kind <- object$predictors$kind
  cols <- lapply(seq_along(kind), function(j) {
    if (kind[j] == "numeric") return(x[, sum(kind[seq_len(j)] == "numeric")])
    k <- sum(kind[seq_len(j)] != "numeric")
    level_values(object, k, codes[, k])
  })
  as.data.frame(stats::setNames(cols, object$predictors$names), stringsAsFactors = FALSE,
                optional = TRUE)
}
