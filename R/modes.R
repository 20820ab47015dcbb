# Mode seeking by local means: mean shift (points climb to modes of the kernel density), the
# blurring self-local mean, MedoidShift (moves restricted to data points) and the principal-
# component shift (moves restricted to density ridges). All are clients of the engine.

#' Mean shift clustering
#'
#' Every point climbs to a mode of the kernel density estimate by repeated
#' local means, \eqn{x \leftarrow m(x) = \sum_i K_h(x, x_i) w_i x_i / \sum_i
#' K_h(x, x_i) w_i}{x <- m(x) = sum_i K_h(x, x_i) w_i x_i / sum_i K_h(x, x_i) w_i}, the localization
#' method's self-local mean. The step \eqn{m(x) - x}{m(x) - x} is proportional to the gradient of
#' the log density (the score: for the Gaussian kernel \eqn{m(x) - x = h^2 \nabla \log \hat
#' f(x)}{m(x) - x = h^2 grad log fhat(x)}), so each point performs gradient ascent with an adaptive
#' step. Points whose modes lie within `merge_tol` bandwidths share a cluster.
#'
#' With `blurring = TRUE` the data move too (Cheng's blurring mean shift): each
#' step replaces all points by their local means among the current points, as
#' [self_local_mean()] does. Clusters collapse within a few steps and then
#' drift slowly towards each other, so the iteration stops as soon as every
#' point lies within `merge_tol / 100` bandwidths of its cluster (points
#' grouped as below), or no point moves more than `tol`.
#'
#' **Bandwidth.** Mode seeking follows the gradient of the density, which
#' needs more smoothing than the density itself (Chacon & Duong 2013), so the
#' selectors target the gradient. "auto" is the normal-scale rule for the
#' gradient, \eqn{h_j = (4 / ((d + 4) n))^{1/(d + 6)} s_j}{h_j = (4 / ((d + 4) n))^(1/(d + 6)) s_j}
#' for a variable of standard deviation \eqn{s_j}{s_j} (the diagonal of
#' `ks::Hns(deriv.order = 1)`): optimal for normal data, a little smooth for
#' multimodal data, which keeps ripples of the estimate from becoming modes.
#' "plugin" is the two-stage diagonal plug-in for the gradient (see
#' [kde_bandwidth()]'s "Gradient" notes), smaller and finer on large samples
#' but prone to many small clusters on small or correlated ones. Both are per
#' variable, chosen for the Gaussian scale and converted to `kernel`. Give a
#' number or one scale per variable otherwise. Distances, `tol` and
#' `merge_tol` are measured in bandwidths, i.e. after dividing every variable
#' by its scale.
#'
#' **Acceleration.** With `accelerate = TRUE` (the default; without seeds or
#' with them, not when blurring) three devices cut the number of local means
#' without moving the modes:
#' * *Over-relaxation* (Gaussian kernel): a point tries the longer step
#'   \eqn{x + \omega (m(x) - x)}{x + omega (m(x) - x)} and keeps it when the density there is no
#'   lower and the path runs straight on (the next plain step turns by less
#'   than about 26 degrees); \eqn{\omega}{omega} grows by half after each kept step
#'   (at most 8) and halves otherwise, when the plain step, which never lowers
#'   the density, is taken. The fixed points and the stopping rule (the plain
#'   step shorter than `tol`) are the plain climb's.
#' * *Shorter reach* (Gaussian kernel, `method = "tree"` or "auto" without a
#'   `control` cut-off): while its plain step is longer than 1e-3 bandwidths,
#'   a point's local means leave out data farther than 6 bandwidths (each
#'   weighs less than \eqn{e^{-18} = 1.5 \times 10^{-8}}{e^(-18) = 1.5 x 10^-8}, so the step moves
#'   by less than \eqn{N e^{-18} (6 + s) / W}{N e^(-18) (6 + s) / W} bandwidths for \eqn{N}{N}
#'   points left out, step length \eqn{s}{s} and kernel weight sum \eqn{W}{W}, which is at least 1
#'   on a climb from a data point without case weights); the last steps and the densities use the
#'   engine's full cut-off.
#' * *Meeting*: points climb in rounds of consecutive rows (16, 32, ... up to
#'   256 points); a point that comes within `merge_tol / 4` bandwidths of a
#'   mode where a point of an earlier round converged stops and takes that
#'   mode. Rounds see only earlier rounds, so results do not depend on the
#'   number of threads.
#'
#' A point's mode then agrees with the plain climb's (`accelerate = FALSE`) to
#' within the convergence tolerance, except for points on the boundary between
#' two basins, whose plain path passes close to a saddle: a different path may
#' end at the neighbouring mode (1 point in 10,000 in the 3-D benchmark of
#' bench/bench-meanshift.R). `iterations` counts local means.
#'
#' **Merging.** Modes are visited in decreasing density; a mode within
#' `merge_tol` of the mode of an earlier cluster joins that cluster, otherwise
#' it starts a new one, so every cluster is represented by its highest mode.
#' Clusters are numbered by decreasing size.
#'
#' @param x A numeric vector, matrix or data frame (one column per variable).
#' @param bandwidth "auto" (the normal-scale rule for the density gradient),
#'   "plugin" (the plug-in for the gradient), a number, or one scale per
#'   variable.
#' @param kernel A kernel name (see [kernels()]), a function of the scaled
#'   distance or a [user_kernel()].
#' @param max_iter Maximum number of steps per point (0: no move, every
#'   point is its own mode and only merging groups them).
#' @param tol A point stops when its step is shorter than `tol` bandwidths.
#'   Gaussian mean shift converges only linearly, slowly along ridges; for
#'   clustering alone `tol = 1e-4` is usually as good and much faster.
#' @param blurring Move the data with the points (blurring mean shift).
#' @param merge_tol Modes closer than this (in bandwidths) are merged.
#' @param min_size Fewest points of a cluster. A smaller cluster joins the
#'   cluster of at least `min_size` points whose mode is nearest its own (in
#'   bandwidths) only if the two climbs meet: the kernel density along the
#'   segment between the two modes stays above 0.8 times the density at the
#'   small mode (no valley between them, so the small mode is a ripple on the
#'   slope of the large one). Otherwise it stays a cluster of its own: points
#'   that never met are never put together. A warning says when more than half
#'   of the points end in clusters smaller than `min_size` (the bandwidth is
#'   then too small). `NULL` means 1% of the points, at least 2; 1 keeps
#'   every mode. The joined clusters' modes are kept as `absorbed_modes`, so
#'   that [predict()] sends new points that climb to them where their training
#'   points went.
#' @param seeds `NULL` (every data point climbs), "bin" (one seed per cell of
#'   a grid with cells one bandwidth wide holding at least `min_bin_freq`
#'   points, at the mean of its points, as scikit-learn's `bin_seeding`), or a
#'   matrix of starting points. With seeds only the seeds climb and every data
#'   point joins the cluster of its nearest mode: much faster on large data.
#' @param min_bin_freq Fewest points of a cell that gets a seed.
#' @param keep_path Keep every point's (or seed's) path (a list of matrices).
#' @param accelerate Over-relaxed steps, a shorter reach for long steps, and
#'   climbs that stop at modes found earlier (see Acceleration). `FALSE`
#'   climbs every point by plain mean-shift steps.
#' @param weights Optional non-negative case weights.
#' @param method "auto", "tree" (kd-tree with the kernel's cut-off) or
#'   "exact" (every point, untruncated).
#' @param control [local_control()] settings of the engine: `cutoff`, the
#'   truncation radius of unbounded kernels for the "tree" strategy (mode
#'   seeking never bins, so `gridsize` does not apply).
#' @inheritParams kde
#' @param ... Unused.
#' @return An object of class `local_modes`: `cluster` (integer labels),
#'   `modes` (one row per cluster), `mode_density` (the kernel density
#'   estimate at the modes), `size`, `point_modes` (where every point
#'   stopped; with seeds, its cluster's mode), `iterations` and `converged`
#'   (per point, or per seed), `seeds`, `paths` (with `keep_path = TRUE`),
#'   `x`, `bandwidth`, `kernel`, `algorithm`, `accelerate`, `min_size`,
#'   `absorbed_modes`, `absorbed_into` (their clusters) and `call`.
#' @references
#' Fukunaga, K. and Hostetler, L. (1975). The estimation of the gradient of a
#' density function, with applications in pattern recognition. *IEEE
#' Transactions on Information Theory* 21, 32-40. \doi{10.1109/TIT.1975.1055330}
#'
#' Chacon, J. E. and Duong, T. (2013). Data-driven density derivative
#' estimation, with applications to nonparametric clustering and bump hunting.
#' *Electronic Journal of Statistics* 7, 499-532. \doi{10.1214/13-EJS781}
#'
#' Cheng, Y. (1995). Mean shift, mode seeking, and clustering. *IEEE
#' Transactions on Pattern Analysis and Machine Intelligence* 17, 790-799.
#' \doi{10.1109/34.400568}
#'
#' Comaniciu, D. and Meer, P. (2002). Mean shift: a robust approach toward
#' feature space analysis. *IEEE Transactions on Pattern Analysis and Machine
#' Intelligence* 24, 603-619. \doi{10.1109/34.1000236}
#' @family modes
#' @export
#' @examples
#' set.seed(1)
#' x <- rbind(matrix(rnorm(200, sd = 0.3), ncol = 2),
#'            matrix(rnorm(200, mean = 2, sd = 0.3), ncol = 2))
#' fit <- mean_shift(x, bandwidth = 0.4, keep_path = TRUE)
#' fit
#' plot(fit, paths = TRUE)
#' predict(fit, rbind(c(0, 0), c(2, 2)))
mean_shift <- function(x, kernel = "gaussian", bandwidth = "auto", max_iter = 500, tol = 1e-8,
                       blurring = FALSE, merge_tol = 0.1, min_size = NULL, seeds = NULL,
                       min_bin_freq = 1, keep_path = FALSE, accelerate = TRUE, weights = NULL,
                       method = "auto", n_threads = NULL, verbose = interactive(),
                       control = local_control(), ...) {
  check_dots(...)
  setup <- shift_setup(x, bandwidth, kernel, weights, method, max_iter, tol, n_threads, verbose,
                       control)
  merge_tol <- check_positive(merge_tol)
  min_size <- check_count(min_size %||% default_min_size(nrow(setup$x)), arg = "min_size")
  keep_path <- check_flag(keep_path)
  accelerate <- check_flag(accelerate)
  blurring <- check_flag(blurring)
  start <- shift_seeds(seeds, setup, min_bin_freq)
  if (blurring && !is.null(start)) abort("{.arg seeds} cannot be used with {.code blurring = TRUE}.")
  res <- if (blurring) {
    blur_distinct(setup, setup$max_iter, setup$tol, -1L, keep_path, collapse_tol = merge_tol)
  } else {
    climb_distinct(setup, -1L, keep_path, points = start, accelerate = accelerate,
                   meet = if (accelerate) meet_share * merge_tol else 0)
  }
  groups <- merge_modes(res$points, res$density, setup$h, merge_tol)
  if (!is.null(start)) groups <- assign_to_modes(groups, res$points, setup)
  groups <- absorb_small(groups, res$points, setup, min_size)
  warn_tiny_clusters(groups$size, min_size)
  fit <- new_local_modes(setup, groups, res, "mean_shift", match.call())
  fit$absorbed_modes <- res$points[groups$absorbed, , drop = FALSE]
  fit$absorbed_into <- groups$absorbed_into
  if (!is.null(start)) {
    fit$seeds <- start
    fit$seed_cluster <- nearest_cluster(fit, res$points, setup$n_threads)
    fit$point_modes <- fit$modes[fit$cluster, , drop = FALSE]
  }
  fit$merge_tol <- merge_tol
  fit$min_size <- min_size
  fit$blurring <- blurring
  fit$accelerate <- accelerate
  fit
}

