# The R side of the local-moment engine: scaling, strategy choice, chunking over a future plan,
# and turning scaled-basis coefficients back into the original units.

#' Control settings of the local-moment engine
#'
#' @param gridsize Grid nodes per dimension of the binned strategy (default
#'   401 in 1-D, as `KernSmooth::locpoly()`, or more to have four nodes per
#'   bandwidth, up to 20001; 151 in 2-D, a fine `KernSmooth::bkde2D()` grid).
#' @param cutoff Truncation radius, in bandwidths, for kernels with unbounded
#'   support (default: the registry's, 8 for the Gaussian; see [kernels()]).
#'   `KernSmooth` truncates the Gaussian at 4.
#' @param candidates Candidate bandwidths for the "cv", "gcv" and "aicc"
#'   selectors: a numeric vector (one predictor) or a matrix with one column
#'   per predictor and one row per candidate. Default: `n_candidates`
#'   multiples, log-spaced from 0.05 to 3, of the rule-of-thumb bandwidths.
#' @param n_candidates Number of default candidates.
#' @param refine After the grid search, refine the best candidate by a
#'   golden-section search between its neighbours (on the common multiplier).
#' @param chunk_size Rows of query points per chunk in `predict()` and in the
#'   selectors; chunks run on the user's `future` plan when one is set.
#' @return A list of class `local_control`.
#' @family regression
#' @export
#' @examples
#' local_control(gridsize = 801)
local_control <- function(gridsize = NULL, cutoff = NULL, candidates = NULL, n_candidates = 40,
                          refine = TRUE, chunk_size = getOption("localmean.chunk_size", 1e6)) {
  if (!is.null(gridsize)) gridsize <- vapply(gridsize, check_count, 1L, arg = "gridsize", min = 3)
  if (!is.null(cutoff) && (!is.numeric(cutoff) || length(cutoff) != 1L ||
                           !is.finite(cutoff) || cutoff <= 0)) {
    abort("{.arg cutoff} must be a positive number.")
  }
  if (!is.null(candidates) && (!is.numeric(candidates) || any(!is.finite(candidates)) ||
                               any(candidates <= 0) || length(candidates) == 0L)) {
    abort("{.arg candidates} must hold positive finite bandwidths.")
  }
  structure(list(gridsize = gridsize, cutoff = cutoff, candidates = candidates,
                 n_candidates = check_count(n_candidates, min = 2), refine = check_flag(refine),
                 chunk_size = check_count(chunk_size)),
            class = "local_control")
}

check_control <- function(control, call = rlang::caller_env()) {
  if (is.null(control)) return(local_control())
  if (!inherits(control, "local_control")) {
    abort("{.arg control} must be made by {.fn local_control}.", call = call)
  }
  control
}

# Exponents of the basis monomials, one row per term, in the engine's order.
basis_powers <- function(d, degree) {
  rows <- list()
  add <- function(p, from, left) {
    if (left == 0) {
      rows[[length(rows) + 1L]] <<- p
      return(invisible())
    }
    for (j in from:d) {
      p[j] <- p[j] + 1L
      add(p, j, left - 1L)
      p[j] <- p[j] - 1L
    }
  }
  for (total in 0:degree) add(integer(d), 1L, total)
  do.call(rbind, rows)
}

# The strategy for m queries on data x: "exact" sweeps every point, "tree" prunes with the
# kd-tree, "binned" convolves on a grid (d <= 2, fixed bandwidths). "auto" bins when the grid
# resolves the bandwidth (two nodes per bandwidth), n >= 10000, and the convolution costs less than
# the kd-tree's visits (estimated from the share of the data range the kernel window covers).
choose_method <- function(method, x, m, kernel, bandwidth, nn, gridsize, cutoff,
                          call = rlang::caller_env()) {
  method <- check_choice(method, c("auto", "exact", "tree", "binned"), call = call)
  d <- ncol(x)
  binnable <- d <= 2L && is.null(nn)
  if (method == "binned" && !binnable) {
    abort("{.code method = \"binned\"} needs at most 2 predictors and a fixed bandwidth.",
          call = call)
  }
  if (method != "auto") return(if (method == "tree" && kernel == "cauchy") "exact" else method)
  if (kernel == "cauchy") return("exact")
  if (!binnable || nrow(x) < 10000L) return("tree")
  span <- diff(column_ranges(x))[1L, ]
  step <- span / (gridsize - 1)
  registry <- cpp_kernel_table()
  reach <- if (cutoff > 0) cutoff else registry$cutoff[registry$kernel == kernel]
  window <- prod(pmin(2 * ceiling(reach * bandwidth / step) + 1, 2 * gridsize - 1))
  covered <- prod(pmin(1, 2 * reach * bandwidth / span))
  cheaper <- prod(gridsize) * window < as.double(nrow(x)) * m * covered
  if (all(bandwidth >= 2 * step) && cheaper) "binned" else "tree"
}

