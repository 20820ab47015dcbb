# localize(): any model refitted with the engine's kernel weights, against plain-R loops.

# Kernel profiles (1 at the query) in plain R.
epan_ref <- function(u) pmax(1 - u^2, 0)
gauss_ref <- function(u) exp(-u^2 / 2)

# The model refitted at every point z0 of `at` with the weights profile((z - z0) / h) of the
# rows of positive weight: list(coef, se) of points x coefficients matrices.
local_loop_ref <- function(fit_fun, data, z, at, h, profile) {
  fits <- lapply(at, function(z0) {
    w <- profile((z - z0) / h)
    keep <- w > 0
    d <- data[keep, , drop = FALSE]
    d$w <- w[keep]
    fit_fun(d)
  })
  coef <- t(vapply(fits, stats::coef, stats::coef(fits[[1L]])))
  se <- t(vapply(fits, function(f) {
    v <- tryCatch(stats::vcov(f), error = function(e) NULL)
    if (is.null(v)) rep(NA_real_, length(stats::coef(f))) else sqrt(diag(v))
  }, stats::coef(fits[[1L]])))
  list(coef = coef, se = se)
}

expect_same_fits <- function(loc, ref, tolerance = 1e-10) {
  expect_equal(unname(loc$coefficients), unname(ref$coef), tolerance = tolerance)
  expect_equal(unname(loc$std.error), unname(ref$se), tolerance = tolerance)
}

# The squared error at row i of d0 of lm(dist ~ speed) weighted by w on the rows where w > 0.
held_out_error <- function(d0, w, i) {
  d <- d0[w > 0, ]
  d$w <- w[w > 0]
  fit <- lm(dist ~ speed, data = d, weights = w)
  (d0$dist[i] - suppressWarnings(predict(fit, d0[i, ])))^2
}

test_that("localize(lm) equals a plain-R loop of weighted lm() fits", {
  at <- c(6, 10, 15, 20, 24.5)
  loc <- localize(lm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                  bandwidth = 5, at = at, verbose = FALSE)
  ref <- local_loop_ref(function(d) lm(dist ~ speed, data = d, weights = w), cars, cars$speed,
                        at, 5, epan_ref)
  expect_s3_class(loc, "local_refits")
  expect_same_fits(loc, ref)
  expect_identical(colnames(loc$coefficients), c("(Intercept)", "speed"))
  expect_identical(loc$n_window, vapply(at, function(z0) sum(abs(cars$speed - z0) < 5), 1L))
  # the Gaussian: every row within the engine's cut-off
  g <- localize(lm(dist ~ speed, data = cars), over = "speed", bandwidth = 3, at = at,
                verbose = FALSE)
  expect_same_fits(g, local_loop_ref(function(d) lm(dist ~ speed, data = d, weights = w), cars,
                                     cars$speed, at, 3, gauss_ref))
  # the generic path (lm() refitted in R) gives the same fits
  slow <- localize(lm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                   bandwidth = 5, at = at, fast = FALSE, verbose = FALSE)
  expect_same_fits(slow, ref)
  # the default points: the distinct values of the localization variable
  expect_identical(loc_default <- nrow(localize(lm(dist ~ speed, data = cars), over = ~speed,
                                                bandwidth = 5, verbose = FALSE)$at),
                   length(unique(cars$speed)))
})

test_that("localize(glm(binomial)) equals weighted glm() fits, covariates and all", {
  at <- c(90, 150, 250)
  # (the generic path: glm() refitted in R, to the convergence of glm()'s own iterations; the
  # engine's fast path is compared with it below at a tight glm.control())
  loc <- localize(glm(vs ~ mpg, family = binomial, data = mtcars), over = ~hp, bandwidth = 60,
                  at = at, fast = FALSE, verbose = FALSE)
  ref <- local_loop_ref(function(d) suppressWarnings(glm(vs ~ mpg, family = binomial, data = d,
                                                         weights = w)),
                        mtcars, mtcars$hp, at, 60, gauss_ref)
  expect_same_fits(loc, ref)
  # the non-integer counts that kernel weights make are no failure
  expect_false(any(loc$failed))
})

