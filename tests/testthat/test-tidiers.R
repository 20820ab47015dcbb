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
    ggplot2::autoplot(fits$local_pca),
    ggplot2::autoplot(fits$local_propagation),
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

# Fits of every class of the package: the shared small fits and the generative ones, a
# classifier whose bandwidth was searched (its selector curve has one row per candidate) and a
# local multinomial logit.
every_class_fits <- function() {
  c(small_fits(), list(
    classify_cv = quietly_about(local_classify(Species ~ Petal.Length + Petal.Width, data = iris,
                                               verbose = FALSE), "localmean_rounded"),
    multinomial = local_classify(Species ~ Sepal.Length, data = iris, degree = 1,
                                 bandwidth = 0.5, verbose = FALSE),
    local_score = local_score(faithful, verbose = FALSE),
    local_denoiser = local_denoiser(faithful),
    local_diffusion = diffusion_sample(faithful, n = 20, n_iter = 10,
                                       verbose = FALSE)
  ))
}

has_method <- function(generic, fit) {
  any(vapply(class(fit), function(cl) {
    !is.null(utils::getS3method(generic, cl, optional = TRUE, envir = asNamespace("localmean")))
  }, TRUE))
}

test_that("glance() is one row for every class that has it", {
  fits <- every_class_fits()
  tried <- character()
  for (name in names(fits)) {
    fit <- fits[[name]]
    if (!has_method("glance", fit)) next
    expect_identical(nrow(glance(fit)), 1L, info = name)
    tried <- c(tried, class(fit))
  }
  # tests (htest objects, not fits) have glance() too
  expect_identical(nrow(glance(kde_test(as.double(1:20), as.double(2:21), verbose = FALSE))), 1L)
  tried <- c(tried, "local_test")
  # every glance() method of the package was tried
  ours <- sub("^glance\\.", "", grep("^glance\\.local_", as.character(utils::methods("glance")),
                                     value = TRUE))
  expect_true(all(ours %in% tried), info = paste(setdiff(ours, tried), collapse = ", "))
  # a searched classifier: one row, its log-likelihood and leave-one-out Brier score
  gl <- glance(fits$classify_cv)
  expect_gt(nrow(fits$classify_cv$cv_curve), 1L)
  expect_equal(gl$logLik, as.numeric(logLik(fits$classify_cv)))
  expect_equal(gl$brier, summary(fits$classify_cv)$brier)
})

test_that("as.matrix() of every result object is a numeric matrix of its numbers", {
  fits <- every_class_fits()
  for (name in names(fits)) {
    m <- as.matrix(fits[[name]])
    expect_true(is.matrix(m) && is.numeric(m), info = name)
  }
  expect_identical(as.matrix(fits$lle), fits$lle$layout)
  expect_identical(as.matrix(fits$trimap), fits$trimap$layout)
  expect_identical(as.matrix(fits$local_score), fits$local_score$score)
  expect_identical(as.matrix(fits$local_diffusion), fits$local_diffusion$samples)
  expect_identical(as.matrix(fits$mean_shift), fitted(fits$mean_shift))
  expect_equal(as.matrix(fits$local_ridges), fitted(fits$local_ridges), ignore_attr = TRUE)
  poly <- as.matrix(fits$local_poly)
  expect_equal(poly[, ".fitted"], fitted(fits$local_poly))
  expect_equal(poly[, "speed"], cars$speed)
  probs <- as.matrix(fits$local_classify)[, paste0(".pred_", levels(iris$Species))]
  expect_equal(unname(probs), unname(predict(fits$local_classify, type = "prob")))
  kde2 <- as.matrix(fits$kde_2d)
  expect_equal(kde2[, "density"], as.vector(fits$kde_2d$estimate))
})

test_that("print(), summary() and format() take digits for every class", {
  fits <- every_class_fits()
  for (name in names(fits)) {
    fit <- fits[[name]]
    printed <- utils::capture.output(print(fit, digits = 3))
    expect_identical(format(fit, digits = 3), sub("[[:space:]]+$", "", printed), info = name)
    expect_no_error(utils::capture.output(print(summary(fit, digits = 3)),
                                          print(summary(fit), digits = 3)))
  }
  fit <- fits$local_poly
  expect_match(format(fit, digits = 3), "Residual se  : 15.2$", all = FALSE)
  expect_match(format(fit, digits = 6), "Residual se  : 15.1635$", all = FALSE)
  expect_output(print(summary(fit, digits = 6)), "Residual std. error : 15.1635")
  expect_output(print(summary(fit), digits = 2), "Residual std. error : 15\n")
  expect_output(print(fits$kde_2d, digits = 2), "eruptions = 0.45, waiting = 5.3")
  expect_error(format(fit, digits = 0), "digits", class = "localmean_error")
})

