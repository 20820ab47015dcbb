# fuzzy_inference(): a Takagi-Sugeno-Kang rule base whose memberships come from the engine.

fuzzy_data <- function(n = 60, seed = 1) {
  set.seed(seed)
  x <- sort(runif(n, 0, 3))
  data.frame(x = x, z = runif(n), y = sin(2 * x) + 0.5 * x + rnorm(n, sd = 0.1))
}

# Normalised memberships written out in plain R: Gaussian radial kernel of the scaled distance.
reference_memberships <- function(x, centres, h) {
  k <- sapply(seq_len(nrow(centres)), function(r) {
    u2 <- rowSums(sweep(sweep(x, 2L, centres[r, ]), 2L, h, "/")^2)
    exp(-u2 / 2)
  })
  k <- matrix(k, nrow = nrow(x))
  k / rowSums(k)
}

test_that("the output is the membership-weighted blend of the rules' linear consequents", {
  d <- fuzzy_data()
  set.seed(2)
  fit <- fuzzy_inference(y ~ x + z, data = d, rules = 4, bandwidth = c(0.4, 0.3),
                         verbose = FALSE)
  x <- as.matrix(d[c("x", "z")])
  w <- reference_memberships(x, fit$centres, c(0.4, 0.3))
  expect_equal(fit$membership, w, tolerance = 1e-12, ignore_attr = TRUE)
  manual <- rowSums(w * (cbind(1, x) %*% t(coef(fit))))
  expect_equal(unname(fitted(fit)), manual, tolerance = 1e-10)
  # the consequents are the least-squares fit of y on the blended design
  phi <- do.call(cbind, lapply(1:4, function(r) w[, r] * cbind(1, x)))
  ls <- lm.fit(phi, d$y)
  expect_equal(as.vector(t(coef(fit))), unname(ls$coefficients), tolerance = 1e-8)
  expect_equal(sum(fit$share), 1)
  expect_equal(fit$share, colMeans(w), tolerance = 1e-12)
})

test_that("one rule is the global linear model of lm()", {
  ref <- lm(mpg ~ wt + hp, data = mtcars)
  fit <- fuzzy_inference(mpg ~ wt + hp, data = mtcars, rules = 1, verbose = FALSE)
  expect_equal(unname(coef(fit)[1, ]), unname(coef(ref)), tolerance = 1e-8)
  expect_equal(unname(fitted(fit)), unname(fitted(ref)), tolerance = 1e-8)
  expect_equal(sigma(fit), sigma(ref), tolerance = 1e-8)
  expect_equal(fit$r.squared, summary(ref)$r.squared, tolerance = 1e-8)
  nd <- data.frame(wt = c(2.5, 4), hp = c(100, 250))
  p <- predict(fit, nd, se.fit = TRUE)
  pr <- predict(ref, nd, se.fit = TRUE)
  expect_equal(p$fit, unname(pr$fit), tolerance = 1e-8)
  expect_equal(p$se.fit, unname(pr$se.fit), tolerance = 1e-8)
  expect_equal(p$df, pr$df)
  expect_equal(fit$leverage, unname(hatvalues(ref)), tolerance = 1e-8)
  expect_equal(tidy(fit)$std.error, unname(summary(ref)$coefficients[, 2]), tolerance = 1e-8)
  # weighted: lm() with weights
  w <- seq_len(32) / 10
  fw <- fuzzy_inference(mtcars[c("wt", "hp")], mtcars$mpg, rules = 1, weights = w,
                        verbose = FALSE)
  expect_equal(unname(coef(fw)[1, ]), unname(coef(lm(mpg ~ wt + hp, mtcars, weights = w))),
               tolerance = 1e-8)
})

test_that("as many rules as points and tiny widths interpolate the data", {
  d <- fuzzy_data(n = 25)
  for (centres in list("kmeans", as.matrix(d["x"]))) {
    fit <- fuzzy_inference(d$x, d$y, rules = 25, bandwidth = 1e-4, centres = centres,
                           verbose = FALSE)
    expect_equal(unname(fitted(fit)), d$y, tolerance = 1e-8)
    expect_equal(predict(fit, d$x), d$y, tolerance = 1e-8)
    expect_identical(fit$cv, Inf)
  }
})

test_that("local consequents are local_poly(degree = 1) fits at the centres", {
  d <- fuzzy_data()
  set.seed(3)
  fit <- fuzzy_inference(y ~ x + z, data = d, rules = 3, bandwidth = c(0.5, 0.4),
                         consequent = "local", verbose = FALSE)
  lp <- local_poly(y ~ x + z, data = d, degree = 1, bandwidth = c(0.5, 0.4), verbose = FALSE)
  at <- as.data.frame(fit$centres)
  value <- predict(lp, at)
  slope <- predict(lp, at, deriv = 1)
  expect_equal(unname(coef(fit)[, -1]), unname(slope), tolerance = 1e-10)
  rule_value <- rowSums(cbind(1, fit$centres) * coef(fit))
  expect_equal(unname(rule_value), value, tolerance = 1e-10)
  expect_equal(unname(fitted(fit)), rowSums(fit$membership * (cbind(1, as.matrix(d[1:2])) %*%
                                                                 t(coef(fit)))))
  expect_error(predict(fit, d, se.fit = TRUE), class = "localmean_error")
})

