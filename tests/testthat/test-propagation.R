# Plain-R label propagation: the kernel matrix, then the iterated local means (labelled rows fixed,
# the others from zero), or the harmonic limit by a linear solve.
propagation_ref <- function(x, labels, h, steps = NULL) {
  d2 <- as.matrix(stats::dist(sweep(x, 2L, h, `/`)))^2
  w <- pmax(1 - d2, 0)  # Epanechnikov
  diag(w) <- 0  # no edge from a point to itself
  y <- outer(as.integer(labels), seq_len(nlevels(labels)), `==`) * 1
  free <- is.na(labels)
  y[free, ] <- 0
  if (is.null(steps)) {
    a <- diag(rowSums(w[free, ])) - w[free, free]
    y[free, ] <- solve(a, w[free, !free] %*% y[!free, ])
    return(y)
  }
  for (s in seq_len(steps)) y[free, ] <- (w %*% y)[free, ] / rowSums(w)[free]
  y
}

test_that("label_propagation() iterates plain-R local means and reaches the harmonic limit", {
  set.seed(1)
  x <- cbind(a = c(rnorm(30), rnorm(30, 3)), b = rnorm(60))
  labels <- factor(rep(c("left", "right"), each = 30))
  labels[-c(1, 2, 31)] <- NA
  h <- c(1.5, 1.5)
  one <- suppressWarnings(label_propagation(x, labels, kernel = "epanechnikov", bandwidth = h,
                                            max_iter = 1, verbose = FALSE))
  ref <- propagation_ref(x, labels, h, steps = 1)
  reached <- rowSums(ref) > 0
  expect_equal(one$prob[reached, ], ref[reached, ] / rowSums(ref[reached, ]),
               tolerance = 1e-12, ignore_attr = TRUE)
  three <- suppressWarnings(label_propagation(x, labels, kernel = "epanechnikov", bandwidth = h,
                                              max_iter = 3, verbose = FALSE))
  ref3 <- propagation_ref(x, labels, h, steps = 3)
  expect_equal(three$prob, ref3 / rowSums(ref3), tolerance = 1e-12, ignore_attr = TRUE)
  limit <- label_propagation(x, labels, kernel = "epanechnikov", bandwidth = h, tol = 1e-12,
                             max_iter = 1e5, verbose = FALSE)
  expect_true(limit$converged)
  expect_equal(limit$prob, propagation_ref(x, labels, h), tolerance = 1e-8, ignore_attr = TRUE)
  expect_identical(limit$fitted, factor(levels(labels)[max.col(limit$prob)], levels(labels)))
  expect_identical(predict(limit), limit$fitted)
  # a new point takes the local mean of the propagated distributions
  p <- c(a = 0.2, b = 0.1)
  w <- pmax(1 - colSums((t(x) - p)^2) / 1.5^2, 0)
  expect_equal(as.vector(predict(limit, p, type = "prob")),
               as.vector(colSums(w * limit$prob) / sum(w)), tolerance = 1e-12)
  # rows with a missing value predict NA
  new <- rbind(p, c(NA, 0), p)
  probs <- predict(limit, new, type = "prob")
  expect_true(all(is.na(probs[2, ])))
  expect_equal(probs[c(1, 3), ], rbind(probs[1, ], probs[1, ]), ignore_attr = TRUE)
  expect_identical(as.integer(is.na(predict(limit, new))), c(0L, 1L, 0L))
})

test_that("label_propagation() follows the data's shape, with any thread count", {
  set.seed(2)
  t <- runif(400, 0, pi)
  upper <- rbinom(400, 1, 0.5) == 1
  x <- cbind(ifelse(upper, cos(t), 1 - cos(t)), ifelse(upper, sin(t), 0.5 - sin(t))) +
    matrix(rnorm(800, sd = 0.05), ncol = 2)
  truth <- factor(ifelse(upper, "upper", "lower"))
  labels <- truth
  labels[-c(which(upper)[1], which(!upper)[1])] <- NA
  fit <- label_propagation(x, labels, n_threads = 1, verbose = FALSE)
  expect_gt(mean(fit$fitted == truth), 0.95)
  expect_identical(label_propagation(x, labels, n_threads = 2, verbose = FALSE)$prob, fit$prob)
})

test_that("label_propagation() reaches tied rows with its default nn() windows", {
  y <- rep(NA, 150)
  y[c(1, 51, 101)] <- as.character(iris$Species[c(1, 51, 101)])
  fit <- label_propagation(iris$Petal.Length, y, verbose = FALSE)
  expect_false(anyNA(fit$prob))
  expect_gt(mean(fit$fitted == iris$Species), 0.8)
})

test_that("label_propagation() marks unreached points and refuses bad input", {
  x <- cbind(c(0, 0.1, 0.2, 5, 5.1))
  labels <- factor(c("a", NA, NA, NA, "b"))
  labels[5] <- NA
  expect_warning(fit <- label_propagation(x, labels, kernel = "epanechnikov", bandwidth = 0.5,
                                          verbose = FALSE),
                 class = "localmean_unreached")
  expect_identical(is.na(fit$prob[, 1]), c(FALSE, FALSE, FALSE, TRUE, TRUE))
  expect_output(print(fit), "Unreached +: 2 points")
  expect_error(label_propagation(x, rep(NA, 5)), "`y` has no labelled point",
               class = "localmean_error")
  expect_error(label_propagation(x, c("a", NA)), "`y` must be", class = "localmean_error")
  expect_error(label_propagation(x, labels, bandwidth = "cv"), "bandwidth",
               class = "localmean_error")
  expect_error(label_propagation(x, labels, bandwidth = nn(5)), "nn",
               class = "localmean_error")
  expect_error(label_propagation(x, labels, max_iter = 0), "max_iter", class = "localmean_error")
})
