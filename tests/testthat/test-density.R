# kde(): exact values against brute force, grids against stats::density() and ks::kde(),
# normalisation, reflection, adaptive bandwidths, methods and bad input.

set.seed(42)
x1 <- c(rnorm(150), rnorm(100, 3, 0.5))
x2 <- cbind(a = rnorm(120), b = rnorm(120, sd = 2))
x3 <- matrix(rnorm(180), ncol = 3)
trapezoid <- function(g, f) sum(diff(g) * (f[-1L] + f[-length(f)]) / 2)

test_that("exact densities equal brute force for every kernel in 1 to 3 dimensions", {
  q1 <- c(-2, 0.3, 2.9, 6)
  for (kernel in kernel_names_ref) {
    fit <- kde(x1, bandwidth = 0.4, kernel = kernel, gridsize = 0)
    ref <- kde_ref(x1, q1, kernel, h = 0.4)
    expect_equal(predict(fit, q1, method = "exact"), ref, tolerance = 1e-10, info = kernel)
    expect_equal(predict(fit, q1), ref, tolerance = 1e-10, info = kernel)
    if (kernel == "cauchy") next
    fit2 <- kde(x2, bandwidth = c(0.5, 1.2), kernel = kernel, gridsize = 0)
    q2 <- rbind(c(0, 0), c(1, -2), c(3, 3))
    expect_equal(predict(fit2, q2), kde_ref(x2, q2, kernel, h = c(0.5, 1.2)),
                 tolerance = 1e-10, info = kernel)
    fit3 <- kde(x3, bandwidth = 0.7, kernel = kernel)
    expect_equal(predict(fit3, x3[1:3, ]), kde_ref(x3, x3[1:3, ], kernel, h = rep(0.7, 3)),
                 tolerance = 1e-10, info = kernel)
  }
})

test_that("weights, bandwidth matrices and sample-point bandwidths match brute force", {
  w <- runif(nrow(x2))
  q <- rbind(c(0, 0), c(-1, 2))
  fit <- kde(x2, bandwidth = 0.6, weights = w, gridsize = 0)
  expect_equal(predict(fit, q), kde_ref(x2, q, "gaussian", h = c(0.6, 0.6), weights = w),
               tolerance = 1e-10)
  H <- matrix(c(0.3, 0.2, 0.2, 0.9), 2)
  for (kernel in c("gaussian", "epanechnikov")) {
    fit <- kde(x2, bandwidth = H, kernel = kernel)
    expect_equal(predict(fit, q), kde_ref(x2, q, kernel, H = H), tolerance = 1e-10)
  }
  expect_equal(predict(kde(x2, bandwidth = diag(c(0.5, 1.2)^2), gridsize = 0), q),
               predict(kde(x2, bandwidth = c(0.5, 1.2), gridsize = 0), q), tolerance = 1e-12)
  fit <- kde(x2, bandwidth = nn(10), kernel = "biweight", gridsize = 0)
  scale <- apply(x2, 2, sd)
  point <- apply(sweep(x2, 2, scale, `/`), 1, function(p) {
    sort(sqrt(colSums((t(sweep(x2, 2, scale, `/`)) - p)^2)))[11]
  })
  expect_equal(fit$bandwidth$point, point, tolerance = 1e-12)
  expect_equal(predict(fit, q), kde_ref(x2, q, "biweight", point = point, scale = scale),
               tolerance = 1e-10)
})

test_that("grid estimates agree with stats::density() and ks::kde()", {
  fit <- kde(x1, bandwidth = 0.3)
  g <- fit$grid[[1]]
  expect_length(g, 512)
  # density() bins on a grid 1024 times finer, whose every 1024th point is ours.
  ref <- stats::density(x1, bw = 0.3, n = 511 * 1024 + 1, from = g[1], to = g[512])
  ours <- seq(1, length(ref$x), by = 1024)
  expect_equal(ref$x[ours], g, tolerance = 1e-12)
  expect_lt(max(abs(ref$y[ours] - fit$estimate)) / max(fit$estimate), 1e-6)
  expect_equal(fit$estimate, kde_ref(x1, g, "gaussian", h = 0.3), tolerance = 1e-10)
  skip_if_not_installed("ks")
  H <- matrix(c(0.3, 0.1, 0.1, 0.8), 2)
  q <- x2[1:10, ]
  ks_fit <- ks::kde(x2, H = H, eval.points = q, binned = FALSE)
  expect_equal(predict(kde(x2, bandwidth = H), q), ks_fit$estimate, tolerance = 1e-10)
  q3 <- x3[1:5, ]
  ks3 <- ks::kde(x3, H = diag(0.4, 3), eval.points = q3, binned = FALSE)
  expect_equal(predict(kde(x3, bandwidth = sqrt(0.4)), q3), ks3$estimate, tolerance = 1e-10)
})