# With `accelerate`, a climb stops once it comes within this share of merge_tol of a mode where
# an earlier climb converged (see mean_shift()).
meet_share <- 0.25

# The default smallest cluster: 1% of the points (as ks::kms()), at least 2, so that a mode
# reached by a single point does not make a cluster of its own.
default_min_size <- function(n) max(2L, as.integer(round(0.01 * n)))

# A cluster smaller than `min_size` joins the cluster of at least `min_size` points whose mode is
# nearest its own (in bandwidths) only when the two climbs meet: the kernel density along the
# segment between the modes stays above `valley` times the density at the small mode, so that the
# small mode is a ripple on the slope of the large one. Other small clusters stay as they are.
# The rest are renumbered by decreasing size. `absorbed` indexes the joined clusters' modes in
# `points`, `absorbed_into` their new clusters.
absorb_small <- function(groups, points, setup, min_size) {
  reps <- groups$representative
  small <- which(groups$size < min_size)
  large <- which(groups$size >= min_size)
  join <- integer(0)
  into <- integer(0)
  if (length(small) && length(large)) {
    nearest <- large[nearest_index(points[reps[large], , drop = FALSE], setup$h,
                                       points[reps[small], , drop = FALSE], 1L)]
    meets <- modes_meet(points[reps[small], , drop = FALSE], points[reps[nearest], , drop = FALSE],
                        setup)
    join <- small[meets]
    into <- nearest[meets]
  }
  if (!length(join)) return(c(groups, list(absorbed = integer(0), absorbed_into = integer(0))))
  target <- seq_along(reps)
  target[join] <- into
  cluster <- target[groups$cluster]
  kept <- setdiff(seq_along(reps), join)
  size <- tabulate(cluster, length(reps))[kept]
  relabel <- order(-size, seq_along(size))
  new_label <- integer(length(reps))
  new_label[kept[relabel]] <- seq_along(kept)
  list(cluster = new_label[cluster], representative = reps[kept[relabel]],
       size = size[relabel], absorbed = reps[join], absorbed_into = new_label[into])
}

