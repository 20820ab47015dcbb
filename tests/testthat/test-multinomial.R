# The local multinomial logit of local_classify(degree >= 1) with more than two classes
# (R/classify.R, multinomial_solve() in engine.hpp): per-query references by plain-R Newton.

# The weighted multinomial MLE of the local polynomial at every row of `query`, by plain Newton
# steps in R: weights w_i = prior_i * k(||(x_i - q) / h||) (times `level_weight` per point for
# categorical predictors); classes with at most 1e-8 of the window's weight are absent
# (probability 0) and their points leave the fit. Returns the class probabilities at the
# queries (m x K).
multinom_ref <- function(x, y, query, h, kernel = "gaussian", degree = 1, prior = NULL,
                         level_weight = NULL) {
  x <- as.matrix(x)
  query <- as.matrix(query)
  n <- nrow(x)
  K <- nlevels(y)
  if (is.null(prior)) prior <- rep(1, n)
  powers <- powers_ref(ncol(x), degree)
  out <- matrix(NA_real_, nrow(query), K, dimnames = list(NULL, levels(y)))
  for (r in seq_len(nrow(query))) {
    u <- sweep(sweep(x, 2, query[r, ], "-"), 2, h, "/")
    w <- prior * kernel_weight_ref(sqrt(rowSums(u^2)), kernel)
    if (!is.null(level_weight)) w <- w * level_weight(r)
    share <- vapply(seq_len(K), function(k) sum(w[as.integer(y) == k]), 1) / sum(w)
    present <- which(share > 1e-8)
    p <- numeric(K)
    if (length(present) == 1L) {
      p[present] <- 1
      out[r, ] <- p
      next
    }
    keep <- w > 0 & as.integer(y) %in% present
    X <- sapply(seq_len(nrow(powers)), function(b) apply(u[keep, , drop = FALSE], 1,
                                                           function(v) prod(v^powers[b, ])))
    X <- matrix(X, nrow = sum(keep))
    ww <- w[keep]
    Y <- outer(match(as.integer(y[keep]), present), seq_along(present), `==`) + 0
    J <- length(present) - 1L
    nb <- ncol(X)
    beta <- matrix(0, nb, J)
    probs <- function(beta) {
      eta <- cbind(0, X %*% beta)
      e <- exp(eta - apply(eta, 1, max))
      e / rowSums(e)
    }
    old <- Inf
    for (it in 1:200) {
      P <- probs(beta)
      # separated classes (setosa in the sepal plane): the probabilities converge while the
      # coefficients diverge, so stop when the deviance does
      dev <- -2 * sum(ww * log(rowSums(Y * P)))
      if (abs(dev - old) < 1e-13 * (abs(dev) + 0.1)) break
      old <- dev
      grad <- crossprod(X, ww * (Y - P)[, -1, drop = FALSE])
      H <- matrix(0, nb * J, nb * J)
      for (s in seq_len(J)) for (t in seq_len(J)) {
        v <- ww * P[, s + 1] * ((s == t) - P[, t + 1])
        H[(s - 1) * nb + seq_len(nb), (t - 1) * nb + seq_len(nb)] <- crossprod(X, v * X)
      }
      step <- tryCatch(solve(H, c(grad)), error = function(e) NULL)
      if (is.null(step)) break  # the separated classes' Newton weights underflow
      beta <- beta + step
      if (max(abs(step)) < 1e-12) break
    }
    eta0 <- c(0, beta[1, ])
    p[present] <- exp(eta0 - max(eta0)) / sum(exp(eta0 - max(eta0)))
    out[r, ] <- p
  }
  out
}

sl <- as.matrix(iris[, "Sepal.Length", drop = FALSE])
sepal <- as.matrix(iris[, c("Sepal.Length", "Sepal.Width")])
species <- iris$Species

