# simulate(), augment() and autoplot() of conditional density fits kde(y ~ x).
#
# f(y | x) is a mixture: the kernel in y centred on each response y_i, with weights proportional
# to w_i K_x(x, x_i) (the engine's windows at x). So an exact draw picks a data row with those
# weights and adds a draw of the y-kernel scaled by h_y. At degree 1 the weights are the local
# linear fit's, of either sign: draws of the estimate's positive part by rejection.

#' Simulate, augment and plot conditional densities
#'
#' `simulate()` draws responses from the estimated conditional density
#' \eqn{\hat f(y \mid x)}{fhat(y | x)} of a fit made by `kde(y ~ x)` (see [kde-conditional]) at
#' the predictors of the data or of `newdata`: the estimate is a mixture of the
#' kernel in \eqn{y}{y} centred on the responses, weighted by the predictors'
#' kernel weights, so each draw picks a data row with probability
#' \eqn{w_i K_x(x, x_i) / \sum_j w_j K_x(x, x_j)}{w_i K_x(x, x_i) / sum_j w_j K_x(x, x_j)} and adds a draw of the kernel scaled
#' by \eqn{h_y}{h_y}. These are exact draws. A local linear fit (`degree = 1`) has
#' weights of either sign, and its estimate may be negative in the tails: the
#' draws are then exact draws of its positive part, normalised (by rejection from
#' the mixture of the positive weights; for a categorical response, from its
#' probabilities with those below zero set to zero). With `seed`, the draws use
#' `set.seed(seed)` and the caller's random number stream is restored
#' afterwards, as [stats::simulate()] methods do.
#'
#' `augment()` adds to the data (or to `newdata`) the conditional density
#' `.density` \eqn{= \hat f(y \mid x)}{= fhat(y | x)} and distribution function `.cdf`
#' \eqn{= \hat F(y \mid x)}{= Fhat(y | x)} at each row's own response (the probability
#' integral transform: roughly uniform when the estimate is calibrated), and
#' the conditional median `.median`.
#'
#' `autoplot()` (with ggplot2) draws what `plot()` draws: for one numeric
#' predictor the conditional density as a raster with the data and the
#' conditional quantile curves of `tau`; for one categorical predictor the
#' conditional density of each level.
#'
#' @param object,x A `local_cdens` object made by `kde(y ~ x)`.
#' @param nsim Number of draws per row.
#' @param seed As in [stats::simulate()].
#' @param newdata A data frame with the predictors (for `augment()` also the
#'   response); by default the data of the fit.
#' @param data For `augment()`: a data frame with one row per observation of
#'   the fit, to which the columns are added; by default the predictors and
#'   response the fit kept.
#' @param tau For `autoplot()`: probabilities of the quantile curves.
#' @param n_grid For `autoplot()`: grid points per axis.
#' @inheritParams kde
#' @param ... Must be empty.
#' @return `simulate()`: a data frame with one row per row of `newdata` (or
#'   of the data) and columns `sim_1`, ..., `sim_<nsim>`, `NA` in rows with a
#'   missing predictor, with attribute `seed`. `augment()`: a tibble (a data
#'   frame without tibble). `autoplot()`: a ggplot object.
#' @name cdens-simulate
#' @family density
#' @examples
#' fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.3, 4))
#' draws <- simulate(fit, nsim = 500, seed = 1, newdata = data.frame(eruptions = c(2, 4.5)))
#' rowMeans(draws)
#' head(augment(fit))
#' @examplesIf requireNamespace("ggplot2", quietly = TRUE)
#' ggplot2::autoplot(fit)
NULL

#' @rdname cdens-simulate
#' @export
simulate.local_cdens <- function(object, nsim = 1, seed = NULL, newdata = NULL,
                                 n_threads = NULL, ...) {
  check_dots(...)
  nsim <- check_count(nsim)
  n_threads <- n_threads(n_threads)
  points <- cdens_new_points(object, newdata, need_response = FALSE)
  m <- nrow(points$x)
  check_size(as.double(m) * nsim, size_limits$simulated_values, "draws", "nsim")
  # the weights first: they use no random numbers, and the draws then depend on the seed alone
  windows <- if (m) cdens_point_weights(object, points, n_threads)
  seed_state <- use_seed(seed)
  on.exit(seed_state$restore(), add = TRUE)
  linear <- cdens_degree(object) == 1L
  draws <- matrix(NA_real_, m, nsim)
  for (j in seq_len(m)) {
    rows <- windows$rows[[j]]
    w <- windows$weights[[j]]
    if (!any(w > 0)) next
    draws[j, ] <- if (linear) {
      draw_signed_mixture(object, object$y[rows], w, nsim)
    } else {
      object$y[rows[sample.int(length(rows), nsim, replace = TRUE, prob = w)]]
    }
  }
  out <- if (cdens_discrete(object)) {
    lapply(seq_len(nsim), function(k) {
      codes <- expand_rows(draws[, k], points$ok)
      if (linear) level_factor(object, codes) else draw_levels(object, codes)
    })
  } else {
    if (!linear) {
      draws <- draws + object$bandwidth$y * matrix(kernel_draws(m * nsim, object$kernel, 1L), m)
    }
    as.data.frame(expand_rows(draws, points$ok))
  }
  out <- stats::setNames(as.data.frame(out), paste0("sim_", seq_len(nsim)))
  structure(out, seed = seed_state$seed)
}

