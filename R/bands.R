# Confidence bands of local polynomial fits (Gaussian errors): pointwise standard errors with a
# global or a local residual variance, and simultaneous bands by the tube formula of Sun and
# Loader (1994). The fit is linear in y, m(x) = l(x)'y, so everything follows from the
# equivalent-kernel weights l(x), and those come from the engine alone.

# One of `choices`; the whole default vector means its first entry (as match.arg).
match_choice <- function(x, choices, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  # `x` is never reassigned, so `arg` stays lazy: naming it costs ~25 us, paid only on error
  check_choice(if (identical(x, choices)) choices[1L] else x, choices, arg = arg, call = call)
}

check_level <- function(level, call = rlang::caller_env()) {
  if (!is.numeric(level) || length(level) != 1L || !is.finite(level) || level <= 0 ||
      level >= 1) {
    abort("{.arg level} must be a number between 0 and 1.", call = call)
  }
  level
}

# ---- Residual variance ---------------------------------------------------------------------

# Residual variance at the points `at` (rows, original units) from the local mean of the
# squared residuals, each divided by its expectation under a locally constant variance:
# r_i = y_i - l(x_i)'y has E[p_i r_i^2] = sigma^2(x_i) (1 - 2 L_ii + p_i v_i), with L_ii the
# leverage, p_i the prior weight and v_i = sum_j L_ij^2 / p_j the engine's variance factor at
# x_i. These factors add up to n - 2 tr L + tr L'L, the residual degrees of freedom for which
# RSS / df is unbiased (Cleveland and Devlin 1988), so the correction is that of the global
# estimate point by point. The local mean uses the fit's kernel, bandwidth and prior weights.
# Its degrees of freedom: each corrected p_i r_i^2 is about sigma^2 chi^2_1, so the local mean
# is about sigma^2 chi^2_df / df with df the effective number of points (sum w)^2 / sum w^2,
# w_i = k_i p_i (Satterthwaite; residual correlations ignored). The degree-0 engine's variance
# factor is sum k^2 p / (sum k p)^2, exactly 1 / df without prior weights (an approximation
# with them).
local_variance <- function(object, at) {
  spec <- object$spec
  data_fit <- fit_at_data(spec, want_var = TRUE)
  p <- object$weights %||% rep(1, length(object$y))
  expected <- 1 - 2 * object$leverage + p * data_fit$fit$var[, 1L]
  usable <- is.finite(object$residuals) & is.finite(expected) & expected > 1e-8 & p > 0
  spec$values <- matrix(ifelse(usable, p * object$residuals^2 / expected, 0))
  spec$prior <- p * usable
  spec$degree <- 0L
  res <- engine_run(spec, at, want_var = TRUE)
  list(sigma2 = res$coef[, 1L, 1L], df = 1 / res$var[, 1L])
}

# Residual scale at the query points and its degrees of freedom: the fit's sigma
# (RSS / (n - tr L)) with n - tr L, or the local estimate with its local df.
residual_scale <- function(object, x, variance) {
  if (variance == "constant") return(list(scale = object$sigma, df = length(object$y) - object$df))
  local <- local_variance(object, x)
  list(scale = sqrt(local$sigma2), df = local$df)
}

# ---- Equivalent kernels and the tube formula -------------------------------------------------

# Equivalent-kernel weights of coefficient `col` at the rows of `queries` (m x n, row q holds
# l(q) with estimate = l(q)'y): the engine run with columns of the identity as the values, a
# block of columns at a time so that memory stays bounded.
equivalent_kernels <- function(spec, queries, col = 1L, cells = 4e6) {
  n <- NROW(spec$x)
  m <- nrow(queries)
  out <- matrix(NA_real_, m, n)
  block <- max(1L, floor(cells / max(n, m)))
  for (start in seq(1L, n, by = block)) {
    j <- start:min(n, start + block - 1L)
    unit <- matrix(0, n, length(j))
    unit[cbind(j, seq_along(j))] <- 1
    spec$values <- unit
    out[, j] <- matrix(engine_run(spec, queries)$coef[, col, ], nrow = m)
  }
  out
}

