# The R side of the local-moment engine: scaling, strategy choice, chunking over a future plan,
# and turning scaled-basis coefficients back into the original units.

#' Control settings of the local-moment engine
#'
#' @param gridsize Grid nodes per dimension of the binned strategy. By default
#'   the strategy picks its own grid, whatever the points asked for: four
#'   nodes per bandwidth (a step of at most h / 4), at least 401 nodes in 1-D
#'   (as `KernSmooth::locpoly()`) and 151 in 2-D, at most 20001 in 1-D and
#'   1001 per dimension in 2-D; the fits are interpolated linearly from it.
#'   At most 100,000 nodes per dimension and 4,000,000 in all; a binned pass
#'   whose convolution would take more than 5e10 multiply-adds (about 20
#'   seconds) is refused with an error that suggests a coarser grid or
#'   `method = "tree"`.
#' @param cutoff Truncation radius, in bandwidths, for kernels with unbounded
#'   support (default: the registry's, 8 for the Gaussian; see [kernels()]).
#'   `KernSmooth` truncates the Gaussian at 4.
#' @param candidates Candidate bandwidths for the "cv", "gcv" and "aicc"
#'   selectors: a numeric vector (one predictor) or a matrix with one column
#'   per predictor and one row per candidate. Default: multiples of the
#'   rule-of-thumb bandwidths up to 3, for one numeric predictor 12 in steps
#'   of \eqn{\sqrt{2}}{sqrt(2)} from 0.066 with the Gaussian kernel and 18 in
#'   steps of \eqn{2^{1/3}}{2^(1/3)} from 0.059 with the others, otherwise
#'   `n_candidates` log-spaced from 0.05.
#' @param n_candidates Number of default candidates: by default 12 or 18 for
#'   one numeric predictor (see `candidates`) and 15 for several, where the grid only starts the
#'   joint search of every bandwidth (see `refine`), and 7 where that search
#'   follows the analytic gradient.
#' @param refine After the grid search, refine the best candidate: with one
#'   numeric predictor by a golden-section search between its neighbours,
#'   with several by a joint search of every bandwidth. For the "cv" score of
#'   least squares with the Gaussian kernel and degree 0 or 1 (unless the
#'   search would bin), the joint search is L-BFGS-B on the analytic gradient
#'   of the leave-one-out score with respect to every log-bandwidth and
#'   categorical lambda; otherwise a coordinate sweep and Nelder-Mead. Both
#'   then move each bandwidth to its upper bound where that costs at most
#'   0.01% of the score.
#' @param chunk_size Rows of query points per chunk in `predict()` and in the
#'   selectors; chunks run on the user's `future` plan when one is set.
#' @param max_iter,tol The local likelihood (`family` other than Gaussian):
#'   at most `max_iter` Newton steps at each query point, converged when the
#'   local deviance changes by less than `tol` relative to it (the rule of
#'   [stats::glm.control()]).
#' @param ordered_kernel The kernel of ordered factors: "liracine" (the
#'   default, as np's, \eqn{\lambda^{|r - r_i|}}{lambda^|r - r_i|}) or "wangvanryzin" (Wang and van
#'   Ryzin, statsmodels' default and np's `oxkertype = "wangvanryzin"`: \eqn{1 - \lambda}{1 - lambda} at the same level,
#'   \eqn{(1 - \lambda) \lambda^{|r - r_i|} / 2}{(1 - lambda) lambda^|r - r_i| / 2} at the others).
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A list of class `local_control`.
#' @family regression
#' @export
#' @examples
#' local_control(gridsize = 801)
local_control <- function(gridsize = NULL, cutoff = NULL, candidates = NULL, n_candidates = NULL,
                          refine = TRUE, chunk_size = getOption("localmean.chunk_size", 1e6),
                          max_iter = 25, tol = 1e-8, ordered_kernel = "liracine", ...) {
  # every fit evaluates the default, local_control(): made once per chunk_size option
  if (nargs() == 0L) return(default_control())
  check_dots(...)
  if (!is.null(gridsize)) {
    gridsize <- vapply(gridsize, check_count, 1L, arg = "gridsize", min = 3)
    check_size(max(gridsize), size_limits$grid_nodes_per_dim, "grid nodes per dimension",
               "gridsize")
  }
  if (!is.null(cutoff) && (!is.numeric(cutoff) || length(cutoff) != 1L ||
                           !is.finite(cutoff) || cutoff <= 0)) {
    abort("{.arg cutoff} must be a positive number.")
  }
  if (!is.null(candidates) && (!is.numeric(candidates) || any(!is.finite(candidates)) ||
                               any(candidates <= 0) || length(candidates) == 0L)) {
    abort("{.arg candidates} must hold positive finite bandwidths.")
  }
  # (class<- rather than structure(): every fit evaluates this default)
  control <- list(gridsize = gridsize, cutoff = cutoff, candidates = candidates,
                  n_candidates = if (!is.null(n_candidates)) check_count(n_candidates, min = 2),
                  refine = check_flag(refine),
                  chunk_size = check_count(chunk_size), max_iter = check_count(max_iter),
                  tol = check_positive(tol),
                  ordered_kernel = check_choice(ordered_kernel, c("liracine", "wangvanryzin")))
  class(control) <- "local_control"
  control
}

