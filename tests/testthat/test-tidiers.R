# The tidiers' columns for each class, their values against the fits' own accessors, and the
# autoplot() methods (with ggplot2 only).

expect_tidy_frame <- function(df, columns) {
  expect_s3_class(df, "data.frame")
  expect_true(all(columns %in% names(df)), info = paste(setdiff(columns, names(df)),
                                                        collapse = ", "))
}

test_that("regression fits: tidy() has the bandwidths, glance() the fit statistics", {
  fit <- small_fits()$local_poly
  td <- tidy(fit)
  expect_tidy_frame(td, c("term", "type", "bandwidth"))
  expect_identical(td$term, "speed")
  expect_identical(td$bandwidth, 5)
  gl <- glance(fit)
  expect_identical(nrow(gl), 1L)
  expect_tidy_frame(gl, c("nobs", "df", "sigma", "r.squared", "deviance", "logLik", "AIC",
                          "BIC", "df.residual", "kernel", "bandwidth.method"))
  expect_identical(gl$nobs, nobs(fit))
  expect_equal(gl$sigma, sigma(fit))
  expect_equal(gl$deviance, deviance(fit))
  expect_equal(gl$df.residual, df.residual(fit))
  expect_equal(gl$logLik, as.numeric(logLik(fit)))
  expect_equal(gl$AIC, AIC(fit))
  mixed <- tidy(small_fits()$mixed)
  expect_identical(mixed$term, c("wt", "factor(cyl)"))
  expect_identical(mixed$type, c("h", "lambda"))
  expect_identical(glance(small_fits()$binomial)$family, "binomial")
})

test_that("augment() adds broom's columns, equal to predict(), fitted() and residuals()", {
  fit <- small_fits()$local_poly
  aug <- augment(fit, se_fit = TRUE, interval = "confidence")
  expect_tidy_frame(aug, c("speed", "dist", ".fitted", ".se.fit", ".lower", ".upper",
                           ".resid", ".hat", ".std.resid"))
  expect_identical(aug$dist, cars$dist)
  expect_equal(aug$.fitted, unname(fitted(fit)))
  expect_equal(aug$.resid, unname(residuals(fit)))
  band <- predict(fit, interval = "confidence")
  expect_equal(aug$.lower, unname(band[, "lwr"]))
  expect_equal(aug$.upper, unname(band[, "upr"]))
  expect_equal(aug$.se.fit, predict(fit, se.fit = TRUE)$se.fit)
  expect_equal(aug$.std.resid, aug$.resid / (sigma(fit) * sqrt(1 - aug$.hat)))
  expect_identical(names(augment(fit)), c("speed", "dist", ".fitted", ".resid", ".hat",
                                          ".std.resid"))
  nd <- data.frame(speed = c(10, 20))
  new <- augment(fit, newdata = nd, interval = "confidence")
  expect_identical(names(new), c("speed", ".fitted", ".lower", ".upper"))
  expect_equal(new$.fitted, unname(predict(fit, nd)))
  # the user's data frame, with its other columns
  with_data <- augment(fit, data = cbind(cars, id = seq_len(50)))
  expect_identical(with_data$id, seq_len(50))
  expect_error(augment(fit, data = cars[1:10, ]), class = "localmean_error")
  # local likelihood: the band on the response scale
  logit <- small_fits()$binomial
  band <- augment(logit, newdata = data.frame(wt = c(2.5, 3.5)), interval = "confidence")
  expect_true(all(band$.lower >= 0 & band$.upper <= 1 & band$.lower < band$.fitted))
  expect_identical(as.data.frame(fit), as.data.frame(augment(fit)))
})