# The linear smoother whose equivalent kernels the tube formula needs: the fit's own data when
# n <= max_points, else the data linearly binned (masses as prior weights) on `bins` nodes per
# variable. Binning replaces each x_i by the nodes of its cell; the inner products
# <l(x), l(x')> that the tube formula uses change by O(bin width / bandwidth), small for the
# default grids (1000 nodes in 1-D, 40 x 40 in 2-D). `whiten` turns weights into the
# directions of the error process: l_i sigma(x_i) / sqrt(p_i), Var(y_i) = sigma^2(x_i) / p_i.
tube_smoother <- function(object, variance, max_points = 1000L,
                          bins = if (ncol(object$x) == 1L) 1000L else 40L) {
  x <- object$x
  spec <- object$spec
  p <- object$weights %||% rep(1, nrow(x))
  if (nrow(x) > max_points) {
    d <- ncol(x)
    size <- rep(as.integer(bins), d)
    mass <- linear_bin(x, object$weights %||% numeric(0), spec$range[1L, ],
                       spec$range[2L, ], size)
    nodes <- as.matrix(expand.grid(lapply(seq_len(d), function(j) {
      seq(spec$range[1L, j], spec$range[2L, j], length.out = size[j])
    })))
    keep <- mass > 0
    x <- nodes[keep, , drop = FALSE]
    colnames(x) <- colnames(object$x)
    p <- mass[keep]
    spec <- engine_spec(x, object$kernel, spec$scale, prior = p, degree = object$degree,
                        control = object$control, n_threads = object$n_threads)
  }
  # the tree strategy is exact (every point within the kernel's cut-off), unlike binned fits
  spec$method <- choose_method(spec, "tree", nrow(x))
  scale <- if (variance == "local") sqrt(pmax(local_variance(object, x)$sigma2, 0)) else 1
  list(spec = spec, whiten = ifelse(p > 0, scale / sqrt(p), 0))
}

# Unit vectors T(x) = v(x) / ||v(x)||, v = whitened equivalent kernel, at the rows of `grid`.
tube_directions <- function(smoother, grid, col, call = rlang::caller_env()) {
  v <- equivalent_kernels(smoother$spec, grid, col)
  v <- v * rep(smoother$whiten, each = nrow(v))
  len <- sqrt(rowSums(v^2))
  if (any(!is.finite(len)) || any(len == 0)) {
    abort(c("The simultaneous band needs a local fit at every point of its domain.",
            i = "Use a wider bandwidth or a kernel with unbounded support."), call = call)
  }
  v / len
}

# Geodesic lengths on the unit sphere between consecutive rows of a matrix of unit vectors.
arc_lengths <- function(t) {
  if (nrow(t) < 2L) return(0)
  chord <- sqrt(rowSums((t[-1L, , drop = FALSE] - t[-nrow(t), , drop = FALSE])^2))
  2 * asin(pmin(1, chord / 2))
}