test_that("binned grids are accurate and do not depend on the thread count", {
  big <- c(rnorm(2e4), rnorm(1e4, 4))
  fit1 <- kde(big, bandwidth = 0.25, n_threads = 1)
  fit2 <- kde(big, bandwidth = 0.25, n_threads = 2)
  expect_equal(fit1$method, "binned")
  expect_identical(fit1$estimate, fit2$estimate)
  idx <- seq(1, 512, by = 37)
  exact <- kde_ref(big, fit1$grid[[1]][idx], "gaussian", h = 0.25)
  expect_lt(max(abs(fit1$estimate[idx] - exact)) / max(exact), 1e-3)
  big2 <- cbind(rnorm(2e4), rnorm(2e4))
  f2 <- kde(big2, bandwidth = c(0.5, 0.4), gridsize = 151, n_threads = 2)
  expect_equal(f2$method, "binned")
  expect_identical(f2$estimate,
                   kde(big2, bandwidth = c(0.5, 0.4), gridsize = 151, n_threads = 1)$estimate)
  idx <- c(5000, 11400, 15000)
  pts <- as.matrix(expand.grid(f2$grid))[idx, ]
  expect_lt(max(abs(as.vector(f2$estimate)[idx] - predict(f2, pts))) / max(f2$estimate), 1e-3)
  expect_identical(predict(f2, pts, n_threads = 1), predict(f2, pts, n_threads = 2))
})

# The binned strategy's own grid (kde_binning_grid()): the output grid refined by whole factors to
# a step of at most h / 4. Documented tolerances, relative to the peak of the exact estimate:
# Gaussian kernel 1e-3 at the output grid points (nodes of the binning grid: the O((step / h)^2)
# error of linear binning alone) and 3e-3 at other points (plus linear interpolation, also
# O((step / h)^2)); 1e-2 for compact kernels, whose kink at the edge of the support makes
# linear binning less accurate at the same step.
binned_grid_check <- function(fit, h) {
  spec <- localmean:::kde_frame(fit, "auto")$spec
  step <- diff(spec$grid_range) / (spec$gridsize - 1)
  expect_true(all(step <= h / 4 * (1 + 1e-9)))
  # every output grid point is a node of the binning grid
  for (j in seq_along(fit$grid)) {
    pos <- (fit$grid[[j]] - spec$grid_range[1L, j]) / step[j]
    expect_lt(max(abs(pos - round(pos))), 1e-6)
  }
}

test_that("the binned strategy resolves the bandwidth on a coarse 1-D output grid", {
  set.seed(16)
  big <- c(rnorm(2e4), rnorm(1e4, 4, 0.5))
  h <- 0.05
  q <- seq(-3, 6, length.out = 97)
  for (kernel in c("gaussian", "epanechnikov", "biweight")) {
    # 64 points: an output step of about three bandwidths
    fit <- kde(big, bandwidth = h, kernel = kernel, gridsize = 64, n_threads = 1)
    expect_equal(fit$method, "binned", info = kernel)
    binned_grid_check(fit, h)
    exact <- kde_ref(big, fit$grid[[1]], kernel, h = h)
    tol <- if (kernel == "gaussian") 1e-3 else 1e-2
    expect_lt(max(abs(fit$estimate - exact)) / max(exact), tol, label = kernel)
    expect_identical(fit$estimate,
                     kde(big, bandwidth = h, kernel = kernel, gridsize = 64,
                         n_threads = 2)$estimate)
    # points between the nodes: interpolated from the binning grid
    at <- localmean:::kde_at(fit, matrix(q), "binned", n_threads = 2)
    expect_identical(at, localmean:::kde_at(fit, matrix(q), "binned", n_threads = 1))
    expect_identical(localmean:::kde_at(fit, matrix(q[3:9]), "binned"), at[3:9])
    ref <- kde_ref(big, q, kernel, h = h)
    tol <- if (kernel == "gaussian") 3e-3 else 1e-2
    expect_lt(max(abs(at - ref)) / max(exact), tol, label = kernel)
    expect_gt(max(abs(at - ref)), 1e-12)  # and it did bin
  }
})

