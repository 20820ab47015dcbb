# The local-mode classifier (R/classify.R): local_classify() and its methods.

iris_x <- as.matrix(iris[, 1:4])
iris_y <- iris$Species
iris_xs <- sweep(iris_x, 2, apply(iris_x, 2, sd), "/")

# Plain-R kNN majority vote, every point at the k-th distance included, ties to the first level.
knn_vote_ref <- function(train, cl, test, k) {
  sets <- knn_sets_ref(train, test, k)
  votes <- t(vapply(sets, function(i) tabulate(as.integer(cl[i]), nlevels(cl)),
                    numeric(nlevels(cl))))
  list(class = factor(levels(cl)[apply(votes, 1, which.max)], levels = levels(cl)),
       prob = votes / rowSums(votes),
       tied = apply(votes, 1, function(v) sum(v == max(v)) > 1))
}

test_that("uniform + nn(k) is the kNN majority vote on iris (training points)", {
  for (k in c(3, 7, 15)) {
    fit <- local_classify(iris_x, iris_y, kernel = "uniform", bandwidth = nn(k),
                          verbose = FALSE)
    ref <- knn_vote_ref(iris_xs, iris_y, iris_xs, k)
    expect_identical(fitted(fit), ref$class, info = k)
    expect_identical(predict(fit), ref$class, info = k)
    expect_identical(predict(fit, iris[, 1:4]), ref$class, info = k)
    prob <- predict(fit, iris[, 1:4], type = "prob")
    expect_equal(unname(prob), unname(ref$prob), tolerance = 1e-12, info = k)
    expect_identical(colnames(prob), levels(iris_y))
    expect_equal(fit$accuracy, mean(ref$class == iris_y))
  }
})

test_that("uniform + nn(k) is the kNN majority vote on held-out points, unscaled too", {
  test <- seq(1, 150, by = 3)  # rows 1, 4, ...: no test row duplicates a training row
  train <- setdiff(1:150, test)
  for (sc in c(TRUE, FALSE)) {
    s <- if (sc) apply(iris_x[train, ], 2, sd) else rep(1, 4)
    tr <- sweep(iris_x[train, ], 2, s, "/")
    te <- sweep(iris_x[test, ], 2, s, "/")
    for (k in c(1, 4, 9)) {
      fit <- local_classify(iris_x[train, ], iris_y[train], kernel = "uniform",
                            bandwidth = nn(k, scale = sc), verbose = FALSE)
      ref <- knn_vote_ref(tr, iris_y[train], te, k)
      expect_identical(predict(fit, iris_x[test, ]), ref$class,
                       info = sprintf("k = %d, scale = %s", k, sc))
      expect_equal(unname(predict(fit, iris_x[test, ], type = "prob")), unname(ref$prob),
                   tolerance = 1e-12)
    }
  }
})

test_that("the kNN classifier agrees with class::knn where the vote is not tied", {
  skip_if_not_installed("class")
  test <- seq(2, 150, by = 3)
  train <- setdiff(1:150, test)
  s <- apply(iris_x[train, ], 2, sd)
  tr <- sweep(iris_x[train, ], 2, s, "/")
  te <- sweep(iris_x[test, ], 2, s, "/")
  for (k in c(3, 5, 11)) {
    fit <- local_classify(iris_x[train, ], iris_y[train], kernel = "uniform", bandwidth = nn(k),
                          verbose = FALSE)
    ours <- predict(fit, iris_x[test, ])
    theirs <- class::knn(tr, te, iris_y[train], k = k, use.all = TRUE)
    tied <- knn_vote_ref(tr, iris_y[train], te, k)$tied
    expect_gt(sum(!tied), 40)
    expect_identical(as.character(ours[!tied]), as.character(theirs[!tied]), info = k)
  }
})

test_that("class votes tied between classes go to the first level", {
  x <- c(0, 1, 10, 11)
  y <- factor(c("b", "a", "b", "a"), levels = c("a", "b"))
  fit <- local_classify(x, y, kernel = "uniform", bandwidth = nn(2), verbose = FALSE)
  expect_identical(predict(fit, c(0.5, 10.5)), factor(c("a", "a"), levels = c("a", "b")))
  y2 <- factor(y, levels = c("b", "a"))
  fit2 <- local_classify(x, y2, kernel = "uniform", bandwidth = nn(2), verbose = FALSE)
  expect_identical(predict(fit2, c(0.5, 10.5)), factor(c("b", "b"), levels = c("b", "a")))
  expect_equal(unname(predict(fit2, 0.5, type = "prob")), matrix(c(0.5, 0.5), 1))
})