# The share of the small mode's density below which a dip between two modes is a valley.
valley <- 0.8

# Whether the kernel density on the data stays above `valley` times its value at `from[i, ]` on
# the segment from `from[i, ]` to `to[i, ]` (checked at `steps` + 1 evenly spaced points).
modes_meet <- function(from, to, setup, steps = 16L) {
  t <- seq(0, 1, length.out = steps + 1L)
  along <- do.call(rbind, lapply(t, function(s) from + s * (to - from)))
  density <- matrix(kde_values_at(setup, along), nrow(from))
  apply(density, 1L, function(f) min(f) >= valley * f[1L])
}

# Warns when more than half of the points end in clusters smaller than `min_size` (at least 2):
# the bandwidth is then too small for the points' climbs to meet. Fewer than twice that many
# points cannot make a cluster of that size and another.
warn_tiny_clusters <- function(size, min_size) {
  least <- max(min_size, 2L)
  tiny <- sum(size[size < least])
  if (sum(size) >= 2 * least && tiny > sum(size) / 2) {
    warn(c("{tiny} of {sum(size)} points are in clusters of fewer than {least} points.",
           i = "The {.arg bandwidth} may be too small: their climbs do not meet."))
  }
}

# The cluster of every point of `points` by the fit's rule for data points: the nearest mode (in
# bandwidths) among the clusters' modes and the modes of the clusters absorbed into them.
nearest_cluster <- function(fit, points, n_threads) {
  modes <- rbind(fit$modes, fit$absorbed_modes)
  c(seq_len(nrow(fit$modes)), fit$absorbed_into)[
    nearest_index(modes, fit$bandwidth, points, n_threads)]
}

# Starting points: NULL (every data point), "bin" (the mean of the points in every cell of a grid
# with one-bandwidth cells holding at least min_bin_freq points) or a matrix.
shift_seeds <- function(seeds, setup, min_bin_freq, call = rlang::caller_env()) {
  if (is.null(seeds)) return(NULL)
  x <- setup$x
  if (is.character(seeds)) {
    check_choice(seeds, "bin", arg = "seeds", call = call)
    min_bin_freq <- check_count(min_bin_freq, arg = "min_bin_freq", call = call)
    cell <- interaction(as.data.frame(floor(sweep(x, 2L, setup$h, `/`))), drop = TRUE)
    count <- tabulate(cell, nlevels(cell))
    means <- rowsum(x, cell, reorder = TRUE) / count
    keep <- count >= min_bin_freq
    if (!any(keep)) abort("No grid cell holds {.arg min_bin_freq} points.", call = call)
    return(unname(means[keep, , drop = FALSE]))
  }
  seeds <- check_predictors(seeds, arg = "seeds", call = call)
  if (ncol(seeds) != ncol(x)) {
    abort("{.arg seeds} must have {ncol(x)} column{?s}, like {.arg x}.", call = call)
  }
  seeds
}