# Draws of a categorical response given the levels (codes) of the picked data rows: each from
# the response kernel's column of its row's level, as a factor of the response's levels.
draw_levels <- function(object, codes) {
  table <- cdens_y_table(object, object$bandwidth$y)
  drawn <- rep(NA_integer_, length(codes))
  for (l in unique(codes[!is.na(codes)])) {
    at <- which(codes == l)
    drawn[at] <- sample.int(nrow(table), length(at), replace = TRUE, prob = table[, l])
  }
  level_factor(object, drawn)
}

# Level codes of a categorical response as a factor of its levels.
level_factor <- function(object, codes) {
  factor(object$y_levels[codes], levels = object$y_levels, ordered = object$y_kind == "ordered")
}

# nsim draws from the positive part, normalised, of a local linear estimate at one point:
# f(y) = sum_b l_b k_hy(y - y_b) with weights l of either sign summing to one (a categorical
# response: the level probabilities sum_b l_b L(z, y_b), those below zero set to zero). The
# mixture of the positive weights alone, g(y) = sum_(l_b > 0) l_b k_hy(y - y_b), bounds f from
# above, so a draw of g (a response picked with probability l_b, plus a kernel draw) is kept with
# probability max(f(y), 0) / g(y): exact draws of max(f, 0) / int max(f, 0), by rejection.
draw_signed_mixture <- function(object, y, l, nsim, max_rounds = 1000L) {
  if (cdens_discrete(object)) {
    prob <- pmax(drop(cdens_y_table(object, object$bandwidth$y)[, y, drop = FALSE] %*% l), 0)
    return(sample.int(length(prob), nsim, replace = TRUE, prob = prob))
  }
  hy <- object$bandwidth$y
  positive <- which(l > 0)
  out <- numeric(0)
  for (round in seq_len(max_rounds)) {
    need <- nsim - length(out)
    if (need == 0L) break
    picked <- positive[sample.int(length(positive), need, replace = TRUE, prob = l[positive])]
    draw <- y[picked] + hy * as.vector(kernel_draws(need, object$kernel, 1L))
    k <- matrix(kernel_value(outer(draw, y, "-") / hy, object$kernel), need)
    f <- drop(k %*% l)
    g <- drop(k[, positive, drop = FALSE] %*% l[positive])
    out <- c(out, draw[stats::runif(need) * g < f])
  }
  c(out, rep(NA_real_, nsim - length(out)))
}

# The weights of the estimate at the query points: per query the data rows of its window
# (`rows`) and their weights l_i (`weights`), the estimate being sum_i l_i k_hy(y - y_i) /
# sum_i l_i. Local constant: the predictors' kernel weights (the engine's windows) times the
# prior weights. Local linear: l_i = w_i K_i e_1' S^-1 (1, (x_i - x) / h), the weights of the
# intercept of the local linear fit (summing to one, some possibly negative), from the windows
# and the engine's S^-1 of the same windows. No rows where no estimate exists.
cdens_point_weights <- function(object, points, n_threads) {
  bw <- object$bandwidth
  spec <- engine_spec(object$x, object$kernel, bw$h, values = matrix(1, object$n, 1L),
                      prior = object$weights, degree = cdens_degree(object),
                      method = object$method, control = object$control,
                      categorical = object$categorical, lambda = bw$lambda,
                      n_threads = n_threads)
  windows <- engine_windows(spec, points$x, points$codes)
  prior <- object$weights %||% rep(1, object$n)
  weights <- Map(function(rows, k) k * prior[rows], windows$rows, windows$weights)
  if (cdens_degree(object) == 1L) {
    # (the windows' sweep: the binned strategy has none, its tree's are given)
    res <- engine_run(spec, points$x, method = if (spec$method == "exact") "exact" else "tree",
                      query_codes = points$codes, want_inverse = TRUE)
    for (j in seq_along(weights)) {
      a <- res$inverse[j, 1L, ]  # S^-1's first row: the constant, then each predictor
      u <- sweep(object$x[windows$rows[[j]], , drop = FALSE], 2L, points$x[j, ]) /
        rep(bw$h, each = length(windows$rows[[j]]))
      weights[[j]] <- weights[[j]] * drop(a[1L] + u %*% a[-1L])
    }
  }
  empty <- !vapply(weights, function(w) length(w) > 0L && all(is.finite(w)) && sum(w) > 0, TRUE)
  windows$rows[empty] <- list(integer(0))
  weights[empty] <- list(numeric(0))
  list(rows = windows$rows, weights = weights)
}