# local_control() with its defaults, kept for the localmean.chunk_size option it was made with.
default_control <- function() {
  chunk_size <- getOption("localmean.chunk_size", 1e6)
  if (is.null(control_cache$control) || !identical(control_cache$chunk_size, chunk_size)) {
    control_cache$control <- local_control(chunk_size = chunk_size)
    control_cache$chunk_size <- chunk_size
  }
  control_cache$control
}
control_cache <- new.env(parent = emptyenv())

check_control <- function(control, call = rlang::caller_env()) {
  if (is.null(control)) return(local_control())
  if (!inherits(control, "local_control")) {
    abort("{.arg control} must be made by {.fn local_control}.", call = call)
  }
  control
}

# ---- The engine specification ---------------------------------------------------------------

# Everything the engine needs besides the query points, built once per fit and the only input of
# engine_run() and engine_shift(), which are the only callers of the C++ engine:
# - x: the data (n x d matrix, or a plain vector for one variable, which is never copied);
#   values (n x nv, or NULL for weight sums alone), prior weights, sample-point scales
#   (point_scale, one per data point) or NULL;
# - scale: per-variable scales (the bandwidths, or for nn(k) the standardising scales); nn:
#   list(k, scale, standardise) for query-adaptive radii (the k-th neighbour's distance);
# - kernel, degree of the local polynomial;
# - the strategy: method ("exact", "tree", "binned", chosen from "auto" by choose_method()),
#   the cut-off in scales (0: the registry's), the binned grid: `grid = list(size, range)` (a
#   2 x d range) fixes it, else local_control(gridsize =) or default_gridsize() give the nodes
#   and the grid spans the data and the queries;
# - chunk_size, n_threads, verbose;
# - categorical: categorical variables (see categorical_predictors()) with their smoothing
#   parameters `lambda`, which enter through the generalized product kernel; unit_mass makes
#   their weights probabilities (densities);
# - family: a loss of the registry (losses()): "gaussian" (least squares), the others
#   iterative with control$max_iter and control$tol (see iterative.hpp; "multinomial": the local
#   baseline-category logit of one-hot class indicators in `values`); loss_param its tuning
#   constant (tau for "quantile").
# - engine: the engine object's handle (engine_handle()), shared by every copy of the
#   specification (with_scale(), the fit's `spec`), so that a fit builds its data once.
# `binnable` is the family's own condition for the binned strategy (e.g. kde: plain scales);
# `range` (2 x d) the data's column ranges, when the caller has them (large data: one pass less).
# Without numeric variables (d = 0) the engine sees one constant column: a local constant.
engine_spec <- function(x, kernel, scale = NULL, values = NULL, prior = NULL, point_scale = NULL,
                        nn = NULL, degree = 0L, method = "auto", control = local_control(),
                        binnable = TRUE, m = NROW(x), grid = NULL, range = NULL,
                        categorical = NULL, lambda = NULL, unit_mass = FALSE,
                        family = "gaussian", loss_param = NA_real_, n_threads = 1L,
                        verbose = FALSE, call = rlang::caller_env()) {
  d <- NCOL(x)
  if (d == 0L) {
    x <- matrix(0, nrow(x), 1L)
    scale <- 1
    degree <- 0L
  }
  # (if-else rather than %||% in this path of every fit: a call less each)
  if (is.null(range)) range <- column_ranges(x)
  gridsize <- if (is.null(grid$size)) control$gridsize else grid$size
  spec <- list(x = x, values = values, prior = prior, point_scale = point_scale,
               kernel = kernel, degree = degree, nn = nn, numeric_vars = d,
               binnable = binnable && d <= 2L && is.null(nn) && is.null(point_scale) &&
                 is.null(categorical) && family == "gaussian",
               requested_method = method,
               cutoff = if (is.null(control$cutoff)) 0 else control$cutoff,
               fixed_grid = !is.null(gridsize), control_gridsize = gridsize,
               grid_range = grid$range,
               range = range, span = range[2L, ] - range[1L, ],
               categorical = if (!is.null(categorical)) {
                 list(codes = categorical$codes, levels = lengths(categorical$levels),
                      ordered = categorical$ordered, unit_mass = unit_mass,
                      wang_van_ryzin = identical(control$ordered_kernel, "wangvanryzin"))
               },
               family = family, loss_param = loss_param, max_iter = control$max_iter,
               tol = control$tol, chunk_size = control$chunk_size, n_threads = n_threads,
               verbose = verbose, engine = engine_handle())
  with_scale(spec, if (is.null(nn)) scale else nn$scale, m, call, lambda)
}

# The specification with other per-variable scales (and categorical lambdas): the grid and the
# strategy follow them.
with_scale <- function(spec, scale, m = NROW(spec$x), call = rlang::caller_env(),
                       lambda = spec$categorical$lambda, search = FALSE) {
  d <- NCOL(spec$x)
  if (spec$numeric_vars == 0L) scale <- 1
  spec$scale <- scale
  if (!is.null(spec$categorical)) spec$categorical$lambda <- as.double(lambda)
  spec$bandwidth <- if (is.null(spec$nn)) scale
  gridsize <- spec$control_gridsize
  if (is.null(gridsize)) gridsize <- default_gridsize(d, spec$bandwidth, spec$span, search)
  spec$gridsize <- rep_len(gridsize, d)
  spec$method <- choose_method(spec, spec$requested_method, m, call, search)
  spec
}