test_that("predict() on the training data equals fitted(), NA rows give NA", {
  aq <- airquality
  set.seed(4)
  fit <- fuzzy_inference(Ozone ~ Temp + Wind, data = aq, rules = 4, verbose = FALSE)
  expect_identical(nobs(fit), sum(complete.cases(aq[c("Ozone", "Temp", "Wind")])))
  expect_length(fitted(fit), nobs(fit))
  used <- aq[complete.cases(aq[c("Ozone", "Temp", "Wind")]), ]
  expect_equal(predict(fit, used), unname(fitted(fit)), tolerance = 1e-12, ignore_attr = TRUE)
  expect_equal(predict(fit, used, se.fit = TRUE)$fit, predict(fit, used))
  nd <- data.frame(Temp = c(70, NA), Wind = c(10, 10))
  p <- predict(fit, nd)
  expect_true(is.na(p[2]) && is.finite(p[1]))
  m <- predict(fit, nd, type = "membership")
  expect_equal(dim(m), c(2L, 4L))
  expect_equal(sum(m[1, ]), 1)
  na_fit <- fuzzy_inference(Ozone ~ Temp, data = aq, rules = 2, na.action = na.exclude,
                            verbose = FALSE)
  expect_length(fitted(na_fit), nrow(aq))
  expect_length(residuals(na_fit), nrow(aq))
})

test_that("factor predictors enter the global consequents as indicators", {
  set.seed(5)
  fit <- fuzzy_inference(mpg ~ wt + factor(am), data = mtcars, rules = 1, verbose = FALSE)
  ref <- lm(mpg ~ wt + factor(am), data = mtcars)
  expect_equal(unname(fitted(fit)), unname(fitted(ref)), tolerance = 1e-8)
  nd <- data.frame(wt = 3, am = c(0, 1))
  expect_equal(predict(fit, nd), unname(predict(ref, nd)), tolerance = 1e-8)
  expect_error(predict(fit, data.frame(wt = 3, am = 2)), class = "localmean_error")
  expect_error(fuzzy_inference(mpg ~ wt + factor(am), data = mtcars, consequent = "local",
                               verbose = FALSE), class = "localmean_error")
})

test_that("mean-shift centres, the cv widths and points far from every rule", {
  set.seed(6)
  x <- c(rnorm(40, 0, 0.3), rnorm(40, 4, 0.3))
  y <- ifelse(x < 2, 1 + x, 8 - x) + rnorm(80, sd = 0.05)
  fit <- fuzzy_inference(x, y, centres = "mean_shift", verbose = FALSE)
  expect_identical(nrow(fit$centres), 2L)
  expect_equal(sort(fit$centres[, 1]), c(0, 4), tolerance = 0.1)
  # a lone outlier is a mode, but too few points for a consequent: no rule
  outlier <- fuzzy_inference(c(x, 20), c(y, 0), centres = "mean_shift", verbose = FALSE)
  expect_equal(outlier$centres, fit$centres, tolerance = 0.05)
  one <- fuzzy_inference(x, y, centres = "mean_shift", rules = 1, verbose = FALSE)
  expect_identical(nrow(one$centres), 1L)
  cv <- fuzzy_inference(x, y, centres = "mean_shift", bandwidth = "cv", verbose = FALSE)
  expect_lte(cv$cv, fit$cv)
  expect_identical(cv$bandwidth_method, "cv")
  # beyond a compact kernel's support a point follows its nearest rule
  compact <- fuzzy_inference(x, y, centres = c(0, 4), bandwidth = 0.5,
                             kernel = "epanechnikov", verbose = FALSE)
  expect_gt(compact$uncovered, 0L)
  expect_equal(predict(compact, c(-10, 2.1, 30), type = "membership"),
               rbind(c(1, 0), c(0, 1), c(0, 1)), ignore_attr = TRUE)
  expect_true(all(is.finite(predict(compact, c(-10, 30)))))
})

test_that("the fit does not depend on the units of the predictors", {
  d <- fuzzy_data()
  x <- as.matrix(d[c("x", "z")])
  centres <- x[c(5, 30, 55), ]
  base <- fuzzy_inference(x, d$y, centres = centres, bandwidth = c(0.4, 0.3), verbose = FALSE)
  for (unit in c(1e-300, 1e300)) {
    scaled <- fuzzy_inference(x * unit, d$y, centres = centres * unit,
                              bandwidth = c(0.4, 0.3) * unit, verbose = FALSE)
    expect_equal(fitted(scaled), fitted(base), tolerance = 1e-8)
    set.seed(10)
    expect_true(all(is.finite(fitted(fuzzy_inference(x * unit, d$y, rules = 3,
                                                     verbose = FALSE)))))
  }
})