test_that("the binned strategy resolves the bandwidth on the default 2-D grid", {
  set.seed(17)
  big <- matrix(rnorm(4e4), ncol = 2)
  h <- c(0.1, 0.15)
  # the default 51 x 51 grid: an output step of 1.2 to 1.7 bandwidths; gridsize 11: 6 to 8
  # (where the kd-tree costs as little at this n, so "binned" is asked for)
  for (size in c(51, 11)) {
    method <- if (size == 51) "auto" else "binned"
    fit <- kde(big, bandwidth = h, gridsize = size, method = method, n_threads = 2)
    expect_equal(fit$method, "binned")
    binned_grid_check(fit, h)
    expect_identical(fit$estimate, kde(big, bandwidth = h, gridsize = size, method = method,
                                       n_threads = 1)$estimate)
    grid <- as.matrix(expand.grid(fit$grid))
    pick <- round(seq(1, nrow(grid), length.out = 60))
    exact <- kde_ref(big, grid[pick, ], "gaussian", h = h)
    expect_lt(max(abs(fit$estimate[pick] - exact)) / max(fit$estimate), 1e-3, label = size)
  }
  q <- cbind(runif(60, -2, 2), runif(60, -2, 2))
  at <- localmean:::kde_at(fit, q, "binned", n_threads = 2)
  expect_identical(at, localmean:::kde_at(fit, q, "binned", n_threads = 1))
  expect_lt(max(abs(at - kde_ref(big, q, "gaussian", h = h))) / max(fit$estimate), 3e-3)
  # the engine fits only the nodes the queries need: fewer queries, the same values
  expect_identical(localmean:::kde_at(fit, q[1:7, ], "binned"), at[1:7])
  # on more data "auto" bins for any output grid: the tree's cost grows with n log n
  expect_equal(kde(matrix(rnorm(2e5), ncol = 2), bandwidth = h, gridsize = 11)$method, "binned")
})

test_that("a bandwidth too small for the capped binning grid is not binned by 'auto'", {
  set.seed(18)
  big <- rnorm(2e4)
  fit <- kde(big, bandwidth = 1e-4, gridsize = 64)
  spec <- localmean:::kde_frame(fit, "auto")$spec
  expect_lte(spec$gridsize, 20001)
  expect_equal(fit$method, "tree")
  big2 <- matrix(rnorm(4e4), ncol = 2)
  fit2 <- kde(big2, bandwidth = c(0.1, 0.002), gridsize = 21)
  spec2 <- localmean:::kde_frame(fit2, "auto")$spec
  expect_true(all(spec2$gridsize <= 1001))
  expect_equal(fit2$method, "tree")
})

test_that("densities integrate to one", {
  for (kernel in c("gaussian", "epanechnikov", "laplace", "cosine")) {
    fit <- kde(x1, bandwidth = 0.3, kernel = kernel, gridsize = 4001)
    expect_equal(trapezoid(fit$grid[[1]], fit$estimate), 1, tolerance = 1e-4, info = kernel)
  }
  fit <- kde(x2, bandwidth = c(0.5, 1), gridsize = 201)
  expect_equal(summary(fit)$integral, 1, tolerance = 1e-4)
  fit <- kde(x2, bandwidth = nn(15), gridsize = 201)
  expect_equal(summary(fit)$integral, 1, tolerance = 2e-3)
})

test_that("reflection at bounds matches mirrored data and keeps the mass inside", {
  e <- rexp(300)
  fit <- kde(e, bandwidth = 0.2, bounds = c(0, Inf), gridsize = 4001)
  expect_equal(fit$grid[[1]][1], 0)
  expect_equal(trapezoid(fit$grid[[1]], fit$estimate), 1, tolerance = 1e-4)
  q <- c(0, 0.1, 1)
  ref <- 2 * kde_ref(c(e, -e), q, "gaussian", h = 0.2)
  expect_equal(predict(fit, q), ref, tolerance = 1e-10)
  expect_equal(predict(fit, -0.5), 0)
  u <- runif(400)
  fit <- kde(u, bandwidth = 0.05, kernel = "epanechnikov", bounds = c(0, 1), gridsize = 2001)
  expect_equal(trapezoid(fit$grid[[1]], fit$estimate), 1, tolerance = 1e-4)
  expect_true(all(simulate(fit, 500, seed = 1) >= 0 & simulate(fit, 500, seed = 1) <= 1))
})