test_that("one predictor: probabilities equal a per-query weighted multinomial MLE", {
  q <- matrix(c(4.6, 5, 5.5, 5.8, 6.3, 7, 7.6), dimnames = list(NULL, "Sepal.Length"))
  for (degree in 1:2) {
    for (method in c("exact", "tree")) {
      fit <- local_classify(sl, species, degree = degree, bandwidth = 0.6, method = method,
                            n_threads = 1, verbose = FALSE)
      ref <- multinom_ref(sl, species, q, 0.6, degree = degree)
      prob <- predict(fit, q, type = "prob")
      expect_equal(prob, ref, tolerance = 1e-6, info = paste(degree, method))
      expect_equal(rowSums(prob), rep(1, nrow(q)), tolerance = 1e-12)
      expect_identical(predict(fit, q),
                       factor(levels(species)[max.col(ref, "first")], levels = levels(species)))
    }
  }
  # the fitted probabilities at the data points
  fit <- local_classify(sl, species, degree = 1, bandwidth = 0.6, method = "exact",
                        n_threads = 1, verbose = FALSE)
  idx <- c(1, 30, 60, 90, 120, 150)
  expect_equal(fit$fitted[idx, ], multinom_ref(sl, species, sl[idx, , drop = FALSE], 0.6),
               tolerance = 1e-6)
})

test_that("two predictors and prior weights: per-query multinomial MLE; nnet agrees", {
  # setosa is linearly separable in the sepal plane: its probabilities converge to 0 or 1
  # (the deviance converges) while its coefficients diverge
  q <- cbind(Sepal.Length = c(5, 5.6, 6.2, 6.8), Sepal.Width = c(3.4, 2.8, 2.9, 3.1))
  h <- c(0.7, 0.5)
  prior <- rep(c(1, 2, 3), 50)
  fit <- local_classify(sepal, species, degree = 1, bandwidth = h, weights = prior,
                        method = "exact", n_threads = 1, verbose = FALSE)
  ref <- multinom_ref(sepal, species, q, h, prior = prior)
  expect_equal(predict(fit, q, type = "prob"), ref, tolerance = 1e-6)
  skip_if_not_installed("nnet")
  w <- prior * exp(-0.5 * rowSums(sweep(sweep(sepal, 2, q[2, ]), 2, h, "/")^2))
  df <- data.frame(y = species, a = sepal[, 1] - q[2, 1], b = sepal[, 2] - q[2, 2])
  mn <- nnet::multinom(y ~ a + b, data = df, weights = w, trace = FALSE, reltol = 1e-14,
                       maxit = 1000)
  theirs <- predict(mn, data.frame(a = 0, b = 0), type = "probs")
  expect_equal(unname(predict(fit, q[2, , drop = FALSE], type = "prob")[1, ]), unname(theirs),
               tolerance = 1e-5)
})

test_that("a class absent from a compact window has probability 0; one class has 1", {
  q <- matrix(c(4.5, 5.2, 6, 7.5), dimnames = list(NULL, "Sepal.Length"))
  # (at 7.9 the window holds one versicolor point, which a line separates: NA there)
  fit <- suppressWarnings(local_classify(sl, species, degree = 1, kernel = "epanechnikov",
                                         bandwidth = 1, n_threads = 1, verbose = FALSE))
  expect_identical(which(is.na(fit$fitted[, 1])), which(sl[, 1] == 7.9))
  ref <- multinom_ref(sl, species, q, 1, kernel = "epanechnikov")
  prob <- predict(fit, q, type = "prob")
  expect_equal(prob, ref, tolerance = 1e-6)
  expect_identical(unname(prob[4, "setosa"]), 0)  # no setosa beyond 5.8
  expect_equal(rowSums(prob), rep(1, 4), tolerance = 1e-12)
  # a window of one class only
  x <- c(0, 0.1, 0.2, 0.3, 5, 5.1, 5.2, 5.3, 10, 10.1, 10.2, 10.3)
  y <- factor(rep(c("a", "b", "c"), each = 4))
  one <- local_classify(x, y, degree = 1, kernel = "epanechnikov", bandwidth = 1,
                        verbose = FALSE)
  expect_equal(unname(predict(one, c(0.15, 5.15, 10.15), type = "prob")), diag(3))
})

test_that("categorical predictors enter the multinomial logit through the kernel", {
  set.seed(5)
  g <- factor(sample(c("u", "v", "w"), 150, replace = TRUE))
  d <- data.frame(Species = species, Sepal.Length = iris$Sepal.Length, g = g)
  lambda <- 0.3
  fit <- local_classify(Species ~ Sepal.Length + g, data = d, degree = 1,
                        bandwidth = c(0.6, lambda), method = "exact", n_threads = 1,
                        verbose = FALSE)
  nd <- data.frame(Sepal.Length = c(5, 6, 7), g = factor(c("u", "w", "v"), levels = levels(g)))
  aa <- function(r) ifelse(g == nd$g[r], 1 - lambda, lambda / 2)
  ref <- multinom_ref(sl, species, as.matrix(nd[, "Sepal.Length", drop = FALSE]), 0.6,
                      level_weight = aa)
  expect_equal(predict(fit, nd, type = "prob"), ref, tolerance = 1e-6)
})