test_that("localize() of MASS::rlm() and quantreg::rq() equals weighted fits", {
  skip_if_not_installed("MASS")
  at <- c(8, 14, 20)
  # (the generic path, to rlm()'s own convergence at its default acc = 1e-4; the engine's fast
  # path is compared with it at acc = 1e-14 below)
  loc <- localize(MASS::rlm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                  bandwidth = 7, at = at, fast = FALSE, verbose = FALSE)
  ref <- local_loop_ref(function(d) MASS::rlm(dist ~ speed, data = d, weights = w), cars,
                        cars$speed, at, 7, epan_ref)
  expect_same_fits(loc, ref)
  fast <- localize(MASS::rlm(dist ~ speed, data = cars), over = ~speed,
                   kernel = "epanechnikov", bandwidth = 7, at = at, verbose = FALSE)
  expect_true(all(fast$engine_fitted))
  expect_equal(fast$coefficients, loc$coefficients, tolerance = 1e-3)
  skip_if_not_installed("quantreg")
  q <- localize(quantreg::rq(dist ~ speed, tau = 0.75, data = cars), over = ~speed,
                kernel = "epanechnikov", bandwidth = 7, at = at, verbose = FALSE)
  qref <- local_loop_ref(function(d) quantreg::rq(dist ~ speed, tau = 0.75, data = d,
                                                  weights = w),
                         cars, cars$speed, at, 7, epan_ref)
  expect_equal(unname(q$coefficients), unname(qref$coef), tolerance = 1e-10)
})

test_that("localizing over another variable gives the varying-coefficient model", {
  at <- c(80, 150, 230)
  vc <- localize(lm(mpg ~ wt + qsec, data = mtcars), over = ~hp, kernel = "epanechnikov",
                 bandwidth = 120, at = data.frame(hp = at), verbose = FALSE)
  ref <- local_loop_ref(function(d) lm(mpg ~ wt + qsec, data = d, weights = w), mtcars,
                        mtcars$hp, at, 120, epan_ref)
  expect_same_fits(vc, ref)
  # a categorical localization variable: Aitchison-Aitken weights 1 - lambda and lambda / 2
  d <- transform(mtcars, cyl = factor(cyl))
  cat <- localize(lm(mpg ~ wt, data = d), over = ~cyl, bandwidth = 0.3,
                  at = data.frame(cyl = c("4", "8")), verbose = FALSE)
  manual <- t(vapply(c("4", "8"), function(level) {
    w <- ifelse(d$cyl == level, 0.7, 0.15)
    coef(lm(mpg ~ wt, data = d, weights = w))
  }, c(1, 1)))
  expect_equal(unname(cat$coefficients), unname(manual), tolerance = 1e-10)
  # the model's own weights and subset are kept
  sub <- localize(lm(mpg ~ wt, data = mtcars, weights = cyl, subset = am == 1), over = ~hp,
                  kernel = "epanechnikov", bandwidth = 150, at = 120, verbose = FALSE)
  m1 <- mtcars[mtcars$am == 1, ]
  w <- epan_ref((m1$hp - 120) / 150) * m1$cyl
  expect_equal(unname(sub$coefficients[1, ]),
               unname(coef(lm(mpg ~ wt, data = m1[w > 0, ], weights = w[w > 0]))),
               tolerance = 1e-10)
})

test_that("the fast path of lm() equals the generic path", {
  d <- transform(airquality, Month = factor(Month))
  args <- list(over = ~ Wind + Month, bandwidth = c(4, 0.3), at = data.frame(
    Wind = c(5, 10, 15, 10), Month = factor(c(5, 7, 9, 6))), verbose = FALSE)
  model <- lm(Ozone ~ Temp + Solar.R, data = d, weights = Day, subset = Day > 3)
  fast <- do.call(localize, c(list(model), args))
  slow <- do.call(localize, c(list(model, fast = FALSE), args))
  expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-8)
  expect_equal(fast$std.error, slow$std.error, tolerance = 1e-8)
  # a factor covariate whose levels some windows lack: those points are refitted by lm()
  mt <- transform(mtcars, cyl = factor(cyl))
  # (and at hp = 250, with cylinder 8 alone, lm() fails: NA either way)
  expect_warning(f2 <- localize(lm(mpg ~ wt + cyl, data = mt), over = ~hp,
                                kernel = "epanechnikov", bandwidth = 60, at = c(70, 150, 250),
                                verbose = FALSE), class = "localmean_localize_warning")
  expect_warning(s2 <- localize(lm(mpg ~ wt + cyl, data = mt), over = ~hp,
                                kernel = "epanechnikov", bandwidth = 60, at = c(70, 150, 250),
                                fast = FALSE, verbose = FALSE),
                 class = "localmean_localize_warning")
  expect_true(all(is.na(f2$coefficients[3, ])))
  expect_equal(f2$coefficients, s2$coefficients, tolerance = 1e-8)
  expect_equal(f2$std.error, s2$std.error, tolerance = 1e-8)
  expect_error(localize(model, over = ~Wind, bandwidth = 4, fast = NA),
               class = "localmean_error", regexp = "fast")
})

