# Conditional panels (R/plots.R): plot() and autoplot() of fits with any number of predictors,
# one panel per predictor with the others at their medians or most frequent levels. The data
# drawn are checked against predict() at those points (vdiffr is not used).

mtcars3 <- function() {
  local_poly(mpg ~ wt + hp + factor(cyl), data = mtcars, bandwidth = c(1, 50, 0.3),
             verbose = FALSE)
}

test_that("plot() of a fit with three mixed predictors draws one panel per predictor", {
  fit <- mtcars3()
  curves <- plot(fit, n_grid = 25)
  expect_s3_class(curves, "data.frame")
  expect_identical(levels(curves$predictor), c("wt", "hp", "factor(cyl)"))
  expect_identical(as.vector(table(curves$predictor)), c(25L, 25L, 3L))
  expect_true(all(curves$.lower <= curves$.fitted & curves$.fitted <= curves$.upper))
  # the others at their medians and the most frequent cylinder count (8)
  wt <- curves[curves$predictor == "wt", ]
  ref <- predict(fit, data.frame(wt = wt$x, hp = median(mtcars$hp), cyl = 8),
                 interval = "confidence")
  expect_equal(wt$.fitted, unname(ref[, "fit"]))
  expect_equal(wt$.upper, unname(ref[, "upr"]))
  cyl <- curves[curves$predictor == "factor(cyl)", ]
  expect_identical(cyl$level, c("4", "6", "8"))
  ref <- predict(fit, data.frame(wt = median(mtcars$wt), hp = median(mtcars$hp), cyl = c(4, 6, 8)),
                 interval = "confidence", level = 0.9)
  expect_equal(plot(fit, level = 0.9, n_grid = 5)$.lower[11:13], unname(ref[, "lwr"]))
})

test_that("plot() chooses conditional panels where a fit has no single view", {
  one <- local_poly(dist ~ speed, data = cars, bandwidth = 5, verbose = FALSE)
  expect_identical(plot(one), one)
  panel <- plot(one, which = "conditional", n_grid = 10)
  expect_identical(panel$x, seq(4, 25, length.out = 10))
  expect_equal(panel$.fitted, unname(predict(one, data.frame(speed = panel$x))))
  expect_error(plot(mtcars3(), simultaneous = TRUE), "pointwise", class = "localmean_error")
  # nine combinations of levels over one numeric predictor: panels, not nine curves
  many <- local_poly(mpg ~ wt + factor(cyl) + factor(gear), data = mtcars,
                     bandwidth = c(1, 0.1, 0.1), verbose = FALSE)
  expect_identical(levels(plot(many)$predictor), c("wt", "factor(cyl)", "factor(gear)"))
  # every predictor categorical
  cat_only <- local_poly(mpg ~ factor(cyl) + factor(am), data = mtcars, bandwidth = c(0.1, 0.1),
                         verbose = FALSE)
  expect_identical(nrow(plot(cat_only)), 5L)
})

test_that("partial residuals are the residuals added to the curve; none for likelihood fits", {
  fit <- mtcars3()
  curves <- localmean:::conditional_curves(fit, 50, 0.95)
  points <- localmean:::partial_residuals(fit, curves)
  cyl <- points[points$predictor == "factor(cyl)", ]
  level_fit <- curves$.fitted[curves$predictor == "factor(cyl)"]
  expect_equal(cyl$y, unname(residuals(fit)) + level_fit[cyl$x])
  logit <- suppressWarnings(local_poly(vs ~ mpg + disp + factor(gear), data = mtcars,
                                       family = "binomial", bandwidth = c(10, 300, 0.5),
                                       verbose = FALSE))
  curves <- plot(logit, n_grid = 20)
  expect_null(localmean:::partial_residuals(logit, curves))
  expect_true(all(curves$.lower >= 0 & curves$.fitted <= curves$.upper & curves$.upper <= 1))
  # where the local likelihood has no maximum the panel is drawn empty, with a note
  apart <- suppressWarnings(local_poly(am ~ wt + hp + qsec, data = mtcars, family = "binomial",
                                       bandwidth = c(1, 60, 2), verbose = FALSE))
  expect_true(all(is.na(plot(apart, n_grid = 5)$.fitted)))
})

test_that("plot() of a classifier draws class probabilities for any number of predictors", {
  fit <- local_classify(Species ~ ., data = iris, bandwidth = 0.5, verbose = FALSE)
  probs <- plot(fit, n_grid = 20)
  expect_identical(levels(probs$predictor), names(iris)[1:4])
  expect_identical(nrow(probs), 4L * 20L * 3L)
  totals <- tapply(probs$.prob, list(probs$predictor, probs$x), sum)
  expect_equal(as.vector(totals[!is.na(totals)]), rep(1, 80))
  typical <- as.data.frame(lapply(iris[1:4], function(v) rep(median(v), 20)))
  typical$Petal.Length <- unique(probs$x[probs$predictor == "Petal.Length"])
  ref <- predict(fit, typical, type = "prob")
  got <- probs[probs$predictor == "Petal.Length", ]
  expect_equal(got$.prob, as.vector(ref))
  one <- local_classify(Species ~ Petal.Length, data = iris, bandwidth = 0.3, verbose = FALSE)
  expect_identical(levels(plot(one)$class), levels(iris$Species))
  mixed <- local_classify(factor(am) ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.3),
                          verbose = FALSE)
  bars <- plot(mixed)
  expect_identical(bars$level[bars$predictor == "factor(cyl)"], rep(c("4", "6", "8"), 2))
  two <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris, bandwidth = 0.3,
                        verbose = FALSE)
  expect_identical(plot(two, n_grid = 20), two)                # the map
  expect_s3_class(plot(two, which = "conditional", n_grid = 20), "data.frame")
})

layer_geoms <- function(p) vapply(p$layers, function(l) class(l$geom)[1L], "")

test_that("autoplot() draws conditional facets and classifiers", {
  skip_if_not_installed("ggplot2")
  p <- ggplot2::autoplot(mtcars3(), n_grid = 30)
  expect_s3_class(p, "ggplot")
  expect_setequal(layer_geoms(p), c("GeomPoint", "GeomRibbon", "GeomLine", "GeomPointrange",
                                    "GeomText"))
  built <- expect_no_warning(ggplot2::ggplot_build(p))
  expect_identical(nlevels(built$layout$layout$PANEL), 3L)
  expect_equal(p$data, plot(mtcars3(), n_grid = 30))
  fit <- local_classify(Species ~ ., data = iris, bandwidth = 0.5, verbose = FALSE)
  p <- ggplot2::autoplot(fit, n_grid = 20)
  expect_identical(layer_geoms(p), "GeomLine")
  expect_no_warning(ggplot2::ggplot_build(p))
  mixed <- local_classify(factor(am) ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.3),
                          verbose = FALSE)
  expect_identical(layer_geoms(ggplot2::autoplot(mixed)), c("GeomLine", "GeomCol", "GeomText"))
  two <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris, bandwidth = 0.3,
                        verbose = FALSE)
  p <- ggplot2::autoplot(two, n_grid = 30)
  expect_identical(layer_geoms(p), c("GeomRaster", "GeomPoint"))
  expect_no_warning(ggplot2::ggplot_build(p))
  expect_error(ggplot2::autoplot(two, which = "map"), class = "localmean_error")
})
