# Kernel density estimation: the denominator of the local mean, sum_i K(x*, x_i) w_i, computed by
# the same engine (no values, degree 0), normalised to integrate to one.

#' Kernel density estimation
#'
#' `kde()` estimates a density in any dimension with any kernel of the
#' registry: on a grid (binned and convolved when there are at most two
#' variables, as `stats::density()` and `KernSmooth::bkde2D()` do) and
#' exactly at any point through `predict()`. In the localization method the
#' density estimate is the denominator of every local mean.
#'
#' **Bandwidths** follow the package convention (see [kernels()]): a number
#' or a vector with one scale per variable, so that the kernel is radial in
#' \eqn{(x - x_i)/h}{(x - x_i)/h}; or a symmetric positive definite matrix `H` playing the
#' role of a covariance (`H = diag(h^2)` is the same as the vector `h`; for
#' the Gaussian kernel it is `ks::kde()`'s `H`); or `nn(k)` for sample-point
#' adaptive bandwidths, where \eqn{h_i}{h_i} is the distance from \eqn{x_i}{x_i} to its
#' k-th nearest other data point (after dividing the columns by their
#' standard deviations when `nn(k, scale = TRUE)`), so that
#' \eqn{\hat f(x) = \sum_i w_i K((x - x_i)/h_i)/h_i^d}{fhat(x) = sum_i w_i K((x - x_i)/h_i)/h_i^d};
#' or a selector (see [kde_bandwidth()]).
#'
#' **Grid.** The default grid has 512 points in one dimension and 51 x 51 in
#' two, extending beyond the data by three bandwidths for the Gaussian and
#' Cauchy kernels, the support of compact kernels and eight bandwidths for
#' the Laplace (clipped to `bounds`); more dimensions have no grid unless `gridsize` asks for one.
#' The binned strategy does not bin on the output grid: it refines it per
#' variable by the smallest whole factor that makes the step at most h / 4
#' (at most 20001 nodes in 1-D, 1001 per variable in 2-D), bins the data
#' linearly there and convolves, so that the output grid points are nodes of
#' the binning grid and a coarse output grid costs no accuracy. With
#' `method = "auto"`, fixed bandwidths on large data (n >= 10000) are binned
#' when that grid resolves the bandwidth (at least two nodes per bandwidth)
#' and binning costs less than the kd-tree; otherwise every grid point is
#' computed with the kd-tree.
#'
#' **Bounds.** `bounds` declares data on a half-line or an interval, per
#' variable (a vector `c(lower, upper)` in 1-D, a 2-row matrix with one column
#' per variable in general; `-Inf`/`Inf` for open ends). The estimate uses
#' reflection: the data mirrored at every finite bound are added, and the
#' density is zero outside the bounds, so that it still integrates to one.
#'
#' **Mixed data.** Factors, ordered factors, logical and character columns
#' of a data frame (or formula terms such as `factor(g)`) are categorical,
#' and the estimate is the generalized product kernel estimate (Li and
#' Racine 2007, as `np::npudens()`)
#' \deqn{\hat f(x, z) = \sum_i w_i K_h(x - x_i) \prod_k L_k(z_k, z_{ik}),}{
#'  fhat(x, z) = sum_i w_i K_h(x - x_i) prod_k L_k(z_k, z_ik),}
#' a density in the numeric columns \eqn{x}{x} and a
#' probability over the levels \eqn{z}{z}: it integrates over \eqn{x}{x} and sums over \eqn{z}{z} to
#' one. Unordered columns (factors, logical, character) use the Aitchison-Aitken kernel,
#' \eqn{1 - \lambda}{1 - lambda} at the point's own level and
#' \eqn{\lambda / (c - 1)}{lambda / (c - 1)} at each of the other \eqn{c - 1}{c - 1} levels (\eqn{0
#' \le \lambda \le (c - 1)/c}{0 <= lambda <= (c - 1)/c}); ordered factors use the Li-Racine kernel
#' \eqn{\lambda^{|r - r_i|}}{lambda^(|r - r_i|)} of the rank difference divided by its sum over the
#' levels, \eqn{\sum_{r'} \lambda^{|r' - r_i|}}{sum_r' lambda^(|r' - r_i|)}, so that it is a
#' probability too (\eqn{0 \le \lambda \le 1}{0 <= lambda <= 1}). This is np's
#' `okertype = "racineliyan"`; np's default for densities, "liracine", multiplies by
#' \eqn{(1 - \lambda)/(1 + \lambda)}{(1 - lambda)/(1 + lambda)} instead, which sums to one only over
#' infinitely many levels. Only the ranks of ordered levels count (np takes numeric labels as
#' distances). \eqn{\lambda = 0}{lambda = 0} estimates each level apart (its share of the weights
#' times the density within it); \eqn{\lambda}{lambda} at its upper bound ignores the column.
#'
#' With categorical columns `bandwidth` is one value per column in column
#' order (or named): \eqn{h}{h} for a numeric column, \eqn{\lambda}{lambda} for a
#' categorical one; or "rot": \eqn{h}{h} by the numeric rule of thumb of the
#' numeric columns (see [kde_bandwidth()]) and
#' \eqn{\lambda = n^{-2/(4 + d)}}{lambda = n^(-2/(4 + d))}, capped at its upper bound, with
#' \eqn{d}{d} the number of numeric columns (\eqn{\lambda}{lambda} of the order of \eqn{h^2}{h^2},
#' Li and Racine 2007, section 4.1; a cautious start rather than an optimum); or "lscv":
#' least-squares cross-validation of every \eqn{h}{h} and \eqn{\lambda}{lambda} jointly (see
#' [kde_bandwidth()]). Matrix and [nn()] bandwidths, `bounds` and the binned strategy are for
#' numeric data only. The `estimate` on the grid of the numeric columns (at most two, as above) is
#' an array with one dimension per numeric grid axis followed by one per categorical column, named
#' by its levels: for `kde(iris[c("Petal.Length", "Species")])`, `estimate[, "setosa"]` is the joint
#' density of `Petal.Length` and `Species == "setosa"` on the grid. Without numeric columns it is
#' the smoothed probability table. `predict()` takes a data frame with every column and refuses
#' levels that the fit has not seen.
#'
#' @references
#' Aitchison, J. and Aitken, C. G. G. (1976). Multivariate binary
#' discrimination by the kernel method. *Biometrika* 63, 413-420.
#' \doi{10.1093/biomet/63.3.413}
#'
#' Li, Q. and Racine, J. S. (2007). *Nonparametric Econometrics: Theory and
#' Practice*. Princeton University Press.
#'
#' Racine, J. S., Li, Q. and Yan, K. X. (2020). Kernel smoothed probability
#' mass functions for ordered datatypes. *Journal of Nonparametric
#' Statistics* 32, 563-586.
#'
#' @param x A numeric vector, matrix or data frame (one column per variable;
#'   a data frame may have categorical columns, see "Mixed data"), or for the
#'   formula method a one-sided formula such as `~ a + b` (a two-sided one,
#'   `y ~ x`, estimates the conditional density of `y`: see [kde-conditional]).
#' @param data A data frame for the formula method.
#' @param kernel A kernel name (see [kernels()]), a function of the scaled
#'   distance or a [user_kernel()]. The Cauchy kernel has no
#'   density in more than one dimension; a full matrix `H` needs a kernel
#'   other than the Cauchy too.
#' @param bandwidth A number, a vector (one per variable), a bandwidth matrix,
#'   [nn()], or a selector: "rot", "plugin", "lscv", "scv", "mlcv" or "isj" (see
#'   [kde_bandwidth()]). With categorical columns one value per column (\eqn{h}{h}
#'   or \eqn{\lambda}{lambda}), "rot" or "lscv"; for a conditional density (a two-sided
#'   formula) see [kde-conditional].
#' @param gridsize Grid points per variable (default 512 in 1-D, 51 in 2-D,
#'   none beyond); 0 skips the grid. At most 1,048,576 grid points in all
#'   (1024 x 1024).
#' @param bounds Bounds of the support, see Details.
#' @param weights Optional non-negative case weights (normalised to sum 1).
#' @param method "auto", "binned", "exact" (every pair, never truncated) or
#'   "tree" (kd-tree with the kernel's cut-off, see [kernels()]).
#' @param n_threads Number of threads, see [n_threads()].
#' @param verbose Show a progress bar for long computations.
#' @param control [local_control()] settings of the engine: `cutoff` (the
#'   truncation radius of unbounded kernels for the "tree" and "binned"
#'   strategies) and `gridsize` (the nodes per variable of the binned
#'   strategy's grid, from which the estimate is interpolated linearly to the
#'   output grid; by default the output grid refined to a step of at most
#'   h / 4, see "Grid").
#' @param subset,na.action For the formula method, as in [stats::lm()].
#' @param ... Unused.
#' @return An object of class `local_kde` (not `kde`, so that it does not
#'   clash with the ks package's class): `x` (the data, a vector when given as
#'   one), `n`, `d`, `vars` (variable names), `range`, `weights` (normalised,
#'   `NULL` without case weights), `kernel`,
#'   `bandwidth` (a list with its `type`, "scale", "matrix" or "nn", and
#'   values), `bandwidth_method`, `bounds`, `grid` (a list of grid axes) and
#'   `estimate` (the density on the grid: a vector in 1-D, an array
#'   otherwise), `method` and `call`. With categorical columns `x` holds the
#'   numeric columns only (`d` counts them), `categorical` the level codes,
#'   levels and orderedness of the others, `predictors` every column's name
#'   and kind, `bandwidth$lambda` the categorical bandwidths, and `estimate`
#'   the array described in "Mixed data".
#' @family density
#' @export
#' @examples
#' fit <- kde(faithful$eruptions)
#' fit
#' plot(fit)
#' predict(fit, c(2, 4.5))
#' fit2 <- kde(~ eruptions + waiting, faithful, bandwidth = "plugin")
#' plot(fit2)
#' # mixed data: the density of petal length jointly with the species
#' fit3 <- kde(iris[c("Petal.Length", "Species")])
#' fit3
#' plot(fit3)
#' predict(fit3, data.frame(Petal.Length = 4.5, Species = c("versicolor", "virginica")))
#' kde(~ eruptions + factor(waiting > 70), faithful, bandwidth = "lscv")
#' # a smoothed probability table
#' kde(~ factor(cyl) + factor(gear), mtcars)$estimate
kde <- function(x, ...) UseMethod("kde")