# With seeds, every data point joins the cluster of its nearest mode (in bandwidths); clusters
# that receive no point are dropped and the rest renumbered by decreasing size.
assign_to_modes <- function(groups, points, setup) {
  modes <- points[groups$representative, , drop = FALSE]
  nearest <- nearest_index(modes, setup$h, setup$x, setup$n_threads)
  size <- tabulate(nearest, nrow(modes))
  relabel <- order(-size, seq_along(size))[seq_len(sum(size > 0))]
  list(cluster = match(nearest, relabel), representative = groups$representative[relabel],
       size = size[relabel])
}

#' Self-local mean (blurring mean shift)
#'
#' `self_local_mean()` applies the self-local mean transform
#' \eqn{x_j \leftarrow \sum_i K_h(x_j, x_i) w_i x_i / \sum_i K_h(x_j, x_i) w_i}{x_j <- sum_i
#' K_h(x_j, x_i) w_i x_i / sum_i K_h(x_j, x_i) w_i} `n_iter` times, each step to the current points:
#' the data contract towards their modes (one step is a denoising of the data by the localization
#' method; many steps are the blurring mean shift).
#'
#' @inheritParams mean_shift
#' @param n_iter Number of steps (0 returns the data; at most 1e7).
#' @return The transformed points, with the shape of `x` (a vector or a
#'   matrix).
#' @references Cheng, Y. (1995). Mean shift, mode seeking, and clustering.
#'   *IEEE Transactions on Pattern Analysis and Machine Intelligence* 17,
#'   790-799. \doi{10.1109/34.400568}
#' @family modes
#' @export
#' @examples
#' set.seed(1)
#' x <- c(rnorm(100), rnorm(100, 5))
#' y <- self_local_mean(x, bandwidth = 0.5, n_iter = 5)
#' plot(x, y)
self_local_mean <- function(x, kernel = "gaussian", bandwidth = "auto", n_iter = 1,
                            weights = NULL, method = "auto", n_threads = NULL,
                            verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  was_vector <- is.numeric(x) && is.null(dim(x))
  n_iter <- check_size(check_count(n_iter, min = 0), size_limits$iterations, "steps", "n_iter")
  setup <- shift_setup(x, bandwidth, kernel, weights, method, n_iter, 0, n_threads, verbose,
                       control)
  res <- blur_distinct(setup, max_iter = n_iter, tol = 0, ndim = -1L, keep_path = FALSE)
  if (was_vector) drop(res$points) else res$points
}

# Checked inputs shared by the shift methods.
shift_setup <- function(x, bandwidth, kernel, weights, method, max_iter, tol, n_threads,
                        verbose, control, call = rlang::caller_env()) {
  x <- check_predictors(x, call = call)
  kernel <- check_kernel(kernel, call = call)
  weights <- check_weights(weights, nrow(x), call = call)
  method <- check_choice(method, c("auto", "tree", "exact"), call = call)
  control <- check_control(control, call = call)
  if (!is.null(control$gridsize)) {
    abort("{.code local_control(gridsize =)} does not apply: this method never bins.",
          call = call)
  }
  n_threads <- n_threads(n_threads)
  h <- shift_bandwidth(bandwidth, x, kernel, weights, n_threads, call)
  setup <- list(x = x, kernel = kernel, weights = weights,
                prior = if (!is.null(weights)) weights / sum(weights), h = h,
                bandwidth_method = if (is.character(bandwidth)) bandwidth else "user",
                max_iter = check_count(max_iter, min = 0, arg = "max_iter", call = call),
                tol = check_positive(tol, zero = TRUE, arg = "tol", call = call),
                control = control, n_threads = n_threads,
                verbose = check_flag(verbose, arg = "verbose", call = call))
  setup$spec <- shift_spec(setup, method = method)
  setup$method <- setup$spec$method
  setup
}

# The engine specification of the data the points move on: the fit's data, or when blurring
# the moving points themselves (with other prior weights for MedoidShift's later rounds).
shift_spec <- function(setup, data = setup$x, prior = setup$prior, method = setup$method) {
  engine_spec(data, setup$kernel, setup$h, prior = prior, method = method,
              control = setup$control, binnable = FALSE, n_threads = setup$n_threads,
              verbose = setup$verbose)
}

shift_bandwidth <- function(bandwidth, x, kernel, weights, n_threads, call) {
  d <- ncol(x)
  if (is.character(bandwidth)) {
    check_choice(bandwidth, selector_names("modes"), arg = "bandwidth", call = call)
    problem <- list(x = x, kernel = kernel, weights = weights, n_threads = n_threads)
    return(run_selector(bandwidth, "modes", problem, call = call)$bandwidth)
  }
  if (!is.numeric(bandwidth) || is.matrix(bandwidth) || !length(bandwidth) %in% c(1L, d) ||
      any(!is.finite(bandwidth)) || any(bandwidth <= 0)) {
    abort("{.arg bandwidth} must be {.val {selector_names(\"modes\")}}, a positive number or one
           per variable ({d}).",
          call = call)
  }
  rep_len(as.double(bandwidth), d)
}

# Moves `points` on the fixed data `data` (non-blurring): the C++ loop climbs each point.
climb <- function(data, setup, points, max_iter, tol, ndim, keep_path, accelerate = FALSE,
                  meet = 0) {
  res <- engine_shift(shift_spec(setup, data), points, max_iter, tol, ndim, keep_path,
                      accelerate = accelerate, meet = meet)
  res$density <- res$wsum * shift_norm(setup, nrow(data))
  res$converged <- res$iterations < max_iter | max_iter == 0L
  if (!keep_path) res$paths <- NULL
  res
}