# The tube's geometric constants over the box [lower, upper] (one bound per predictor): kappa0,
# the length (1-D) or area (2-D) of the curve or surface T(x) on the unit sphere, and in 2-D
# zeta0, the length of the image of the box's boundary. T is evaluated on a regular grid of
# `grid_size` points per predictor (made odd): in 1-D kappa0 is the length of the geodesic
# polygon through the grid images (a finite-difference approximation of the integral of
# ||dT/dx||); in 2-D the area of the triangulated grid images (two triangles a cell), and zeta0
# the polygon along the box's edges. These errors are O(step^2), so the values on the grid and
# on its every-other-point subgrid are combined by Richardson extrapolation, f + (f - f2) / 3.
# The defaults give at least eight grid points (1-D) or four (2-D) per bandwidth (up to 1001
# and 41 x 41): in tests the extrapolated values change by less than 1e-4 on finer grids.
tube_constants <- function(object, lower, upper, col = 1L, variance = "constant",
                           grid_size = NULL, call = rlang::caller_env()) {
  d <- length(lower)
  h <- object$bandwidth
  if (is.null(grid_size)) {
    per_bandwidth <- if (d == 1L) 8 else 4
    limits <- if (d == 1L) c(101, 1001) else c(21, 41)
    grid_size <- pmin(limits[2L], pmax(limits[1L], ceiling(per_bandwidth * (upper - lower) / h)))
  }
  grid_size <- rep_len(as.integer(grid_size), d)
  grid_size <- grid_size + (grid_size %% 2L == 0L)
  axes <- lapply(seq_len(d), function(j) seq(lower[j], upper[j], length.out = grid_size[j]))
  grid <- as.matrix(expand.grid(axes))
  colnames(grid) <- colnames(object$x)
  t <- tube_directions(tube_smoother(object, variance), grid, col, call)
  index <- array(seq_len(nrow(grid)), grid_size)
  fine <- tube_measures(t, index)
  coarse <- tube_measures(t, if (d == 1L) index[c(TRUE, FALSE)] else
    index[c(TRUE, FALSE), c(TRUE, FALSE), drop = FALSE])
  if (min(grid_size) < 5L) return(fine)
  list(kappa0 = fine$kappa0 + (fine$kappa0 - coarse$kappa0) / 3,
       zeta0 = fine$zeta0 + (fine$zeta0 - coarse$zeta0) / 3)
}

# kappa0 and zeta0 of the unit vectors `t` (rows) laid out on the grid `index` (a vector of row
# numbers in 1-D, a matrix in 2-D).
tube_measures <- function(t, index) {
  if (is.null(dim(index)) || length(dim(index)) == 1L) {
    return(list(kappa0 = sum(arc_lengths(t[as.vector(index), , drop = FALSE])), zeta0 = 0))
  }
  g1 <- nrow(index)
  g2 <- ncol(index)
  edges <- list(index[, 1L], index[g1, ], rev(index[, g2]), rev(index[1L, ]))
  zeta0 <- sum(vapply(edges, function(e) sum(arc_lengths(t[e, , drop = FALSE])), 1))
  list(kappa0 = surface_area(t, index), zeta0 = zeta0)
}

# Area of the surface through the rows of `t` laid out on the grid `index`: two triangles a cell.
surface_area <- function(t, index) {
  g1 <- nrow(index)
  g2 <- ncol(index)
  if (g1 < 2L || g2 < 2L) return(0)
  a <- index[-g1, -g2]
  b <- index[-1L, -g2]
  c <- index[-1L, -1L]
  e <- index[-g1, -1L]
  triangle <- function(p, q, r) {
    u <- t[q, , drop = FALSE] - t[p, , drop = FALSE]
    w <- t[r, , drop = FALSE] - t[p, , drop = FALSE]
    0.5 * sqrt(pmax(0, rowSums(u^2) * rowSums(w^2) - rowSums(u * w)^2))
  }
  sum(triangle(a, b, c)) + sum(triangle(a, c, e))
}

# Two-sided tail probability P(sup_x |T(x)'e| / s > c) by the tube formula (Sun and Loader
# 1994; the Euler-characteristic form of Adler and Taylor), e ~ N(0, I) and s^2 ~ chi^2_df / df
# independent (df = Inf: s = 1). One-sided, the terms are those of a d-dimensional manifold with
# boundary and Euler characteristic 1:
#   1-D: P(t_df > c) + kappa0 / (2 pi) E[exp(-c^2 s^2 / 2)],
#   2-D: P(t_df > c) + zeta0 / 2 / (2 pi) E[exp(-c^2 s^2 / 2)]
#        + kappa0 / (2 pi)^(3/2) E[c s exp(-c^2 s^2 / 2)],
# with E[exp(-c^2 s^2 / 2)] = (1 + c^2 / df)^(-df / 2) and E[s exp(-c^2 s^2 / 2)] =
# sqrt(2 / df) Gamma((df + 1) / 2) / Gamma(df / 2) (1 + c^2 / df)^(-(df + 1) / 2). Two-sided:
# twice the one-sided probability.
tube_tail <- function(c, kappa0, zeta0, d, df = Inf) {
  if (is.finite(df)) {
    base <- stats::pt(c, df, lower.tail = FALSE)
    g1 <- (1 + c^2 / df)^(-df / 2)
    g2 <- c * exp(0.5 * log(2 / df) + lgamma((df + 1) / 2) - lgamma(df / 2)) *
      (1 + c^2 / df)^(-(df + 1) / 2)
  } else {
    base <- stats::pnorm(c, lower.tail = FALSE)
    g1 <- exp(-c^2 / 2)
    g2 <- c * g1
  }
  one_sided <- base + kappa0 / (2 * pi) * g1
  if (d == 2L) one_sided <- base + zeta0 / (4 * pi) * g1 + kappa0 / (2 * pi)^1.5 * g2
  2 * one_sided
}

