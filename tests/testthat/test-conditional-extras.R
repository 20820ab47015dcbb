# simulate(), augment() and autoplot() of conditional densities (R/conditional-extras.R).

test_that("simulate() draws from f(y | x): its mean and variance at a seed", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.3, 4))
  at <- c(2, 4.5)
  nsim <- 20000
  draws <- simulate(fit, nsim = nsim, seed = 1, newdata = data.frame(eruptions = at))
  expect_equal(dim(draws), c(2L, nsim))
  for (j in seq_along(at)) {
    # plain R: the mixture's mean is the local mean, its variance the local variance plus h_y^2
    k <- dnorm((faithful$eruptions - at[j]) / 0.3)
    mean_ref <- sum(k * faithful$waiting) / sum(k)
    var_ref <- sum(k * (faithful$waiting - mean_ref)^2) / sum(k) + 4^2
    v <- unlist(draws[j, ])
    expect_lt(abs(mean(v) - mean_ref), 4 * sqrt(var_ref / nsim))
    se_var <- sqrt(mean((v - mean(v))^4) - var(v)^2) / sqrt(nsim)
    expect_lt(abs(var(v) - var_ref), 4 * se_var)
  }
})

test_that("simulate() is reproducible, restores the stream and keeps rows", {
  fit <- kde(waiting ~ eruptions, data = faithful, bandwidth = c(0.3, 4))
  set.seed(5)
  a <- simulate(fit, nsim = 2, seed = 9)
  after <- runif(1)
  set.seed(5)
  expect_equal(runif(1), after)
  expect_identical(simulate(fit, nsim = 2, seed = 9, n_threads = 2), a)
  expect_equal(dim(a), c(nrow(faithful), 2L))
  expect_named(a, c("sim_1", "sim_2"))
  expect_equal(attr(a, "seed")[1L], 9L)
  nd <- data.frame(eruptions = c(2, NA))
  b <- simulate(fit, nsim = 3, seed = 1, newdata = nd)
  expect_true(all(is.na(b[2L, ])))
  expect_false(anyNA(b[1L, ]))
  expect_error(simulate(fit, nsim = 0), class = "localmean_error", "nsim")
})

test_that("simulate() with a compact kernel and a factor kept apart stays within its level", {
  fit <- kde(mpg ~ factor(cyl), data = mtcars, kernel = "epanechnikov", bandwidth = c(0, 1.5))
  draws <- unlist(simulate(fit, nsim = 2000, seed = 3, newdata = data.frame(cyl = 4)))
  own <- mtcars$mpg[mtcars$cyl == 4]
  expect_true(all(draws > min(own) - 1.5 & draws < max(own) + 1.5))
  # the Epanechnikov kernel's variance is h^2 / 5
  expect_lt(abs(var(draws) - (mean((own - mean(own))^2) + 1.5^2 / 5)), 4)
})

test_that("augment() adds the density, the distribution function and the median", {
  fit <- kde(waiting ~ eruptions, data = faithful[1:80, ], bandwidth = c(0.4, 5))
  aug <- augment(fit)
  expect_named(aug, c("eruptions", "waiting", ".density", ".cdf", ".median"))
  expect_equal(aug$.density, predict(fit))
  expect_equal(aug$.cdf, predict(fit, type = "distribution"))
  expect_equal(aug$.median, as.vector(predict(fit, type = "quantile")))
  nd <- faithful[81:83, ]
  new <- augment(fit, newdata = nd)
  expect_equal(new$.density, predict(fit, nd))
  expect_equal(nrow(augment(fit, data = faithful[1:80, ])), 80L)
  expect_error(augment(fit, data = faithful), class = "localmean_error", "rows")
})

test_that("autoplot() draws one numeric or one categorical predictor", {
  skip_if_not_installed("ggplot2")
  fit <- kde(waiting ~ eruptions, data = faithful[1:80, ], bandwidth = c(0.4, 5))
  expect_s3_class(ggplot2::autoplot(fit, n_grid = 21), "ggplot")
  fit2 <- kde(mpg ~ factor(cyl), data = mtcars, bandwidth = c(0.1, 2))
  p <- ggplot2::autoplot(fit2, n_grid = 21)
  expect_s3_class(p, "ggplot")
  expect_equal(nlevels(p$data$level), 3L)
  two <- kde(mpg ~ wt + hp, data = mtcars, bandwidth = c(1, 50, 3))
  expect_error(ggplot2::autoplot(two), class = "localmean_error", "one predictor")
  expect_error(ggplot2::autoplot(fit, tau = 1), class = "localmean_error", "tau")
})

test_that("a categorical response: simulate() draws its levels, augment() its probabilities", {
  fit <- kde(factor(gear) ~ mpg, data = mtcars, bandwidth = c(3, 0.1))
  sims <- simulate(fit, nsim = 2, seed = 1)
  expect_s3_class(sims$sim_1, "factor")
  expect_identical(levels(sims$sim_1), c("3", "4", "5"))
  # lambda = 0: every draw is the level of a data row in the window
  exact <- kde(factor(gear) ~ mpg, data = mtcars, bandwidth = c(0.5, 0))
  draws <- simulate(exact, nsim = 1, seed = 2)$sim_1
  near <- vapply(mtcars$mpg, function(v) paste(sort(unique(mtcars$gear[abs(mtcars$mpg - v) <= 4])),
                                               collapse = ""), "")
  expect_true(all(mapply(grepl, as.character(draws), near)))
  aug <- augment(fit)
  expect_named(aug, c("mpg", "factor(gear)", ".density"))
  expect_equal(aug$.density, predict(fit))
  expect_error(conditional_modes(fit), "categorical response", class = "localmean_error")
  skip_if_not_installed("ggplot2")
  expect_error(ggplot2::autoplot(fit), "numeric response", class = "localmean_error")
})