# The strategy for m queries: "exact" sweeps every point, "tree" prunes with the kd-tree,
# "binned" convolves on its own grid (d <= 2, fixed scales) and interpolates to the queries.
# "auto" bins when binning is accurate enough and n reaches binned_min_n: the binning grid
# resolves the bandwidth (at least two nodes per bandwidth; binning_gridsize() gives four unless
# capped or fixed by the user) and binning costs less than the kd-tree (binning_cost(),
# tree_cost()). The number of queries enters only through the tree's cost: a coarse output grid
# no longer sends a large data set to the tree. Kernels that are never truncated always sweep
# every point. A bandwidth `search` scores candidates binned from a smaller n than fits use.
choose_method <- function(spec, method, m, call = rlang::caller_env(), search = FALSE) {
  if (!identical(method, "auto")) {
    method <- check_choice(method, c("auto", "exact", "tree", "binned"), call = call)
  }
  if (method == "binned" && !spec$binnable) {
    abort("{.code method = \"binned\"} needs at most 2 variables and a fixed bandwidth.",
          call = call)
  }
  truncated <- kernel_row(spec$kernel)$truncated
  if (method == "binned") check_binning_size(spec, call)
  if (method != "auto") return(if (method == "tree" && !truncated) "exact" else method)
  if (!truncated) return("exact")
  min_n <- if (search) binned_min_n$search else binned_min_n$fit
  if (!spec$binnable || NROW(spec$x) < min_n) return(tree_or_exact(spec))
  span <- if (is.null(spec$grid_range)) spec$span else diff(spec$grid_range)[1L, ]
  step <- span / (spec$gridsize - 1)
  resolved <- all(spec$bandwidth >= 2 * step)
  if (resolved && binning_cost(spec, step) < tree_cost(spec, m)) "binned" else tree_or_exact(spec)
}

# The kd-tree prunes nothing when the kernel's reach spans the data's range in every variable
# (e.g. the Gaussian at a cross-validated bandwidth in 4-D and more): then it only adds the cost
# of its searches, and every point is swept exactly. Measured (n = 2000, degree 1, Gaussian,
# 1.5 times the rule of thumb, bench/README.md): the tree took 1.4 times as long as the exact
# sweep in 4-, 5- and 6-D. Fixed scales only (nn() radii and point scales vary per query).
tree_or_exact <- function(spec) {
  fixed <- !is.null(spec$bandwidth) && is.null(spec$point_scale) && spec$numeric_vars > 0L
  if (fixed && all(2 * kernel_reach(spec) * spec$bandwidth >= spec$span)) "exact" else "tree"
}

# The least number of data points for "auto" to bin: fits and predictions stay exact below 1e4
# points; a bandwidth search scores its candidates binned from 1000 points (the chosen
# bandwidth's final score and fit use the fit's strategy). Binning's relative error,
# O((step / h)^2) at four nodes per bandwidth, moves the minimiser of a CV curve by a fraction of
# a percent, far less than the curve's own sampling variability.
binned_min_n <- list(fit = 10000L, search = 1000L)