test_that("results do not depend on the number of threads", {
  d <- fuzzy_data(n = 300)
  fits <- lapply(1:2, function(threads) {
    set.seed(7)
    fuzzy_inference(y ~ x + z, data = d, rules = 5, n_threads = threads, verbose = FALSE)
  })
  expect_identical(fits[[1]]$fitted, fits[[2]]$fitted)
  expect_identical(predict(fits[[1]], d, n_threads = 1), predict(fits[[1]], d, n_threads = 2))
  local <- lapply(1:2, function(threads) {
    fuzzy_inference(y ~ x + z, data = d, centres = fits[[1]]$centres, consequent = "local",
                    n_threads = threads, verbose = FALSE)
  })
  expect_identical(local[[1]]$fitted, local[[2]]$fitted)
})

test_that("print, summary, tidiers and plots", {
  set.seed(8)
  fit <- fuzzy_inference(mpg ~ wt + hp, data = mtcars, rules = 3, verbose = FALSE)
  out <- capture.output(print(fit))
  expect_match(out[1], "^<local_fuzzy> Takagi-Sugeno-Kang rule base")
  expect_true(any(grepl("^Rules +: 3 \\(centres: k-means\\)$", out)))
  expect_false(any(grepl(" $", out)))
  s <- summary(fit)
  expect_named(s$rules, c("rule", "centre.wt", "centre.hp", "share", "(Intercept)", "wt", "hp"))
  expect_equal(sum(s$rules$share), 1)
  sout <- capture.output(print(s))
  expect_true(any(sout == "Rules:"))
  expect_false(any(grepl(" $", sout)))
  expect_identical(formula(fit), mpg ~ wt + hp, ignore_attr = TRUE)
  tt <- tidy(fit)
  expect_identical(nrow(tt), 9L)
  expect_equal(tt$estimate, as.vector(t(coef(fit))))
  g <- glance(fit)
  expect_identical(g$rules, 3L)
  a <- augment(fit)
  expect_equal(a$.fitted + a$.resid, mtcars$mpg)
  expect_equal(augment(fit, newdata = mtcars[1:3, ])$.fitted, predict(fit, mtcars[1:3, ]))
  expect_identical(nrow(as.data.frame(fit)), 32L)
  pdf(NULL)
  on.exit(dev.off())
  expect_invisible(plot(fit))
  expect_invisible(plot(fit, which = "membership"))
  one <- fuzzy_inference(mpg ~ wt, data = mtcars, rules = 3, verbose = FALSE)
  expect_invisible(plot(one))
  expect_invisible(plot(one, which = "membership"))
})

test_that("bad input is a classed error naming the argument", {
  d <- fuzzy_data(n = 20)
  bad <- function(..., arg) {
    expect_error(fuzzy_inference(d$x, d$y, verbose = FALSE, ...), arg,
                 class = "localmean_error")
  }
  bad(rules = 0, arg = "rules")
  bad(rules = 21, arg = "rules")
  bad(rules = 2.5, arg = "rules")
  bad(rules = NA, arg = "rules")
  bad(rules = 1001, arg = "rules")
  bad(centres = "bogus", arg = "centres")
  bad(centres = matrix(1:4, 2), arg = "centres")
  bad(centres = matrix(1:4), rules = 3, arg = "rules")
  bad(bandwidth = -1, arg = "bandwidth")
  bad(bandwidth = c(1, 2), arg = "bandwidth")
  bad(bandwidth = "bogus", arg = "bandwidth")
  bad(bandwidth = "cv", consequent = "local", arg = "bandwidth")
  bad(consequent = "bogus", arg = "consequent")
  bad(kernel = "bogus", arg = "kernel")
  bad(method = "binned", arg = "method")
  bad(weights = rep(-1, 20), arg = "weights")
  bad(bandwth = 1, arg = "bandwidth")
  expect_error(fuzzy_inference(d$x, d$y[-1], verbose = FALSE), "y", class = "localmean_error")
  expect_error(fuzzy_inference(rep(1, 20), d$y, verbose = FALSE), "constant",
               class = "localmean_error")
  expect_error(fuzzy_inference(data.frame(g = letters[1:20]), d$y, verbose = FALSE),
               "numeric", class = "localmean_error")
  expect_error(fuzzy_inference(d$x, d$y, centres = cbind(c(0, 10)), bandwidth = 0.01,
                               kernel = "uniform", consequent = "local", verbose = FALSE),
               "bandwidth", class = "localmean_error")
  set.seed(9)
  fit <- fuzzy_inference(d$x, d$y, rules = 2, verbose = FALSE)
  expect_error(predict(fit, d$x, type = "bogus"), "type", class = "localmean_error")
  expect_error(predict(fit, d$x, level = 0.9), "level", class = "localmean_error")
  expect_error(summary(fit, digit = 3), class = "localmean_error")
  expect_error(plot(fit, which = "bogus"), "which", class = "localmean_error")
})
