# Categorical predictors (R/predictors.R): the generalized product kernel against a brute-force
# R product kernel, formula terms, bandwidths per predictor, new data.

# Local polynomial fit at one query by weighted least squares in the numeric predictors, with
# the product of a Gaussian kernel (numeric) and Aitchison-Aitken / Li-Racine kernels.
product_kernel_ref <- function(num, cat, y, q_num, q_cat, h, lambda, degree) {
  w <- rep(1, length(y))
  for (j in seq_along(h)) w <- w * dnorm((num[, j] - q_num[j]) / h[j])
  for (j in seq_along(cat)) {
    z <- cat[[j]]
    w <- w * if (is.ordered(z)) {
      lambda[j]^abs(as.integer(z) - match(q_cat[[j]], levels(z)))
    } else {
      ifelse(as.character(z) == as.character(q_cat[[j]]), 1 - lambda[j],
             lambda[j] / (nlevels(z) - 1))
    }
  }
  u <- sweep(num, 2, q_num)
  design <- switch(degree + 1, matrix(1, length(y)), cbind(1, u),
                   cbind(1, u, u^2, if (ncol(u) == 2) u[, 1] * u[, 2]))
  unname(stats::lm.wfit(design, y, w)$coefficients[1])
}

test_that("mixed fits equal a brute-force product kernel, degrees 0-2, unordered and ordered", {
  set.seed(3)
  n <- 80
  df <- data.frame(a = runif(n), b = rnorm(n), f = factor(sample(c("p", "q", "r"), n, TRUE)),
                   o = factor(sample(1:4, n, TRUE), ordered = TRUE), l = runif(n) > 0.5)
  df$y <- df$a + (df$f == "q") + as.integer(df$o) / 3 + df$l + rnorm(n, sd = 0.2)
  h <- c(0.3, 0.8)
  lambda <- c(0.3, 0.4, 0.2)
  for (degree in 0:2) {
    fit <- local_poly(y ~ a + f + b + o + l, data = df, degree = degree,
                      bandwidth = c(h[1], lambda[1], h[2], lambda[2], lambda[3]), verbose = FALSE)
    cats <- list(df$f, df$o, factor(df$l))
    ref <- vapply(seq_len(n), function(i) {
      product_kernel_ref(cbind(df$a, df$b), cats, df$y, c(df$a[i], df$b[i]),
                         list(df$f[i], df$o[i], factor(df$l)[i]), h, lambda, degree)
    }, 1)
    expect_equal(unname(fitted(fit)), ref, tolerance = 1e-9, info = degree)
    nd <- data.frame(a = 0.5, b = 0, f = "r", o = factor(2, levels = 1:4, ordered = TRUE),
                     l = TRUE)
    expect_equal(predict(fit, nd),
                 product_kernel_ref(cbind(df$a, df$b), cats, df$y, c(0.5, 0), list("r", "2", "TRUE"),
                                    h, lambda, degree), tolerance = 1e-9)
  }
})

test_that("leverages of mixed fits are the diagonal of the smoother matrix", {
  set.seed(4)
  n <- 40
  df <- data.frame(x = runif(n), f = factor(sample(letters[1:3], n, TRUE)))
  df$y <- df$x + as.integer(df$f) + rnorm(n, sd = 0.1)
  fit <- local_poly(y ~ x + f, data = df, bandwidth = c(0.2, 0.3), verbose = FALSE)
  # column j of the smoother matrix: the fit to the j-th unit vector
  diag_ref <- vapply(seq_len(n), function(j) {
    e <- replace(numeric(n), j, 1)
    product_kernel_ref(cbind(df$x), list(df$f), e, df$x[j], list(df$f[j]), 0.2, 0.3, 1)
  }, 1)
  expect_equal(fit$leverage, diag_ref, tolerance = 1e-9)
  expect_equal(fit$df, sum(diag_ref), tolerance = 1e-9)
})