# climb() on the data with tied rows merged: the distinct rows, each weighted by the prior
# weights of its copies, are the data, and without `points` they are also the climbers, every
# copy taking its row's path. The kernel sums are the same (up to rounding), and rounded data
# with many copies (1e5 rows holding a few hundred distinct ones) climb in a fraction of the
# time. Untied data climb as they are.
climb_distinct <- function(setup, ndim, keep_path, points = NULL, ...) {
  rows <- distinct_rows(setup$x)
  if (is.null(rows)) {
    return(climb(setup$x, setup, points %||% setup$x, setup$max_iter, setup$tol, ndim,
                 keep_path, ...))
  }
  merged <- merge_tied_weights(setup, rows)
  res <- climb(rows$x, merged, points %||% rows$x, setup$max_iter, setup$tol, ndim, keep_path,
               ...)
  if (is.null(points)) expand_rows_of(res, rows$index) else res
}

# blurring_shift() of the data with tied rows merged as in climb_distinct(): copies of a row
# move together, so the distinct rows, weighted, blur exactly as all of them.
blur_distinct <- function(setup, max_iter, tol, ndim, keep_path, collapse_tol = NULL) {
  rows <- distinct_rows(setup$x)
  if (is.null(rows)) {
    return(blurring_shift(setup$x, setup, setup$x, max_iter, tol, ndim, keep_path, collapse_tol))
  }
  res <- blurring_shift(rows$x, merge_tied_weights(setup, rows), rows$x, max_iter, tol, ndim,
                        keep_path, collapse_tol)
  expand_rows_of(res, rows$index)
}

# The setup with the prior weights of tied rows summed onto their distinct rows.
merge_tied_weights <- function(setup, rows) {
  prior <- setup$prior %||% rep(1 / nrow(setup$x), nrow(setup$x))
  setup$prior <- as.vector(rowsum(prior, rows$index, reorder = TRUE))
  setup
}

# A climb's per-point results for every row of the data from those of its distinct rows.
expand_rows_of <- function(res, index) {
  res$points <- res$points[index, , drop = FALSE]
  for (field in c("density", "iterations", "converged", "wsum", "status", "paths")) {
    if (!is.null(res[[field]])) res[[field]] <- res[[field]][index]
  }
  res
}

# The distinct rows of x (in order of first appearance) and the index of every row among them,
# or NULL when no two rows are equal.
distinct_rows <- function(x) {
  if (!anyDuplicated(x)) return(NULL)
  ord <- do.call(order, unname(as.data.frame(x)))
  sorted <- x[ord, , drop = FALSE]
  first <- c(TRUE, rowSums(sorted[-1L, , drop = FALSE] != sorted[-nrow(x), , drop = FALSE]) > 0)
  group <- integer(nrow(x))
  group[ord] <- cumsum(first)
  firsts <- which(!duplicated(group))
  list(x = x[firsts, , drop = FALSE], index = match(group, group[firsts]))
}

# Kernel density from the engine's weight sums: c_d / prod(h), over n without weights.
shift_norm <- function(setup, n) {
  radial_constant(setup$kernel, length(setup$h)) / prod(setup$h) /
    if (is.null(setup$prior)) n else 1
}

# Blurring: every step moves all points to their local means among the current points. With a
# `collapse_tol`, it also stops once the points have collapsed into clusters (see mean_shift()).
blurring_shift <- function(data, setup, points, max_iter, tol, ndim, keep_path,
                           collapse_tol = NULL) {
  paths <- if (keep_path) list(points)
  iter <- 0L
  moving <- TRUE
  while (iter < max_iter && moving) {
    step <- engine_shift(shift_spec(setup, points), points, 1L, ndim = ndim, verbose = FALSE)
    change <- sqrt(rowSums(sweep(step$points - points, 2L, setup$h, `/`)^2))
    points <- step$points
    iter <- iter + 1L
    if (keep_path) paths[[iter + 1L]] <- points
    moving <- max(change) >= tol &&
      (is.null(collapse_tol) || !collapsed(points, setup$h, collapse_tol))
  }
  n <- nrow(points)
  list(points = points, density = kde_values_at(setup, points, data = points),
       iterations = rep(iter, n), converged = rep(!moving || max_iter == 0L, n),
       paths = if (keep_path) lapply(seq_len(n), function(i) {
         do.call(rbind, lapply(paths, function(p) p[i, ]))
       }))
}

# Whether every point lies within tol / 100 of the first point of its group (points grouped
# greedily within tol, in bandwidths).
collapsed <- function(points, h, tol) {
  scaled <- sweep(points, 2L, h, `/`)
  group <- group_within(scaled, tol)
  first <- scaled[match(group, group), , drop = FALSE]
  max(rowSums((scaled - first)^2)) < (tol / 100)^2
}

# Groups points by their modes: visited by decreasing density, a mode within `tol` bandwidths of
# an earlier group's representative joins it. Groups are numbered by decreasing size.
merge_modes <- function(modes, density, h, tol) {
  scaled <- sweep(modes, 2L, h, `/`)
  ord <- order(-density, seq_along(density))
  group <- group_within(scaled[ord, , drop = FALSE], tol)
  cluster <- integer(length(density))
  cluster[ord] <- group
  reps <- ord[!duplicated(group)]  # the highest mode of every group, in group order
  size <- tabulate(cluster, length(reps))
  relabel <- order(-size, seq_along(size))
  cluster <- match(cluster, relabel)
  list(cluster = cluster, representative = reps[relabel], size = size[relabel])
}

new_local_modes <- function(setup, groups, res, algorithm, call) {
  reps <- groups$representative
  dimnames(res$points) <- list(NULL, colnames(setup$x))
  modes <- res$points[reps, , drop = FALSE]
  structure(list(cluster = groups$cluster, modes = modes, mode_density = res$density[reps],
                 size = groups$size, point_modes = res$points, iterations = res$iterations,
                 converged = res$converged, paths = res$paths, x = setup$x,
                 weights = setup$weights, bandwidth = setup$h,
                 bandwidth_method = setup$bandwidth_method, kernel = setup$kernel,
                 method = setup$method, control = setup$control, max_iter = setup$max_iter,
                 tol = setup$tol,
                 algorithm = algorithm, call = call),
            class = "local_modes")
}