test_that("the engine's fast path of glm() and rq() over their covariate equals the generic path", {
  set.seed(5)
  n <- 80
  d <- data.frame(x = runif(n, 0, 3))
  d$count <- rpois(n, exp(0.5 + sin(d$x)))
  d$hit <- rbinom(n, 1, plogis(2 * cos(2 * d$x)))
  d$size <- rgamma(n, shape = 3, rate = 3 / exp(1 + d$x / 2))
  d$trials <- sample(1:4, n, replace = TRUE)
  at <- c(0.3, 1.2, 2.6)
  tight <- list(epsilon = 1e-14, maxit = 100)
  compare <- function(formula, family, kernel, h, prior = rep(1, n), tolerance = 1e-8) {
    d$prior <- prior
    model <- glm(formula, family = family, data = d, weights = prior, control = tight)
    fast <- localize(model, over = ~x, kernel = kernel, bandwidth = h, at = at,
                     verbose = FALSE)
    slow <- localize(model, over = ~x, kernel = kernel, bandwidth = h, at = at, fast = FALSE,
                     verbose = FALSE)
    expect_true(all(fast$engine_fitted))
    expect_false(any(slow$engine_fitted))
    expect_equal(fast$coefficients, slow$coefficients, tolerance = tolerance)
    # glm()'s vcov() comes from the working weights of the step before its last, which moves
    # it by about the square root of its tolerance; refitted from the local optimum (`start`)
    # it is the vcov() at the optimum
    expect_equal(fast$std.error, slow$std.error, tolerance = 1e-6)
    profile <- if (kernel == "gaussian") gauss_ref else epan_ref
    at_optimum <- t(vapply(seq_along(at), function(k) {
      d$w <- profile((d$x - at[k]) / h) * prior
      f <- suppressWarnings(glm(formula, family = family, data = d[d$w > 0, ], weights = w,
                                start = fast$coefficients[k, ], control = tight))
      c(coef(f), sqrt(diag(vcov(f))))
    }, c(1, 1, 1, 1)))
    # the engine's fit is the optimum: glm() started there stays there
    expect_equal(unname(fast$coefficients), unname(at_optimum[, 1:2]), tolerance = 1e-10)
    expect_equal(unname(fast$std.error), unname(at_optimum[, 3:4]), tolerance = 1e-8)
  }
  compare(hit ~ x, binomial, "gaussian", 0.6)
  compare(count ~ x, poisson, "epanechnikov", 0.8, prior = d$trials)
  # (Fisher scoring converges linearly with the non-canonical log link: glm() stops about 1e-8
  # from the optimum even at epsilon = 1e-14)
  compare(size ~ x, Gamma(link = "log"), "gaussian", 0.7, tolerance = 1e-7)
  d$y <- sin(2 * d$x) + rnorm(n, sd = 0.3)
  d$y[c(5, 30, 55)] <- d$y[c(5, 30, 55)] + c(4, -5, 6)
  skip_if_not_installed("MASS")
  # MASS::rlm() with case weights: Huber and bisquare, tuning constants, vcov() as summary.rlm()
  for (model in list(MASS::rlm(y ~ x, data = d, wt.method = "case", acc = 1e-14, maxit = 200),
                     MASS::rlm(y ~ x, data = d, wt.method = "case", psi = MASS::psi.bisquare,
                               c = 5, acc = 1e-14, maxit = 200))) {
    fast <- localize(model, over = ~x, kernel = "epanechnikov", bandwidth = 0.8, at = at,
                     verbose = FALSE)
    slow <- localize(model, over = ~x, kernel = "epanechnikov", bandwidth = 0.8, at = at,
                     fast = FALSE, verbose = FALSE)
    expect_true(all(fast$engine_fitted))
    expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-8)
    expect_equal(fast$std.error, slow$std.error, tolerance = 1e-8)
  }
  # rlm()'s default inverse-variance weights (the rows scaled by sqrt(weight)), prior weights
  # and all; vcov() as summary.rlm() gives it for them
  d$prior <- d$trials
  for (model in list(MASS::rlm(y ~ x, data = d, acc = 1e-14, maxit = 200),
                     MASS::rlm(y ~ x, data = d, weights = prior, psi = MASS::psi.bisquare,
                               acc = 1e-14, maxit = 200))) {
    fast <- localize(model, over = ~x, kernel = "epanechnikov", bandwidth = 0.8, at = at,
                     verbose = FALSE)
    slow <- localize(model, over = ~x, kernel = "epanechnikov", bandwidth = 0.8, at = at,
                     fast = FALSE, verbose = FALSE)
    expect_true(all(fast$engine_fitted))
    expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-8)
    expect_equal(fast$std.error, slow$std.error, tolerance = 1e-8)
  }
  # the inverse-variance fit is another estimate than the case-weighted one
  case <- localize(MASS::rlm(y ~ x, data = d, wt.method = "case", acc = 1e-14, maxit = 200),
                   over = ~x, kernel = "epanechnikov", bandwidth = 0.8, at = at, verbose = FALSE)
  inv <- localize(MASS::rlm(y ~ x, data = d, acc = 1e-14, maxit = 200), over = ~x,
                  kernel = "epanechnikov", bandwidth = 0.8, at = at, verbose = FALSE)
  expect_gt(max(abs(case$coefficients - inv$coefficients)), 1e-6)
  skip_if_not_installed("quantreg")
  fast <- localize(quantreg::rq(y ~ x, tau = 0.25, data = d), over = ~x,
                   kernel = "epanechnikov", bandwidth = 0.8, at = at, verbose = FALSE)
  slow <- localize(quantreg::rq(y ~ x, tau = 0.25, data = d), over = ~x,
                   kernel = "epanechnikov", bandwidth = 0.8, at = at, fast = FALSE,
                   verbose = FALSE)
  expect_true(all(fast$engine_fitted))
  expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-8)
  # an offset: the generic path
  off <- localize(glm(count ~ x, family = poisson, data = d, offset = rep(0.1, n)), over = ~x,
                  bandwidth = 0.8, at = 1, verbose = FALSE)
  expect_false(off$engine_fitted)
})