test_that("update() works from user code (the global environment) for every class", {
  # evaluated where a user's code runs: the package's internals (kde.default) are not visible
  user <- new.env(parent = globalenv())
  evalq({
    kde_fit <- kde(faithful$waiting, verbose = FALSE)
    kde_3 <- update(kde_fit, bandwidth = 3)
    kde_formula <- kde(~ eruptions + waiting, data = faithful, verbose = FALSE)
    kde_one <- update(kde_formula, ~ . - waiting)
    kde_mixed <- kde(iris[c("Petal.Length", "Species")], verbose = FALSE)
    kde_mixed_2 <- update(kde_mixed, bandwidth = c(0.3, 0.1))
    poly <- local_poly(mpg ~ wt + hp + qsec, data = mtcars,
                       bandwidth = c(wt = 1, hp = 50, qsec = 2), verbose = FALSE)
    poly_2 <- update(poly, . ~ . - hp)
    poly_unnamed <- update(local_poly(mpg ~ wt + hp, data = mtcars, bandwidth = c(1, 50),
                                      verbose = FALSE), . ~ . - wt)
    poly_xy <- update(local_poly(as.matrix(cars["speed"]), cars$dist, bandwidth = 3,
                                 verbose = FALSE), bandwidth = 4)
    mean_2 <- update(local_mean(dist ~ speed, data = cars, bandwidth = 3, verbose = FALSE),
                     bandwidth = 5)
    classify_2 <- update(local_classify(Species ~ Petal.Length, data = iris, bandwidth = 0.3,
                                        verbose = FALSE), bandwidth = 0.5)
    fuzzy_2 <- update(fuzzy_inference(mpg ~ wt + hp, mtcars, rules = 3, verbose = FALSE),
                      rules = 2)
    modes_2 <- update(mean_shift(faithful, bandwidth = c(0.5, 5), verbose = FALSE),
                      bandwidth = c(0.6, 6))
    medoid_2 <- update(medoid_shift(faithful, bandwidth = c(0.5, 5), verbose = FALSE),
                       bandwidth = c(0.6, 6))
    ridges_2 <- update(pc_shift(faithful, bandwidth = c(0.5, 5), verbose = FALSE),
                       bandwidth = c(0.6, 6))
    lle_2 <- update(lle(scale(iris[, 1:4]), k = 20, verbose = FALSE), k = 25)
    impute_2 <- update(local_impute(airquality, verbose = FALSE), max_iter = 3)
    qkv_2 <- update(qkv_fit(rep(c("a", "b", "c"), 100), dim = 2, window = 2, n_iter = 1,
                            verbose = FALSE), n_iter = 2)
    score_2 <- update(local_score(faithful, verbose = FALSE), bandwidth = c(0.3, 3))
    denoiser_2 <- update(local_denoiser(faithful), bandwidth = 0.1)
    diffusion_2 <- update(diffusion_sample(faithful, n = 10, n_iter = 5,
                                           verbose = FALSE), n = 5)
  }, user)
  expect_identical(user$kde_3$bandwidth$h, 3)
  expect_identical(user$kde_one$vars, "eruptions")
  expect_equal(user$kde_mixed_2$bandwidth$h, 0.3)
  # the predictors kept keep their bandwidths, named or given in order
  expect_identical(user$poly_2$bandwidth, c(1, 2))
  expect_identical(user$poly_2$predictors$names, c("wt", "qsec"))
  expect_identical(user$poly_unnamed$bandwidth, 50)
  expect_identical(user$poly_xy$bandwidth, 4)
  expect_s3_class(user$mean_2, "local_mean")
  expect_identical(user$classify_2$bandwidth, 0.5)
  expect_identical(nrow(user$fuzzy_2$centres), 2L)
  expect_identical(user$modes_2$bandwidth, c(0.6, 6))
  expect_identical(user$medoid_2$bandwidth, c(0.6, 6))
  expect_identical(user$ridges_2$bandwidth, c(0.6, 6))
  expect_identical(user$lle_2$parameters$k, 25L)
  expect_s3_class(user$impute_2, "local_imputation")
  expect_length(user$qkv_2$epoch_loss, 2L)
  expect_identical(user$score_2$bandwidth, c(0.3, 3))
  expect_identical(user$denoiser_2$bandwidth, c(0.1, 0.1))
  expect_identical(nrow(user$diffusion_2$samples), 5L)
  # a formula change with a bandwidth given anew uses the new one
  refit <- update(user$poly, . ~ . - hp, bandwidth = c(2, 3))
  expect_identical(refit$bandwidth, c(2, 3))
  expect_identical(update(user$poly, . ~ . - hp, evaluate = FALSE)$bandwidth,
                   c(wt = 1, qsec = 2))
})