#' MedoidShift clustering
#'
#' MedoidShift (Sheikh, Khan and Kanade, 2007) restricts mean shift to the
#' data: each point \eqn{x_i}{x_i} moves to the data point minimising the
#' kernel-weighted sum of squared distances \eqn{\sum_k K_h(x_i, x_k) w_k
#' \|x_k - x_j\|^2}{sum_k K_h(x_i, x_k) w_k ||x_k - x_j||^2}. Expanding the square shows that this
#' is the data point nearest to the local mean \eqn{m(x_i)}{m(x_i)}, so one engine pass and one
#' nearest-neighbour search give every move. Following the moves gives a forest whose roots (points
#' that stay) are the modes; every tree is a cluster, and no centre lies outside the data. With
#' `max_iter > 1` the method is iterated on the roots, each weighted by the points it holds, until
#' no root moves (Sheikh et al.'s reapplication to the modes).
#'
#' @inheritParams mean_shift
#' @param max_iter Most rounds of MedoidShift (1: a single pass over the data;
#'   by default the roots are shifted again until none moves).
#'
#' @return An object of class `local_modes` (see [mean_shift()]); `parent`
#'   holds every point's move (its index in the data) in the first round.
#' @references Sheikh, Y. A., Khan, E. A. and Kanade, T. (2007). Mode-seeking
#'   by medoidshifts. *IEEE 11th International Conference on Computer Vision
#'   (ICCV 2007)*, 1-8.
#' @family modes
#' @export
#' @examples
#' set.seed(2)
#' x <- rbind(matrix(rnorm(100, sd = 0.3), ncol = 2),
#'            matrix(rnorm(100, mean = 2, sd = 0.3), ncol = 2))
#' fit <- medoid_shift(x, bandwidth = 0.5)
#' plot(fit, paths = TRUE)
medoid_shift <- function(x, kernel = "gaussian", bandwidth = "auto", max_iter = 100,
                         merge_tol = 0, min_size = NULL, weights = NULL, method = "auto",
                         n_threads = NULL, verbose = interactive(), control = local_control(),
                         ...) {
  check_dots(...)
  setup <- shift_setup(x, bandwidth, kernel, weights, method, max_iter, 0, n_threads, verbose,
                       control)
  if (setup$max_iter < 1L) abort("{.arg max_iter} must be at least 1.")
  n <- nrow(setup$x)
  min_size <- check_count(min_size %||% default_min_size(n), arg = "min_size")
  parent <- medoid_moves(setup$x, setup, setup$weights %||% rep(1, n))
  root <- forest_roots(parent)
  w <- setup$weights %||% rep(1, n)
  for (round in seq_len(setup$max_iter - 1L)) {
    tops <- sort(unique(root))
    mass <- as.vector(tapply(w, factor(root, tops), sum))
    up <- tops[medoid_moves(setup$x[tops, , drop = FALSE], setup, mass)]
    if (all(up == tops)) break
    moves <- seq_len(n)
    moves[tops] <- up
    root <- forest_roots(moves)[root]
  }
  res <- list(points = setup$x[root, , drop = FALSE], iterations = rep(1L, n),
              converged = rep(TRUE, n))
  res$density <- kde_values_at(setup, setup$x[root, , drop = FALSE])
  groups <- merge_modes(res$points, res$density, setup$h, merge_tol)
  groups <- absorb_small(groups, res$points, setup, min_size)
  warn_tiny_clusters(groups$size, min_size)
  fit <- new_local_modes(setup, groups, res, "medoid_shift", match.call())
  fit$absorbed_modes <- res$points[groups$absorbed, , drop = FALSE]
  fit$absorbed_into <- groups$absorbed_into
  fit$min_size <- min_size
  fit$parent <- parent
  fit$root <- root
  fit$paths <- NULL
  fit
}

# The move of every point of `data` (weighted by `mass`): the data point nearest its local mean.
medoid_moves <- function(data, setup, mass) {
  step <- engine_shift(shift_spec(setup, data, mass / sum(mass)), data, 1L)
  nearest_index(data, setup$h, step$points, setup$n_threads)
}

# Roots of the forest parent[i] (a root is its own parent), by pointer jumping. A cycle (possible
# only through exact ties) is cut at its smallest index.
forest_roots <- function(parent) {
  jumps <- ceiling(log2(length(parent) + 1)) + 1L
  repeat {
    root <- parent
    for (i in seq_len(jumps)) root <- root[root]
    stuck <- which(parent[root] != root)
    if (!length(stuck)) return(root)
    for (i in stuck) {
      orbit <- i
      while (!parent[orbit[length(orbit)]] %in% orbit) orbit <- c(orbit, parent[orbit[length(orbit)]])
      cycle <- orbit[match(parent[orbit[length(orbit)]], orbit):length(orbit)]
      parent[min(cycle)] <- min(cycle)
    }
  }
}

# The kernel density of `data` (by default the fit's) at `points`.
kde_values_at <- function(setup, points, data = setup$x) {
  res <- engine_run(shift_spec(setup, data), points, verbose = FALSE)
  res$wsum * shift_norm(setup, nrow(data))
}