test_that("the engine's varying-coefficient fits of glm(), rlm() and rq() equal the generic path", {
  set.seed(7)
  n <- 150
  d <- data.frame(x = rnorm(n), x2 = rnorm(n), z = runif(n), w = runif(n, 0.5, 2),
                  g = factor(sample(c("a", "b", "c"), n, replace = TRUE)),
                  k = sample(c("u", "v"), n, replace = TRUE))
  d$hit <- rbinom(n, 1, plogis(0.5 + sin(3 * d$z) * d$x))
  d$count <- rpois(n, exp(0.3 + d$z * d$x))
  d$size <- rgamma(n, shape = 3, rate = 3 / exp(1 + d$z * d$x / 2))
  d$y <- sin(3 * d$z) + (1 + d$z) * d$x - d$x2 + rnorm(n, sd = 0.3)
  d$y[c(5, 30, 55)] <- d$y[c(5, 30, 55)] + c(4, -5, 6)
  at <- data.frame(z = c(0.2, 0.5, 0.8), k = c("u", "v", "u"))
  tight <- list(epsilon = 1e-14, maxit = 100)
  compare <- function(model, over = ~z, bandwidth = 0.3) {
    args <- list(over = over, kernel = "epanechnikov", bandwidth = bandwidth,
                 at = at[all.vars(over)], verbose = FALSE)
    fast <- do.call(localize, c(list(model), args))
    slow <- do.call(localize, c(list(model, fast = FALSE), args))
    expect_true(all(fast$engine_fitted))
    expect_false(any(slow$engine_fitted))
    expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-8)
    # (glm()'s vcov() from the working weights of the step before its last)
    expect_equal(fast$std.error, slow$std.error, tolerance = 1e-6)
    expect_equal(fast$n_window, slow$n_window)
  }
  compare(glm(hit ~ x + x2, family = binomial, data = d, control = tight))
  # (prior weights that are not counts: glm()'s warning)
  compare(suppressWarnings(glm(hit ~ x + g, family = binomial, data = d, weights = w,
                               control = tight)))
  compare(glm(count ~ x, family = poisson, data = d, control = tight), over = ~ z + k,
          bandwidth = c(0.4, 0.5))
  compare(glm(size ~ x, family = Gamma(link = "log"), data = d, control = tight))
  compare(glm(count ~ x, family = quasipoisson, data = d, control = tight))
  compare(glm(hit ~ x, family = binomial, data = d, control = tight), bandwidth = nn(60))
  skip_if_not_installed("MASS")
  compare(MASS::rlm(y ~ x + x2, data = d, wt.method = "case", acc = 1e-14, maxit = 200))
  compare(MASS::rlm(y ~ x, data = d, wt.method = "case", psi = MASS::psi.bisquare,
                    acc = 1e-14, maxit = 200))
  compare(MASS::rlm(y ~ x + x2, data = d, acc = 1e-14, maxit = 200))
  skip_if_not_installed("quantreg")
  compare(quantreg::rq(y ~ x + x2, tau = 0.3, data = d))
  compare(quantreg::rq(y ~ x, tau = 0.7, data = d), over = ~ z + k, bandwidth = c(0.4, 0.5))
  # without an intercept: the generic path
  noint <- localize(glm(hit ~ x - 1, family = binomial, data = d), over = ~z, bandwidth = 0.3,
                    at = 0.5, verbose = FALSE)
  expect_false(noint$engine_fitted)
})