test_that("classification: class probabilities as .pred_<level>, the class as .fitted", {
  fit <- small_fits()$local_classify
  aug <- augment(fit)
  expect_tidy_frame(aug, c("Sepal.Length", "Sepal.Width", "Species", ".fitted",
                           paste0(".pred_", levels(iris$Species))))
  expect_identical(aug$.fitted, predict(fit))
  expect_equal(unname(as.matrix(aug[paste0(".pred_", fit$levels)])),
               unname(predict(fit, type = "prob")))
  new <- augment(fit, newdata = iris[c(1, 51, 101), ])
  expect_identical(new$.fitted, predict(fit, iris[c(1, 51, 101), ]))
  gl <- glance(fit)
  expect_equal(gl$accuracy, mean(aug$.fitted == iris$Species))
  expect_identical(tidy(fit)$term, c("Sepal.Length", "Sepal.Width"))
})

test_that("densities: the grid from tidy(), the density at the data from augment()", {
  fit <- small_fits()$kde_1d
  td <- tidy(fit)
  expect_tidy_frame(td, c("x", "density"))
  expect_equal(td$density, fit$estimate)
  aug <- augment(fit)
  expect_tidy_frame(aug, c("x", ".density"))
  expect_equal(aug$.density, predict(fit, faithful$eruptions), tolerance = 1e-8)
  expect_equal(augment(fit, newdata = data.frame(x = 3))$.density, predict(fit, 3))
  gl <- glance(fit)
  expect_equal(gl$logLik, as.numeric(logLik(fit)))
  expect_identical(gl$bandwidth, fit$bandwidth$h)
  two <- small_fits()$kde_2d
  expect_tidy_frame(tidy(two), c("eruptions", "waiting", "density"))
  expect_tidy_frame(augment(two), c("eruptions", "waiting", ".density"))
})

test_that("mode clusters: one row per mode, .cluster per point, as kmeans' tidiers", {
  fit <- small_fits()$mean_shift
  td <- tidy(fit)
  expect_tidy_frame(td, c("cluster", "size", "density", "a", "b"))
  expect_equal(as.matrix(td[c("a", "b")]), fit$modes, ignore_attr = TRUE)
  expect_identical(td$size, fit$size)
  aug <- augment(fit)
  expect_identical(as.integer(aug$.cluster), fit$cluster)
  new <- augment(fit, newdata = data.frame(a = c(0, 2), b = c(0, 2)))
  expect_identical(as.integer(new$.cluster), predict(fit, rbind(c(0, 0), c(2, 2))))
  gl <- glance(fit)
  expect_identical(gl$n.clusters, nrow(fit$modes))
  expect_identical(gl$nobs, nobs(fit))
  expect_equal(fitted(fit) + residuals(fit), fit$x)
  expect_identical(glance(small_fits()$medoid_shift)$algorithm, "medoid_shift")
})

test_that("principal-component shifts, embeddings, imputations and QKV models", {
  pcs <- small_fits()$local_ridges
  expect_equal(as.matrix(tidy(pcs)), fitted(pcs), ignore_attr = TRUE)
  expect_tidy_frame(augment(pcs), c("x1", "x2", ".fitted_x1", ".fitted_x2"))
  expect_identical(glance(pcs)$nobs, nobs(pcs))
  lle_fit <- small_fits()$lle
  expect_equal(as.matrix(tidy(lle_fit)), lle_fit$layout, ignore_attr = TRUE)
  aug <- augment(lle_fit, data = iris)
  expect_tidy_frame(aug, c("Species", ".dim1", ".dim2"))
  expect_identical(glance(lle_fit)$nobs, nobs(lle_fit))
  expect_tidy_frame(augment(small_fits()$trimap), c(".row", ".dim1", ".dim2"))
  imp <- small_fits()$local_imputation
  td <- tidy(imp)
  expect_tidy_frame(td, c("row", "column", "value"))
  expect_identical(nrow(td), sum(imp$missing))
  expect_equal(td$value, imp$completed[cbind(td$row, match(td$column, colnames(imp$completed)))])
  expect_identical(sum(augment(imp)$.imputed), sum(imp$missing))
  expect_equal(as.matrix(as.data.frame(imp)), imp$completed)
  expect_identical(glance(imp)$n.missing, sum(imp$missing))
  qkv <- small_fits()$local_qkv
  expect_tidy_frame(tidy(qkv), c("epoch", "train.loss"))
  expect_identical(glance(qkv)$nobs, nobs(qkv))
})

