# Conditional modes: conditional_modes() (R/conditional-modes.R).

# Plain-R reference: the conditional density f(t | x0) with product-kernel weights, its slope in
# t, sign changes of the slope on a fine grid (with points beside every kink of a compact
# kernel), each refined by uniroot() on the slope.
cmodes_ref <- function(x, y, x0, h, hy, kernel = "gaussian", kx = NULL) {
  kx <- kx %||% switch(kernel, gaussian = dnorm((x - x0) / h),
                       epanechnikov = pmax(0, 1 - ((x - x0) / h)^2))
  ky <- function(u) switch(kernel, gaussian = dnorm(u), epanechnikov = 0.75 * pmax(0, 1 - u^2))
  dky <- function(u) switch(kernel, gaussian = -u * dnorm(u),
                            epanechnikov = -1.5 * u * (abs(u) < 1))
  f <- function(t) sum(kx * ky((t - y) / hy)) / hy / sum(kx)
  slope_of <- function(t) sum(kx * dky((t - y) / hy))
  grid <- seq(min(y) - hy + hy / 201, max(y) + hy, by = hy / 100)
  if (kernel == "epanechnikov") {
    kinks <- c(y - hy, y + hy)
    grid <- sort(c(grid, kinks - 1e-7 * hy, kinks + 1e-7 * hy))
  }
  slope <- colSums(kx * dky(outer(y, grid, function(yi, t) (t - yi) / hy)))
  root <- function(k) uniroot(slope_of, grid[c(k, k + 1L)], tol = 1e-14)$root
  modes <- vapply(which(slope[-length(grid)] > 0 & slope[-1L] <= 0), root, 1)
  out <- data.frame(mode = modes, density = vapply(modes, f, 1))
  if (kernel == "gaussian") {
    # the probability of each basin, between the antimodes
    antimodes <- vapply(which(slope[-length(grid)] < 0 & slope[-1L] >= 0), root, 1)
    cdf <- function(t) sum(kx * pnorm((t - y) / hy)) / sum(kx)
    # (signed weights: antimodes in a negative tail have no mode beyond them)
    if (length(antimodes) == length(modes) - 1L) {
      out$probability <- diff(c(0, vapply(antimodes, cdf, 1), 1))
    }
  }
  out
}

test_that("conditional modes equal a plain-R search of f(y | x) (Gaussian, faithful)", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.25, 3))
  at <- c(2, 2.5, 3, 4.5)
  modes <- conditional_modes(fit, data.frame(eruptions = at), verbose = FALSE)
  counts <- integer(0)
  for (j in seq_along(at)) {
    ref <- cmodes_ref(faithful$eruptions, faithful$waiting, at[j], 0.25, 3)
    got <- modes[modes$row == j, ]
    got <- got[order(got$mode), ]
    expect_equal(nrow(got), nrow(ref))
    expect_equal(got$mode, ref$mode, tolerance = 1e-8)
    expect_equal(got$density, ref$density, tolerance = 1e-10)
    expect_equal(got$probability, ref$probability, tolerance = 1e-9)
    expect_equal(got$rank[order(-got$density)], seq_len(nrow(ref)))
    counts[j] <- nrow(ref)
  }
  # bimodal between the two regimes, trimodal at 3
  expect_equal(counts, c(1L, 2L, 3L, 1L))
  expect_identical(conditional_modes(fit, data.frame(eruptions = at), n_threads = 2,
                                     verbose = FALSE), modes)
})

test_that("conditional modes of the Epanechnikov kernel climb with its shadow, kinks included", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.5, 5), kernel = "epanechnikov")
  at <- c(2, 3.6, 4)
  modes <- conditional_modes(fit, data.frame(eruptions = at), verbose = FALSE)
  for (j in seq_along(at)) {
    ref <- cmodes_ref(faithful$eruptions, faithful$waiting, at[j], 0.5, 5, "epanechnikov")
    got <- modes[modes$row == j, ]
    expect_equal(sort(got$mode), ref$mode, tolerance = 1e-10)
  }
})