# The critical value c of a band fit +- c se with coverage `level`: the pointwise quantile, or
# for simultaneous bands the root of tube_tail(c) = 1 - level (uniroot, from the pointwise
# quantile, where the tail already exceeds 1 - level, upwards). With local degrees of freedom
# (a vector) the pointwise quantiles are one per point and the simultaneous band takes the
# smallest df (conservative).
band_critical <- function(level, df, constants = NULL, d = 1L) {
  alpha <- 1 - level
  if (!is.null(constants)) df <- min(df)
  pointwise <- ifelse(is.finite(df), stats::qt(1 - alpha / 2, df), stats::qnorm(1 - alpha / 2))
  if (is.null(constants) || constants$kappa0 + constants$zeta0 == 0) return(pointwise)
  excess <- function(c) tube_tail(c, constants$kappa0, constants$zeta0, d, df) - alpha
  stats::uniroot(excess, c(pointwise, pointwise + 10), extendInt = "downX",
                 tol = 1e-10)$root
}

# Checks that the simultaneous band applies to a fit: one or two numeric predictors, a fixed
# bandwidth, and a kernel without jumps (T(x) must be continuous for its length to exist).
check_simultaneous <- function(object, deriv, call = rlang::caller_env()) {
  d <- ncol(object$x)
  if (d > 2L) {
    abort(c("{.code simultaneous = TRUE} handles one or two predictors; the model has {d}.",
            i = "Use pointwise bands ({.code simultaneous = FALSE})."), call = call)
  }
  if (!is.null(object$nn)) {
    abort("{.code simultaneous = TRUE} needs a fixed bandwidth, not {.fn nn}.", call = call)
  }
  row <- kernel_row(object$kernel)
  if (row$compact && cpp_kernel_value(object$kernel, 0.999999 * row$cutoff) > 1e-4) {
    abort(c("{.code simultaneous = TRUE} needs a kernel that is continuous at its edge.",
            x = "The {.val {object$kernel}} kernel jumps to zero, so the band is undefined."),
          call = call)
  }
  if (d == 2L && deriv > 0L) {
    abort("{.code simultaneous = TRUE} with {.arg deriv} > 0 handles one predictor only.",
          call = call)
  }
}

# Confidence band at the rows of x: a matrix with columns fit, lwr, upr and the critical value.
# The simultaneous band covers the box spanned by x (the data's range for the fitted values).
confidence_band <- function(object, x, fit, se, df, col, level, simultaneous, variance, deriv,
                            call = rlang::caller_env()) {
  constants <- NULL
  if (simultaneous) {
    check_simultaneous(object, deriv, call)
    box <- column_ranges(x)
    constants <- tube_constants(object, box[1L, ], box[2L, ], col, variance, call = call)
  }
  crit <- band_critical(level, df, constants, ncol(object$x))
  band <- cbind(fit = fit, lwr = fit - crit * se, upr = fit + crit * se)
  list(band = band, critical = crit, constants = constants)
}

# A band (columns lwr and upr) as a translucent polygon over `grid`.
draw_band <- function(grid, band, col, alpha) {
  edge <- c(band[, "upr"], rev(band[, "lwr"]))
  ok <- is.finite(edge)
  graphics::polygon(c(grid, rev(grid))[ok], edge[ok], border = NA,
                    col = grDevices::adjustcolor(col, alpha))
}