test_that("bandwidth = 'cv' scores leave-one-out losses as a plain-R loop does", {
  d0 <- cars[seq(1, 50, by = 2), ]
  ctrl <- local_control(candidates = c(4, 7))
  loc <- localize(lm(dist ~ speed, data = d0), over = ~speed, kernel = "epanechnikov",
                  bandwidth = "cv", at = 15, control = ctrl, verbose = FALSE)
  loo <- vapply(c(4, 7), function(h) {
    mean(vapply(seq_len(nrow(d0)), function(i) {
      w <- epan_ref((d0$speed - d0$speed[i]) / h)
      w[i] <- 0
      # (a window of one distinct speed: rank-deficient, as in localize())
      held_out_error(d0, w, i)
    }, 0))
  }, 0)
  expect_equal(loc$cv_curve$score, loo, tolerance = 1e-10)
  expect_identical(loc$bandwidth, c(4, 7)[which.min(loo)])
  expect_identical(loc$bandwidth_method, "cv")
  expect_output(print(loc), "(cv)", fixed = TRUE)
  # logistic: the binomial deviance of the held-out rows
  lg <- localize(glm(vs ~ mpg, family = binomial, data = mtcars), over = ~hp,
                 bandwidth = "cv", at = 150, control = local_control(candidates = 80),
                 verbose = FALSE)
  dev <- mean(vapply(seq_len(nrow(mtcars)), function(i) {
    w <- gauss_ref((mtcars$hp - mtcars$hp[i]) / 80)
    w[i] <- 0
    d <- mtcars[w > 0, ]
    d$w <- w[w > 0]
    f <- suppressWarnings(glm(vs ~ mpg, family = binomial, data = d, weights = w))
    p <- predict(f, mtcars[i, ], type = "response")
    -2 * (mtcars$vs[i] * log(p) + (1 - mtcars$vs[i]) * log(1 - p))
  }, 0))
  expect_equal(lg$cv_curve$score, dev, tolerance = 1e-10)
})