test_that("only categorical predictors give kernel-weighted cell means", {
  fit <- local_mean(mpg ~ factor(cyl) + factor(am), data = mtcars, bandwidth = c(0, 0),
                    verbose = FALSE)
  cell <- ave(mtcars$mpg, mtcars$cyl, mtcars$am)
  expect_equal(unname(fitted(fit)), cell)
  smooth <- local_mean(mpg ~ factor(cyl), data = mtcars, bandwidth = 2 / 3, verbose = FALSE)
  expect_equal(unname(fitted(smooth)), rep(mean(mtcars$mpg), 32))
})

test_that("bandwidths are given per predictor, by position or name, and checked", {
  fit <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.2),
                    verbose = FALSE)
  named <- local_poly(mpg ~ wt + factor(cyl), data = mtcars,
                      bandwidth = c(`factor(cyl)` = 0.2, wt = 1), verbose = FALSE)
  expect_equal(fitted(fit), fitted(named))
  expect_equal(fit$bandwidth, c(1, 0.2))
  expect_output(print(fit), "wt = 1, factor\\(cyl\\) = 0.2")
  expect_error(local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.9),
                          verbose = FALSE), class = "localmean_error", regexp = "factor\\(cyl\\)")
  expect_error(local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, -0.1),
                          verbose = FALSE), class = "localmean_error", regexp = "lambda|upper")
  expect_error(local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(0, 0.1),
                          verbose = FALSE), class = "localmean_error", regexp = "positive")
  expect_error(local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(x = 1, y = 0.1),
                          verbose = FALSE), class = "localmean_error", regexp = "names")
  expect_error(local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = nn(5),
                          verbose = FALSE), class = "localmean_error", regexp = "numeric")
})

test_that("predict() refuses unseen levels and gives NA rows for missing predictors", {
  fit <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.2),
                    verbose = FALSE)
  expect_error(predict(fit, data.frame(wt = 3, cyl = 5)), class = "localmean_error",
               regexp = "\"5\"")
  p <- predict(fit, data.frame(wt = c(3, NA, 2.5), cyl = c(4, 6, NA)))
  expect_equal(p[1], predict(fit, data.frame(wt = 3, cyl = 4)))
  expect_true(all(is.na(p[2:3])))
  s <- predict(fit, data.frame(wt = c(NA, 3), cyl = c(4, 4)), se.fit = TRUE)
  expect_true(is.na(s$se.fit[1]) && is.finite(s$se.fit[2]))
  num <- local_poly(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE)
  expect_identical(is.na(predict(num, data.frame(speed = c(10, NA, 12)))), c(FALSE, TRUE, FALSE))
  expect_error(predict(fit, data.frame(wt = 3)), class = "localmean_error", regexp = "cyl")
})

test_that("formula terms: I(), log() and poly() are numeric predictors; predictions agree", {
  fit <- local_poly(mpg ~ I(wt^2) + poly(hp, 2) + log(disp), data = mtcars,
                    bandwidth = c(5, 0.3, 0.3, 0.5), verbose = FALSE)
  expect_equal(ncol(fit$x), 4)
  expect_equal(predict(fit, mtcars[1:5, ]), unname(fitted(fit)[1:5]), tolerance = 1e-10)
  x <- cbind(mtcars$wt^2, stats::poly(mtcars$hp, 2), log(mtcars$disp))
  direct <- local_poly(x, mtcars$mpg, bandwidth = c(5, 0.3, 0.3, 0.5), verbose = FALSE)
  expect_equal(unname(fitted(fit)), unname(fitted(direct)))
})

test_that("local_classify and update() work with categorical predictors", {
  fit <- local_classify(Species ~ Petal.Length + I(Sepal.Width > 3), data = iris,
                        bandwidth = c(0.3, 0.1), verbose = FALSE)
  expect_gt(fit$accuracy, 0.9)
  expect_identical(fit$call[[1L]], as.name("local_classify"))
  p <- predict(fit, iris[c(1, 51, 101), ])
  expect_identical(as.character(p), c("setosa", "versicolor", "virginica"))
  reg <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.2), verbose = FALSE)
  wider <- update(reg, bandwidth = c(2, 0.2))
  expect_identical(wider$call[[1L]], as.name("local_poly"))
  expect_equal(wider$bandwidth, c(2, 0.2))
})