# The binned strategy's grid and work within size_limits (see local_control()).
check_binning_size <- function(spec, call) {
  span <- if (is.null(spec$grid_range)) spec$span else diff(spec$grid_range)[1L, ]
  check_size(prod(as.double(spec$gridsize)), size_limits$grid_nodes, "binning grid nodes",
             "gridsize", call = call)
  work <- binning_cost(spec, span / (spec$gridsize - 1))
  if (work > size_limits$binning_work) {
    abort(c("The binned strategy would take about {signif(work, 2)} multiply-adds; the limit
             is {size_limits$binning_work}.",
            i = "Use a coarser {.arg gridsize} in {.fn local_control}, a smaller bandwidth,
                 or {.code method = \"tree\"}."), call = call)
  }
}

# Rough operation counts (multiply-adds) of the two strategies. The kd-tree is built over the
# data (n log2 n steps of partitioning, about 20 multiply-adds' time each, as measured with
# bench/bench-kde.R) and, per query, visits the points within the kernel's reach (the share
# `covered` of the data range) at a few operations each. Binning spreads each point over 2^d
# nodes, then every node convolves each array it smooths (moment sums, value sums) with the
# window: for the Gaussian in 2-D (separable weights) one row pass per monomial power of each
# array and one column pass per moment, the whole window otherwise.
tree_cost <- function(spec, m) {
  n <- as.double(NROW(spec$x))
  covered <- prod(pmin(1, 2 * kernel_reach(spec) * spec$bandwidth / spec$span))
  nb <- choose(spec$numeric_vars + spec$degree, spec$degree)
  nv <- if (is.null(spec$values)) 0 else NCOL(spec$values)
  20 * n * log2(n) + 4 * (1 + nb * nv) * n * m * covered
}

binning_cost <- function(spec, step) {
  d <- spec$numeric_vars
  p <- spec$degree
  taps <- pmin(2 * ceiling(kernel_reach(spec) * spec$bandwidth / step) + 1, 2 * spec$gridsize - 1)
  nv <- if (is.null(spec$values)) 0 else NCOL(spec$values)
  nodes <- prod(as.double(spec$gridsize))
  moments <- choose(d + 2 * p, d) + choose(d + p, d) * nv
  convolution <- if (separable_window(spec)) {
    nodes * ((2 * p + 1 + (p + 1) * nv) * taps[1L] + moments * taps[2L])
  } else {
    nodes * moments * prod(taps)
  }
  2^d * as.double(NROW(spec$x)) + convolution
}

# Whether the binned strategy smooths in two 1-D passes (binned_fit_nodes()): the Gaussian in
# 2-D at the registry's cut-off or wider.
separable_window <- function(spec) {
  spec$numeric_vars == 2L && spec$kernel == "gaussian" &&
    kernel_reach(spec) >= kernel_row("gaussian")$cutoff
}

# The kernel's truncation radius in scales: local_control(cutoff =) or the registry's.
kernel_reach <- function(spec) if (spec$cutoff > 0) spec$cutoff else kernel_row(spec$kernel)$cutoff

# How far the engine's sweep reaches with strategy `method` (the engine's Reach): the exact
# strategy truncates only at a cut-off the user gave; the tree strategy at the kernel's reach.
sweep_reach <- function(spec, method = spec$method) {
  ifelse(method == "exact" & spec$cutoff <= 0, Inf, kernel_reach(spec))
}

# Nodes per dimension of the binning grid (when neither local_control(gridsize =) nor the
# family fixes it): four nodes per bandwidth (step <= h / 4, where the O((step / h)^2) errors of
# linear binning and of linear interpolation are about 1e-3 of the estimate's range), at least
# 401 in 1-D and 151 x 151 in 2-D, and at most binning_max_nodes(d) per dimension. A capped
# grid resolves a bandwidth down to span / 10000 (1-D) or span / 500 (2-D) at two nodes per
# bandwidth, the accuracy "auto" asks before it bins. A 2-D bandwidth `search` scores on three
# nodes per bandwidth (from 11 x 11): a third of the cost, and its chosen bandwidths' exact CV
# scores stay within 0.05% of those chosen on four nodes (bench/bench-cv.R).
default_gridsize <- function(d, bandwidth, span, search = FALSE) {
  least <- if (d == 1L) 401 else if (search) 11 else 151
  per_bandwidth <- if (search && d == 2L) 3 else 4
  if (is.null(bandwidth)) return(rep_len(as.integer(least), d))
  nodes <- ceiling(per_bandwidth * span / bandwidth) + 1
  # (clamped by assignment: pmin() and pmax() take microseconds on a few numbers)
  nodes[nodes < least] <- least
  most <- binning_max_nodes(d)
  nodes[nodes > most] <- most
  as.integer(nodes)
}

# At most 20001 nodes in 1-D and 1001 x 1001 (8 MB per smoothed array) in 2-D.
binning_max_nodes <- function(d) if (d == 2L) 1001L else 20001L

`%||%` <- function(a, b) if (is.null(a)) b else a

# ---- Running the engine ------------------------------------------------------------------------

# Local moments at `queries` (m x d, original units): coef (m x nb x nv, original units),
# var (m x nb, with want_var), s00, wsum, status, radius (nn) and powers (the basis exponents).
# `method` overrides the specification's strategy; rtol > 0 approximates weight sums (kd-tree).
# Likelihood families: `leave_out` (one data row per query, 0: none) drops that row from the
# query's window (exact leave-one-out fits at the data).
# `nodes`: the grid's node fits kept by a one-pass fit of this specification (engine_data_fit()
# with keep_nodes), interpolated instead of binning the data again where they apply (see
# stored_nodes_apply()). `want_inverse`: also `inverse` (m x nb x nb), each query's S^-1 of its
# last solve in the scaled basis u = (x - q) / (scale * radius) (the iterative fits' inverse
# information, for localize()'s standard errors). `want_window` (iterative losses): also
# `window` (m x 2), the rows of each query's window and the sum of their kernel weights, as
# engine_windows(sizes_only = TRUE) gives them when every prior weight is positive.
engine_run <- function(spec, queries, want_var = FALSE, method = spec$method, rtol = 0,
                       n_threads = spec$n_threads, verbose = spec$verbose,
                       query_codes = NULL, leave_out = NULL, nodes = NULL,
                       want_inverse = FALSE, want_window = FALSE) {
  spec$method <- method
  if (spec$numeric_vars == 0L) queries <- matrix(0, nrow(queries), 1L)
  if (!is.null(spec$categorical) && is.null(query_codes)) {
    abort("Internal error: categorical variables need the queries' levels.", call = NULL)
  }
  # The binned grid spans the data and every query, so that all chunks share one grid.
  if (method == "binned" && is.null(spec$grid_range)) {
    rx <- spec$range
    rq <- column_ranges(queries)
    spec$grid_range <- rbind(pmin(rx[1L, ], rq[1L, ]), pmax(rx[2L, ], rq[2L, ]))
  }
  m <- nrow(queries)
  if (m <= spec$chunk_size) {
    return(engine_chunk(spec, queries, query_codes, want_var, rtol, n_threads, verbose,
                        leave_out, nodes, want_inverse, want_window))
  }
  run <- function(idx, threads) {
    engine_chunk(spec, queries[idx, , drop = FALSE], query_codes[idx, , drop = FALSE],
                 want_var, rtol, threads, verbose, leave_out[idx], nodes, want_inverse,
                 want_window)
  }
  starts <- seq(1, m, by = spec$chunk_size)
  chunks <- lapply(starts, function(s) s:min(m, s + spec$chunk_size - 1))
  parts <- if (future_plan_active()) {
    future.apply::future_lapply(chunks, run, threads = 1L, future.seed = NULL)
  } else {
    lapply(chunks, run, threads = n_threads)
  }
  bind_fits(parts)
}

# A plan needs future loaded, so nothing is loaded otherwise: requireNamespace() catches every
# error while it loads, an expiring time limit's included, which would then be lost.
future_plan_active <- function() {
  isNamespaceLoaded("future") && requireNamespace("future.apply", quietly = TRUE) &&
    !inherits(future::plan(), "sequential")
}

bind_fits <- function(parts) {
  first <- parts[[1L]]
  bind_array <- function(name) {
    arrs <- lapply(parts, `[[`, name)
    if (is.null(arrs[[1L]])) return(NULL)
    dims <- dim(arrs[[1L]])
    if (is.null(dims)) return(unlist(arrs, use.names = FALSE))
    flat <- lapply(arrs, function(a) matrix(a, nrow = dim(a)[1L]))
    out <- do.call(rbind, flat)
    array(out, dim = c(nrow(out), dims[-1L]))
  }
  out <- lapply(stats::setNames(names(first), names(first)), bind_array)
  out$powers <- first$powers
  out
}

engine_chunk <- function(spec, queries, query_codes, want_var, rtol, n_threads, verbose,
                         leave_out = NULL, nodes = NULL, want_inverse = FALSE,
                         want_window = FALSE) {
  scale <- spec$scale
  radius <- numeric(0)
  if (!is.null(spec$nn)) {
    radius <- nn_radius(spec, queries, n_threads, verbose)
  }
  grid_range <- if (!is.null(nodes)) spec$grid_range %||% matrix(numeric(0), 2L)
  res <- if (!want_var && !is.null(nodes) && stored_nodes_apply(nodes, spec, grid_range)) {
    cpp_interpolate_nodes(nodes$fits, queries, scale, spec$gridsize, grid_range[1L, ],
                          grid_range[2L, ])
  } else {
    # a user kernel is registered here, not in C++ (a registry kernel is a plain name)
    if (!is.null(attributes(spec$kernel))) spec$kernel <- engine_kernel(spec$kernel)
    cpp_engine_fit(engine_pointer(spec), spec,
                   list(queries = queries, radius = radius, want_var = want_var, rtol = rtol,
                        query_codes = query_codes, leave_out = leave_out,
                        n_threads = n_threads, verbose = verbose,
                        want_inverse = want_inverse, want_window = want_window))
  }
  # Queries without a usable window are NA (the engine leaves NaN there).
  undefined <- res$status != 0L
  if (any(undefined)) {
    res$coef[undefined, , ] <- NA_real_
    if (want_var) res$var[undefined, ] <- NA_real_
    res$s00[undefined] <- NA_real_
  }
  powers <- basis_powers(NCOL(spec$x), spec$degree)
  if (spec$degree > 0L) {
    # Coefficients of the scaled basis u = (x - q) / (scale * radius) back to original units:
    # per basis term the product of (scale * radius)^power over the variables, the same for
    # every query without nn() radii.
    m <- nrow(queries)
    if (length(radius)) {
      factor <- matrix(1, m, nrow(powers))
      for (b in seq_len(nrow(powers))) {
        for (j in which(powers[b, ] > 0L)) {
          factor[, b] <- factor[, b] * (scale[j] * radius)^powers[b, j]
        }
      }
    } else {
      # (x^0 = 1 exactly, so the product over every variable equals that over the powers > 0)
      term_power <- rep(scale, each = nrow(powers))^powers
      per_term <- term_power[, 1L]
      for (j in seq_len(ncol(term_power))[-1L]) per_term <- per_term * term_power[, j]
      # (the divisor of every query, as a vector: it recycles over the value columns)
      factor <- rep(per_term, each = m)
    }
    res$coef <- res$coef / as.vector(factor)
    if (want_var) res$var <- res$var / factor^2
  }
  if (!want_var) res$var <- NULL
  res$radius <- if (length(radius)) radius else NULL
  res$powers <- powers
  res
}

# The kernel windows of `queries` (m x d, original units; `query_codes` their categorical
# levels), as engine_run() would sweep them with this specification's kernel, scales, nn()
# radii, categorical lambdas, cut-off, prior weights and strategy: list(rows, weights, size,
# wsum), per query the data rows (ascending) of positive weight (kernel times prior) and their
# kernel weights, 1 at the query (level weights included, prior weights not), the number of
# those rows and the sum of their kernel weights (`sizes_only`: these two alone). localize()
# fits the user's model on them.
engine_windows <- function(spec, queries, query_codes = NULL, sizes_only = FALSE,
                           n_threads = spec$n_threads, verbose = spec$verbose) {
  if (spec$numeric_vars == 0L) queries <- matrix(0, nrow(queries), 1L)
  radius <- if (!is.null(spec$nn)) nn_radius(spec, queries, n_threads, verbose) else numeric(0)
  spec$kernel <- engine_kernel(spec$kernel)
  res <- cpp_engine_windows(engine_pointer(spec), spec,
                            list(queries = queries, radius = radius, query_codes = query_codes,
                                 sizes_only = sizes_only, n_threads = n_threads,
                                 verbose = verbose))
  out <- list(size = res$size, wsum = res$wsum)
  if (sizes_only) return(out)
  query <- factor(rep.int(seq_len(nrow(queries)), res$size), levels = seq_len(nrow(queries)))
  c(list(rows = unname(split(res$row, query)), weights = unname(split(res$weight, query))), out)
}

# Conditional quantiles of kde(y ~ x) at degree 0 at `queries` (m x d, `query_codes` their
# levels): F(y | x) = tau solved in each query's window of the specification (of the predictors,
# without values) for responses `y` with the registry kernel `y_kernel` of bandwidth `hy`, every
# tau of a query from one window. m x length(tau), NA where no data weigh.
engine_cdens_quantiles <- function(spec, queries, query_codes, y, y_kernel, hy, tau,
                                   max_iter = 100L, n_threads = spec$n_threads,
                                   verbose = spec$verbose) {
  if (spec$numeric_vars == 0L) queries <- matrix(0, nrow(queries), 1L)
  cpp_engine_cdens_quantiles(engine_pointer(spec), spec,
                             list(queries = queries, query_codes = query_codes,
                                  y = as.double(y), y_kernel = y_kernel, hy = as.double(hy),
                                  tau = as.double(tau), max_iter = as.integer(max_iter),
                                  n_threads = n_threads, verbose = verbose))
}

# The Gaussian weight sums of the specification (Gaussian kernel, without values) at `queries`
# with their first and second derivatives in the log-scales: m x (1 + d + d (d + 1) / 2), the
# sums S, then S_k = sum W u_k^2, then S_kl = sum W u_k^2 u_l^2 (k <= l, row by row), u in
# scales (conditional.hpp); without `derivatives`, m x 1, the sums alone. `at_data`: the queries
# are the data points in their order, whose symmetric pairs are each computed once. `joint`
# (at the data, with `derivatives`): the specification of the data with one more variable,
# `y`, at the same scales (a conditional density's, whose marginal `spec` is); then the same
# pass gives its sums too, from the same pairs: list(joint, marginal) of such matrices. NULL
# when the joint reaches beyond the window of `spec` (its sums need their own pass).
engine_scale_moments <- function(spec, queries, query_codes = NULL, derivatives = TRUE,
                                 n_threads = spec$n_threads, verbose = FALSE, at_data = FALSE,
                                 joint = NULL, y = NULL) {
  request <- list(queries = queries, query_codes = query_codes, derivatives = derivatives,
                  at_data = at_data, n_threads = n_threads, verbose = verbose, y = NULL,
                  joint_cutoff = NULL)
  if (!is.null(joint)) {
    request$joint_cutoff <- sweep_reach(joint)
    if (request$joint_cutoff > sweep_reach(spec)) return(NULL)
    request$y <- as.double(y) / joint$scale[length(joint$scale)]
  }
  out <- cpp_engine_scale_moments(engine_pointer(spec), spec, request)
  if (is.null(joint)) return(out)
  d <- spec$numeric_vars
  marginal <- seq_len(1L + d + d * (d + 1L) / 2L)
  list(joint = out[, -marginal, drop = FALSE], marginal = out[, marginal, drop = FALSE])
}

# ---- The engine object ---------------------------------------------------------------------

# The handle of a specification's engine object: an environment (shared by every copy of the
# specification and of the fit that keeps it) whose `ptr` is the C++ object, an external pointer
# that holds the data in tree order (see EngineObject in src/engine.cpp). The object is made when
# first asked for, and again when the pointer is dead: after saveRDS() / readRDS(), or in a
# `future` worker, which receives a copy whose pointer is nil.
engine_handle <- function() {
  handle <- new.env(parent = emptyenv())
  handle$ptr <- NULL
  handle
}

# The live engine object of `spec` (NULL without a handle: a one-off object per call).
engine_pointer <- function(spec) {
  handle <- spec$engine
  if (is.null(handle)) return(NULL)
  if (!cpp_engine_alive(handle$ptr)) handle$ptr <- cpp_engine_new()
  handle$ptr
}

# The number of times an engine object built its data (for tests: a search builds once).
engine_builds <- function() cpp_engine_builds()

# Gives the engine object of `spec` the specification's values (n x nv) in place of those it
# holds, which C++ permutes into its tree order, when it holds the same data otherwise (points,
# prior weights, levels): replicates of a fit swap responses without rebuilding its tree.
# FALSE when it did not (no data built yet, or other data: the next request builds them).
engine_set_values <- function(spec) {
  handle <- spec$engine
  !is.null(handle) && cpp_engine_set_values(handle$ptr, spec)
}

# Whether fits at the data points of `spec` can come from one pass over the binned grid's fits
# (engine_data_fit()): binned least squares, without variances.
one_pass_fit <- function(spec, want_var = FALSE) {
  !want_var && identical(spec$method, "binned") &&
    identical(spec$family %||% "gaussian", "gaussian") && is.null(spec$categorical) &&
    spec$numeric_vars > 0L
}

# Fits at the data points of a binned least-squares specification in one C++ pass: the node
# fits and [S^-1]_00 of the grid (the one engine_run() would use for these queries) interpolated
# to every point, with the fit's summaries (`sums`, see fit_sums()). `keep_fits`: also the fits
# (n x nv, a vector for one value column; NA where none exists) and leverages;
# `keep_residuals`: the residuals (as the fits).
# `keep_nodes`: also the grid's node fits (`nodes`) with what they were computed from, which
# engine_run(nodes =) interpolates to later queries on the same grid.
engine_data_fit <- function(spec, keep_fits = TRUE, keep_residuals = FALSE,
                            n_threads = spec$n_threads, verbose = spec$verbose,
                            keep_nodes = FALSE) {
  grid_range <- spec$grid_range %||% spec$range
  res <- cpp_binned_data_fit(spec$x, spec$scale, spec$values, spec$prior %||% numeric(0),
                             engine_kernel(spec$kernel), spec$degree, spec$cutoff, spec$gridsize,
                             grid_range[1L, ], grid_range[2L, ], n_threads, verbose, keep_fits,
                             keep_residuals, keep_nodes)
  if (keep_nodes) res$nodes <- list(fits = res$nodes, key = stored_nodes_key(spec, grid_range))
  res
}

# Least-squares fits at the data points of `spec` in one engine call, as fit_at_data() returns
# them (fitted, leverage, status, status_counts) with the fit's summaries (`sums`, see
# fit_sums()), for least squares where one_call() allows it.
engine_fit_at_data <- function(spec, n_threads = spec$n_threads, verbose = spec$verbose) {
  if (!is.null(attributes(spec$kernel))) spec$kernel <- engine_kernel(spec$kernel)
  cpp_engine_data_fit(engine_pointer(spec), spec, list(n_threads = n_threads, verbose = verbose))
}

# The local polynomial's value at `queries` (m x d, original units) in one engine call, as
# engine_run() fits it without variances: list(coef (m x 1 x 1, the intercept of the first
# value column), status), where one_call() allows it.
engine_values <- function(spec, queries, n_threads = spec$n_threads, verbose = spec$verbose) {
  if (!is.null(attributes(spec$kernel))) spec$kernel <- engine_kernel(spec$kernel)
  cpp_engine_values(engine_pointer(spec), spec,
                    list(queries = queries, n_threads = n_threads, verbose = verbose))
}

# Whether fits of `spec` at m queries can take one engine call (engine_fit_at_data(),
# engine_values()): values to fit, the exact or tree strategy in one chunk, without nn() radii
# or categorical variables.
one_call <- function(spec, m) {
  !is.null(spec$values) && is.null(spec$nn) && is.null(spec$categorical) &&
    spec$numeric_vars > 0L && spec$method != "binned" && m <= spec$chunk_size
}

# Selector summaries (as fit_sums() gives them) of least-squares fits at the data points of a
# one-variable specification for many bandwidths `scales` at once, each truncated at `reach`
# bandwidths (Inf: none): one engine pass instead of one per bandwidth. A list per bandwidth.
engine_candidate_sums <- function(spec, scales, reach, n_threads = spec$n_threads,
                                  verbose = FALSE) {
  spec$kernel <- engine_kernel(spec$kernel)
  cpp_engine_candidate_sums(engine_pointer(spec), spec,
                            list(scales = as.double(scales), reach = as.double(reach),
                                 n_threads = n_threads, verbose = verbose))
}

# What the node fits of a one-pass fit depend on besides the data (which the model keeps as it
# is): the strategy, kernel, degree, cut-off, scales and grid.
stored_nodes_key <- function(spec, grid_range) {
  list(method = spec$method, kernel = spec$kernel, degree = spec$degree, cutoff = spec$cutoff,
       scale = spec$scale, gridsize = spec$gridsize, grid_range = unname(grid_range),
       n = NROW(spec$x))
}

# Whether node fits kept by engine_data_fit() serve queries of `spec` on the grid spanning
# `grid_range`: the same grid and settings (a query beyond the fit's data range widens the
# grid, and then the data are binned again).
stored_nodes_apply <- function(nodes, spec, grid_range) {
  !is.null(nodes) && identical(nodes$key, stored_nodes_key(spec, grid_range))
}

# Summaries of fits (n x nv) and leverages (n) of `values` at the data points, with prior
# weights (NULL: 1), over the points whose fit and leverage are finite: count (of those with
# positive weight), weight, rss, trace (of the smoother: the effective df), loo (the weighted
# sum of squared leave-one-out residuals r / (1 - L)), mean and spread (weighted mean and sum
# of squared deviations of the first column of `values`), near_one (a weighted leverage within
# 1e-10 of 1) and status (points per engine status; a missing fit counts as status 2).
fit_sums <- function(values, fitted, leverage, prior, n_threads = 1L) {
  cpp_fit_sums(values, fitted, leverage, if (is.null(prior)) numeric(0) else prior, n_threads)
}

# Moves `points` (original units) by iterated local means of the specification's data: mean
# shift (ndim < 0) or the subspace-constrained shift onto ndim-dimensional ridges. Returns the
# final points, weight sums, iterations, status and (keep_path) paths.
engine_shift <- function(spec, points, max_iter, tol = 0, ndim = -1L, keep_path = FALSE,
                         accelerate = FALSE, meet = 0, n_threads = spec$n_threads,
                         verbose = spec$verbose) {
  cpp_shift_points(spec$x, spec$scale, spec$prior %||% numeric(0), points,
                   engine_kernel(spec$kernel),
                   spec$method, spec$cutoff, max_iter, tol, ndim, keep_path, accelerate, meet,
                   n_threads, verbose)
}

# The radius of nn(k) bandwidths about every query (engine_chunk()).
# Kernels with unbounded support: the distance to the k-th neighbour. Compact kernels need the
# window to hold data at p different distances (p: the coefficients of the local polynomial)
# with positive weight: the uniform kernel reaches the k-th or the p-th distinct distance,
# whichever is farther (so degree 0 is exact k-NN); the others, which vanish at the edge, the
# k-th or the (p + 1)-th distinct distance. Where the data hold fewer distinct distances, twice
# the farthest distance. A zero radius (every point of
# the window on the query) becomes the smallest positive number: only those points count.
# `spec$nn$memo`, an environment (robust_iterations() sets one), keeps the last radii with
# their queries, k, kernel and degree: refits on the same data reuse them.
nn_radius <- function(spec, queries, n_threads, verbose) {
  memo <- spec$nn$memo
  key <- list(spec$nn$k, spec$kernel, spec$degree, spec$scale, NROW(spec$x))
  if (!is.null(memo) && identical(memo$key, key) && identical(memo$queries, queries)) {
    return(memo$radius)
  }
  k <- spec$nn$k
  row <- kernel_row(spec$kernel)
  reach <- if (row$compact) {
    uniform <- spec$kernel == "uniform"
    distinct <- choose(NCOL(spec$x) + spec$degree, spec$degree) + !uniform
    # the uniform kernel takes in every point tied (up to rounding) at the last distance
    cpp_knn_distinct_radius(spec$x, spec$scale, queries, k, distinct, if (uniform) 1e-9 else 0,
                            n_threads, verbose)
  } else {
    cpp_knn_radius(spec$x, spec$scale, queries, k, n_threads, verbose)
  }
  short <- !is.finite(reach)
  if (any(short)) {
    far <- queries[short, , drop = FALSE]
    reach[short] <- 2 * cpp_knn_radius(spec$x, spec$scale, far, NROW(spec$x), n_threads, FALSE)
  }
  radius <- pmax(reach * (1 + 1e-12), .Machine$double.xmin)
  if (!is.null(memo)) {
    memo$key <- key
    memo$queries <- queries
    memo$radius <- radius
  }
  radius
}

# ---- The other engine entry points ------------------------------------------------------------
#
# R/engine.R is the only R file that calls the engine's C++ entry points: every cpp_ function
# of src/engine.cpp, src/binning.cpp and src/metric.cpp, and the neighbour searches
# (cpp_knn_graph(), cpp_knn_radius(), cpp_knn_distinct_radius(), cpp_nearest_index()), but the
# kernel registry's readers (cpp_kernel_table(), cpp_kernel_value(), called by R/kernels.R and
# kernel_value()) and two checks of the data (cpp_column_ranges(), cpp_all_finite()). The
# registries' own files, src/kernels.cpp and src/losses.cpp, are read by R/kernels.R and
# R/likelihood.R.
# tests/testthat/test-engine.R enforces it. The other files call these small functions.

# Index (1-based) of the data point (rows of x) nearest to every query, in coordinates divided
# by `scale`.
nearest_index <- function(x, scale, queries, n_threads = 1L) {
  cpp_nearest_index(x, scale, queries, n_threads)
}

# Distance from every query to its k-th nearest data point, in coordinates divided by `scale`.
knn_radius <- function(x, scale, queries, k, n_threads = 1L, verbose = FALSE) {
  cpp_knn_radius(x, scale, queries, k, n_threads, verbose)
}

# The k nearest neighbours of every query (rows of queries) among the rows of x: index and
# distance matrices; `self` leaves a point out of its own list.
knn_graph <- function(x, queries, k, self, n_threads = 1L, verbose = FALSE) {
  cpp_knn_graph(x, queries, k, self, n_threads, verbose)
}

# Normalising constant of the radial kernel in d dimensions.
radial_constant <- function(kernel, d) cpp_radial_constant(engine_kernel(kernel), d)

# The exponents of the local polynomial basis in d variables up to `degree` (one row per term).
basis_powers <- function(d, degree) cpp_basis_powers(d, degree)

# Linear binning of the points x (a vector, or n x d) with weights (numeric(0): 1) on the grid
# from lo to hi with `gridsize` nodes per variable.
linear_bin <- function(x, weights, lo, hi, gridsize) cpp_linear_bin(x, weights, lo, hi, gridsize)

# Hermite-weighted pair sums of the plug-in selectors (bandwidth.hpp).
hermite_pair_sums <- function(z, w, g, orders, n_threads = 1L) {
  cpp_hermite_pair_sums(z, w, g, orders, n_threads)
}

# The leave-one-out loss of a learned metric A and its gradient (metric.hpp), for a registry
# kernel.
metric_loss <- function(x, y, prior, A, degree, categorical, cutoff, min_gap, n_threads,
                        verbose, diagonal = FALSE, lambda_gradient = FALSE, kernel = "gaussian") {
  cpp_metric_loss(x, y, prior, A, degree, categorical, cutoff, min_gap, n_threads, verbose,
                  diagonal, lambda_gradient, as.character(kernel))
}

# Greedy grouping of points (rows, in visiting order): a point joins the first group whose
# representative lies within `tol`. 1-based groups.
group_within <- function(points, tol) cpp_merge_modes(points, tol)

# Local principal axes from the local means of the coordinates and their products (local_pca()).
local_axes <- function(means, d) cpp_local_axes(means, d)

# Jacobi sweeps of label propagation over the kernel graph of the free rows (label_propagation()).
propagate_labels <- function(prob, free, from, to, weight, wsum, max_iter, tol) {
  cpp_propagate_labels(prob, free, from, to, weight, wsum, max_iter, tol)
}

# Column minima (row 1) and maxima (row 2) of a numeric matrix.
column_ranges <- function(x) cpp_column_ranges(x)$range

#' @export
print.local_control <- function(x, ...) {
  check_dots(...)
  shown <- vapply(unclass(x), function(v) {
    if (is.null(v)) "default" else paste(format(v), collapse = ", ")
  }, "")
  print_fields("<local_control> engine and selector settings", as.list(shown))
  invisible(x)
}