#' @rdname kde
#' @export
kde.formula <- function(x, data = NULL, ..., weights = NULL, subset, na.action = stats::na.omit) {
  # `weights` is a formal so that the model frame evaluates it in `data`, as lm() does
  check_dots(..., .known = c(setdiff(names(formals(kde.default)), c("x", "weights", "...")),
                             if (length(x) == 3L) "degree"))
  call <- match.call(expand.dots = FALSE)
  names(call)[names(call) == "x"] <- "formula"
  mf <- call_model_frame(call, parent.frame())
  if (length(x) == 3L) {  # a response: the conditional density (R/conditional.R)
    fit <- kde_conditional(mf, weights = stats::model.weights(mf), ...)
    fit$call <- generic_call(match.call(), "kde")
    fit$terms <- attr(mf, "terms")
    return(fit)
  }
  fit <- kde.default(formula_parts(mf)$x, weights = stats::model.weights(mf), ...)
  fit$call <- generic_call(match.call(), "kde")
  fit$terms <- attr(mf, "terms")
  fit
}

#' @rdname kde
#' @export
kde.default <- function(x, kernel = "gaussian", bandwidth = "rot", gridsize = NULL, bounds = NULL,
                        weights = NULL, method = "auto", n_threads = NULL,
                        verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  if (has_categorical(x)) {
    return(kde_mixed(x, bandwidth, kernel, weights, gridsize, bounds, method, n_threads,
                     verbose, control, generic_call(match.call(), "kde")))
  }
  data <- check_kde_data(x)
  weights <- check_weights(weights, data$n)
  bounds <- check_bounds(bounds, data)
  method <- check_choice(method, c("auto", "binned", "exact", "tree"))
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  control <- check_control(control)
  kernel <- check_kernel(kernel)
  if (!kernel_row(kernel)$multivariate && data$d > 1L) {
    abort("The {.val {kernel}} kernel has no density in more than one dimension; choose another
           {.arg kernel}.")
  }
  fit <- structure(c(data, list(weights = if (!is.null(weights)) weights / sum(weights),
                                kernel = kernel, bounds = bounds, control = control,
                                call = generic_call(match.call(), "kde"))),
                   class = "local_kde")
  chosen <- resolve_kde_bandwidth(bandwidth, fit, weights, n_threads, verbose)
  check_kde_volume(chosen$bandwidth)
  fit$bandwidth <- chosen$bandwidth
  fit$bandwidth_method <- chosen$method
  fit$grid <- kde_grid(fit, gridsize)
  frame <- kde_frame(fit, method)
  fit$method <- frame$spec$method
  fit$estimate <- if (length(fit$grid)) kde_on_grid(fit, frame, n_threads, verbose)
  fit
}

# The kernel's normalising constant 1 / det(H)^(1/2) (1 / prod(h) per variable) must be a finite
# double: a bandwidth of 1e-160 in two dimensions underflows it and every estimate turns NaN.
check_kde_volume <- function(bandwidth, call = rlang::caller_env()) {
  volume <- switch(bandwidth$type,
    scale = prod(bandwidth$h),
    matrix = abs(det(bandwidth$root)),
    return(invisible(bandwidth))  # nn(k): the constant varies with the point
  )
  if (!is.finite(volume) || !is.finite(1 / volume)) {
    abort(c("{.arg bandwidth} is too small or too large for a density in double precision.",
            i = "Rescale the data."), call = call)
  }
  invisible(bandwidth)
}

# The data with their size, names and ranges. A plain numeric vector is kept as it is: copying
# large data costs more than estimating on a grid (see bench/README.md).
check_kde_data <- function(x, call = rlang::caller_env()) {
  if (is.double(x) && is.null(dim(x)) && !is.object(x) && length(x) > 0L) {
    ranges <- cpp_column_ranges(x)
    if (!ranges$finite) abort("{.arg x} has missing or non-finite values.", call = call)
    return(list(x = x, n = length(x), d = 1L, vars = "x", range = ranges$range))
  }
  if (is.double(x) && is.matrix(x) && !is.object(x) && all(dim(x) > 0L)) {
    ranges <- cpp_column_ranges(x)
    vars <- colnames(x) %||% paste0("x", seq_len(ncol(x)))
    if (!all(ranges$finite)) {
      abort("{.arg x} has missing or non-finite values in column{?s}
             {.field {vars[!ranges$finite]}}.", call = call)
    }
    return(list(x = x, n = nrow(x), d = ncol(x), vars = vars, range = ranges$range))
  }
  x <- check_predictors(x, call = call)
  list(x = x, n = nrow(x), d = ncol(x), vars = colnames(x), range = column_ranges(x))
}

# The data as a matrix with named columns.
kde_data <- function(fit) {
  if (is.null(dim(fit$x))) return(matrix(fit$x, ncol = 1L, dimnames = list(NULL, fit$vars)))
  if (!identical(colnames(fit$x), fit$vars)) colnames(fit$x) <- fit$vars
  fit$x
}

# Normalised weights (equal without case weights).
kde_weights <- function(fit) fit$weights %||% rep(1 / fit$n, fit$n)

# Bounds as a 2 x d matrix (row 1 lower, row 2 upper) that contains the data, or NULL.
check_bounds <- function(bounds, data, call = rlang::caller_env()) {
  if (is.null(bounds)) return(NULL)
  d <- data$d
  if (is.numeric(bounds) && is.null(dim(bounds)) && length(bounds) == 2L && d == 1L) {
    bounds <- matrix(bounds, 2L)
  }
  if (!is.numeric(bounds) || !is.matrix(bounds) || !identical(dim(bounds), c(2L, d)) ||
      anyNA(bounds) || any(bounds[1L, ] >= bounds[2L, ])) {
    abort("{.arg bounds} must be {.code c(lower, upper)} in 1-D or a 2-row matrix with one
           column per variable, lower below upper.", call = call)
  }
  if (any(data$range[1L, ] < bounds[1L, ]) || any(data$range[2L, ] > bounds[2L, ])) {
    abort("Some data lie outside {.arg bounds}.", call = call)
  }
  colnames(bounds) <- data$vars
  bounds
}

# A bandwidth specification: list(type = "scale", h) / ("matrix", H) / ("nn", k, scale, point).
resolve_kde_bandwidth <- function(bandwidth, fit, weights, n_threads, verbose = FALSE,
                                  call = rlang::caller_env()) {
  d <- fit$d
  if (is.character(bandwidth)) {
    method <- check_choice(bandwidth, selector_names("density"), arg = "bandwidth", call = call)
    bw <- kde_bandwidth(kde_data(fit), fit$kernel, method, weights = weights,
                        n_threads = n_threads, verbose = verbose)
    return(list(bandwidth = as_kde_bandwidth(bw, d, call), method = method))
  }
  if (inherits(bandwidth, "local_nn")) {
    x <- kde_data(fit)
    if (bandwidth$k >= nrow(x)) {
      abort("{.arg bandwidth}: {.code nn(k)} needs k below the number of points ({nrow(x)}).",
            call = call)
    }
    scale <- if (bandwidth$scale) apply(x, 2L, stats::sd) else rep(1, d)
    if (any(!(scale > 0))) scale[!(scale > 0)] <- 1
    point <- knn_radius(x, scale, x, bandwidth$k + 1L, n_threads, FALSE)
    if (any(point <= 0)) {
      abort(c("{.arg bandwidth}: the {bandwidth$k}-th neighbour distance is zero for some
               points (repeated values).", i = "Use a larger {.code k}."), call = call)
    }
    return(list(bandwidth = list(type = "nn", k = bandwidth$k, scale = scale, point = point),
                method = "nn"))
  }
  if (is.list(bandwidth)) { # lists are the selectors' own specifications
    abort("{.arg bandwidth} must be a number, one per variable, a matrix, {.code nn(k)} or a
           selector name, not a list.", call = call)
  }
  list(bandwidth = as_kde_bandwidth(bandwidth, d, call), method = "user")
}

# A numeric bandwidth (number, per-variable vector or matrix) as a specification.
as_kde_bandwidth <- function(bw, d, call) {
  if (is.list(bw)) return(bw)
  if (is.numeric(bw) && is.matrix(bw)) {
    if (!identical(dim(bw), c(d, d)) || any(!is.finite(bw)) || !isSymmetric(unname(bw))) {
      abort("A bandwidth matrix must be a finite symmetric {d} x {d} matrix.", call = call)
    }
    root <- tryCatch(chol(bw), error = function(e) NULL)
    if (is.null(root) || min(diag(root)) <= 1e-8 * max(diag(root))) {
      abort("The bandwidth matrix is singular or not positive definite.", call = call)
    }
    return(list(type = "matrix", H = unname(bw), root = t(root)))
  }
  if (!is.numeric(bw) || !length(bw) %in% c(1L, d) || any(!is.finite(bw)) || any(bw <= 0)) {
    abort("{.arg bandwidth} must be positive: one number, one per variable ({d}), a matrix,
           {.code nn(k)} or a selector name.", call = call)
  }
  list(type = "scale", h = rep_len(as.double(bw), d))
}

# The engine specification and constants for a fit: a full matrix H = A A' turns into unit
# scales on A^-1 x; reflection at the bounds adds mirrored copies of the data. On a grid, the
# binned strategy bins on the output grid refined to resolve the bandwidth (kde_binning_grid())
# unless local_control(gridsize =) asks for another binning grid.
kde_frame <- function(fit, method = "tree", call = rlang::caller_env()) {
  x <- fit$x
  prior <- fit$weights
  point <- if (fit$bandwidth$type == "nn") fit$bandwidth$point
  if (!is.null(fit$bounds) || fit$bandwidth$type != "scale") {
    x <- kde_data(fit)
    prior <- kde_weights(fit)
  }
  if (!is.null(fit$bounds)) {
    for (j in seq_len(ncol(x))) {
      for (edge in fit$bounds[, j][is.finite(fit$bounds[, j])]) {
        mirror <- x
        mirror[, j] <- 2 * edge - x[, j]
        x <- rbind(x, mirror)
        prior <- c(prior, prior)
        point <- if (!is.null(point)) c(point, point)
      }
    }
  }
  bw <- fit$bandwidth
  d <- fit$d
  # Categorical columns: no numeric kernel constant when there are no numeric columns.
  constant <- if (d) radial_constant(fit$kernel, d) else 1
  frame <- switch(bw$type,
    # Equal weights are left to the normalising constant: no weight vector.
    scale = list(x = x, prior = prior, scale = bw$h, point = NULL,
                 norm = constant / prod(bw$h) / if (is.null(prior)) fit$n else 1,
                 to_engine = identity),
    matrix = {
      to_engine <- function(q) t(forwardsolve(bw$root, t(q)))
      list(x = to_engine(x), prior = prior, scale = rep(1, d), point = NULL,
           norm = constant / prod(diag(bw$root)), to_engine = to_engine)
    },
    nn = list(x = x, prior = prior / point^d, scale = bw$scale, point = point,
              norm = constant / prod(bw$scale), to_engine = identity)
  )
  range <- if (is.null(fit$bounds)) fit$range else column_ranges(x)
  grid <- if (length(fit$grid) && is.null(fit$control$gridsize)) kde_binning_grid(fit, range)
  if (bw$type == "matrix") range <- column_ranges(frame$x)
  frame$spec <- engine_spec(frame$x, fit$kernel, frame$scale, prior = frame$prior,
                            point_scale = frame$point, method = method, control = fit$control,
                            binnable = bw$type == "scale",
                            m = if (length(fit$grid)) prod(lengths(fit$grid)) else 0,
                            grid = grid, range = range, categorical = fit$categorical,
                            lambda = bw$lambda, unit_mass = TRUE, call = call)
  frame
}

# Density at the rows of `queries` (original units), from a frame made by kde_frame(); `codes`
# are the queries' level codes of the categorical columns (mixed fits).
kde_at <- function(fit, queries, method = "tree", n_threads = 1L, verbose = FALSE, rtol = 0,
                   frame = kde_frame(fit, method), codes = NULL) {
  res <- engine_run(frame$spec, frame$to_engine(queries), rtol = rtol, n_threads = n_threads,
                    verbose = verbose, query_codes = codes)
  outside_bounds(fit, queries, frame$norm * res$wsum)
}

# Density at the data points themselves.
kde_at_data <- function(fit) kde_at(fit, kde_data(fit), codes = fit$categorical$codes)

outside_bounds <- function(fit, points, dens) {
  if (is.null(fit$bounds)) return(dens)
  out <- rep(FALSE, nrow(points))
  for (j in seq_len(ncol(points))) {
    out <- out | points[, j] < fit$bounds[1L, j] | points[, j] > fit$bounds[2L, j]
  }
  dens[out] <- 0
  dens
}

# Grid axes: `gridsize` points per variable spanning the data and the kernel's reach, clipped to
# the bounds.
kde_grid <- function(fit, gridsize) {
  d <- fit$d
  if (is.null(gridsize)) gridsize <- c(512L, 51L, 0L)[min(d, 3L)]
  if (!is.numeric(gridsize) || !length(gridsize) %in% c(1L, d) || any(!is.finite(gridsize)) ||
      any(gridsize != round(gridsize)) || any(gridsize < 0) || any(gridsize %in% 1:2)) {
    abort("{.arg gridsize} must be 0 (no grid) or whole numbers of at least 3.",
          call = rlang::caller_env())
  }
  if (any(gridsize == 0)) return(NULL)
  check_size(prod(rep_len(as.double(gridsize), d)), size_limits$kde_grid_points, "grid points",
             "gridsize", call = rlang::caller_env())
  gridsize <- rep_len(as.integer(gridsize), d)
  reach <- kernel_row(fit$kernel)$reach
  range <- fit$range
  half <- reach * kde_spread(fit$bandwidth)
  axes <- lapply(seq_len(d), function(j) {
    lo <- range[1L, j] - half[j]
    hi <- range[2L, j] + half[j]
    if (!is.null(fit$bounds)) {
      lo <- max(lo, fit$bounds[1L, j])
      hi <- min(hi, fit$bounds[2L, j])
    }
    seq(lo, hi, length.out = gridsize[j])
  })
  stats::setNames(axes, fit$vars)
}

# Per-variable scale of the kernel: h, sqrt(diag(H)), or the largest sample-point bandwidth.
kde_spread <- function(bw) {
  switch(bw$type, scale = bw$h, matrix = sqrt(diag(bw$H)), nn = max(bw$point) * bw$scale)
}

# The density on the grid (a vector in 1-D, an array otherwise).
kde_on_grid <- function(fit, frame, n_threads, verbose) {
  points <- as.matrix(expand.grid(fit$grid, KEEP.OUT.ATTRS = FALSE))
  dens <- kde_at(fit, points, n_threads = n_threads, verbose = verbose, frame = frame)
  if (length(fit$grid) == 1L) dens else array(dens, lengths(fit$grid))
}

# The binning grid of a grid estimate, chosen to resolve the bandwidth whatever the output grid:
# the output grid refined k times per axis, k the smallest whole number that makes the step at
# most h / 4 (as default_gridsize()), then extended by whole steps to hold every (mirrored)
# point, whose column ranges are `range`. The output grid points are nodes of it, so they need
# no interpolation. At most binning_max_nodes() nodes per axis: a bandwidth too small for that
# gets a coarser refinement (and "auto" then bins only if the grid still resolves it).
kde_binning_grid <- function(fit, range) {
  d <- length(fit$grid)
  h <- if (fit$bandwidth$type == "scale") fit$bandwidth$h else rep(Inf, d)
  lo <- hi <- size <- numeric(d)
  for (j in seq_len(d)) {
    g <- fit$grid[[j]]
    step <- g[2L] - g[1L]
    # the extended axis in output steps, which the refinement multiplies
    outer <- (max(g[length(g)], range[2L, j]) - min(g[1L], range[1L, j])) / step
    fine <- max(1, ceiling(4 * step / h[j] - 1e-9))
    k <- max(1, min(fine, floor((binning_max_nodes(d) - 3) / outer)))
    step <- step / k
    below <- max(0, ceiling((g[1L] - range[1L, j]) / step - 1e-9))
    above <- max(0, ceiling((range[2L, j] - g[length(g)]) / step - 1e-9))
    lo[j] <- g[1L] - below * step
    hi[j] <- g[length(g)] + above * step
    size[j] <- (length(g) - 1) * k + 1 + below + above
  }
  list(size = as.integer(size), range = rbind(lo, hi))
}

#' Methods for kernel density estimates
#'
#' `predict()` evaluates the density exactly (no binning) at new points;
#' `logLik()` is \eqn{\sum_i w_i n \log \hat f(x_i)}{sum_i w_i n log fhat(x_i)} at the data (not
#' cross-validated); `as.data.frame()` gives the grid and the estimate;
#' `simulate()` draws a smoothed bootstrap sample: data points drawn with
#' their weights plus kernel noise scaled by the bandwidth (mirrored back at
#' the bounds); the levels of categorical columns are drawn from their kernel
#' around the drawn point's level (kept with probability \eqn{1 - \lambda}{1 - lambda},
#' else one of the other levels at random, for unordered columns). These are
#' exact draws from the estimate. `sampler = "langevin"` instead runs
#' annealed Langevin dynamics on the estimate's score ([diffusion_sample()]
#' with the fit's bandwidth as the noise floor): the same target reached by
#' `n_iter` noise levels of local means, approximately (the discretisation
#' and the finite annealing leave a bias) and far more slowly; it shows the
#' score-based route, for Gaussian estimates with one bandwidth per variable
#' and no bounds. With `seed`, the draws use `set.seed(seed)` and the
#' caller's random number stream is restored afterwards, as
#' [stats::simulate()] methods do; the result's attribute `seed` records the
#' seed (or the stream's state before the draws).
#'
#' With categorical columns (see [kde()]) `plot()` draws one curve per
#' combination of levels (one numeric column) or bars of the smoothed
#' probabilities (no numeric column), and `summary()` gives the total mass
#' on the grid and its highest cell.
#'
#' In two dimensions `plot()` shades highest-density regions: their levels
#' are the quantiles of the estimate at the data points (Hyndman, 1996), so
#' that each region holds about `probs` of the data (not exactly of the
#' estimate's own mass, which smoothing spreads wider).
#'
#' @param object,x A `local_kde` object made by [kde()].
#' @param newdata Points: a vector (1-D), or a matrix or data frame with the
#'   variables of the fit as columns (matched by name when named); a data
#'   frame with every column of the fit when it has categorical columns.
#'   A point with a missing coordinate gets the density `NA`.
#' @param method "tree" (kd-tree with the kernel's cut-off) or "exact".
#' @param rtol Relative error allowed at every point (0: exact). With
#'   `rtol > 0` whole kd-tree nodes whose kernel values vary little are
#'   summed from the bounds of their distances (single-tree kernel summation,
#'   Gray and Moore 2003, as scikit-learn's `KernelDensity(rtol =)`); the
#'   error is guaranteed to stay below `rtol` times the density. Not for
#'   `nn(k)` bandwidths.
#' @param interval For `predict()`: `"none"`, or `"bootstrap"` for a
#'   confidence band of the density at `newdata` by the smoothed bootstrap:
#'   `B` samples of `n` points drawn from the estimate itself (the draws of
#'   `simulate()`: data points resampled plus kernel noise at the bandwidth;
#'   Silverman 1986, section 6.4), each estimated with the fit's kernel and
#'   bandwidth. Pointwise, the basic bootstrap interval of the replicates'
#'   deviations from their mean; with `simultaneous = TRUE` the max-t band
#'   over the points of `newdata`. Like every such band it covers the
#'   expectation of the estimate (the density smoothed by the kernel), not
#'   the smoothing bias; lower limits are cut at 0. Numeric data and fixed
#'   bandwidths; `set.seed()` fixes the band for any number of threads.
#'   For `plot()`, `"bootstrap"` draws that pointwise band (level `level`,
#'   `B` samples) over the grid of a one-dimensional estimate.
#' @param level Coverage probability of the band.
#' @param simultaneous `FALSE` for a pointwise band, `TRUE` for a band that
#'   covers the density at every point of `newdata` at once.
#' @param B Number of bootstrap samples, a whole number of at least 19.
#' @param probs Probability masses of the highest-density regions.
#' @param rug Draw the data as a rug (1-D) or points (2-D).
#' @param nsim Number of points to draw: at most 5e7 values in all (`nsim`
#'   times the number of variables).
#' @param seed As in [stats::simulate()].
#' @param sampler "bootstrap" (exact draws, the default) or "langevin" (see
#'   Details).
#' @param n_iter Noise levels of the Langevin sampler.
#' @param row.names,optional Unused, for compatibility.
#' @inheritParams kde
#' @param ... Unused, or passed to the plotting functions.
#' @return `predict()`: density values (with `interval = "bootstrap"`, a
#'   matrix with columns `fit`, `lwr` and `upr`); `simulate()`: a vector (1-D) or a
#'   matrix of draws (a data frame with categorical columns), with the
#'   attribute `seed`; `summary()`: an object of class `summary.local_kde`;
#'   `logLik()`: the log-likelihood of the estimate at the data,
#'   \eqn{n \sum_i w_i \log \hat f(x_i)}{n sum_i w_i log fhat(x_i)} (\eqn{w_i}{w_i} the
#'   normalised weights), whose `df` is the trace of the estimate,
#'   \eqn{\sum_i w_i K_i(0) / \hat f(x_i)}{sum_i w_i K_i(0) / fhat(x_i)}: each point's
#'   share of the density at itself (Loader 1999, as `locfit` reports for
#'   densities; from `n` for a bandwidth near 0 down to 1 and less for wide
#'   ones). `AIC()` is \eqn{-2 \log L + k\,df}{-2 log L + k df}; with categorical columns
#'   `df` is `NA` and `AIC()` an error.
#' @references Loader, C. (1999). *Local Regression and Likelihood*.
#'   Springer, chapter 5.
#'
#'   Silverman, B. W. (1986). *Density Estimation for Statistics and Data
#'   Analysis*. Chapman and Hall.
#' @name kde-methods
#' @family density
#' @examples
#' fit <- kde(faithful$waiting)
#' summary(fit)
#' predict(fit, c(55, 80))
#' set.seed(1)
#' predict(fit, c(55, 65, 80), interval = "bootstrap", B = 199)
#' hist(simulate(fit, 1000, seed = 1), breaks = 30)
#' fit2 <- kde(faithful)
#' plot(fit2)
NULL

#' @rdname kde-methods
#' @export
predict.local_kde <- function(object, newdata, rtol = 0, interval = c("none", "bootstrap"),
                              level = 0.95, simultaneous = FALSE, B = 999, method = "tree",
                              n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  if (missing(newdata)) abort("{.arg newdata} is required: the points at which to evaluate.")
  method <- check_choice(method, c("tree", "exact"))
  rtol <- check_positive(rtol, zero = TRUE)
  if (rtol >= 1) abort("{.arg rtol} must be below 1.")
  interval <- match_choice(interval, c("none", "bootstrap"))
  if (interval == "bootstrap") {
    return(predict_kde_band(object, newdata, check_level(level), check_flag(simultaneous),
                            check_replicates(B), n_threads(n_threads), check_flag(verbose)))
  }
  if (!missing(B) || !missing(simultaneous) || !missing(level)) {
    abort("{.arg level}, {.arg simultaneous} and {.arg B} need {.code interval = \"bootstrap\"}.")
  }
  if (!is.null(object$categorical)) {
    if (rtol > 0) abort("{.arg rtol} is for numeric data only; this fit has categorical columns.")
    points <- new_predictors(object, newdata)
    dens <- kde_at(object, points$x, method, n_threads(n_threads), check_flag(verbose),
                   codes = points$codes)
    return(expand_rows(dens, points$ok))
  }
  if (rtol > 0 && object$bandwidth$type == "nn") {
    abort("{.arg rtol} needs a fixed bandwidth (a number, vector or matrix), not {.code nn(k)}.")
  }
  # a point with a missing coordinate has a missing density, as predict.lm() gives NA
  ok <- complete_points(newdata, object$d)
  if (!any(ok)) return(rep(NA_real_, length(ok)))
  if (!all(ok)) newdata <- if (is.null(dim(newdata))) newdata[ok] else newdata[ok, , drop = FALSE]
  points <- kde_points(object, newdata)
  expand_rows(kde_at(object, points, method, n_threads(n_threads), check_flag(verbose), rtol), ok)
}

# Which points of `newdata` (a vector of values, one point of d coordinates, a matrix or a data
# frame) have every coordinate.
complete_points <- function(newdata, d) {
  if (is.null(dim(newdata))) return(if (d > 1L) !anyNA(newdata) else !is.na(newdata))
  stats::complete.cases(newdata)
}

# New points as a matrix with the fit's columns.
kde_points <- function(object, newdata, arg = "newdata", call = rlang::caller_env()) {
  vars <- object$vars %||% colnames(object$x)
  if (is.data.frame(newdata) || is.matrix(newdata)) {
    if (!is.null(colnames(newdata)) && all(vars %in% colnames(newdata))) {
      newdata <- newdata[, vars, drop = FALSE]
    }
  } else if (is.numeric(newdata) && length(vars) > 1L) {
    if (length(newdata) != length(vars)) {
      abort("{.arg {arg}} must have {length(vars)} columns ({.field {vars}}).", call = call)
    }
    newdata <- matrix(newdata, nrow = 1L)
  }
  points <- check_predictors(newdata, arg = arg, call = call)
  if (ncol(points) != length(vars)) {
    abort("{.arg {arg}} must have {length(vars)} column{?s} ({.field {vars}}).", call = call)
  }
  colnames(points) <- vars
  points
}

#' @rdname kde-methods
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_kde <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  if (!is.null(x$categorical)) return(print_kde_mixed(x, digits))
  d <- x$d
  print_fields(
    sprintf("<local_kde> n = %d, %d variable%s, %s kernel", x$n, d, if (d > 1L) "s" else "",
            x$kernel),
    list(Bandwidth = sprintf("%s (%s)", format_kde_bandwidth(x$bandwidth, x$vars, digits),
                             x$bandwidth_method),
         Bounds = if (!is.null(x$bounds)) {
           paste0(x$vars, " [", x$bounds[1L, ], ", ", x$bounds[2L, ], "]", collapse = ", ")
         },
         Grid = if (length(x$grid)) {
           sprintf("%s points (%s)", paste(lengths(x$grid), collapse = " x "), x$method)
         }))
  invisible(x)
}

format_kde_bandwidth <- function(bw, vars = NULL, digits = 4L) {
  fmt <- function(v) paste(format(signif(v, digits)), collapse = ", ")
  switch(bw$type,
    scale = named_values(bw$h, vars, digits),
    matrix = paste0("H = [", paste(apply(signif(bw$H, digits), 1L, paste, collapse = " "),
                                   collapse = "; "), "]"),
    nn = paste0("nn(", bw$k, "): sample-point scales from ", fmt(min(bw$point)), " to ",
                fmt(max(bw$point)), " (times ", fmt(bw$scale), ")")
  )
}

#' @rdname kde-methods
#' @export
summary.local_kde <- function(object, probs = c(0.25, 0.5, 0.75, 0.95), ..., digits = NULL) {
  check_dots(...)
  out <- list(fit = object, levels = hdr_levels(object, probs), digits = check_digits(digits))
  if (!is.null(object$categorical)) return(summary_kde_mixed(out))
  if (length(object$grid)) {
    steps <- vapply(object$grid, function(g) g[2L] - g[1L], 1)
    est <- object$estimate
    # Trapezoid weights on the grid.
    w <- Reduce(outer, lapply(object$grid, function(g) c(0.5, rep(1, length(g) - 2L), 0.5)))
    out$integral <- sum(w * est) * prod(steps)
    best <- arrayInd(which.max(est), .dim = lengths(object$grid))
    out$mode <- mapply(function(g, i) g[i], object$grid, best)
    if (length(object$grid) == 1L) out$local_maxima <- grid_maxima(object$grid[[1L]], est)
  }
  class(out) <- "summary.local_kde"
  out
}

# Density levels whose superlevel sets hold `probs` of the mass: quantiles of the density at the
# data (weighted).
hdr_levels <- function(object, probs) {
  dens <- kde_at_data(object)
  ord <- order(dens)
  cw <- cumsum(kde_weights(object)[ord])
  levels <- vapply(probs, function(p) dens[ord][which(cw >= 1 - p - 1e-12)[1L]], 1)
  stats::setNames(levels, paste0(100 * probs, "%"))
}

# Grid points higher than their neighbours (an end point counts when it tops its one neighbour,
# as at a bound), highest first.
grid_maxima <- function(g, est) {
  up <- c(TRUE, diff(est) > 0)
  down <- c(-diff(est) > 0, TRUE)
  top <- which(up & down & est > 0)
  g[top[order(est[top], decreasing = TRUE)]]
}

#' @export
print.summary.local_kde <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- print_summary_fit(x, digits)
  print_fields(NULL, list(
    `Integral over the grid` = if (!is.null(x$integral) && x$fit$d) {
      format(x$integral, digits = digits + 2L)
    },
    `Total probability` = if (!is.null(x$integral) && !x$fit$d) {
      format(x$integral, digits = digits + 2L)
    },
    `Highest cell` = x$highest,
    `Modes on the grid` = if (!is.null(x$local_maxima)) show_num(x$local_maxima, digits),
    `Highest grid point` = if (is.null(x$local_maxima) && !is.null(x$mode)) {
      show_num(x$mode, digits)
    }))
  cat("Highest-density region levels:\n")
  print_trimmed(signif(x$levels, digits))
  invisible(x)
}

#' @rdname kde-methods
#' @export
plot.local_kde <- function(x, probs = c(0.25, 0.5, 0.75, 0.95), rug = TRUE,
                           interval = c("none", "bootstrap"), level = 0.95, B = 999, ...) {
  check_graphics_dots(..., .known = names(formals(graphics::barplot.default)))
  check_probs(probs)
  check_flag(rug)
  interval <- match_choice(interval, c("none", "bootstrap"))
  if (interval == "bootstrap" && (x$d != 1L || !is.null(x$categorical))) {
    abort("{.code interval = \"bootstrap\"} draws the band of a one-dimensional density.")
  }
  if (!is.null(x$categorical)) return(plot_kde_mixed(x, rug, ...))
  d <- x$d
  if (d > 2L || length(x$grid) == 0L) {
    abort("{.fn plot} needs a grid in one or two dimensions; fit with {.arg gridsize}.")
  }
  vars <- x$vars
  points <- kde_data(x)
  bandwidth <- sprintf("bandwidth %s (%s)", format_kde_bandwidth(x$bandwidth, vars),
                       x$bandwidth_method)
  if (d == 1L) {
    # as density(): the sample size and the bandwidth under the axis
    band <- if (interval == "bootstrap") {
      predict(x, x$grid[[1L]], interval = "bootstrap", level = level, B = B, verbose = FALSE)
    }
    plot_with_defaults(x$grid[[1L]], x$estimate, type = "l", ylab = "density",
                       ylim = range(0, x$estimate, band[, "upr"], finite = TRUE),
                       xlab = sprintf("%s\nN = %d, %s", vars, x$n, bandwidth),
                       main = sprintf("Kernel density, %s kernel", x$kernel), ...)
    if (!is.null(band)) {
      draw_band(x$grid[[1L]], band, "steelblue", 0.3)
      graphics::lines(x$grid[[1L]], x$estimate)
    }
    if (rug) graphics::rug(points[sample_rows(x$n, 2000L), 1L])
    return(invisible(x))
  }
  levels <- sort(hdr_levels(x, probs))
  breaks <- c(levels, max(x$estimate, levels) * (1 + 1e-9))
  cols <- grDevices::hcl.colors(length(levels), "YlOrRd", rev = TRUE)
  plot_with_defaults(range(x$grid[[1L]]), range(x$grid[[2L]]), type = "n", xlab = vars[1L],
                     ylab = vars[2L],
                     main = sprintf("Highest-density regions, %s kernel", x$kernel), ...)
  bandwidth_note(bandwidth)
  graphics::.filled.contour(x$grid[[1L]], x$grid[[2L]], x$estimate, breaks, cols)
  if (rug) {
    keep <- sample_rows(x$n, 5000L)
    graphics::points(points[keep, 1L], points[keep, 2L], pch = 20, cex = 0.4, col = "grey20")
  }
  graphics::contour(x$grid[[1L]], x$grid[[2L]], x$estimate, levels = levels, drawlabels = FALSE,
                    add = TRUE, col = "grey25")
  # the region of probability p is where the density exceeds its level: the darkest colour is the
  # smallest region; listed from the smallest
  region <- names(levels)
  graphics::legend(emptiest_corner(points[, 1L], points[, 2L]), legend = rev(region),
                   fill = rev(cols), title = "Region holding", bg = "white", box.col = "grey70",
                   cex = 0.85)
  invisible(x)
}

# graphics::plot() with our labels as defaults that the caller's `...` may override.
plot_with_defaults <- function(x, y, ...) {
  args <- list(...)
  named <- names(args) %||% rep("", length(args))
  keep <- named == "" | !duplicated(named, fromLast = TRUE)
  do.call(graphics::plot, c(list(x, y), args[keep]))
}

# At most `max` row indices, evenly spread (plots of large data).
sample_rows <- function(n, max) if (n <= max) seq_len(n) else round(seq(1, n, length.out = max))

#' @rdname kde-methods
#' @export
logLik.local_kde <- function(object, ...) {
  check_dots(...)
  n <- object$n
  dens <- kde_at_data(object)
  w <- kde_weights(object)
  df <- if (is.null(object$categorical)) sum(w * kde_self_weight(object) / dens) else NA_real_
  structure(sum(n * w * log(dens)), df = df, nobs = n, class = "logLik")
}

#' @rdname kde-methods
#' @param k For `AIC()`: the penalty per degree of freedom.
#' @export
AIC.local_kde <- function(object, ..., k = 2) {
  check_dots(...)  # one density at a time
  ll <- stats::logLik(object)
  if (is.na(attr(ll, "df"))) {
    abort("{.fn AIC} needs numeric columns only: a density with categorical columns has no
           degrees of freedom here.")
  }
  -2 * as.numeric(ll) + k * attr(ll, "df")
}

# Each data point's kernel at itself, K_i(0) (the same for every point but with nn(k)
# bandwidths): the density at its own position of a fit to that point alone (no bounds).
kde_self_weight <- function(fit) {
  one <- fit
  one$x <- kde_data(fit)[1L, , drop = FALSE]
  one$n <- 1L
  one$weights <- NULL
  one$bounds <- NULL
  one$grid <- NULL
  one$range <- rbind(one$x[1L, ], one$x[1L, ] + 1)
  nn <- fit$bandwidth$type == "nn"
  if (nn) one$bandwidth$point <- 1
  k0 <- kde_at(one, one$x, method = "exact")
  if (nn) k0 / fit$bandwidth$point^fit$d else rep(k0, fit$n)
}

#' @rdname kde-methods
#' @param formula. For `update()` of a formula fit: changes to the formula
#'   (e.g. `~ . - waiting`).
#' @param evaluate For `update()`: `TRUE` to refit, `FALSE` for the call.
#' @return `update()`: the density refitted with the changed arguments (the
#'   call, with `evaluate = FALSE`).
#' @export
update.local_kde <- function(object, formula., ..., evaluate = TRUE) {
  call <- update_call(object, formula., match.call(expand.dots = FALSE)$..., "x")
  if (isTRUE(evaluate)) eval(call, parent.frame()) else call
}

#' @export
formula.local_kde <- function(x, ...) {
  check_dots(...)
  if (is.null(x$terms)) abort("The density was not fitted with a formula.")
  stats::formula(x$terms)
}

#' @rdname kde-methods
#' @export
nobs.local_kde <- function(object, ...) {
  check_dots(...)
  object$n
}

#' @rdname kde-methods
#' @export
as.data.frame.local_kde <- function(x, row.names = NULL, optional = FALSE, ...) {
  check_dots(..., .known = "stringsAsFactors")
  if (is.null(x$estimate)) abort("The fit has no grid; refit with {.arg gridsize}.")
  out <- expand.grid(c(x$grid, kde_level_axes(x)), KEEP.OUT.ATTRS = FALSE,
                     stringsAsFactors = FALSE)
  out$density <- as.vector(x$estimate)
  out
}

#' @rdname kde-methods
#' @export
simulate.local_kde <- function(object, nsim = 1, seed = NULL, sampler = "bootstrap",
                               n_iter = 100, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  nsim <- check_size(check_count(nsim), size_limits$simulated_values / max(1, object$d),
                     "draws", "nsim")
  sampler <- check_choice(sampler, c("bootstrap", "langevin"))
  if (!missing(n_iter) && sampler != "langevin") {
    abort("{.arg n_iter} applies to {.code sampler = \"langevin\"} only.")
  }
  if (sampler == "langevin") check_langevin_kde(object)
  seed_state <- use_seed(seed)
  on.exit(seed_state$restore(), add = TRUE)
  draws <- if (sampler == "langevin") {
    diffusion_sample(kde_data(object), nsim, bandwidth = object$bandwidth$h,
                     sampler = "langevin", n_iter = n_iter, weights = object$weights,
                     n_threads = n_threads, verbose = verbose)$samples
  } else {
    kde_bootstrap(object, nsim)
  }
  if (is.data.frame(draws)) return(structure(draws, seed = seed_state$seed))
  draws <- if (object$d == 1L) unname(drop(draws)) else draws
  structure(draws, seed = seed_state$seed)
}

# set.seed(seed) for the caller's draws with the user's stream restored afterwards, as
# stats:::simulate.lm does; `seed` is what simulate() records: the seed with the RNG kind, or
# the state the draws started from.
use_seed <- function(seed, call = rlang::caller_env()) {
  if (!exists(".Random.seed", envir = globalenv(), inherits = FALSE)) stats::runif(1L)
  saved <- get(".Random.seed", envir = globalenv(), inherits = FALSE)
  if (is.null(seed)) return(list(seed = saved, restore = function() invisible()))
  seed <- check_count(seed, min = -.Machine$integer.max, call = call)
  set.seed(seed)
  list(seed = structure(seed, kind = as.list(RNGkind())),
       restore = function() assign(".Random.seed", saved, envir = globalenv()))
}

# Langevin dynamics follow the score of a Gaussian estimate with one scale per variable on the
# whole space: no bounds, matrix or nn(k) bandwidths, categorical columns or other kernels.
check_langevin_kde <- function(object, call = rlang::caller_env()) {
  if (object$kernel != "gaussian" || object$bandwidth$type != "scale" ||
      !is.null(object$bounds) || !is.null(object$categorical)) {
    abort(c("{.code sampler = \"langevin\"} needs a Gaussian estimate of numeric data with one
             bandwidth per variable and no bounds.",
            i = "Use {.code sampler = \"bootstrap\"} (exact for every estimate)."), call = call)
  }
}

# The smoothed bootstrap: data points drawn with their weights plus kernel noise scaled by the
# bandwidth, mirrored back at the bounds. Exact draws from the estimate.
kde_bootstrap <- function(object, nsim) {
  x <- kde_data(object)
  d <- object$d
  rows <- sample.int(object$n, nsim, replace = TRUE, prob = object$weights)
  if (!is.null(object$categorical)) return(simulate_kde_mixed(object, rows))
  noise <- kernel_draws(nsim, object$kernel, d)
  bw <- object$bandwidth
  noise <- switch(bw$type,
    scale = sweep(noise, 2L, bw$h, `*`),
    matrix = noise %*% t(bw$root),
    nn = sweep(noise * bw$point[rows], 2L, bw$scale, `*`)
  )
  draws <- x[rows, , drop = FALSE] + noise
  if (!is.null(object$bounds)) {
    for (j in seq_len(d)) {
      lo <- object$bounds[1L, j]
      hi <- object$bounds[2L, j]
      v <- draws[, j]
      v <- ifelse(v < lo, 2 * lo - v, v)
      draws[, j] <- ifelse(v > hi, 2 * hi - v, v)
    }
  }
  dimnames(draws) <- list(NULL, colnames(x))
  draws
}

# n draws from the standard radial kernel in d dimensions: a uniform direction times a radius
# with density proportional to r^(d-1) k(r), by inversion of its tabulated distribution.
kernel_draws <- function(n, kernel, d) {
  if (kernel == "gaussian") return(matrix(stats::rnorm(n * d), n))
  if (kernel == "cauchy") return(matrix(stats::rcauchy(n), n))
  reg <- kernel_row(kernel)
  r <- seq(0, if (reg$compact) reg$cutoff else 40, length.out = 8193L)
  dens <- r^(d - 1) * kernel_value(r, kernel)
  cdf <- c(0, cumsum((dens[-1L] + dens[-length(dens)]) / 2))
  radius <- stats::approx(cdf / cdf[length(cdf)], r, stats::runif(n), ties = "ordered")$y
  dir <- matrix(stats::rnorm(n * d), n)
  dir / sqrt(rowSums(dir^2)) * radius
}

# ---- Mixed data: the generalized product kernel -------------------------------------------------
#
# With categorical columns the estimate is
#   f(x, z) = sum_i w_i K_h(x - x_i) prod_k L_k(z_k, z_ik),
# a density in the numeric columns x and a probability in the levels z. The engine's discrete
# kernels (kernels.hpp) with unit mass make every L_k(., z_ik) a probability over the levels:
# Aitchison-Aitken for unordered columns, Li-Racine divided by its sum over the levels for
# ordered ones (np's okertype = "racineliyan"). So f sums (integrates) to one.

kde_mixed <- function(x, bandwidth, kernel, weights, gridsize, bounds, method, n_threads,
                      verbose, control, call) {
  predictors <- split_predictors(x, arg = "x")
  num <- predictors$x
  n <- nrow(num)
  d <- ncol(num)
  kernel <- check_kernel(kernel)
  weights <- check_weights(weights, n)
  method <- check_choice(method, c("auto", "exact", "tree"))
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  control <- check_control(control)
  if (!is.null(bounds)) {
    abort("{.arg bounds} is for numeric data only; {.arg x} has categorical columns.")
  }
  if (!kernel_row(kernel)$multivariate && d > 1L) {
    abort("The {.val {kernel}} kernel has no density in more than one dimension; choose another
           {.arg kernel}.")
  }
  columns <- if (is.data.frame(x)) x else stats::setNames(data.frame(x), "x")
  fit <- structure(list(x = num, n = n, d = d, vars = colnames(num) %||% character(0),
                        range = if (d) column_ranges(num),
                        categorical = predictors$categorical,
                        predictors = predictors[c("names", "kind")],
                        level_type = level_types(columns[predictors$kind != "numeric"]),
                        weights = if (!is.null(weights)) weights / sum(weights),
                        kernel = kernel, bounds = NULL, control = control, call = call),
                   class = "local_kde")
  chosen <- resolve_kde_mixed_bandwidth(bandwidth, fit, predictors, weights, n_threads,
                                        call = call)
  fit$bandwidth <- list(type = "scale", h = chosen$h, lambda = chosen$lambda)
  fit$bandwidth_method <- chosen$method
  fit$grid <- if (d) kde_grid(fit, gridsize)
  frame <- kde_frame(fit, method)
  fit$method <- frame$spec$method
  if (d == 0L || length(fit$grid)) fit$estimate <- kde_mixed_estimate(fit, frame, n_threads, verbose)
  fit
}

# The type of each categorical column, so that levels come back as they came in.
level_types <- function(frame) {
  vapply(frame, function(col) {
    if (is.ordered(col)) "ordered" else if (is.factor(col)) "factor" else
      if (is.logical(col)) "logical" else "character"
  }, "")
}

# Level codes of categorical column j as values of the column's type.
level_values <- function(fit, j, codes) {
  cat <- fit$categorical
  labels <- cat$levels[[j]]
  switch(fit$level_type[[j]],
    ordered = factor(labels[codes], levels = labels, ordered = TRUE),
    factor = factor(labels[codes], levels = labels),
    logical = as.logical(labels[codes]),
    labels[codes]
  )
}

# Every level of every categorical column, named (NULL without categorical columns).
kde_level_axes <- function(fit) {
  cat <- fit$categorical
  if (is.null(cat)) return(NULL)
  axes <- lapply(seq_along(cat$levels), function(j) level_values(fit, j, seq_along(cat$levels[[j]])))
  stats::setNames(axes, colnames(cat$codes))
}

# Bandwidths of a mixed fit: one per column in column order (h or lambda), or "rot" / "lscv".
resolve_kde_mixed_bandwidth <- function(bandwidth, fit, predictors, weights, n_threads,
                                        call = rlang::caller_env()) {
  method <- "user"
  if (is.character(bandwidth)) {
    method <- check_choice(bandwidth, selector_names("density"), arg = "bandwidth", call = call)
    if (!method %in% mixed_kde_selectors) {
      abort(c("{.arg bandwidth} {.val {method}} is for numeric data only.",
              i = "With categorical columns choose {.val {mixed_kde_selectors}} or give one
                   bandwidth per column."), call = call)
    }
    if (method == "lscv" && identical(fit$control$ordered_kernel, "wangvanryzin") &&
        any(predictors$categorical$ordered)) {
      abort(c("{.arg bandwidth} {.val lscv} of mixed data is written for the Li-Racine kernel of
               ordered factors.", i = "Give one bandwidth per column, or use {.val rot}."),
            call = call)
    }
    bandwidth <- kde_mixed_bandwidth(predictors, method, fit$kernel, weights, n_threads)
  } else if (!is.numeric(bandwidth) || is.matrix(bandwidth)) {
    abort("{.arg bandwidth} of data with categorical columns must be one number per column (h
           for numeric, lambda for categorical ones), {.val rot} or {.val lscv}.", call = call)
  }
  bw <- split_bandwidth(bandwidth, predictors, call = call)
  list(h = bw$h, lambda = bw$lambda, method = method)
}

# The estimate on the grid of the numeric columns times every combination of levels: an array
# with one dimension per numeric grid axis, then one per categorical column (named by its
# levels). Without numeric columns it is the smoothed probability table.
kde_mixed_estimate <- function(fit, frame, n_threads, verbose) {
  d <- fit$d
  cat <- fit$categorical
  codes <- lapply(cat$levels, seq_along)
  cells <- expand.grid(c(fit$grid, codes), KEEP.OUT.ATTRS = FALSE)
  points <- as.matrix(cells[seq_len(d)])
  query_codes <- as.matrix(cells[d + seq_along(codes)])
  storage.mode(query_codes) <- "integer"
  dens <- kde_at(fit, points, n_threads = n_threads, verbose = verbose, frame = frame,
                 codes = query_codes)
  dims <- c(lengths(fit$grid), lengths(cat$levels))
  array(dens, unname(dims), dimnames = c(lapply(fit$grid, function(g) NULL), cat$levels))
}

# The kernel of categorical column j as a c x c matrix: entry [z, l] is the probability
# L(z, l) of level z for a data point at level l (columns sum to one). The values come from
# the engine itself, one data point per level with one-hot values, so that they are the
# registry's kernel.
discrete_kernel_table <- function(categorical, j, lambda, control = local_control()) {
  c <- length(categorical$levels[[j]])
  one <- list(codes = matrix(seq_len(c)), levels = categorical$levels[j],
              ordered = categorical$ordered[j])
  none <- matrix(numeric(0), c, 0L)
  spec <- engine_spec(none, "gaussian", values = diag(c), method = "exact", categorical = one,
                      lambda = lambda, unit_mass = TRUE, control = control)
  res <- engine_run(spec, none, query_codes = one$codes)
  matrix(res$coef[, 1L, ], c) * res$wsum
}

print_kde_mixed <- function(x, digits) {
  k <- length(x$categorical$levels)
  levels <- lengths(x$categorical$levels)
  print_fields(
    sprintf("<local_kde> n = %d, %d numeric and %d categorical variable%s%s", x$n, x$d, k,
            if (k > 1L) "s" else "", if (x$d) paste0(", ", x$kernel, " kernel") else ""),
    list(Bandwidth = sprintf("%s (%s)", format_mixed_bandwidth(x, digits), x$bandwidth_method),
         `Probability table` = if (x$d == 0L) paste(paste(levels, collapse = " x "), "cells"),
         Grid = if (x$d > 0L && length(x$grid)) {
           sprintf("%s points x %s levels (%s)", paste(lengths(x$grid), collapse = " x "),
                   paste(levels, collapse = " x "), x$method)
         }))
  invisible(x)
}

format_mixed_bandwidth <- function(x, digits = 4L) {
  kind <- x$predictors$kind
  value <- join_bandwidth(x$bandwidth$h, x$bandwidth$lambda, x$predictors)
  label <- ifelse(kind == "numeric", "h", paste0("lambda (", kind, ")"))
  shown <- show_num(value, digits)
  paste(paste0(x$predictors$names, " ", label, " = ", shown), collapse = ", ")
}

# Summary of a mixed fit: the total mass on the grid (trapezoid rule over the numeric axes, a sum
# over the levels) and the highest cell.
summary_kde_mixed <- function(out) {
  fit <- out$fit
  est <- fit$estimate
  if (!is.null(est)) {
    trapezoid <- lapply(fit$grid, function(g) {
      (g[2L] - g[1L]) * c(0.5, rep(1, length(g) - 2L), 0.5)
    })
    w <- Reduce(outer, c(trapezoid, lapply(fit$categorical$levels, function(l) rep(1, length(l)))))
    out$integral <- sum(w * est)
    best <- arrayInd(which.max(est), .dim = dim(est))
    at <- c(mapply(function(g, i) format(signif(g[i], 4)), fit$grid, best[seq_len(fit$d)]),
            mapply(function(l, i) l[i], fit$categorical$levels,
                   best[fit$d + seq_along(fit$categorical$levels)]))
    out$highest <- paste(paste0(c(fit$vars, colnames(fit$categorical$codes)), " = ", at),
                         collapse = ", ")
  }
  class(out) <- "summary.local_kde"
  out
}

# One curve per combination of levels (one numeric column), or bars of the probability table.
plot_kde_mixed <- function(x, rug, ...) {
  cat <- x$categorical
  combos <- expand.grid(cat$levels, KEEP.OUT.ATTRS = FALSE, stringsAsFactors = FALSE)
  labels <- do.call(paste, c(unname(combos), sep = ":"))
  cols <- grDevices::hcl.colors(max(2L, length(labels)), "Dark 3")[seq_along(labels)]
  title <- paste(colnames(cat$codes), collapse = ":")
  if (x$d == 0L) {
    graphics::barplot(stats::setNames(as.vector(x$estimate), labels), col = cols,
                      ylab = "probability", main = paste("Smoothed probabilities of", title), ...)
    return(invisible(x))
  }
  if (x$d > 1L || length(x$grid) == 0L) {
    abort("{.fn plot} of data with categorical columns needs one numeric variable and a grid;
           use {.fn predict} or {.fn as.data.frame}.")
  }
  g <- x$grid[[1L]]
  est <- matrix(x$estimate, length(g))
  plot_with_defaults(range(g), range(est), type = "n", xlab = x$vars, ylab = "density",
                     main = paste("Kernel density by", title), ...)
  cell <- 1L + colSums((t(cat$codes) - 1L) * cumprod(c(1L, lengths(cat$levels)))[seq_along(cat$levels)])
  for (k in seq_along(labels)) {
    graphics::lines(g, est[, k], col = cols[k], lwd = 2)
    if (rug) graphics::rug(x$x[cell == k, 1L][sample_rows(sum(cell == k), 2000L)], col = cols[k])
  }
  graphics::legend("topright", legend = labels, col = cols, lwd = 2, bty = "n", title = title)
  invisible(x)
}

# Draws from a mixed fit: each drawn data point's numeric columns plus kernel noise, and each of
# its categorical levels redrawn from the column's kernel (kept with probability 1 - lambda,
# else one of the other levels, for unordered columns).
simulate_kde_mixed <- function(object, rows) {
  nsim <- length(rows)
  out <- vector("list", length(object$predictors$names))
  numeric_cols <- which(object$predictors$kind == "numeric")
  if (length(numeric_cols)) {
    noise <- sweep(kernel_draws(nsim, object$kernel, object$d), 2L, object$bandwidth$h, `*`)
    draws <- object$x[rows, , drop = FALSE] + noise
    out[numeric_cols] <- lapply(seq_along(numeric_cols), function(j) unname(draws[, j]))
  }
  cat <- object$categorical
  for (j in seq_along(cat$levels)) {
    table <- discrete_kernel_table(cat, j, object$bandwidth$lambda[j], object$control)
    from <- cat$codes[rows, j]
    drawn <- integer(nsim)
    for (l in unique(from)) {
      at <- which(from == l)
      drawn[at] <- sample.int(nrow(table), length(at), replace = TRUE, prob = table[, l])
    }
    out[[which(object$predictors$kind != "numeric")[j]]] <- level_values(object, j, drawn)
  }
  names(out) <- object$predictors$names
  as.data.frame(out, stringsAsFactors = FALSE, optional = TRUE)
}
