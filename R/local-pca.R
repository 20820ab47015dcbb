#' Local principal component analysis
#'
#' `local_pca()` computes, at each point, the kernel-weighted covariance of the
#' data around it, the local mean of `(x_i - m)(x_i - m)'` with the
#' localization kernel, and its principal axes: the eigenvectors, with the
#' local variances along them (the eigenvalues). These are the second local
#' moments that [pc_shift()] projects its steps with, and the local intrinsic
#' dimension follows from them: the number of leading axes that explain at
#' least `variance_share` of the local variance (the local PCA estimate of
#' Fukunaga and Olsen, 1971).
#'
#' The covariance is in the data's units, so that, as in PCA without
#' scaling, the axes and the dimension depend on the variables' scales (a
#' variable in larger units dominates): standardise variables measured in
#' different units first, e.g. with [scale()]. Like every local estimate it mixes
#' the data's shape with the kernel's window: along a curve or surface, the
#' variance along it grows with the bandwidth, the variance across it is the
#' noise; the dimension is read reliably when the bandwidth is well above the
#' noise level.
#'
#' @inheritParams mean_shift
#' @param at Points at which to compute the local axes (a vector, matrix or
#'   data frame with the columns of `x`); `NULL` for the data points.
#' @param variance_share Share of the local variance, in (0, 1], that the
#'   leading axes must explain: it defines the local intrinsic dimension.
#' @return An object of class `local_pca`: `at` (the points), `center` (the
#'   local means), `variances` (a matrix, one row per point, the local
#'   variances along the axes, largest first), `axes` (an array d x d x m,
#'   `axes[, k, i]` the unit axis of `variances[i, k]`), `dimension` (the local
#'   intrinsic dimension of every point), `variance_share`, `x`, `bandwidth`,
#'   `bandwidth_method`, `kernel` and `call`. Points with no data in a compact
#'   kernel's window get `NA`.
#' @references Fukunaga, K. and Olsen, D. R. (1971). An algorithm for finding
#'   intrinsic dimensionality of data. *IEEE Transactions on Computers* C-20,
#'   176-183.
#' @family modes
#' @export
#' @examples
#' set.seed(3)
#' t <- runif(400, 0, pi)
#' x <- cbind(cos(t), sin(t)) + matrix(rnorm(800, sd = 0.03), ncol = 2)
#' fit <- local_pca(x, bandwidth = 0.2)
#' fit
#' table(fit$dimension)
#' plot(fit)
local_pca <- function(x, at = NULL, kernel = "gaussian", bandwidth = "auto",
                      variance_share = 0.9, weights = NULL, method = "auto", n_threads = NULL,
                      verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  setup <- shift_setup(x, bandwidth, kernel, weights, method, max_iter = 0, tol = 0, n_threads,
                       verbose, control)
  share <- check_share(variance_share)
  points <- if (is.null(at)) setup$x else kde_points(list(x = setup$x), at, arg = "at")
  res <- local_axes_at(setup, points)
  structure(c(res, list(dimension = intrinsic_dimension(res$variances, share),
                        variance_share = share, x = setup$x, bandwidth = setup$h,
                        bandwidth_method = setup$bandwidth_method, kernel = setup$kernel,
                        weights = setup$weights, call = match.call())),
            class = "local_pca")
}

check_share <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  if (!is.numeric(x) || length(x) != 1L || !is.finite(x) || x <= 0 || x > 1) {
    abort("{.arg {arg}} must be a number in (0, 1].", call = call)
  }
  as.double(x)
}

# The local means of the coordinates and of their products x_j x_k (j <= k), by the engine, then
# the local covariance's eigen-decomposition (local_axes(), the routine of the principal-component
# shift). The data are centred first: the covariance is the same, with less cancellation.
local_axes_at <- function(setup, points) {
  x <- setup$x
  d <- ncol(x)
  shift <- colMeans(x)
  centred <- sweep(x, 2L, shift)
  pairs <- which(upper.tri(diag(d), diag = TRUE), arr.ind = TRUE)
  pairs <- pairs[order(pairs[, "row"], pairs[, "col"]), , drop = FALSE]
  products <- centred[, pairs[, "row"], drop = FALSE] * centred[, pairs[, "col"], drop = FALSE]
  spec <- engine_spec(x, setup$kernel, setup$h, values = cbind(centred, products),
                      prior = setup$prior, method = setup$method, control = setup$control,
                      binnable = FALSE, n_threads = setup$n_threads, verbose = setup$verbose)
  res <- engine_run(spec, points)
  m <- nrow(points)
  means <- matrix(res$coef[, 1L, ], m)
  seen <- res$wsum > 0
  variances <- matrix(NA_real_, m, d)
  axes <- array(NA_real_, c(d, d, m))
  if (any(seen)) {
    found <- local_axes(means[seen, , drop = FALSE], d)
    variances[seen, ] <- pmax(found$variances, 0)  # rounding can leave -1e-17
    axes[, , seen] <- found$axes
  }
  center <- sweep(means[, seq_len(d), drop = FALSE], 2L, shift, `+`)
  center[!seen, ] <- NA_real_
  names_x <- colnames(x)
  dimnames(axes) <- list(names_x, paste0("axis", seq_len(d)), NULL)
  colnames(variances) <- paste0("axis", seq_len(d))
  colnames(center) <- names_x
  list(at = points, center = center, variances = variances, axes = axes)
}