test_that("the rule of thumb is Silverman's in 1-D and Scott's beyond", {
  expect_equal(kde(x1)$bandwidth$h, stats::bw.nrd0(x1))
  ratio <- kernels()$canonical[2] / kernels()$canonical[1]
  expect_equal(kde(x1, kernel = "epanechnikov")$bandwidth$h, stats::bw.nrd0(x1) * ratio)
})

test_that("methods: formula, print, summary, logLik, as.data.frame, simulate, plot", {
  fit <- kde(~ waiting, faithful)
  expect_equal(fit$estimate, kde(faithful$waiting)$estimate)
  expect_output(print(fit), "<local_kde> n = 272")
  expect_output(print(summary(fit)), "Modes on the grid")
  ll <- logLik(fit)
  expect_equal(as.numeric(ll), sum(log(predict(fit, faithful$waiting))))
  expect_equal(nobs(fit), 272)
  df <- as.data.frame(fit)
  expect_named(df, c("waiting", "density"))
  expect_equal(nrow(df), 512)
  s <- simulate(fit, 4000, seed = 3)
  expect_identical(s, simulate(fit, 4000, seed = 3))
  h <- fit$bandwidth$h
  expect_equal(var(s), var(faithful$waiting) * 271 / 272 + h^2, tolerance = 0.06)
  fit2 <- kde(~ eruptions + waiting, faithful)
  expect_equal(unname(dim(fit2$estimate)), c(51, 51))
  expect_equal(predict(fit2, data.frame(waiting = 70, eruptions = 3)),
               predict(fit2, c(3, 70)))
  expect_equal(ncol(simulate(fit2, 10, seed = 1)), 2)
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(fit))
  expect_silent(plot(fit2))
  expect_error(plot(kde(x3)), class = "localmean_error")
})

test_that("bad input gives classed errors naming the argument", {
  expect_error(kde(1), "at least 2 points", class = "localmean_error")
  expect_error(kde(rep(2, 10)), "no spread", class = "localmean_error")
  expect_error(kde(cbind(1:10, 1)), "no spread", class = "localmean_error")
  expect_equal(predict(kde(rep(2, 10), bandwidth = 1), 2), dnorm(0))
  expect_error(kde(x2, bandwidth = matrix(c(1, 1, 1, 1), 2)), "singular",
               class = "localmean_error")
  expect_error(kde(x2, bandwidth = matrix(1, 3, 3)), "2 x 2", class = "localmean_error")
  expect_error(kde(x2, bandwidth = -1), "bandwidth", class = "localmean_error")
  expect_error(kde(x2, bandwidth = "cv"), "bandwidth", class = "localmean_error")
  expect_error(kde(x2, kernel = "cauchy"), "cauchy", class = "localmean_error")
  expect_error(kde(x1, bounds = c(0, Inf)), "outside", class = "localmean_error")
  expect_error(kde(x1, bounds = c(1, 0)), "bounds", class = "localmean_error")
  expect_error(kde(x1, gridsize = 2), "gridsize", class = "localmean_error")
  expect_error(kde(c(1, NA, 3)), "non-finite", class = "localmean_error")
  expect_error(kde(x1, weights = -x1), "weights", class = "localmean_error")
  expect_error(kde(x2, bandwidth = nn(200)), "nn", class = "localmean_error")
  expect_error(kde(c(1, 1, 1, 2), bandwidth = nn(1)), "zero", class = "localmean_error")
  expect_error(kde(x2, method = "binned", bandwidth = nn(5)), "binned",
               class = "localmean_error")
  fit <- kde(x2, bandwidth = 1)
  expect_error(predict(fit), "newdata", class = "localmean_error")
  expect_error(predict(fit, matrix(1, 2, 3)), "2 columns", class = "localmean_error")
})

test_that("rtol approximations stay within their relative error", {
  set.seed(5)
  X <- matrix(rnorm(6000), ncol = 3)
  Q <- matrix(rnorm(300), ncol = 3)
  H <- diag(c(0.1, 0.2, 0.15))
  fit <- kde(X, bandwidth = H)
  exact <- predict(fit, Q, method = "exact")
  for (rtol in c(1e-3, 1e-6)) {
    approx <- predict(fit, Q, rtol = rtol)
    expect_lt(max(abs(approx - exact) / exact), rtol)
  }
  expect_gt(max(abs(predict(fit, Q, rtol = 1e-3) - exact) / exact), 1e-9)  # it approximates
  expect_identical(predict(fit, Q, rtol = 1e-4, n_threads = 1),
                   predict(fit, Q, rtol = 1e-4, n_threads = 2))
  f1 <- kde(X[, 1], bandwidth = 0.05, kernel = "epanechnikov")
  expect_lt(max(abs(predict(f1, Q[, 1], rtol = 1e-4) / predict(f1, Q[, 1]) - 1)), 1e-4)
  expect_error(predict(fit, Q, rtol = -1), "rtol", class = "localmean_error")
  expect_error(predict(kde(X, bandwidth = nn(5)), Q, rtol = 1e-3), "rtol",
               class = "localmean_error")
})