test_that("conditional modes with a factor predictor, NA rows and the output's shape", {
  fit <- kde(mpg ~ factor(cyl), data = mtcars, bandwidth = c(0.1, 2))
  nd <- data.frame(cyl = c(4, NA, 8))
  modes <- conditional_modes(fit, nd, verbose = FALSE)
  expect_named(modes, c("row", "factor(cyl)", "mode", "density", "probability", "rank",
                        "n_modes"))
  expect_equal(as.vector(tapply(modes$probability, modes$row, sum)), c(1, NA, 1))
  expect_true(is.factor(modes[["factor(cyl)"]]))
  expect_equal(modes$row[is.na(modes$mode)], 2L)
  expect_equal(modes$n_modes[modes$row == 2L], 0L)
  # Aitchison-Aitken weights: 1 - lambda for the own level, lambda / 2 for the two others
  for (r in c(1L, 3L)) {
    kx <- ifelse(mtcars$cyl == nd$cyl[r], 0.9, 0.05)
    ref <- cmodes_ref(NULL, mtcars$mpg, NULL, NULL, 2, kx = kx)
    got <- modes[modes$row == r, ]
    expect_equal(sort(got$mode), ref$mode, tolerance = 1e-8)
    expect_equal(unique(got$n_modes), nrow(ref))
  }
  expect_setequal(conditional_modes(fit, verbose = FALSE)$row, seq_len(nrow(mtcars)))
})

test_that("conditional_modes() rejects what it cannot climb", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.5, 5), kernel = "uniform")
  expect_error(conditional_modes(fit), class = "localmean_error", "shadow")
  expect_error(conditional_modes(kde(faithful$waiting)), class = "localmean_error", "object")
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.5, 5))
  expect_error(conditional_modes(fit, tol = -1), class = "localmean_error", "tol")
  expect_error(conditional_modes(fit, foo = 1), class = "localmean_error")
})

# The local linear weights l_i(x0) = K_i e_1' S^-1 (1, x_i - x0) of one numeric predictor
# (Gaussian kernel), by weighted least squares in plain R.
linear_weights <- function(x, x0, h) {
  z <- cbind(1, x - x0)
  k <- dnorm((x - x0) / h)
  drop(k * (z %*% solve(crossprod(z, k * z))[, 1L]))
}

test_that("conditional modes of a local linear fit: the reference with its signed weights", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.4, 3), degree = 1)
  at <- c(1.6, 2.5, 3, 4.5, 5.1)
  modes <- conditional_modes(fit, data.frame(eruptions = at), verbose = FALSE)
  for (j in seq_along(at)) {
    l <- linear_weights(faithful$eruptions, at[j], 0.4)
    ref <- cmodes_ref(NULL, faithful$waiting, NULL, NULL, 3, kx = l)
    ref <- ref[ref$density > 0, ]
    got <- modes[modes$row == j, ]
    got <- got[order(got$mode), ]
    expect_equal(got$mode, ref$mode, tolerance = 1e-8)
    expect_equal(got$density, ref$density, tolerance = 1e-10)
    expect_equal(sum(got$probability), 1)
  }
  expect_true(any(linear_weights(faithful$eruptions, 5.1, 0.4) < 0))  # the case that matters
  expect_identical(conditional_modes(fit, data.frame(eruptions = at), n_threads = 2,
                                     verbose = FALSE), modes)
})

test_that("simulate() of a local linear fit draws the positive part of its estimate", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.4, 3), degree = 1)
  nd <- data.frame(eruptions = c(1.6, 3, 5.1))
  sims <- simulate(fit, nsim = 4000, seed = 1, newdata = nd)
  grid <- seq(30, 110, by = 0.05)
  for (j in seq_len(nrow(nd))) {
    l <- linear_weights(faithful$eruptions, nd$eruptions[j], 0.4)
    dens <- pmax(0, colSums(l * dnorm(outer(faithful$waiting, grid, "-") / 3)))
    cdf <- cumsum(dens) / sum(dens)
    draws <- unlist(sims[j, ])
    expect_lt(max(abs(ecdf(draws)(grid) - cdf)), 0.035)
  }
  expect_identical(simulate(fit, nsim = 20, seed = 2, newdata = nd, n_threads = 2),
                   simulate(fit, nsim = 20, seed = 2, newdata = nd, n_threads = 1))
  # a categorical response: its probabilities, those below zero set to zero
  fit3 <- kde(factor(gear) ~ mpg, data = mtcars, bandwidth = c(3, 0.1), degree = 1)
  at <- data.frame(mpg = c(12, 30))
  prob <- pmax(predict(fit3, at, y = c("3", "4", "5")), 0)
  draws <- simulate(fit3, nsim = 4000, seed = 3, newdata = at)
  for (j in 1:2) {
    freq <- as.vector(table(unlist(draws[j, ]))) / 4000
    expect_equal(freq, as.vector(prob[j, ] / sum(prob[j, ])), tolerance = 0.03)
  }
})