# The number of leading axes whose variances make up at least `share` of the total.
intrinsic_dimension <- function(variances, share) {
  apply(variances, 1L, function(v) {
    if (anyNA(v)) return(NA_integer_)
    total <- sum(v)
    if (total <= 0) return(0L)
    as.integer(which(cumsum(v) >= share * total * (1 - 1e-12))[1L])
  })
}

#' Methods for local principal component analyses
#'
#' `plot()` draws two-dimensional data with the local axes at (at most 30 of)
#' the points: segments of half-length one local standard deviation along
#' each axis, the first dark and the second light. Other dimensions get a
#' bar chart of the local intrinsic dimensions.
#'
#' @param x,object A `local_pca` object.
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @param ... Graphical parameters for `plot()`; unused otherwise.
#' @return `summary()`: an object of class `summary.local_pca`; `plot()`: `x`,
#'   invisibly.
#' @name local_pca-methods
#' @family modes
NULL

#' @rdname local_pca-methods
#' @export
print.local_pca <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  d <- ncol(x$x)
  counts <- table(x$dimension)
  missing <- sum(is.na(x$dimension))
  print_fields(
    sprintf("<local_pca> local axes at %d points of %d variable%s, %s kernel", nrow(x$at), d,
            if (d > 1L) "s" else "", x$kernel),
    list(Bandwidth = sprintf("%s (%s)", named_values(x$bandwidth, colnames(x$x), digits),
                             x$bandwidth_method),
         Dimension = sprintf("%s of the points (axes for %g%% of the local variance)",
                             paste0(names(counts), " in ", round(100 * counts / sum(counts)),
                                    "%", collapse = ", "),
                             100 * x$variance_share),
         `No data` = if (missing) sprintf("%d point%s", missing, if (missing > 1L) "s" else "")))
  invisible(x)
}

#' @rdname local_pca-methods
#' @export
summary.local_pca <- function(object, ..., digits = NULL) {
  check_dots(...)
  share <- object$variances / rowSums(object$variances)
  structure(list(fit = object, share = summary(share), digits = check_digits(digits)),
            class = "summary.local_pca")
}

#' @export
print.summary.local_pca <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list("Share of the local variance along each axis" = x$share),
                         digits)
}

#' @rdname local_pca-methods
#' @export
plot.local_pca <- function(x, ...) {
  check_graphics_dots(...)
  d <- ncol(x$x)
  if (d != 2L) {
    counts <- table(factor(x$dimension, levels = seq_len(d)))
    graphics::barplot(counts, xlab = "local intrinsic dimension", ylab = "points",
                      main = "Local PCA", col = "grey70", border = NA, ...)
    return(invisible(x))
  }
  # equal axis scales where the variables' spreads are alike, so that the axes drawn look as
  # orthogonal as they are (other units would squash the data into a sliver)
  spread <- apply(x$x, 2L, stats::sd)
  alike <- max(spread) <= 5 * min(spread)
  plot_with_defaults(x$x, NULL, col = "grey75", pch = 20, asp = if (alike) 1 else NA,
                     main = "Local principal axes", ...)
  bandwidth_note(sprintf("bandwidth %s (%s), %s kernel",
                         named_values(x$bandwidth, colnames(x$x)), x$bandwidth_method, x$kernel))
  shown <- sample_rows(nrow(x$at), 30L)
  shown <- shown[!is.na(x$dimension[shown])]
  for (k in 2:1) {
    half <- t(matrix(x$axes[, k, shown], 2L)) * sqrt(x$variances[shown, k])
    graphics::segments(x$at[shown, 1L] - half[, 1L], x$at[shown, 2L] - half[, 2L],
                       x$at[shown, 1L] + half[, 1L], x$at[shown, 2L] + half[, 2L],
                       col = c("grey10", "steelblue")[k], lwd = c(2, 1.5)[k])
  }
  invisible(x)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_pca <- function(x, ...) {
  check_dots(...)
  m <- nrow(x$at)
  d <- ncol(x$x)
  rows <- rep(seq_len(m), each = d)
  axis <- rep(seq_len(d), m)
  total <- rowSums(x$variances)
  out <- data.frame(.row = rows, axis = axis, variance = as.vector(t(x$variances)),
                    share = as.vector(t(x$variances / total)))
  directions <- matrix(x$axes, nrow = d)  # column (k, i): axis k of point i
  for (j in seq_len(d)) out[[colnames(x$x)[j]]] <- directions[j, ]
  as_tidy_frame(out)
}

#' @rdname localmean-tidiers
#' @export
glance.local_pca <- function(x, ...) {
  check_dots(...)
  h <- x$bandwidth
  glance_row(nobs = nrow(x$x), points = nrow(x$at), kernel = x$kernel,
             bandwidth = if (length(unique(h)) == 1L) h[1L],
             bandwidth.method = x$bandwidth_method, variance.share = x$variance_share,
             mean.dimension = mean(x$dimension, na.rm = TRUE))
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_pca <- function(x, ...) {
  check_dots(...)
  cbind(x$at, dimension = x$dimension, x$variances)
}