test_that("mixed fits do not depend on the thread count", {
  set.seed(5)
  df <- data.frame(x = runif(3000), f = factor(sample(letters[1:4], 3000, TRUE)))
  df$y <- sin(6 * df$x) + as.integer(df$f) + rnorm(3000, sd = 0.1)
  one <- local_poly(y ~ x + f, data = df, bandwidth = c(0.05, 0.1), n_threads = 1,
                    verbose = FALSE)
  two <- local_poly(y ~ x + f, data = df, bandwidth = c(0.05, 0.1), n_threads = 2,
                    verbose = FALSE)
  expect_identical(fitted(one), fitted(two))
  expect_identical(one$leverage, two$leverage)
})

test_that("plot() draws one curve per level over one numeric predictor, else panels", {
  fit <- local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.1), verbose = FALSE)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_identical(plot(fit), fit)
  expect_error(plot(fit, simultaneous = TRUE), class = "localmean_error")
  two <- local_poly(mpg ~ wt + hp + factor(cyl), data = mtcars, bandwidth = c(1, 50, 0.1),
                    verbose = FALSE)
  expect_s3_class(plot(two), "data.frame") # conditional panels (test-plots.R)
  many <- local_poly(mpg ~ wt + factor(cyl) + factor(gear), data = mtcars,
                     bandwidth = c(1, 0.1, 0.1), verbose = FALSE)
  expect_s3_class(plot(many), "data.frame")
})

test_that("the mixed cv search is within 1% of a brute-force LOO minimised by optim()", {
  set.seed(12)
  n <- 70
  num <- cbind(x = runif(n))
  f <- factor(sample(c("a", "b", "c"), n, TRUE))
  y <- sin(2 * pi * num[, 1]) + c(a = 0, b = 0.4, c = 0.8)[as.integer(f)] + rnorm(n, sd = 0.2)
  # leave each point out and refit at it; theta = (log h, logit of lambda / (2/3))
  loo <- function(theta) {
    h <- exp(theta[1])
    lambda <- 2 / 3 * stats::plogis(theta[2])
    err <- vapply(seq_len(n), function(i) {
      y[i] - product_kernel_ref(num[-i, , drop = FALSE], list(f[-i]), y[-i], num[i, ],
                                list(f[i]), h, lambda, 1)
    }, 1)
    mean(err^2)
  }
  starts <- list(c(log(0.05), -2), c(log(0.2), 0), c(log(0.1), 2))
  brute <- min(vapply(starts, function(s) {
    stats::optim(s, loo, control = list(maxit = 300, reltol = 1e-9))$value
  }, 1))
  fit <- local_poly(data.frame(x = num[, 1], f = f), y, bandwidth = "cv", verbose = FALSE)
  expect_lte(fit$cv, 1.01 * brute)
  lambda <- fit$bandwidth[2]
  expect_equal(fit$cv, loo(c(log(fit$bandwidth[1]), stats::qlogis(lambda / (2 / 3)))),
               tolerance = 1e-8)
})

test_that("predict() reads plain numeric variables as the model frame gives them", {
  fit <- local_poly(dist ~ speed, cars, bandwidth = 3, verbose = FALSE)
  at <- data.frame(speed = c(5L, NA, 12L, 30L), other = "x")
  expect_warning(plain <- predict(fit, at, se.fit = TRUE), "outside the range")
  # I() makes the column an object, which takes the model frame's path
  expect_warning(framed <- predict(fit, data.frame(speed = I(at$speed)), se.fit = TRUE),
                 "outside the range")
  expect_identical(plain, framed)
  expect_identical(is.na(plain$fit), c(FALSE, TRUE, FALSE, FALSE))
  expect_identical(predict(fit, cars[c(3, 9), ]), fitted(fit)[c(3, 9)] + 0 * 1:2)
  expect_error(predict(fit, data.frame(speed = "a")), class = "localmean_error")
  expect_error(predict(fit, data.frame(sp = 5)), "lacks the predictor")
  transformed <- local_poly(dist ~ log(speed), cars, bandwidth = 0.3, verbose = FALSE)
  expect_equal(predict(transformed, data.frame(speed = cars$speed)), fitted(transformed),
               tolerance = 1e-12)
})