#' @rdname cdens-simulate
#' @export
augment.local_cdens <- function(x, data = NULL, newdata = NULL, ...) {
  check_dots(...)
  if (is.null(newdata)) {
    base <- augment_base(data, x$n, function() {
      frame <- cdens_predictor_frame(x, x$x, x$categorical$codes)
      frame[[x$response]] <- if (cdens_discrete(x)) {
        factor(x$y_levels[x$y], levels = x$y_levels, ordered = x$y_kind == "ordered")
      } else x$y
      frame
    })
  } else {
    base <- as.data.frame(newdata)
  }
  base$.density <- predict(x, newdata, verbose = FALSE)
  if (!cdens_discrete(x)) {  # a categorical response has its probabilities alone
    base$.cdf <- predict(x, newdata, type = "distribution", verbose = FALSE)
    base$.median <- as.vector(predict(x, newdata, type = "quantile", tau = 0.5, verbose = FALSE))
  }
  as_tidy_frame(base)
}

#' @rdname cdens-simulate
#' @exportS3Method ggplot2::autoplot
autoplot.local_cdens <- function(object, tau = c(0.1, 0.5, 0.9), n_grid = 101, ...) {
  check_dots(...)
  check_ggplot2()
  tau <- check_tau(tau)
  n_grid <- check_count(n_grid, min = 3)
  if (cdens_discrete(object)) {
    abort("{.fn autoplot} draws conditional densities of a numeric response; use {.fn plot} for
           the probabilities of a categorical one.")
  }
  kind <- object$predictors$kind
  if (length(kind) != 1L) {
    abort("{.fn autoplot} of a conditional density needs exactly one predictor; use
           {.fn predict}.")
  }
  var <- object$predictors$names
  hy <- object$bandwidth$y
  ys <- seq(min(object$y) - 2 * hy, max(object$y) + 2 * hy, length.out = n_grid)
  if (kind == "numeric") {
    xs <- seq(min(object$x), max(object$x), length.out = n_grid)
    nd <- stats::setNames(data.frame(xs), colnames(object$x))
    dens <- predict(object, nd, y = ys, verbose = FALSE)
    surface <- data.frame(x = rep(xs, n_grid), y = rep(ys, each = n_grid),
                          density = as.vector(dens))
    q <- predict(object, nd, type = "quantile", tau = tau, verbose = FALSE)
    curves <- data.frame(x = rep(xs, length(tau)), y = as.vector(q),
                         tau = factor(rep(quantile_names(tau), each = n_grid),
                                      levels = quantile_names(tau)))
    points <- data.frame(x = object$x[, 1L], y = object$y)
    return(ggplot2::ggplot(surface, ggplot2::aes(x = .data$x, y = .data$y)) +
             ggplot2::geom_raster(ggplot2::aes(fill = .data$density)) +
             ggplot2::scale_fill_gradient(low = "white", high = "firebrick",
                                          name = "density") +
             ggplot2::geom_point(data = points, size = 0.6, colour = "grey25") +
             ggplot2::geom_line(ggplot2::aes(group = .data$tau, linetype = .data$tau),
                                data = curves, colour = "navy", linewidth = 0.8) +
             ggplot2::labs(x = var, y = object$response, linetype = "quantile",
                           title = sprintf("Conditional density of %s", object$response),
                           subtitle = paste("bandwidth", format_cdens_bandwidth(object, 3L))))
  }
  levels <- object$categorical$levels[[1L]]
  codes <- matrix(seq_along(levels), dimnames = list(NULL, colnames(object$categorical$codes)))
  dens <- cdens_grid(object, matrix(numeric(0), length(levels), 0L), codes, ys, "density")
  curves <- data.frame(y = rep(ys, each = length(levels)), density = as.vector(dens),
                       level = factor(rep(levels, n_grid), levels = levels))
  ggplot2::ggplot(curves, ggplot2::aes(x = .data$y, y = .data$density, colour = .data$level)) +
    ggplot2::geom_line(linewidth = 0.8) +
    ggplot2::labs(x = object$response, y = "density", colour = var,
                  title = sprintf("Conditional density of %s by %s", object$response, var),
                  subtitle = paste("bandwidth", format_cdens_bandwidth(object, 3L)))
}