test_that("k-fold cross-validation scores held-out folds as a plain-R loop does", {
  d0 <- transform(cars[seq(1, 50, by = 2), ], speed = round(speed / 2) * 2)
  ctrl <- local_control(candidates = c(4, 7))
  set.seed(3)
  loc <- localize(lm(dist ~ speed, data = d0), over = ~speed, kernel = "epanechnikov",
                  bandwidth = "cv", folds = 5, at = 15, control = ctrl, verbose = FALSE)
  set.seed(3)
  fold <- sample(rep_len(1:5, nrow(d0)))
  kfold <- vapply(c(4, 7), function(h) {
    mean(vapply(seq_len(nrow(d0)), function(i) {
      w <- epan_ref((d0$speed - d0$speed[i]) / h)
      w[fold == fold[i]] <- 0
      # (an empty window fails, and its candidate scores Inf, as in localize())
      if (!any(w > 0)) return(Inf)
      held_out_error(d0, w, i)
    }, 0))
  }, 0)
  expect_equal(loc$cv_curve$score, kfold, tolerance = 1e-10)
  expect_identical(loc$cv_folds, 5L)
  # the same seed, the same folds and choice
  set.seed(3)
  again <- localize(lm(dist ~ speed, data = d0), over = ~speed, kernel = "epanechnikov",
                    bandwidth = "cv", folds = 5, at = 15, control = ctrl, verbose = FALSE)
  expect_identical(again$cv_curve, loc$cv_curve)
  expect_error(localize(lm(dist ~ speed, data = d0), over = ~speed, bandwidth = 5, folds = 5),
               class = "localmean_error", regexp = "folds")
  expect_error(localize(lm(dist ~ speed, data = d0), over = ~speed, bandwidth = "cv",
                        folds = 1), class = "localmean_error", regexp = "folds")
})

test_that("rows the model drops for missing values enter no window and no count", {
  at <- c(5, 10, 15)
  loc <- localize(lm(Ozone ~ Wind, data = airquality), over = ~Wind, kernel = "uniform",
                  bandwidth = nn(20), at = at, verbose = FALSE)
  expect_identical(nobs(loc), 116L)
  expect_output(print(loc), "Observations : 116", fixed = TRUE)
  expect_identical(glance(loc)$nobs, 116L)
  # nn(20) windows among the 116 complete rows, as a plain-R count gives them
  cc <- airquality[!is.na(airquality$Ozone), ]
  sizes <- vapply(at, function(z0) {
    d <- abs(cc$Wind - z0)
    sum(d <= sort(d)[20] + 1e-9)
  }, 1L)
  expect_identical(loc$n_window, sizes)
  ref <- localize(lm(Ozone ~ Wind, data = cc), over = ~Wind, kernel = "uniform",
                  bandwidth = nn(20), at = at, fast = FALSE, verbose = FALSE)
  expect_equal(loc$coefficients, ref$coefficients, tolerance = 1e-10)
  # a missing prior weight drops its row as well
  d <- transform(cars, w = ifelse(seq_len(50) %% 10 == 0, NA, 1))
  lw <- localize(lm(dist ~ speed, data = d, weights = w), over = ~speed, bandwidth = 5,
                 at = 15, verbose = FALSE)
  expect_identical(nobs(lw), 45L)
})

test_that("a failing local fit is NA with one classed warning", {
  at <- c(4.5, 15)
  expect_warning(
    loc <- localize(lm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                    bandwidth = 0.2, at = at, verbose = FALSE),
    class = "localmean_localize_warning")
  expect_true(all(is.na(loc$coefficients[1, ])))
  expect_identical(loc$failed, c(TRUE, FALSE))
  expect_equal(unname(loc$coefficients[2, 1]), mean(cars$dist[cars$speed == 15]))
})

test_that("predict() refits at each row; the methods work", {
  vc <- localize(lm(mpg ~ wt, data = mtcars), over = ~hp, kernel = "epanechnikov",
                 bandwidth = 100, at = c(100, 200), verbose = FALSE)
  nd <- data.frame(wt = c(2.5, 3.5), hp = c(100, 200))
  expect_equal(predict(vc, nd), unname(coef(vc)[, 1] + coef(vc)[, 2] * nd$wt),
               tolerance = 1e-10)
  logit <- localize(glm(vs ~ mpg, family = binomial, data = mtcars,
                        control = list(epsilon = 1e-14)),
                    over = ~hp, bandwidth = 60, at = 150, verbose = FALSE)
  p <- predict(logit, data.frame(mpg = 20, hp = 150), type = "response")
  expect_equal(p, unname(plogis(coef(logit)[1, 1] + 20 * coef(logit)[1, 2])), tolerance = 1e-10)
  expect_output(print(vc), "local_refits")
  expect_output(print(summary(vc)), "Local coefficients")
  expect_identical(nobs(vc), 32L)
  td <- tidy(vc)
  expect_identical(nrow(td), 4L)
  expect_named(td, c("hp", "term", "estimate", "std.error"))
  expect_identical(glance(vc)$points, 2L)
  path <- tempfile(fileext = ".pdf")
  grDevices::pdf(path)
  on.exit(unlink(path), add = TRUE)
  expect_invisible(plot(vc))
  grDevices::dev.off()
  skip_if_not_installed("ggplot2")
  p <- ggplot2::autoplot(vc, which = "wt")
  expect_s3_class(p, "ggplot")
  expect_identical(nrow(p$data), 2L)
  expect_equal(p$data$estimate, unname(coef(vc)[, "wt"]))
  expect_error(ggplot2::autoplot(vc, which = "hp"), class = "localmean_error", regexp = "which")
})