#' Principal-component shift (density ridges)
#'
#' `pc_shift()` is the subspace-constrained mean shift (Ozertem and Erdogmus,
#' 2011): every point moves by its mean-shift step projected onto the
#' directions of least local variance, the `d - ndim` eigenvectors of
#' the kernel-weighted covariance of the data around it with the smallest
#' eigenvalues (for the Gaussian kernel these are the directions of most
#' negative curvature of the log density). Points converge to
#' `ndim`-dimensional density ridges: principal curves for `ndim = 1`.
#' `ndim = 0` is mean shift. The local covariance is computed in bandwidth
#' units (each variable divided by its scale).
#'
#' @inheritParams mean_shift
#' @param ndim Dimension of the ridge, from 0 to d - 1.
#' @return An object of class `local_ridges`: `points` (the projected points),
#'   `x`, `ndim`, `iterations`, `converged`, `paths`, `bandwidth`, `kernel`
#'   and `call`.
#' @references Ozertem, U. and Erdogmus, D. (2011). Locally defined principal
#'   curves and surfaces. *Journal of Machine Learning Research* 12,
#'   1249-1286.
#' @family modes
#' @export
#' @examples
#' set.seed(3)
#' t <- runif(400, 0, pi)
#' x <- cbind(cos(t), sin(t)) + matrix(rnorm(800, sd = 0.1), ncol = 2)
#' fit <- pc_shift(x, ndim = 1, bandwidth = 0.15)
#' plot(fit)
pc_shift <- function(x, kernel = "gaussian", bandwidth = "auto", ndim = 1, max_iter = 500,
                     tol = 1e-8, keep_path = FALSE, weights = NULL, method = "auto",
                     n_threads = NULL, verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  setup <- shift_setup(x, bandwidth, kernel, weights, method, max_iter, tol, n_threads, verbose,
                       control)
  d <- ncol(setup$x)
  ndim <- check_count(ndim, min = 0)
  if (ndim >= d) abort("{.arg ndim} must be below the number of variables ({d}).")
  res <- climb_distinct(setup, ndim, check_flag(keep_path))
  check_overflow(res$points, "x")
  colnames(res$points) <- colnames(setup$x)
  structure(list(points = res$points, x = setup$x, ndim = ndim, iterations = res$iterations,
                 converged = res$converged, paths = if (keep_path) res$paths,
                 bandwidth = setup$h, bandwidth_method = setup$bandwidth_method,
                 kernel = setup$kernel, call = match.call()),
            class = "local_ridges")
}

#' Methods for mode clusterings
#'
#' `predict()` assigns new points to clusters the way the fit assigned the
#' data: for mean shift a new point climbs on the training data and joins the
#' cluster with the nearest mode (NA if it stops farther than `merge_tol`
#' bandwidths from every mode); for MedoidShift it moves to the data point
#' nearest its local mean and takes that point's cluster.
#'
#' `plot()` draws the points coloured by cluster and the modes (crosses), with
#' `paths = TRUE` also the paths kept by `keep_path = TRUE` (mean shift) or
#' the moves (MedoidShift). More than two variables give a pairs plot; one
#' variable a strip chart.
#'
#' @param object,x A `local_modes` or `local_ridges` object.
#' @param newdata New points (a vector, matrix or data frame with the fit's
#'   variables).
#' @param paths Draw the paths or moves.
#' @inheritParams kde
#' @param ... Passed to the plotting functions or unused.
#' @return `predict()`: integer cluster labels; `summary()`: an object of
#'   class `summary.local_modes`.
#' @name local_modes
#' @family modes
NULL

#' @rdname local_modes
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_modes <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  label <- c(mean_shift = if (isTRUE(x$blurring)) "blurring mean shift" else "mean shift",
             medoid_shift = "MedoidShift")[[x$algorithm]]
  k <- length(x$size)
  stuck <- sum(!x$converged)
  print_fields(
    sprintf("<local_modes> %s: %d cluster%s from %d points, %s kernel", label, k,
            if (k != 1L) "s" else "", nrow(x$x), x$kernel),
    list(Bandwidth = sprintf("%s (%s)", named_values(x$bandwidth, colnames(x$x), digits),
                             x$bandwidth_method),
         `Cluster sizes` = c(utils::head(x$size, 20L), if (k > 20L) "..."),
         `Not converged` = if (x$algorithm == "mean_shift" && stuck) {
           sprintf("%d points in %d steps", stuck, x$max_iter)
         }))
  invisible(x)
}

#' @rdname local_modes
#' @export
summary.local_modes <- function(object, ..., digits = NULL) {
  check_dots(...)
  modes <- data.frame(cluster = seq_along(object$size), size = object$size, object$modes,
                      density = object$mode_density, check.names = FALSE)
  structure(list(fit = object, modes = modes, iterations = summary(object$iterations),
                 digits = check_digits(digits)),
            class = "summary.local_modes")
}

#' @export
print.summary.local_modes <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- print_summary_fit(x, digits)
  cat("\nModes:\n")
  print_trimmed(utils::head(x$modes, 20L), row.names = FALSE, digits = digits)
  if (x$fit$algorithm == "mean_shift") {
    cat("\nSteps per point:\n")
    print_trimmed(x$iterations)
  }
  invisible(x)
}

#' @rdname local_modes
#' @export
predict.local_modes <- function(object, newdata, n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  points <- kde_points(object, newdata)
  setup <- list(x = object$x, h = object$bandwidth, kernel = object$kernel,
                method = object$method, control = object$control,
                prior = if (!is.null(object$weights)) object$weights / sum(object$weights),
                n_threads = n_threads(n_threads), verbose = check_flag(verbose))
  if (object$algorithm == "medoid_shift") {
    step <- engine_shift(shift_spec(setup), points, 1L)
    nearest <- nearest_index(object$x, setup$h, step$points, setup$n_threads)
    return(object$cluster[nearest])
  }
  if (!is.null(object$seeds)) return(nearest_cluster(object, points, setup$n_threads))
  res <- climb(object$x, setup, points, object$max_iter, object$tol, -1L, FALSE)
  modes <- rbind(object$modes, object$absorbed_modes)
  nearest <- nearest_index(modes, object$bandwidth, res$points, setup$n_threads)
  dist <- sqrt(rowSums(sweep(res$points - modes[nearest, , drop = FALSE], 2L,
                             object$bandwidth, `/`)^2))
  label <- c(seq_len(nrow(object$modes)), object$absorbed_into)[nearest]
  ifelse(dist <= object$merge_tol, label, NA_integer_)
}