test_that("the multinomial fit, its predictions and its cv are thread invariant", {
  args <- list(sepal, species, degree = 1, verbose = FALSE)
  f1 <- do.call(local_classify, c(args, list(bandwidth = c(0.7, 0.5), n_threads = 1)))
  f2 <- do.call(local_classify, c(args, list(bandwidth = c(0.7, 0.5), n_threads = 2)))
  expect_identical(f1$fitted, f2$fitted)
  expect_identical(f1$leverage, f2$leverage)
  q <- cbind(Sepal.Length = seq(4.5, 7.5, by = 0.25), Sepal.Width = 3)
  expect_identical(predict(f1, q, type = "prob", n_threads = 1),
                   predict(f1, q, type = "prob", n_threads = 2))
  ctl <- local_control(candidates = cbind(c(0.5, 1, 2), c(0.4, 0.8, 1.6)), refine = FALSE)
  c1 <- do.call(local_classify, c(args, list(bandwidth = "cv", control = ctl, n_threads = 1)))
  c2 <- do.call(local_classify, c(args, list(bandwidth = "cv", control = ctl, n_threads = 2)))
  expect_identical(c1$cv_curve, c2$cv_curve)
})

test_that("cv minimises the exact leave-one-out multinomial deviance", {
  set.seed(3)
  idx <- sample(150, 60)
  x <- sl[idx, , drop = FALSE]
  y <- species[idx]
  cands <- c(0.4, 0.7, 1.2, 2)
  fit <- local_classify(x, y, degree = 1, bandwidth = "cv", method = "exact",
                        control = local_control(candidates = cands, refine = FALSE),
                        n_threads = 1, verbose = FALSE)
  score <- vapply(cands, function(h) {
    own <- vapply(seq_along(y), function(i) {
      multinom_ref(x[-i, , drop = FALSE], y[-i], x[i, , drop = FALSE], h)[1, as.integer(y[i])]
    }, 1)
    -2 * mean(log(own))
  }, 1)
  expect_equal(fit$cv_curve$score, score, tolerance = 1e-6)
  expect_equal(unname(fit$bandwidth), cands[which.min(score)])
  # nn("cv") scores the same leave-one-out deviance
  knn <- local_classify(x, y, degree = 1, bandwidth = nn("cv"), verbose = FALSE)
  expect_true(knn$nn$k >= 3)
  expect_true(all(is.finite(knn$cv_curve$score[knn$cv_curve$k == knn$nn$k])))
})

test_that("separation gives NA with a warning; degree 0 is still the local mode", {
  pl <- as.matrix(iris[, "Petal.Length", drop = FALSE])
  expect_warning(sep <- local_classify(pl, species, degree = 1, bandwidth = 0.5,
                                       verbose = FALSE),
                 "no maximum")
  expect_true(anyNA(sep$fitted))
  expect_true(all(abs(rowSums(sep$fitted) - 1) < 1e-12, na.rm = TRUE))
  mode <- local_classify(sl, species, degree = 0, bandwidth = 0.4, verbose = FALSE)
  onehot <- sapply(levels(species), function(l) as.numeric(species == l))
  q <- c(5, 6, 7)
  ref <- sapply(1:3, function(j) local_poly_ref(sl, onehot[, j], q, 0.4, "gaussian", 0)$coef[, 1])
  expect_equal(unname(predict(mode, q, type = "prob")), ref, tolerance = 1e-10)
  expect_output(print(mode), "local mode")
})

test_that("print and summary name the multinomial logit; bad degree is refused", {
  fit <- local_classify(Species ~ Sepal.Length, data = iris, degree = 1, bandwidth = 0.6,
                        verbose = FALSE)
  expect_output(print(fit), "local multinomial logit \\(3 classes, baseline setosa\\)")
  expect_output(print(summary(fit)), "Classifier +: local multinomial logit")
  expect_true(is.finite(fit$class_deviance))
  expect_gt(fit$df, 2)
  expect_error(local_classify(sl, species, degree = 4, bandwidth = 0.6, verbose = FALSE),
               class = "localmean_error")
})