test_that("predict(interpolate = TRUE) interpolates the local coefficients linearly", {
  at <- c(80, 120, 180, 250)
  logit <- localize(glm(vs ~ mpg, family = binomial, data = mtcars), over = ~hp,
                    bandwidth = 60, at = at, verbose = FALSE)
  nd <- data.frame(mpg = c(15, 21, 30, 18), hp = c(80, 100, 200, 250))
  manual <- vapply(seq_len(nrow(nd)), function(i) {
    j <- max(which(at <= nd$hp[i]))
    if (j == length(at)) j <- j - 1L
    t <- (nd$hp[i] - at[j]) / (at[j + 1L] - at[j])
    beta <- (1 - t) * coef(logit)[j, ] + t * coef(logit)[j + 1L, ]
    sum(beta * c(1, nd$mpg[i]))
  }, 0)
  expect_equal(predict(logit, nd, interpolate = TRUE), manual, tolerance = 1e-12)
  expect_equal(predict(logit, nd, type = "response", interpolate = TRUE), plogis(manual),
               tolerance = 1e-12)
  # at the fitted points it is the refit's prediction
  expect_equal(predict(logit, nd[c(1, 4), ], interpolate = TRUE),
               predict(logit, nd[c(1, 4), ]), tolerance = 1e-8)
  # where it is not defined: a classed error
  expect_error(predict(logit, data.frame(mpg = 20, hp = 300), interpolate = TRUE),
               class = "localmean_error", regexp = "outside")
  expect_error(predict(logit, nd, type = "terms", interpolate = TRUE),
               class = "localmean_error", regexp = "type")
  d <- transform(mtcars, cyl = factor(cyl))
  two <- localize(lm(mpg ~ wt, data = d), over = ~ hp + cyl, bandwidth = c(60, 0.2),
                  at = data.frame(hp = c(100, 150), cyl = c("4", "6")), verbose = FALSE)
  expect_error(predict(two, d, interpolate = TRUE), class = "localmean_error",
               regexp = "one numeric")
  skip_if_not_installed("MASS")
  d$gear <- factor(d$gear)
  polr <- suppressWarnings(localize(MASS::polr(gear ~ wt, data = d, Hess = TRUE), over = ~hp,
                                    bandwidth = 120, at = c(100, 200), verbose = FALSE))
  expect_error(predict(polr, d[1:2, ], interpolate = TRUE), class = "localmean_error",
               regexp = "model matrix")
})

test_that("the varying-coefficient fit equals np's npscoef at the same bandwidth", {
  skip_on_cran()
  skip_if_not_installed("np")
  set.seed(11)
  n <- 80
  d <- data.frame(z = runif(n), x = rnorm(n))
  d$y <- sin(3 * d$z) + (1 + d$z) * d$x + rnorm(n, sd = 0.2)
  at <- c(0.1, 0.35, 0.6, 0.9)
  # np's Gaussian kernel has standard deviation bws, untruncated, and local-constant weights
  # in z (its default regtype "lc"): localize()'s fit of y ~ x with the Gaussian kernel
  vc <- localize(lm(y ~ x, data = d), over = ~z, bandwidth = 0.15, at = at,
                 control = local_control(cutoff = 40), verbose = FALSE)
  old <- options(np.messages = FALSE)
  on.exit(options(old), add = TRUE)
  bw <- np_fun("npscoefbw")(xdat = d["x"], ydat = d$y, zdat = d["z"], bws = 0.15,
                            bandwidth.compute = FALSE)
  np_fit <- np_fun("npscoef")(bws = bw, txdat = d["x"], tydat = d$y, tzdat = d["z"],
                              exdat = data.frame(x = rep(0, 4)), ezdat = data.frame(z = at),
                              betas = TRUE, iterate = FALSE)
  expect_equal(unname(vc$coefficients), unname(np_fit$beta), tolerance = 1e-8)
})