test_that("update() refits with changed arguments", {
  fit <- small_fits()$local_poly
  wider <- update(fit, bandwidth = 8)
  expect_identical(wider$bandwidth, 8)
  expect_s3_class(update(small_fits()$kde_1d, bandwidth = 0.2), "local_kde")
})

test_that("autoplot() draws every class as a ggplot", {
  skip_if_not_installed("ggplot2")
  fits <- small_fits()
  plots <- list(
    ggplot2::autoplot(fits$local_poly),
    ggplot2::autoplot(fits$binomial),
    ggplot2::autoplot(fits$mixed),
    ggplot2::autoplot(local_poly(mpg ~ wt + hp, data = mtcars, bandwidth = c(1, 60),
                                 verbose = FALSE)),
    ggplot2::autoplot(fits$kde_1d),
    ggplot2::autoplot(fits$kde_2d),
    ggplot2::autoplot(fits$mean_shift, paths = TRUE),
    ggplot2::autoplot(fits$medoid_shift),
    ggplot2::autoplot(fits$local_ridges),
    ggplot2::autoplot(fits$lle, labels = iris$Species),
    ggplot2::autoplot(fits$trimap),
    ggplot2::autoplot(fits$local_imputation)
  )
  for (p in plots) {
    expect_s3_class(p, "ggplot")
    # building draws every layer without warnings
    expect_no_warning(ggplot2::ggplot_build(p))
  }
  expect_error(ggplot2::autoplot(fits$local_poly, bandwith = 1), class = "localmean_error")
  expect_error(ggplot2::autoplot(fits$lle, labels = 1:3), class = "localmean_error")
})

test_that("print() and summary() share one style: a <class> header, aligned fields", {
  fits <- small_fits()
  for (name in names(fits)) {
    fit <- fits[[name]]
    out <- utils::capture.output(print(fit))
    expect_match(out[1L], sprintf("^<%s>", class(fit)[1L]), info = name)
    fields <- out[-1L][grepl(" : ", out[-1L])]
    expect_true(length(fields) > 0L, info = name)
    # the colons line up
    expect_length(unique(regexpr(" : ", fields)), 1L)
    s <- summary(fit)
    expect_false(identical(class(s), "table"), info = name)  # not the list summary
    lines <- utils::capture.output(print(s))
    expect_false(any(grepl("[[:space:]]$", c(out, lines))), info = name)
  }
  expect_match(utils::capture.output(print(local_control()))[1L], "^<local_control>")
  # the bandwidth carries its predictor's name
  expect_output(print(fits$kde_1d), "Bandwidth : x = ")
  expect_output(print(fits$mean_shift), "Bandwidth +: a = 0.4, b = 0.4")
})

test_that("summary() of a local-mode classifier has its leave-one-out Brier score", {
  fit <- small_fits()$local_classify
  s <- summary(fit)
  # plain-R reference: refit without each point in turn
  x <- as.matrix(iris[, c("Sepal.Length", "Sepal.Width")])
  y <- iris$Species
  brier <- vapply(seq_len(nrow(x)), function(i) {
    w <- exp(-0.5 * rowSums(sweep(x[-i, ], 2L, x[i, ])^2) / 0.5^2)
    p <- vapply(levels(y), function(l) sum(w * (y[-i] == l)) / sum(w), 1)
    sum((p - (levels(y) == y[i]))^2)
  }, 1)
  expect_equal(s$brier, mean(brier), tolerance = 1e-6)
  expect_output(print(s), "LOO Brier score")
})
