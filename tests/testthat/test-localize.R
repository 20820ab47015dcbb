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

test_that("localize(lm) equals a plain-R loop of weighted lm() fits", {
  at <- c(6, 10, 15, 20, 24.5)
  loc <- localize(lm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                  bandwidth = 5, at = at, verbose = FALSE)
  ref <- local_loop_ref(function(d) lm(dist ~ speed, data = d, weights = w), cars, cars$speed,
                        at, 5, epan_ref)
  expect_s3_class(loc, "localized")
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
  loc <- localize(glm(vs ~ mpg, family = binomial, data = mtcars), over = ~hp, bandwidth = 60,
                  at = at, verbose = FALSE)
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
  loc <- localize(MASS::rlm(dist ~ speed, data = cars), over = ~speed, kernel = "epanechnikov",
                  bandwidth = 7, at = at, verbose = FALSE)
  ref <- local_loop_ref(function(d) MASS::rlm(dist ~ speed, data = d, weights = w), cars,
                        cars$speed, at, 7, epan_ref)
  expect_same_fits(loc, ref)
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

test_that("bandwidth = 'cv' scores leave-one-out losses as a plain-R loop does", {
  d0 <- cars[seq(1, 50, by = 2), ]
  ctrl <- local_control(candidates = c(4, 7))
  loc <- localize(lm(dist ~ speed, data = d0), over = ~speed, kernel = "epanechnikov",
                  bandwidth = "cv", at = 15, control = ctrl, verbose = FALSE)
  loo <- vapply(c(4, 7), function(h) {
    mean(vapply(seq_len(nrow(d0)), function(i) {
      w <- epan_ref((d0$speed - d0$speed[i]) / h)
      w[i] <- 0
      d <- d0[w > 0, ]
      d$w <- w[w > 0]
      # (a window of one distinct speed: rank-deficient, as in localize())
      fit <- lm(dist ~ speed, data = d, weights = w)
      (d0$dist[i] - suppressWarnings(predict(fit, d0[i, ])))^2
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
  logit <- localize(glm(vs ~ mpg, family = binomial, data = mtcars), over = ~hp,
                    bandwidth = 60, at = 150, verbose = FALSE)
  p <- predict(logit, data.frame(mpg = 20, hp = 150), type = "response")
  expect_equal(p, unname(plogis(coef(logit)[1, 1] + 20 * coef(logit)[1, 2])), tolerance = 1e-10)
  expect_output(print(vc), "localized")
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