test_that("class probabilities are local means of the one-hot labels", {
  x <- iris_x[, 3:4]
  for (k in c("gaussian", "epanechnikov", "cauchy")) {
    h <- if (k == "epanechnikov") c(1.2, 0.5) else c(0.3, 0.12)
    fit <- local_classify(x, iris_y, kernel = k, bandwidth = h, verbose = FALSE)
    q <- cbind(Petal.Length = c(1.5, 4, 4.9, 5.1, 6), Petal.Width = c(0.2, 1.3, 1.6, 1.7, 2.2))
    onehot <- sapply(levels(iris_y), function(l) as.numeric(iris_y == l))
    ref <- sapply(seq_len(3), function(j) {
      local_poly_ref(x, onehot[, j], q, h, k, 0)$coef[, 1]
    })
    prob <- predict(fit, q, type = "prob")
    expect_equal(unname(prob), unname(ref), tolerance = 1e-10, info = k)
    expect_equal(rowSums(prob), rep(1, nrow(q)), tolerance = 1e-12)
    expect_identical(predict(fit, q),
                     factor(levels(iris_y)[max.col(ref, "first")], levels = levels(iris_y)))
  }
})

test_that("the cv bandwidth minimises the brute-force leave-one-out Brier score", {
  set.seed(21)
  idx <- sample(150, 90)
  x <- iris_x[idx, 3:4]
  y <- droplevels(iris_y[idx])
  onehot <- sapply(levels(y), function(l) as.numeric(y == l))
  cands <- cbind(c(0.1, 0.2, 0.4, 0.8, 1.6), c(0.05, 0.1, 0.2, 0.4, 0.8))
  fit <- local_classify(x, y, bandwidth = "cv",
                        control = local_control(candidates = cands, refine = FALSE),
                        verbose = FALSE)
  score <- vapply(seq_len(nrow(cands)), function(r) {
    err <- vapply(seq_len(nrow(x)), function(i) {
      p <- vapply(seq_len(ncol(onehot)), function(j) {
        local_poly_ref(x[-i, ], onehot[-i, j], x[i, , drop = FALSE], cands[r, ], "gaussian",
                       0)$coef[1, 1]
      }, 1)
      sum((onehot[i, ] - p)^2)
    }, 1)
    mean(err)
  }, 1)
  expect_equal(fit$cv_curve$score, score, tolerance = 1e-8)
  expect_equal(unname(fit$bandwidth), cands[which.min(score), ])
  expect_identical(fit$bandwidth_method, "cv")
})

test_that("the formula method, character labels and S3 methods work", {
  fit <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris, bandwidth = "rot",
                        verbose = FALSE)
  m <- local_classify(iris_x[, 3:4], iris_y, bandwidth = "rot", verbose = FALSE)
  expect_identical(fitted(fit), fitted(m))
  expect_s3_class(fit, c("local_classify", "local_model"), exact = TRUE)
  expect_identical(nobs(fit), 150L)
  expect_identical(formula(fit), Species ~ Petal.Length + Petal.Width)
  expect_identical(fit$levels, levels(iris$Species))
  expect_equal(fit$accuracy, mean(fitted(fit) == iris$Species))
  chr <- local_classify(iris_x[, 3:4], as.character(iris_y), bandwidth = "rot",
                        verbose = FALSE)
  expect_identical(as.character(fitted(chr)), as.character(fitted(m)))
  expect_output(print(fit), "local_classify")
  expect_output(print(summary(fit)), "Training accuracy")
  all <- local_classify(Species ~ ., data = iris, kernel = "uniform", bandwidth = nn(7),
                        verbose = FALSE)
  expect_identical(ncol(all$x), 4L)
  # rows with missing values are dropped
  ir <- iris
  ir$Petal.Width[c(5, 60)] <- NA
  na <- local_classify(Species ~ Petal.Length + Petal.Width, data = ir, bandwidth = "rot",
                       verbose = FALSE)
  expect_identical(nobs(na), 148L)
  # unused levels are dropped
  sub <- local_classify(Species ~ Petal.Length, data = iris[1:100, ], bandwidth = 0.3,
                        verbose = FALSE)
  expect_identical(sub$levels, c("setosa", "versicolor"))
})