test_that("local_control() sets the cut-off and the binning grid of kde() as in regression", {
  set.seed(8)
  x <- rnorm(300)
  q <- c(-1, 0, 0.7)
  h <- 0.4
  cut <- 1.5
  ref <- vapply(q, function(p) {
    u <- (p - x) / h
    sum(dnorm(u) * (abs(u) <= cut)) / (length(x) * h)
  }, 1)
  fit <- kde(x, bandwidth = h, gridsize = 0, control = local_control(cutoff = cut))
  expect_equal(predict(fit, q), ref, tolerance = 1e-12)
  expect_false(isTRUE(all.equal(predict(kde(x, bandwidth = h, gridsize = 0), q), ref)))
  big <- rnorm(2e4)
  own <- kde(big, bandwidth = 0.3, method = "binned", verbose = FALSE)
  fine <- kde(big, bandwidth = 0.3, method = "binned", control = local_control(gridsize = 4001),
              verbose = FALSE)
  exact <- kde(big, bandwidth = 0.3, method = "exact", verbose = FALSE)
  expect_equal(fine$estimate, exact$estimate, tolerance = 1e-4)
  expect_equal(own$estimate, exact$estimate, tolerance = 1e-3)
})

test_that("absurd grids and simulations are refused up front with the limit (issue 18)", {
  set.seed(1)
  x <- rnorm(100)
  x2 <- matrix(rnorm(200), 100)
  expect_error(kde(x2, gridsize = c(5000, 5000), verbose = FALSE), class = "localmean_error",
               regexp = "gridsize.*limit is 1,048,576")
  expect_error(kde(x, gridsize = 2e6, verbose = FALSE), class = "localmean_error",
               regexp = "gridsize")
  fits <- list(kde(x, verbose = FALSE), kde(x2, verbose = FALSE),
               kde(x2, bandwidth = nn(10), verbose = FALSE),
               kde(x2, bandwidth = diag(0.1, 2), verbose = FALSE),
               kde(abs(x), bounds = c(0, Inf), verbose = FALSE),
               kde(data.frame(a = x, g = factor(rep(c("u", "v"), 50))), verbose = FALSE))
  for (fit in fits) {
    expect_error(simulate(fit, nsim = 1e9), class = "localmean_error", regexp = "nsim")
    expect_error(simulate(fit, nsim = 2^31), class = "localmean_error", regexp = "nsim")
    expect_error(simulate(fit, nsim = 5, seed = -Inf), class = "localmean_error",
                 regexp = "seed")
    expect_identical(NROW(simulate(fit, nsim = 5, seed = 1)), 5L)
  }
})

test_that("rtol keeps its guarantee where whole nodes are swept (n = 2e4, 3-D)", {
  set.seed(62)
  X <- matrix(rnorm(6e4), ncol = 3)
  Q <- rbind(matrix(rnorm(150), ncol = 3), matrix(rnorm(30, sd = 3), ncol = 3))
  for (kernel in c("gaussian", "laplace", "epanechnikov")) {
    fit <- kde(X, bandwidth = diag(c(0.2, 0.3, 0.25)), kernel = kernel, gridsize = 0)
    exact <- predict(fit, Q, method = "exact")
    inside <- exact > 0
    for (rtol in c(1e-3, 1e-6)) {
      approx <- predict(fit, Q, rtol = rtol)
      expect_lt(max(abs(approx - exact)[inside] / exact[inside]), rtol)
      expect_true(all(approx[!inside] == 0))
    }
    expect_identical(predict(fit, Q, rtol = 1e-4, n_threads = 2),
                     predict(fit, Q, rtol = 1e-4, n_threads = 1))
  }
})

test_that("a bandwidth whose kernel constant underflows is an error, not NaN (issue 18)", {
  set.seed(1)
  x2 <- matrix(runif(120), ncol = 2)
  expect_error(kde(x2, bandwidth = 1e-160, verbose = FALSE), "bandwidth",
               class = "localmean_error")
  expect_error(kde(x2, bandwidth = diag(1e-320, 2), verbose = FALSE), "bandwidth",
               class = "localmean_error")
  expect_false(anyNA(kde(x2, bandwidth = 1e-100, verbose = FALSE)$estimate))
})