test_that("bad input gets classed errors naming the argument", {
  toy <- function(formula, data) structure(list(call = match.call()), class = "toy")
  expect_error(localize(toy(dist ~ speed, cars), over = ~speed, bandwidth = 5),
               class = "localmean_error", regexp = "weights")
  fit <- lm(dist ~ speed, data = cars)
  expect_error(localize(fit, over = ~speed, bandwidth = -1), class = "localmean_error",
               regexp = "bandwidth")
  expect_error(localize(fit, over = ~speed, bandwidth = "aicc"), class = "localmean_error",
               regexp = "bandwidth")
  expect_error(localize(fit, over = ~speed), class = "localmean_error", regexp = "bandwidth")
  expect_error(localize(fit, over = ~speed, bandwith = 5), class = "localmean_error",
               regexp = "bandwidth")
  expect_error(localize(fit, over = ~height, bandwidth = 5), class = "localmean_error",
               regexp = "over")
  expect_error(localize(fit, over = ~speed, bandwidth = 5, at = data.frame(z = 1)),
               class = "localmean_error", regexp = "at")
  expect_error(localize(fit, over = ~speed, bandwidth = 5, kernel = "gauss"),
               class = "localmean_error", regexp = "kernel")
})

test_that("localize() gives identical results on a future plan", {
  skip_on_cran()
  skip_if_not_installed("future")
  skip_if_not_installed("future.apply")
  fit <- glm(vs ~ mpg, family = binomial, data = mtcars)
  seq_fit <- localize(fit, over = ~hp, bandwidth = 60, at = c(90, 150, 250), verbose = FALSE)
  old <- future::plan(future::multisession, workers = 2)
  on.exit(future::plan(old), add = TRUE)
  par_fit <- localize(fit, over = ~hp, bandwidth = 60, at = c(90, 150, 250), verbose = FALSE)
  expect_identical(par_fit$coefficients, seq_fit$coefficients)
  expect_identical(par_fit$std.error, seq_fit$std.error)
})

test_that("predict() gives NA for rows missing a localization variable", {
  fit <- localize(lm(mpg ~ wt, mtcars), over = ~hp, bandwidth = 100, at = c(100, 200),
                  verbose = FALSE)
  p <- predict(fit, data.frame(wt = c(3, 3), hp = c(NA, 120)))
  expect_true(is.na(p[1L]))
  expect_identical(p[2L], predict(fit, data.frame(wt = 3, hp = 120)))
})

test_that("the engine's check-loss optimum over wide windows equals weighted rq() fits", {
  skip_if_not_installed("quantreg")
  # windows of about 400 rows: the pivots' weighted selections go beyond their first candidates
  set.seed(11)
  n <- 400
  d <- data.frame(x = runif(n, 0, 3))
  d$y <- sin(2 * d$x) + rnorm(n, sd = 0.3)
  at <- c(0.2, 1.5, 2.9)
  for (tau in c(0.1, 0.5, 0.9)) {
    loc <- localize(quantreg::rq(y ~ x, tau = tau, data = d), over = ~x, bandwidth = 1,
                    at = at, verbose = FALSE)
    expect_true(all(loc$engine_fitted))
    ref <- t(vapply(at, function(z0) {
      d$w <- gauss_ref((d$x - z0) / 1)
      coef(quantreg::rq(y ~ x, tau = tau, data = d, weights = w))
    }, c(1, 1)))
    expect_equal(unname(loc$coefficients), unname(ref), tolerance = 1e-8)
  }
})

test_that("the engine's glm() standard errors follow nn() bandwidths", {
  set.seed(5)
  n <- 80
  d <- data.frame(x = runif(n, 0, 3))
  d$count <- rpois(n, exp(0.5 + sin(d$x)))
  model <- glm(count ~ x, family = poisson, data = d, control = list(epsilon = 1e-14))
  at <- c(0.3, 1.2, 2.6)
  fast <- localize(model, over = ~x, bandwidth = nn(40), at = at, verbose = FALSE)
  slow <- localize(model, over = ~x, bandwidth = nn(40), at = at, fast = FALSE,
                   verbose = FALSE)
  expect_true(all(fast$engine_fitted))
  expect_equal(fast$coefficients, slow$coefficients, tolerance = 1e-10)
  # (glm()'s vcov() from the working weights of the step before its last)
  expect_equal(fast$std.error, slow$std.error, tolerance = 1e-6)
})