test_that("plot() draws a classifier of two or more predictors", {
  pdf(NULL)
  on.exit(dev.off(), add = TRUE)
  fit <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris, bandwidth = "rot",
                        verbose = FALSE)
  expect_invisible(plot(fit, n_grid = 30))
  all <- local_classify(Species ~ ., data = iris, bandwidth = "rot", verbose = FALSE)
  expect_s3_class(plot(all, n_grid = 20), "data.frame") # conditional panels (test-plots.R)
})

test_that("bad classification input is refused with a clear error", {
  x <- iris_x[, 3:4]
  expect_error(local_classify(x, rep("a", 150), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "two classes")
  expect_error(local_classify(x, replace(iris_y, 3, NA), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "missing")
  expect_error(local_classify(x, iris_y[-1], bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "length")
  expect_error(local_classify(x, as.numeric(iris_y), bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "factor")
  for (sel in c("gcv", "aicc", "plugin")) {
    expect_error(local_classify(x, iris_y, bandwidth = sel, verbose = FALSE),
                 class = "localmean_error", regexp = "bandwidth")
  }
  expect_error(local_classify(x, iris_y, bandwidth = nn(150), verbose = FALSE),
               class = "localmean_error", regexp = "k")
  expect_error(local_classify(x, iris_y, bandwidth = 0, verbose = FALSE),
               class = "localmean_error", regexp = "bandwidth")
  expect_error(local_classify(x, iris_y, bandwidth = 1, weights = rep(-1, 150),
                              verbose = FALSE), class = "localmean_error", regexp = "weights")
  expect_error(local_classify(cbind(x, c = 1), iris_y, bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "constant")
  expect_error(local_classify(Species ~ ., data = transform(iris, f = factor(Sepal.Length > 5)),
                              bandwidth = 1, verbose = FALSE),
               class = "localmean_error", regexp = "f")
  fit <- local_classify(x, iris_y, bandwidth = 1, verbose = FALSE)
  expect_error(predict(fit, x, type = "response"))
  far <- local_classify(x, iris_y, kernel = "uniform", bandwidth = 0.5, verbose = FALSE)
  expect_warning(p <- predict(far, cbind(Petal.Length = 30, Petal.Width = 1)),
                 class = "localmean_warning")
  expect_true(is.na(p))
  expect_warning(pr <- predict(far, cbind(Petal.Length = 30, Petal.Width = 1), type = "prob"),
                 class = "localmean_warning")
  expect_true(all(is.na(pr)))
})

test_that("newdata with the wrong number of columns is refused", {
  fit <- local_classify(iris_x[, 3:4], iris_y, bandwidth = 1, verbose = FALSE)
  expect_error(predict(fit, iris_x[, 3, drop = FALSE]), class = "localmean_error",
               regexp = "newdata")
  ff <- local_classify(Species ~ Petal.Length + Petal.Width, data = iris, bandwidth = 1,
                       verbose = FALSE)
  expect_error(predict(ff, iris[, 1:3]), class = "localmean_error", regexp = "Petal.Width")
})

test_that("logLik() is the log-likelihood of the fitted class probabilities", {
  fit <- local_classify(Species ~ Petal.Length, data = iris, bandwidth = 0.3, verbose = FALSE)
  p <- predict(fit, type = "prob")
  own <- p[cbind(seq_len(150), as.integer(iris$Species))]
  ll <- logLik(fit)
  expect_equal(as.numeric(ll), sum(log(own)))
  expect_equal(attr(ll, "df"), sum(fit$leverage))
  expect_identical(attr(ll, "nobs"), 150L)
  expect_equal(AIC(fit), -2 * sum(log(own)) + 2 * sum(fit$leverage))
  multi <- local_classify(Species ~ Sepal.Length, data = iris, degree = 1, bandwidth = 0.5,
                          verbose = FALSE)
  expect_equal(-2 * as.numeric(logLik(multi)), multi$class_deviance)
})