test_that("predict() gives NA at points with a missing coordinate", {
  fit <- kde(faithful$waiting, verbose = FALSE)
  p <- predict(fit, c(-100, NA, 70))
  expect_identical(is.na(p), c(FALSE, TRUE, FALSE))
  expect_equal(p[c(1, 3)], predict(fit, c(-100, 70)))
  expect_identical(predict(fit, NA_real_), NA_real_)
  fit2 <- kde(faithful, verbose = FALSE)
  nd <- data.frame(eruptions = c(3, NA, 4), waiting = c(70, 60, NA))
  expect_identical(is.na(predict(fit2, nd)), c(FALSE, TRUE, TRUE))
  expect_identical(predict(fit2, c(3, NA)), NA_real_)
})

test_that("logLik() has the trace as df, and AIC() follows", {
  x <- faithful$waiting
  for (h in c(1, 4, 20)) {
    fit <- kde(x, bandwidth = h, verbose = FALSE)
    ll <- logLik(fit)
    # plain R: the density at the data and each point's own share of it
    dens <- vapply(x, function(u) mean(dnorm(u, x, h)), 1)
    expect_equal(as.numeric(ll), sum(log(dens)), tolerance = 1e-8)
    expect_equal(attr(ll, "df"), sum(dnorm(0, 0, h) / (length(x) * dens)), tolerance = 1e-8)
    expect_equal(AIC(fit), -2 * sum(log(dens)) + 2 * attr(ll, "df"), tolerance = 1e-8)
  }
  # narrow bandwidths spend more degrees of freedom
  expect_gt(attr(logLik(kde(x, bandwidth = 1, verbose = FALSE)), "df"),
            attr(logLik(kde(x, bandwidth = 20, verbose = FALSE)), "df"))
  expect_true(is.finite(AIC(kde(faithful, verbose = FALSE))))
  expect_true(is.finite(AIC(kde(faithful, bandwidth = nn(20), verbose = FALSE))))
  expect_error(AIC(kde(iris[c("Petal.Length", "Species")], verbose = FALSE)), "categorical",
               class = "localmean_error")
})

test_that("a kernel given as a function gives the triweight's (and Gaussian's) densities", {
  triweight_profile <- function(u) (1 - u^2)^3 * (abs(u) < 1)
  set.seed(44)
  z <- rnorm(300)
  at <- seq(-3, 3, by = 0.1)
  expect_equal(predict(kde(z, kernel = triweight_profile, bandwidth = 0.6), at),
               predict(kde(z, kernel = "triweight", bandwidth = 0.6), at), tolerance = 1e-10)
  expect_equal(predict(kde(z, kernel = function(u) exp(-u^2 / 2), bandwidth = 0.4), at),
               predict(kde(z, kernel = "gaussian", bandwidth = 0.4), at), tolerance = 1e-10)
  # the selectors convert with the numerically computed constants
  expect_equal(kde(z, kernel = triweight_profile, bandwidth = "plugin")$bandwidth,
               kde(z, kernel = "triweight", bandwidth = "plugin")$bandwidth, tolerance = 1e-10)
  # two dimensions: the radial constant from the tabulated profile
  x2 <- matrix(rnorm(400), 200)
  expect_equal(predict(kde(x2, kernel = triweight_profile, bandwidth = 0.8), x2[1:10, ]),
               predict(kde(x2, kernel = "triweight", bandwidth = 0.8), x2[1:10, ]),
               tolerance = 1e-10)
})

test_that("predict() and simulate() show progress bars by default in interactive sessions", {
  ns <- asNamespace("localmean")
  methods <- c("predict.local_kde", "simulate.local_kde", "predict.local_modes",
               "predict.local_poly", "predict.local_classify", "predict.local_score",
               "predict.local_denoiser", "predict.local_embedding", "predict.local_fuzzy")
  for (name in methods) {
    expect_identical(formals(get(name, envir = ns))$verbose, quote(interactive()), info = name)
  }
  # a long prediction ticks its bar
  old <- options(cli.progress_show_after = 0)
  on.exit(options(old), add = TRUE)
  fit <- kde(faithful$eruptions, bandwidth = 0.3, verbose = FALSE)
  shown <- testthat::capture_messages(predict(fit, seq(1, 6, length.out = 2e5), verbose = TRUE))
  expect_match(paste(shown, collapse = ""), "local fit")
})