#' @rdname local_modes
#' @export
plot.local_modes <- function(x, paths = FALSE, ...) {
  # more than two variables give a pairs plot, which has arguments of its own
  check_graphics_dots(..., .known = names(formals(graphics::pairs.default)))
  check_flag(paths)
  cols <- cluster_colours(length(x$size))
  point_col <- grDevices::adjustcolor(cols[x$cluster], 0.6)
  d <- ncol(x$x)
  if (d > 2L) {
    graphics::pairs(rbind(x$x, x$modes), col = c(point_col, rep("black", nrow(x$modes))),
                    pch = c(rep(20, nrow(x$x)), rep(4, nrow(x$modes))), ...)
    return(invisible(x))
  }
  xy <- if (d == 2L) x$x else cbind(x$x, strip_jitter(nrow(x$x)))
  modes <- if (d == 2L) x$modes else cbind(x$modes, 0)
  k <- length(x$size)
  plot_with_defaults(xy, NULL, col = point_col, pch = 20, xlab = colnames(x$x)[1L],
                     ylab = if (d == 2L) colnames(x$x)[2L] else "", yaxt = if (d == 1L) "n",
                     main = paste0(if (x$algorithm == "mean_shift") "Mean shift" else
                                     "MedoidShift", ": ", k, " cluster", if (k != 1L) "s"), ...)
  bandwidth_note(shift_bandwidth_note(x))
  if (paths && d == 2L) draw_paths(x, cols)
  graphics::points(modes, pch = 4, cex = 2, lwd = 3)
  invisible(x)
}

draw_paths <- function(x, cols) {
  if (x$algorithm == "medoid_shift") {
    # moves between repeated points have no length (arrows() would warn)
    moved <- which(x$parent != seq_along(x$parent) &
                     rowSums(abs(x$x - x$x[x$parent, , drop = FALSE])) > 0)
    graphics::arrows(x$x[moved, 1L], x$x[moved, 2L], x$x[x$parent[moved], 1L],
                     x$x[x$parent[moved], 2L], length = 0.05, col = cols[x$cluster[moved]])
    return(invisible())
  }
  if (is.null(x$paths)) abort("The fit kept no paths; refit with {.code keep_path = TRUE}.")
  path_cluster <- x$seed_cluster %||% x$cluster
  for (i in sample_rows(length(x$paths), 500L)) {
    graphics::lines(x$paths[[i]], col = cols[path_cluster[i]], lwd = 0.7)
  }
}

# Vertical offsets in (-1, 1) that spread a strip chart's points without drawing random numbers
# (a plot must leave the user's random stream alone): the golden-ratio sequence.
strip_jitter <- function(n) 2 * ((seq_len(n) * 0.6180339887498949) %% 1) - 1

cluster_colours <- function(k) {
  base <- group_colours(min(k, 26L))
  rep_len(base, k)
}

shift_bandwidth_note <- function(x) {
  sprintf("bandwidth %s (%s), %s kernel", named_values(x$bandwidth, colnames(x$x)),
          x$bandwidth_method, x$kernel)
}

#' @rdname local_modes
#' @export
print.local_ridges <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  print_fields(
    sprintf("<local_ridges> onto %d-dimensional ridges: %d points, %s kernel", x$ndim, nrow(x$x),
            x$kernel),
    list(Bandwidth = sprintf("%s (%s)", named_values(x$bandwidth, colnames(x$x), digits),
                             x$bandwidth_method),
         Converged = sprintf("%d of %d points; median steps %g", sum(x$converged), nrow(x$x),
                             stats::median(x$iterations))))
  invisible(x)
}

#' @rdname pc_shift
#' @param object A `local_ridges` fit.
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
summary.local_ridges <- function(object, ..., digits = NULL) {
  check_dots(...)
  moved <- sqrt(rowSums((object$points - object$x)^2))
  structure(list(fit = object, distance = summary(moved),
                 iterations = summary(object$iterations), digits = check_digits(digits)),
            class = "summary.local_ridges")
}

#' @export
print.summary.local_ridges <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list("Distance from each point to the ridge" = x$distance,
                                        "Steps per point" = x$iterations), digits)
}

#' @rdname local_modes
#' @export
plot.local_ridges <- function(x, paths = FALSE, ...) {
  # more than two variables give a pairs plot, which has arguments of its own
  check_graphics_dots(..., .known = names(formals(graphics::pairs.default)))
  check_flag(paths)
  if (ncol(x$x) != 2L) {
    graphics::pairs(rbind(x$x, x$points), col = rep(c("grey60", "firebrick"), each = nrow(x$x)),
                    pch = 20, ...)
    return(invisible(x))
  }
  plot_with_defaults(x$x, NULL, col = "grey60", pch = 20,
                     main = sprintf("Principal-component shift onto %d-dimensional ridges",
                                    x$ndim), ...)
  bandwidth_note(shift_bandwidth_note(x))
  if (paths && !is.null(x$paths)) {
    for (i in sample_rows(length(x$paths), 500L)) graphics::lines(x$paths[[i]], col = "grey40")
  }
  graphics::points(x$points, col = "firebrick", pch = 20, cex = 0.8)
  graphics::legend(emptiest_corner(x$x[, 1L], x$x[, 2L]), c("data", "on the ridge"),
                   col = c("grey60", "firebrick"), pch = 20, bg = "white", box.col = "grey70",
                   cex = 0.85)
  invisible(x)
}