# Grid nodes per dimension: 151 x 151 in 2-D; 401 in 1-D, refined to at least four nodes per
# bandwidth (at most 20001), so that small bandwidths bin accurately.
default_gridsize <- function(d, bandwidth, span) {
  if (d == 2L) return(c(151L, 151L))
  if (is.null(bandwidth)) return(401L)
  as.integer(min(20001, max(401, ceiling(4 * span / bandwidth) + 1)))
}

# A fitting specification: everything the engine needs besides the points.
new_spec <- function(x, kernel, degree, bandwidth, nn, method, control) {
  d <- ncol(x)
  span <- diff(column_ranges(x))[1L, ]
  gridsize <- rep_len(control$gridsize %||% default_gridsize(d, bandwidth, span), d)
  cutoff <- control$cutoff %||% 0
  list(kernel = kernel, degree = degree, bandwidth = bandwidth, nn = nn,
       method = choose_method(method, x, nrow(x), kernel, bandwidth, nn, gridsize, cutoff),
       requested_method = method, cutoff = cutoff, gridsize = gridsize,
       fixed_grid = !is.null(control$gridsize), span = span,
       chunk_size = control$chunk_size)
}

`%||%` <- function(a, b) if (is.null(a)) b else a

# Per-variable scales: the bandwidths, or for nn(k) the standardising scales.
spec_scale <- function(spec) if (is.null(spec$nn)) spec$bandwidth else spec$nn$scale

# Fits at `queries` (m x d) from data x (n x d) with values (n x nv) and prior weights.
# Returns coef (m x nb x nv, original units), var (m x nb or NULL), s00, wsum, status, radius.
engine_fit <- function(x, values, prior, queries, spec, want_var = FALSE, n_threads = 1L,
                       verbose = FALSE) {
  # The binned grid spans the data and every query, so that all chunks share one grid.
  grid_range <- if (spec$method == "binned") {
    rx <- column_ranges(x)
    rq <- column_ranges(queries)
    rbind(pmin(rx[1L, ], rq[1L, ]), pmax(rx[2L, ], rq[2L, ]))
  }
  m <- nrow(queries)
  run <- function(idx, threads) {
    q <- if (is.null(idx)) queries else queries[idx, , drop = FALSE]
    engine_chunk(x, values, prior, q, spec, want_var, grid_range, threads, verbose)
  }
  if (m <= spec$chunk_size) return(run(NULL, n_threads))
  starts <- seq(1, m, by = spec$chunk_size)
  chunks <- lapply(starts, function(s) s:min(m, s + spec$chunk_size - 1))
  parts <- if (future_plan_active()) {
    future.apply::future_lapply(chunks, run, threads = 1L, future.seed = NULL)
  } else {
    lapply(chunks, run, threads = n_threads)
  }
  bind_fits(parts)
}

future_plan_active <- function() {
  requireNamespace("future.apply", quietly = TRUE) &&
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

engine_chunk <- function(x, values, prior, queries, spec, want_var, grid_range, n_threads,
                         verbose) {
  scale <- spec_scale(spec)
  radius <- numeric(0)
  if (!is.null(spec$nn)) {
    # The k-th neighbour lies exactly on the boundary: widen by rounding error so it counts.
    # A zero distance (k points on the query) becomes the smallest scale: only they count.
    radius <- cpp_knn_radius(x, scale, queries, spec$nn$k, n_threads, verbose) * (1 + 1e-12)
    radius <- pmax(radius, .Machine$double.xmin)
  }
  grid_range <- grid_range %||% matrix(numeric(0), 2L)
  res <- cpp_local_fit(x, scale, values, prior %||% numeric(0), numeric(0), queries, radius,
                       spec$kernel,
                       spec$degree, want_var, spec$method, spec$cutoff, spec$gridsize,
                       grid_range[1L, ], grid_range[2L, ], n_threads, verbose)
  # Queries without a usable window are NA (the engine leaves NaN there).
  undefined <- res$status != 0L
  if (any(undefined)) {
    res$coef[undefined, , ] <- NA_real_
    if (want_var) res$var[undefined, ] <- NA_real_
    res$s00[undefined] <- NA_real_
  }
  powers <- basis_powers(ncol(x), spec$degree)
  if (spec$degree > 0L) {
    # Coefficients of the scaled basis u = (x - q) / (scale * radius) back to original units.
    m <- nrow(queries)
    unit <- if (length(radius)) radius else rep(1, m)
    factor <- vapply(seq_len(nrow(powers)), function(b) {
      f <- rep(1, m)
      for (j in which(powers[b, ] > 0L)) f <- f * (scale[j] * unit)^powers[b, j]
      f
    }, numeric(m))
    factor <- matrix(factor, nrow = m)
    res$coef <- res$coef / as.vector(factor)
    if (want_var) res$var <- res$var / factor^2
  }
  if (!want_var) res$var <- NULL
  res$radius <- if (length(radius)) radius else NULL
  res$powers <- powers
  res
}

# Column minima (row 1) and maxima (row 2) of a numeric matrix.
column_ranges <- function(x) cpp_column_ranges(x)$range
