# Conditional densities, distributions and quantiles: kde(y ~ x) (R/conditional.R).

# Plain-R product-kernel reference: x-weights (radial in the numeric predictors, Aitchison-Aitken
# for unordered and lambda^|r - r_i| for ordered categorical ones) times the kernel in y, or its
# distribution function written out for the Gaussian and the Epanechnikov.
cdf_ref <- function(u, kernel) {
  switch(kernel,
    gaussian = pnorm(u),
    epanechnikov = ifelse(u <= -1, 0, ifelse(u >= 1, 1, 0.5 + 0.75 * u - 0.25 * u^3)),
    stop("no reference for ", kernel)
  )
}

cdens_weights_ref <- function(x, codes, ordered, nlev, x0, codes0, h, lambda, kernel, w) {
  r <- if (ncol(x)) sqrt(rowSums(sweep(sweep(x, 2L, x0), 2L, h, `/`)^2)) else rep(0, nrow(x))
  k <- kernel_weight_ref(r, kernel)
  for (j in seq_len(ncol(codes))) {
    k <- k * if (ordered[j]) lambda[j]^abs(codes[, j] - codes0[j]) else
      ifelse(codes[, j] == codes0[j], 1 - lambda[j], lambda[j] / (nlev[j] - 1))
  }
  k * w
}

# The predictors' weights k of the data at x0 and the response kernel's values v at y0.
cdens_parts_ref <- function(d, x0, codes0, y0, type, leave_out) {
  k <- cdens_weights_ref(d$x, d$codes, d$ordered, d$nlev, x0, codes0, d$h, d$lambda, d$kernel,
                         d$w)
  if (leave_out) k[leave_out] <- 0
  u <- (y0 - d$y) / d$hy
  v <- if (type == "density") kernel_density_ref(u, d$kernel) / d$hy else cdf_ref(u, d$kernel)
  list(k = k, v = v)
}

cdens_ref <- function(d, x0, codes0, y0, type = "density", leave_out = 0L) {
  p <- cdens_parts_ref(d, x0, codes0, y0, type, leave_out)
  sum(p$k * p$v) / sum(p$k)
}

quantile_ref <- function(d, x0, codes0, tau) {
  uniroot(function(y) cdens_ref(d, x0, codes0, y, "distribution") - tau,
          range(d$y) + c(-10, 10) * d$hy, tol = 1e-13)$root
}

ref_data <- function(fit) {
  cat <- fit$categorical
  list(x = fit$x, y = fit$y, codes = if (is.null(cat)) matrix(0L, fit$n, 0L) else cat$codes,
       ordered = cat$ordered, nlev = lengths(cat$levels), h = fit$bandwidth$h,
       lambda = fit$bandwidth$lambda, hy = fit$bandwidth$y, kernel = fit$kernel,
       w = fit$weights %||% rep(1, fit$n))
}

faithful_small <- faithful[seq(1, 272, by = 4), ]

for (kernel in c("gaussian", "epanechnikov")) {
  test_that(paste("f, F and quantiles equal the product-kernel reference:", kernel), {
    fit <- kde(waiting ~ eruptions, data = faithful_small, kernel = kernel,
               bandwidth = c(0.5, 6))
    expect_s3_class(fit, "local_cdens")
    d <- ref_data(fit)
    nd <- data.frame(eruptions = c(1.9, 3.1, 4.4), waiting = c(52, 70, 83))
    ys <- c(45, 60.5, 80)
    dens <- unname(predict(fit, nd, y = ys))
    dist <- unname(predict(fit, nd, y = ys, type = "distribution"))
    q <- predict(fit, nd, type = "quantile", tau = c(0.1, 0.5, 0.95))
    for (i in 1:3) {
      for (k in seq_along(ys)) {
        expect_equal(dens[i, k], cdens_ref(d, nd$eruptions[i], integer(0), ys[k]),
                     tolerance = 1e-10)
        expect_equal(dist[i, k], cdens_ref(d, nd$eruptions[i], integer(0), ys[k],
                                           "distribution"), tolerance = 1e-10)
      }
      expect_equal(unname(q[i, ]), vapply(c(0.1, 0.5, 0.95), function(t) {
        quantile_ref(d, nd$eruptions[i], integer(0), t)
      }, 1), tolerance = 1e-10)
    }
    # at pairs: each row's own response
    expect_equal(predict(fit, nd), vapply(1:3, function(i) {
      cdens_ref(d, nd$eruptions[i], integer(0), nd$waiting[i])
    }, 1), tolerance = 1e-10)
    expect_equal(predict(fit, nd, type = "distribution"), vapply(1:3, function(i) {
      cdens_ref(d, nd$eruptions[i], integer(0), nd$waiting[i], "distribution")
    }, 1), tolerance = 1e-10)
  })
}

test_that("mixed predictors and prior weights equal the product-kernel reference", {
  cars <- transform(mtcars, cyl = factor(cyl), gear = ordered(gear), manual = am == 1)
  w <- seq(0.5, 2, length.out = 32)
  fit <- kde(mpg ~ wt + cyl + gear + manual, data = cars, weights = w,
             bandwidth = c(0.6, 0.2, 0.4, 0.3, 2.5))
  d <- ref_data(fit)
  expect_equal(d$ordered, c(FALSE, TRUE, FALSE))
  nd <- cars[c(1, 5, 20), ]
  dens <- unname(predict(fit, nd, y = c(15, 22)))
  q <- predict(fit, nd, type = "quantile", tau = c(0.25, 0.75))
  at_pairs <- predict(fit, nd)  # each row's own mpg
  for (i in 1:3) {
    codes0 <- c(match(as.character(nd$cyl[i]), levels(cars$cyl)),
                match(as.character(nd$gear[i]), levels(cars$gear)),
                match(as.character(nd$manual[i]), c("FALSE", "TRUE")))
    for (k in 1:2) {
      expect_equal(dens[i, k], cdens_ref(d, nd$wt[i], codes0, c(15, 22)[k]), tolerance = 1e-10)
    }
    expect_equal(at_pairs[i], cdens_ref(d, nd$wt[i], codes0, nd$mpg[i]), tolerance = 1e-10)
    expect_equal(unname(q[i, ]), c(quantile_ref(d, nd$wt[i], codes0, 0.25),
                                   quantile_ref(d, nd$wt[i], codes0, 0.75)), tolerance = 1e-10)
  }
  # a factor predictor alone
  fit2 <- kde(mpg ~ cyl, data = cars, bandwidth = c(0.3, 2))
  d2 <- ref_data(fit2)
  p <- predict(fit2, data.frame(cyl = factor(c("4", "8"))), y = 20,
               type = "distribution")
  expect_equal(p[, 1], c(cdens_ref(d2, numeric(0), 1L, 20, "distribution"),
                         cdens_ref(d2, numeric(0), 3L, 20, "distribution")), tolerance = 1e-10)
})

test_that("f integrates to one over y and F is monotone", {
  fit <- kde(accel ~ times, data = MASS::mcycle, bandwidth = c(2, 8))
  nd <- data.frame(times = c(5, 20, 35))
  ys <- seq(-250, 200, length.out = 3001)
  dens <- predict(fit, nd, y = ys)
  step <- ys[2] - ys[1]
  expect_equal(rowSums(dens[, -1] + dens[, -3001]) * step / 2, rep(1, 3), tolerance = 1e-6)
  dist <- predict(fit, nd, y = ys, type = "distribution")
  expect_true(all(apply(dist, 1, diff) >= 0))
  expect_equal(dist[, 1], rep(0, 3), tolerance = 1e-12)
  expect_equal(dist[, 3001], rep(1, 3), tolerance = 1e-12)
  # quantiles invert F and increase with tau
  tau <- c(0.05, 0.25, 0.5, 0.75, 0.95)
  q <- predict(fit, nd, type = "quantile", tau = tau)
  expect_true(all(apply(q, 1, diff) > 0))
  back <- vapply(1:3, function(i) predict(fit, nd[i, , drop = FALSE], y = q[i, ],
                                          type = "distribution")[cbind(1, 1:5)], tau)
  expect_equal(back, matrix(tau, 5, 3), tolerance = 1e-10)
})

test_that("a factor predictor with lambda = 0 gives each group's own kde", {
  fit <- kde(mpg ~ factor(cyl), data = mtcars, bandwidth = c(0, 1.5))
  ys <- c(14, 20, 27)
  p <- predict(fit, data.frame(cyl = c(4, 6, 8)), y = ys)
  for (k in 1:3) {
    group <- kde(mtcars$mpg[mtcars$cyl == c(4, 6, 8)[k]], bandwidth = 1.5, gridsize = 0)
    expect_equal(p[k, ], predict(group, ys), tolerance = 1e-12, ignore_attr = TRUE)
  }
})

test_that("the leave-one-out likelihood equals the reference and mlcv maximises it", {
  ns <- asNamespace("localmean")
  for (kernel in c("gaussian", "epanechnikov")) {
    fit <- kde(mpg ~ wt + factor(cyl), data = mtcars, kernel = kernel,
               bandwidth = c(0.8, 0.2, 4))
    d <- ref_data(fit)
    loo <- ns$cdens_at_data(fit, fit$bandwidth, ns$cdens_search_specs(fit, 1L), TRUE)
    ref <- vapply(seq_len(fit$n), function(i) {
      cdens_ref(d, d$x[i, ], d$codes[i, ], d$y[i], leave_out = i)
    }, 1)
    expect_equal(loo, ref, tolerance = 1e-10)
  }
  fit <- kde(accel ~ times, data = MASS::mcycle, bandwidth = "mlcv")
  expect_identical(fit$bandwidth_method, "mlcv")
  score <- function(h, hy) {
    f <- kde(accel ~ times, data = MASS::mcycle, bandwidth = c(h, hy))
    mean(log(ns$cdens_at_data(f, f$bandwidth, ns$cdens_search_specs(f, 1L), TRUE)))
  }
  h <- fit$bandwidth$h
  hy <- fit$bandwidth$y
  expect_equal(score(h, hy), fit$cv_loglik, tolerance = 1e-10)
  for (a in c(0.8, 1.25)) {
    expect_lte(score(a * h, hy), fit$cv_loglik + 1e-8)
    expect_lte(score(h, a * hy), fit$cv_loglik + 1e-8)
  }
  rot <- kde(accel ~ times, data = MASS::mcycle)
  expect_lte(score(rot$bandwidth$h, rot$bandwidth$y), fit$cv_loglik)
})

test_that("the normal-reference rule is np's", {
  fit <- kde(waiting ~ eruptions, data = faithful)
  n <- nrow(faithful)
  s <- function(v) min(sd(v), IQR(v) / 1.349)
  expect_equal(fit$bandwidth$h, 1.06 * s(faithful$eruptions) * n^(-1 / 6))
  expect_equal(fit$bandwidth$y, 1.06 * s(faithful$waiting) * n^(-1 / 6))
  expect_identical(fit$bandwidth_method, "rot")
})

test_that("kernel_cdf() integrates every registry kernel", {
  ns <- asNamespace("localmean")
  for (kernel in kernel_names_ref) {
    u <- c(-3, -1, -0.7, -0.2, 0, 0.3, 0.9, 1, 2.5)
    ref <- vapply(u, function(b) {
      integrate(kernel_density_ref, -Inf, b, kernel = kernel, rel.tol = 1e-12)$value
    }, 1)
    expect_equal(ns$kernel_cdf(u, kernel), ref, tolerance = 1e-9, info = kernel)
  }
})

test_that("rows with missing values predict NA", {
  fit <- kde(waiting ~ eruptions, data = faithful_small, bandwidth = c(0.5, 6))
  nd <- data.frame(eruptions = c(2, NA, 4), waiting = c(50, 60, NA))
  p <- predict(fit, nd)
  expect_true(is.na(p[2]) && is.na(p[3]) && !is.na(p[1]))
  expect_equal(dim(predict(fit, nd, y = c(50, NA))), c(3L, 2L))
  expect_true(all(is.na(predict(fit, nd, y = c(50, NA))[, 2])))
  q <- predict(fit, nd, type = "quantile", tau = c(0.2, 0.8))
  expect_true(all(is.na(q[2, ])) && !anyNA(q[-2, ]))
  expect_length(predict(fit), nrow(faithful_small))
})

test_that("bad input to predict() gets classed errors naming the argument", {
  fit <- kde(waiting ~ eruptions, data = faithful_small, bandwidth = c(0.5, 6))
  nd <- data.frame(eruptions = 3)
  expect_error(predict(fit, nd, y = "a"), "y", class = "localmean_error")
  expect_error(predict(fit, nd, y = Inf), "y", class = "localmean_error")
  expect_error(predict(fit, nd), "waiting", class = "localmean_error")
  for (tau in list(0, 1, 1.5, NA, "a", numeric(0))) {
    expect_error(predict(fit, nd, type = "quantile", tau = tau), "tau",
                 class = "localmean_error")
  }
  expect_error(predict(fit, nd, y = 50, tau = 0.5), "tau", class = "localmean_error")
  expect_error(predict(fit, nd, type = "quantile", y = 50), "y", class = "localmean_error")
  expect_error(predict(fit, nd, tua = 0.5), "tua", class = "localmean_error")
  expect_error(predict(fit, nd, type = "mode"), "type", class = "localmean_error")
})

test_that("bad arguments of kde(y ~ x) get classed errors naming them", {
  expect_error(kde(waiting ~ eruptions, faithful, bandwith = 1), "bandwith",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, bandwidth = -1), "bandwidth",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, bandwidth = c(0.5, 0)), "waiting",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, bandwidth = c(a = 1, b = 2)), "names",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, bandwidth = "plugin"), "bandwidth",
               class = "localmean_error")
  expect_error(kde(mpg ~ factor(cyl), mtcars, bandwidth = c(0.9, 1)), "factor\\(cyl\\)",
               class = "localmean_error")
  expect_error(kde(as.Date("2020-01-01") + cyl ~ mpg, mtcars), "numeric",
               class = "localmean_error")
  expect_error(kde(Species ~ Sepal.Length, iris, bandwidth = c(0.5, 0.9)), "lambda",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, gridsize = 10), "gridsize",
               class = "localmean_error")
  expect_error(kde(waiting ~ eruptions, faithful, kernel = function(u) exp(-u^2)), "kernel",
               class = "localmean_error")
})

test_that("print, summary, plot and logLik work", {
  fit <- kde(waiting ~ eruptions, data = faithful_small, bandwidth = c(0.5, 6))
  expect_output(print(fit), "f\\(waiting \\| eruptions\\)")
  s <- summary(fit)
  expect_s3_class(s, "summary.local_cdens")
  expect_output(print(s), "Conditional quartiles")
  expect_equal(nrow(s$quartiles), 5L)
  ll <- logLik(fit)
  expect_equal(as.numeric(ll), sum(log(predict(fit))), tolerance = 1e-10)
  expect_identical(nobs(fit), nrow(faithful_small))
  expect_identical(formula(fit), waiting ~ eruptions)
  expect_silent(plot(fit, n_grid = 21))
  fit2 <- kde(mpg ~ factor(cyl), data = mtcars, bandwidth = c(0.1, 2))
  expect_silent(plot(fit2, n_grid = 21))
  expect_output(print(summary(fit2)), "factor\\(cyl\\)")
  expect_error(plot(kde(mpg ~ wt + hp, mtcars)), "one predictor", class = "localmean_error")
})

test_that("tidy() and glance() summarise the bandwidths and the fit", {
  fit <- kde(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(0.6, 0.2, 2))
  td <- as.data.frame(tidy(fit))
  expect_identical(td$variable, c("wt", "factor(cyl)", "mpg"))
  expect_identical(td$parameter, c("h", "lambda", "h"))
  expect_equal(td$bandwidth, c(0.6, 0.2, 2))
  gl <- as.data.frame(glance(fit))
  expect_identical(gl$nobs, 32L)
  expect_identical(gl$degree, 0L)
  expect_equal(gl$logLik, as.numeric(logLik(fit)))
})

# ---- Categorical responses ----------------------------------------------------------------------

# The response's kernel: Aitchison-Aitken, or Li-Racine normalised over the levels (np's).
y_kernel_ref <- function(z, yi, lambda, nlev, ordered) {
  if (!ordered) return(ifelse(z == yi, 1 - lambda, lambda / (nlev - 1)))
  lambda^abs(z - yi) / vapply(yi, function(l) sum(lambda^abs(seq_len(nlev) - l)), 1)
}

cat_data <- local({
  set.seed(31)
  n <- 60
  x <- runif(n)
  g <- factor(sample(c("a", "b", "c"), n, TRUE))
  y <- cut(x + rnorm(n, sd = 0.3), c(-Inf, 0.3, 0.7, Inf), labels = c("lo", "mid", "hi"))
  data.frame(x = x, g = g, y = factor(y, levels = c("lo", "mid", "hi")),
             o = factor(y, levels = c("lo", "mid", "hi"), ordered = TRUE))
})

test_that("a categorical response gives local_classify()'s probabilities at lambda = 0", {
  fit <- kde(y ~ x, data = cat_data, bandwidth = c(0.15, 0))
  cl <- local_classify(y ~ x, data = cat_data, bandwidth = 0.15, degree = 0)
  nd <- cat_data[c(3, 17, 40), ]
  expect_equal(unname(predict(fit, nd, y = levels(cat_data$y))),
               unname(predict(cl, nd, type = "prob")), tolerance = 1e-12)
  expect_equal(predict(fit, nd), unname(predict(cl, nd, type = "prob"))[cbind(1:3,
               as.integer(nd$y))], tolerance = 1e-12)
})

for (response in c("y", "o")) {
  test_that(paste("conditional probabilities equal the reference:", response), {
    f <- stats::as.formula(paste(response, "~ x + g"))
    fit <- kde(f, data = cat_data, bandwidth = c(0.2, 0.3, 0.25), kernel = "epanechnikov")
    d <- ref_data(fit)
    ordered <- response == "o"
    nd <- data.frame(x = c(0.2, 0.55), g = factor(c("a", "c"), levels = c("a", "b", "c")))
    p <- predict(fit, nd, y = c("lo", "mid", "hi"))
    for (i in 1:2) {
      k <- cdens_weights_ref(d$x, d$codes, d$ordered, d$nlev, nd$x[i], as.integer(nd$g[i]),
                             d$h, d$lambda, d$kernel, d$w)
      ref <- vapply(1:3, function(z) {
        sum(k * y_kernel_ref(z, fit$y, 0.25, 3, ordered)) / sum(k)
      }, 1)
      expect_equal(unname(p[i, ]), ref, tolerance = 1e-12)
    }
    expect_equal(unname(rowSums(p)), c(1, 1), tolerance = 1e-12)
    if (ordered) {
      expect_equal(unname(predict(fit, nd, y = c("lo", "mid", "hi"), type = "distribution")),
                   t(apply(unname(p), 1, cumsum)), tolerance = 1e-12)
    } else {
      expect_error(predict(fit, nd, y = "lo", type = "distribution"), class = "localmean_error")
    }
    expect_error(predict(fit, nd, type = "quantile"), class = "localmean_error")
    expect_error(predict(fit, nd, y = "top"), "outside the levels", class = "localmean_error")
  })
}

test_that("mlcv chooses every lambda of a categorical response and scores the reference", {
  fit <- kde(y ~ x + g, data = cat_data, bandwidth = "mlcv", verbose = FALSE)
  d <- ref_data(fit)
  lambda_y <- fit$bandwidth$y
  expect_true(lambda_y >= 0 && lambda_y <= 2 / 3)
  loo <- vapply(seq_len(fit$n), function(i) {
    k <- cdens_weights_ref(d$x, d$codes, d$ordered, d$nlev, d$x[i, ], d$codes[i, ], d$h,
                           d$lambda, d$kernel, d$w)
    k[i] <- 0
    sum(k * y_kernel_ref(fit$y[i], fit$y, lambda_y, 3, FALSE)) / sum(k)
  }, 1)
  expect_equal(fit$cv_loglik, mean(log(loo)), tolerance = 1e-10)
  logical_fit <- kde(I(x > 0.5) ~ g, data = cat_data, bandwidth = c(0.2, 0.1))
  expect_equal(sum(predict(logical_fit, cat_data[1, ], y = c(FALSE, TRUE))), 1)
  expect_output(print(fit), "P\\(y \\| x, g\\).*y lambda \\(unordered\\)")
  expect_equal(tidy(fit)$parameter, c("h", "lambda", "lambda"))
})

# ---- Local linear ------------------------------------------------------------------------------

# The intercept of the weighted least-squares line (plane) of the y-kernel values in x - x0.
ll_ref <- function(d, x0, codes0, y0, type = "density", leave_out = 0L) {
  p <- cdens_parts_ref(d, x0, codes0, y0, type, leave_out)
  z <- sweep(d$x, 2L, x0)
  unname(stats::coef(stats::lm.wfit(cbind(1, z), p$v, p$k))[1L])
}

test_that("local linear f and F equal the weighted least-squares reference", {
  set.seed(2)
  dat <- data.frame(x1 = runif(50), x2 = rnorm(50), g = factor(sample(letters[1:3], 50, TRUE)))
  dat$y <- dat$x1 + 0.5 * dat$x2 + rnorm(50, sd = 0.3)
  w <- runif(50, 0.5, 2)
  for (kernel in c("gaussian", "epanechnikov")) {
    fit <- kde(y ~ x1 + g + x2, data = dat, weights = w, kernel = kernel, degree = 1,
               bandwidth = c(0.4, 0.3, 1.5, 0.5))
    d <- ref_data(fit)
    nd <- data.frame(x1 = c(0.3, 0.7), x2 = c(-0.2, 0.4),
                     g = factor(c("b", "c"), levels = letters[1:3]))
    ys <- c(0, 0.8)
    dens <- unname(predict(fit, nd, y = ys))
    dist <- unname(predict(fit, nd, y = ys, type = "distribution"))
    for (i in 1:2) {
      x0 <- c(nd$x1[i], nd$x2[i])
      for (k in 1:2) {
        expect_equal(dens[i, k], ll_ref(d, x0, as.integer(nd$g[i]), ys[k]), tolerance = 1e-10)
        expect_equal(dist[i, k], ll_ref(d, x0, as.integer(nd$g[i]), ys[k], "distribution"),
                     tolerance = 1e-10)
      }
    }
  }
  expect_output(print(fit), "local linear")
  expect_error(kde(y ~ x1, data = dat, degree = 2), "degree", class = "localmean_error")
})

test_that("local linear leave-one-out likelihood equals the reference; quantiles invert F", {
  fit <- kde(waiting ~ eruptions, data = faithful_small, degree = 1, bandwidth = c(0.4, 5))
  d <- ref_data(fit)
  specs <- localmean:::cdens_search_specs(fit, 1L)
  loo <- localmean:::cdens_at_data(fit, fit$bandwidth, specs, leave_out = TRUE)
  ref <- vapply(c(1, 20, 45), function(i) {
    ll_ref(d, d$x[i, ], integer(0), d$y[i], leave_out = i)
  }, 1)
  expect_equal(loo[c(1, 20, 45)], ref, tolerance = 1e-10)
  q <- predict(fit, data.frame(eruptions = c(2, 4)), type = "quantile", tau = c(0.2, 0.7))
  expect_equal(predict(fit, data.frame(eruptions = c(2, 2, 4, 4), waiting = c(t(q))),
                       type = "distribution"), c(0.2, 0.7, 0.2, 0.7), tolerance = 1e-9)
})

# ---- The Wang-van Ryzin ordered kernel ------------------------------------------------------------

wvr_ref <- function(r, r0, lambda) {
  ifelse(r == r0, 1 - lambda, (1 - lambda) / 2 * lambda^abs(r - r0))
}

test_that("the Wang-van Ryzin kernel of ordered factors equals its plain-R reference", {
  ctrl <- local_control(ordered_kernel = "wangvanryzin")
  dat <- cat_data
  dat$r <- factor(cut(dat$x + rnorm(60, sd = 0.2), 4, labels = FALSE), ordered = TRUE)
  dat$v <- dat$x + as.integer(dat$r) / 4 + rnorm(60, sd = 0.1)
  fit <- kde(v ~ x + r, data = dat, bandwidth = c(0.2, 0.4, 0.3), control = ctrl)
  nd <- data.frame(x = c(0.3, 0.6), r = factor(c(1, 3), levels = 1:4, ordered = TRUE))
  p <- predict(fit, nd, y = c(0.5, 1.2))
  for (i in 1:2) {
    k <- dnorm((dat$x - nd$x[i]) / 0.2) * wvr_ref(as.integer(dat$r), as.integer(nd$r[i]), 0.4)
    for (j in 1:2) {
      expect_equal(unname(p[i, j]), unname(sum(k * dnorm((c(0.5, 1.2)[j] - dat$v) / 0.3) / 0.3) /
                                     sum(k)), tolerance = 1e-12)
    }
  }
  # leave-one-out at the data removes the point's own weight 1 - lambda
  specs <- localmean:::cdens_search_specs(fit, 1L)
  loo <- localmean:::cdens_at_data(fit, fit$bandwidth, specs, leave_out = TRUE)
  k <- dnorm((dat$x - dat$x[5]) / 0.2) * wvr_ref(as.integer(dat$r), as.integer(dat$r[5]), 0.4)
  k[5] <- 0
  expect_equal(loo[5], sum(k * dnorm((dat$v[5] - dat$v) / 0.3) / 0.3) / sum(k),
               tolerance = 1e-12)
  # a regression: the local mean with the same weights
  lm_fit <- local_mean(v ~ r, data = dat, bandwidth = 0.4, control = ctrl)
  w <- wvr_ref(as.integer(dat$r), 2L, 0.4)
  expect_equal(unname(predict(lm_fit, data.frame(r = factor(2, levels = 1:4, ordered = TRUE)))),
               sum(w * dat$v) / sum(w), tolerance = 1e-12)
  # an ordered response: the kernel normalised over the levels
  pfit <- kde(o ~ x, data = cat_data, bandwidth = c(0.2, 0.3), control = ctrl)
  prob <- predict(pfit, data.frame(x = 0.5), y = c("lo", "mid", "hi"))
  k <- dnorm((cat_data$x - 0.5) / 0.2)
  yi <- as.integer(cat_data$o)
  ref <- vapply(1:3, function(z) {
    sum(k * wvr_ref(z, yi, 0.3) / vapply(yi, function(l) sum(wvr_ref(1:3, l, 0.3)), 1)) / sum(k)
  }, 1)
  expect_equal(unname(prob[1, ]), ref, tolerance = 1e-12)
  expect_error(local_control(ordered_kernel = "habbema"), "ordered_kernel",
               class = "localmean_error")
})

# ---- Least-squares cross-validation ------------------------------------------------------------

# sum_i w_i [int f_-i(y | x_i)^2 dy - 2 f_-i(y_i | x_i)], the integral by quadrature on a fine
# grid (numeric response) or a sum over the levels, with the leave-one-out estimates of the
# references above (local constant).
lscv_ref <- function(fit) {
  d <- ref_data(fit)
  w <- d$w / sum(d$w)
  discrete <- fit$y_kind != "numeric"
  total <- 0
  for (i in seq_len(fit$n)) {
    k <- cdens_weights_ref(d$x, d$codes, d$ordered, d$nlev, d$x[i, ], d$codes[i, ], d$h,
                           d$lambda, d$kernel, d$w)
    k[i] <- 0
    a <- k / sum(k)
    if (discrete) {
      nlev <- length(fit$y_levels)
      p <- vapply(seq_len(nlev), function(z) sum(a * y_kernel_ref(z, d$y, d$hy, nlev, FALSE)), 1)
      total <- total + w[i] * (sum(p^2) - 2 * p[d$y[i]])
    } else {
      sq <- stats::integrate(function(y) {
        vapply(y, function(v) sum(a * dnorm((v - d$y) / d$hy) / d$hy)^2, 1)
      }, -Inf, Inf, rel.tol = 1e-12)$value
      total <- total + w[i] * (sq - 2 * sum(a * dnorm((d$y[i] - d$y) / d$hy) / d$hy))
    }
  }
  total
}

test_that("the lscv criterion equals the reference and the selection minimises it", {
  skip_on_cran()  # the reference integrates numerically
  small <- faithful[seq(1, 272, by = 8), ]
  fit <- kde(waiting ~ eruptions, data = small, bandwidth = "lscv", verbose = FALSE)
  expect_equal(fit$bandwidth_method, "lscv")
  expect_equal(fit$cv_ls, lscv_ref(fit), tolerance = 1e-8)
  score <- function(mult) {
    bw <- list(h = fit$bandwidth$h * mult[1], lambda = NULL, y = fit$bandwidth$y * mult[2])
    localmean:::cdens_lscv_score(fit, bw)
  }
  for (mult in list(c(0.8, 1), c(1.25, 1), c(1, 0.8), c(1, 1.25))) {
    expect_gte(score(mult), fit$cv_ls)
  }
  # a categorical response with a factor predictor: lambdas jointly
  cfit <- kde(y ~ x + g, data = cat_data, bandwidth = "lscv", verbose = FALSE)
  expect_equal(cfit$cv_ls, lscv_ref(cfit), tolerance = 1e-10)
  expect_output(print(cfit), "LSCV criterion")
  expect_error(kde(waiting ~ eruptions, data = small, bandwidth = "lscv",
                   kernel = "epanechnikov"), "gaussian", class = "localmean_error")
})

test_that("lscv at fixed bandwidths, local linear: the weights of a linear smoother", {
  skip_on_cran()  # the reference integrates numerically
  fit <- kde(waiting ~ eruptions, data = faithful[seq(1, 272, by = 8), ], degree = 1,
             bandwidth = c(0.5, 5))
  d <- ref_data(fit)
  w <- rep(1 / fit$n, fit$n)
  ref <- sum(vapply(seq_len(fit$n), function(i) {
    z <- cbind(1, d$x[, 1] - d$x[i, 1])
    k <- dnorm((d$x[, 1] - d$x[i, 1]) / 0.5)
    k[i] <- 0
    a <- (solve(crossprod(z, k * z), t(k * z)))[1, ]
    sq <- stats::integrate(function(y) {
      vapply(y, function(v) sum(a * dnorm((v - d$y) / 5) / 5)^2, 1)
    }, -Inf, Inf, rel.tol = 1e-12)$value
    w[i] * (sq - 2 * sum(a * dnorm((d$y[i] - d$y) / 5) / 5))
  }, 1))
  expect_equal(localmean:::cdens_lscv_score(fit, fit$bandwidth), ref, tolerance = 1e-8)
})

# ---- Standard errors of quantiles ----------------------------------------------------------------

test_that("quantile standard errors follow the asymptotic formula", {
  fit <- kde(waiting ~ eruptions, data = faithful_small, bandwidth = c(0.5, 6))
  nd <- data.frame(eruptions = c(1.9, 3.1, 4.4))
  tau <- c(0.25, 0.5)
  p <- predict(fit, nd, type = "quantile", tau = tau, se.fit = TRUE)
  expect_equal(p$fit, predict(fit, nd, type = "quantile", tau = tau))
  d <- ref_data(fit)
  for (i in 1:3) {
    # n h fhat(x) = sum_i phi((x_i - x) / h)
    nhf <- sum(dnorm((d$x[, 1] - nd$eruptions[i]) / 0.5))
    for (t in 1:2) {
      dens <- cdens_ref(d, nd$eruptions[i], integer(0), p$fit[i, t])
      expect_equal(unname(p$se.fit[i, t]),
                   sqrt(tau[t] * (1 - tau[t]) / (2 * sqrt(pi)) / nhf) / dens, tolerance = 1e-10)
    }
  }
  expect_error(predict(fit, nd, y = 60, se.fit = TRUE), "se.fit", class = "localmean_error")
})

# The local linear weights l_i(x0) = w_i K_i e_1' S^-1 (1, x_i - x0) of one numeric predictor
# (Gaussian kernel), by weighted least squares in plain R.
linear_weights_ref <- function(x, x0, h, w) {
  z <- cbind(1, x - x0)
  k <- dnorm((x - x0) / h) * w
  drop(k * (z %*% solve(crossprod(z, k * z))[, 1L]))
}

test_that("local linear quantile standard errors use the local linear weights", {
  dat <- faithful_small
  w <- rep(c(1, 2), length.out = nrow(dat))
  nd <- data.frame(eruptions = c(1.7, 3.1, 5))
  tau <- c(0.25, 0.5)
  for (weights in list(NULL, w)) {
    fit <- kde(waiting ~ eruptions, data = dat, bandwidth = c(0.5, 6), degree = 1,
               weights = weights)
    p <- predict(fit, nd, type = "quantile", tau = tau, se.fit = TRUE)
    expect_equal(p$fit, predict(fit, nd, type = "quantile", tau = tau))
    p_w <- if (is.null(weights)) rep(1, nrow(dat)) else weights / sum(weights)
    for (i in 1:3) {
      l <- linear_weights_ref(dat$eruptions, nd$eruptions[i], 0.5, p_w)
      # with prior weights: sum w K^2 a^2 (a = l / (w K)) times sum w^2
      k <- dnorm((dat$eruptions - nd$eruptions[i]) / 0.5)
      v <- if (is.null(weights)) sum(l^2) else sum(p_w * k^2 * (l / (p_w * k))^2) * sum(p_w^2)
      for (t in 1:2) {
        dens <- sum(l * dnorm((p$fit[i, t] - dat$waiting) / 6) / 6)
        expect_equal(unname(p$se.fit[i, t]), sqrt(tau[t] * (1 - tau[t]) * v) / dens,
                     tolerance = 1e-10)
      }
    }
  }
  # no restriction to the Gaussian kernel with two numeric predictors; larger at the ends
  dat2 <- data.frame(x = runif(80), z = runif(80))
  dat2$y <- dat2$x + rnorm(80)
  fit2 <- kde(y ~ x + z, data = dat2, bandwidth = c(0.3, 0.3, 0.5), kernel = "epanechnikov",
              degree = 1)
  se2 <- predict(fit2, data.frame(x = c(0.5, 0.01), z = 0.5), type = "quantile",
                 se.fit = TRUE)$se.fit
  expect_true(all(is.finite(se2)))
  fit0 <- kde(waiting ~ eruptions, data = dat, bandwidth = c(0.5, 6))
  fit1 <- kde(waiting ~ eruptions, data = dat, bandwidth = c(0.5, 6), degree = 1)
  edge <- data.frame(eruptions = min(dat$eruptions))
  ratio <- predict(fit1, edge, type = "quantile", se.fit = TRUE)$se.fit /
    predict(fit0, edge, type = "quantile", se.fit = TRUE)$se.fit
  expect_gt(drop(ratio), 1.2)
})

test_that("local linear quantile standard errors match the spread of simulated quantiles", {
  skip_on_cran()
  set.seed(31)
  at <- data.frame(x = c(0.02, 0.5))
  sims <- replicate(200, {
    x <- runif(300)
    dat <- data.frame(x = x, y = x + rnorm(300, sd = 0.5))
    fit <- kde(y ~ x, data = dat, bandwidth = c(0.1, 0.1), degree = 1)
    p <- predict(fit, at, type = "quantile", tau = 0.5, se.fit = TRUE)
    c(p$fit[, 1], p$se.fit[, 1])
  })
  ratio <- apply(sims[1:2, ], 1L, sd) / rowMeans(sims[3:4, ])
  expect_true(all(ratio > 0.8 & ratio < 1.25), label = paste(signif(ratio, 3), collapse = ", "))
})

# ---- np at the same bandwidths (np's raw bandwidths: the response's first) -----------------------

test_that("f, F, quantiles and their standard errors equal np's", {
  skip_on_cran()
  skip_if_not_installed("np")
  old <- options(np.messages = FALSE)
  on.exit(options(old))
  set.seed(4)
  n <- 60
  dat <- data.frame(x = runif(n), g = factor(sample(c("a", "b", "c"), n, TRUE)),
                    r = factor(sample(1:4, n, TRUE), ordered = TRUE))
  dat$y <- sin(3 * dat$x) + as.integer(dat$g) / 3 + rnorm(n, sd = 0.3)
  nd <- data.frame(x = c(0.2, 0.5, 0.8), g = factor(c("a", "b", "c"), levels = c("a", "b", "c")),
                   r = factor(c(1, 3, 4), levels = 1:4, ordered = TRUE), y = c(0.5, 1, 1.5))
  for (case in list(list("lc", "liracine"), list("ll", "liracine"), list("lc", "wangvanryzin"))) {
    fit <- kde(y ~ x + g + r, data = dat, bandwidth = c(0.2, 0.3, 0.4, 0.35),
               degree = if (case[[1]] == "ll") 1 else 0,
               control = local_control(ordered_kernel = case[[2]]))
    args <- list(y ~ x + g + r, data = dat, bws = c(0.35, 0.2, 0.3, 0.4),
                 bandwidth.compute = FALSE, regtype = case[[1]], oxkertype = case[[2]])
    bw_dens <- do.call(np_fun("npcdensbw"), args)
    bw_dist <- do.call(np_fun("npcdistbw"), args)
    expect_equal(predict(fit, nd), np_fun("npcdens")(bws = bw_dens, newdata = nd)$condens,
                 tolerance = 1e-8)
    expect_equal(predict(fit, nd, type = "distribution"),
                 np_fun("npcdist")(bws = bw_dist, newdata = nd)$condist, tolerance = 1e-8)
  }
  # quantiles and their standard errors (np inverts to its tol)
  fit <- kde(waiting ~ eruptions, data = faithful_small, bandwidth = c(0.5, 6))
  bw <- np_fun("npcdistbw")(waiting ~ eruptions, data = faithful_small, bws = c(6, 0.5),
                      bandwidth.compute = FALSE)
  nd <- data.frame(eruptions = c(1.9, 3.1, 4.4))
  for (tau in c(0.25, 0.5)) {
    q <- np_fun("npqreg")(bws = bw, newdata = nd, tau = tau, se = TRUE, tol = 1e-12,
                          small = 1e-14)
    ours <- predict(fit, nd, type = "quantile", tau = tau, se.fit = TRUE)
    expect_equal(unname(ours$fit[, 1]), as.vector(q$quantile), tolerance = 1e-8)
    expect_equal(unname(ours$se.fit[, 1]), as.vector(q$quanterr), tolerance = 1e-8)
  }
})

test_that("the engine's quantiles equal the grid-and-Newton inversion, for any thread count", {
  ns <- asNamespace("localmean")
  set.seed(7)
  n <- 600
  dat <- data.frame(x = runif(n), g = factor(sample(c("a", "b"), n, TRUE)))
  dat$y <- sin(2 * pi * dat$x) + rnorm(n, sd = 0.3)
  w <- runif(n, 0.5, 2)
  pts <- matrix(c(-0.1, seq(0, 1, length.out = 200), 3), dimnames = list(NULL, "x"))
  codes <- matrix(rep(1:2, length.out = nrow(pts)), dimnames = list(NULL, "g"))
  tau <- c(0.02, 0.5, 0.97)
  for (kernel in c("gaussian", "epanechnikov", "laplace", "cauchy")) {
    fit <- kde(y ~ x + g, data = dat, kernel = kernel, weights = w,
               bandwidth = c(0.05, 0.3, 0.25))
    fast <- ns$cdens_quantiles(fit, pts, codes, tau)
    expect_equal(fast, ns$cdens_quantiles_grid(fit, pts, codes, tau), tolerance = 1e-10)
    expect_identical(ns$cdens_quantiles(fit, pts, codes, tau, n_threads = 2L), fast)
  }
  expect_false(anyNA(fast))  # the Cauchy reaches every point
  expect_true(all(is.na(ns$cdens_quantiles(
    kde(y ~ x, data = dat, kernel = "epanechnikov", bandwidth = c(0.05, 0.3)),
    pts[nrow(pts), , drop = FALSE], NULL, tau))))  # no data within a compact kernel's reach
})

test_that("the Gaussian mlcv score's gradient and Hessian are its derivatives; Newton's optimum", {
  ns <- asNamespace("localmean")
  set.seed(8)
  n <- 120
  dat <- data.frame(x = runif(n), z = rnorm(n))
  dat$y <- dat$x + dat$z^2 / 2 + rnorm(n, sd = 0.4)
  w <- runif(n, 0.5, 2)
  fit <- kde(y ~ x + z, data = dat, weights = w, bandwidth = c(0.2, 0.5, 0.4))
  specs <- ns$cdens_search_specs(fit, 1L)
  self <- ns$cdens_self_weight(fit, NULL)
  score <- function(theta) ns$gaussian_mlcv_score(fit, specs, theta, self, fit$weights)
  theta <- log(c(0.2, 0.5, 0.4))
  at <- score(theta)
  d <- ref_data(fit)
  ref <- vapply(seq_len(n), function(i) {
    cdens_ref(d, d$x[i, ], integer(0), d$y[i], leave_out = i)
  }, 1)
  expect_equal(at$value, -sum(fit$weights * log(ref)), tolerance = 1e-10)
  eps <- 1e-5
  for (k in 1:3) {
    step <- replace(numeric(3), k, eps)
    up <- score(theta + step)
    down <- score(theta - step)
    expect_equal(at$gradient[k], (up$value - down$value) / (2 * eps), tolerance = 1e-6)
    expect_equal(at$hessian[, k], (up$gradient - down$gradient) / (2 * eps), tolerance = 1e-6)
  }
  chosen <- kde(y ~ x + z, data = dat, weights = w, bandwidth = "mlcv")
  best <- score(log(c(chosen$bandwidth$h, chosen$bandwidth$y)))
  expect_equal(chosen$cv_loglik, -best$value, tolerance = 1e-12)
  expect_lt(max(abs(best$gradient)), 1e-6)
  skip_on_cran()
  search <- ns$cdens_mlcv_search(fit, specs, NULL)  # the general joint search
  expect_gte(chosen$cv_loglik, search$cv_loglik - 1e-9)
  expect_equal(c(chosen$bandwidth$h, chosen$bandwidth$y),
               unname(c(search$bandwidth$h, search$bandwidth$y)), tolerance = 1e-3)
})

test_that("the mlcv Newton search starts at the best multiple of the rule of thumb", {
  ns <- asNamespace("localmean")
  mult <- exp(seq(log(0.25), log(2), length.out = 10L))
  start <- c(0.1, 0.3)
  for (best in c(1L, 3L, 4L, 7L, 10L)) {
    calls <- c(value = 0, full = 0)
    target <- log(mult[best] * start) + c(0.01, -0.01)
    # a convex quadratic, its minimum near mult[best]
    score <- function(theta, derivatives = TRUE) {
      kind <- if (derivatives) "full" else "value"
      calls[kind] <<- calls[kind] + 1
      list(value = sum((theta - target)^2), gradient = 2 * (theta - target), hessian = diag(2, 2))
    }
    begin <- ns$mlcv_newton_start(score, start, log(start / 100), log(start * 100))
    expect_equal(begin$theta, log(mult[best] * start))
    expect_equal(begin$now$value, sum((begin$theta - target)^2))
    # (the third multiple within a grid step of the minimum: no scan; otherwise the scan from the
    # second, the third's score reused)
    expect_equal(unname(calls), if (best == 3L) c(1, 1) else if (best == 1L) c(2, 2) else
      c(min(best - 1, 8), 2))
  }
  # held within the bounds
  target <- log(0.2 * start)
  begin <- ns$mlcv_newton_start(function(theta, derivatives = TRUE) {
    list(value = sum((theta - target)^2), gradient = 2 * (theta - target), hessian = diag(2, 2))
  }, start, log(start * 0.5), log(start * 100))
  expect_equal(begin$theta, log(start * 0.5))
})

test_that("cross-validated bandwidths score no worse than np's npcdensbw on the same objective", {
  skip_on_cran()
  skip_if_not_installed("np")
  old <- options(np.messages = FALSE)
  on.exit(options(old))
  ns <- asNamespace("localmean")
  set.seed(11)
  n <- 100
  dat <- data.frame(x = runif(n), g = factor(sample(c("a", "b", "c"), n, TRUE)))
  dat$y <- sin(2 * pi * dat$x) + as.integer(dat$g) / 2 + rnorm(n, sd = 0.3)
  # both bandwidth sets scored by one function: ours, at fixed bandwidths
  at_np <- function(form, bw) kde(form, data = dat, bandwidth = c(bw$xbw, bw$ybw))
  mlcv <- function(fit) {
    loo <- ns$cdens_at_data(fit, fit$bandwidth, ns$cdens_search_specs(fit, 1L),
                            leave_out = TRUE)
    mean(log(pmax(loo, .Machine$double.xmin)))
  }
  lscv <- function(fit) ns$cdens_lscv_score(fit, fit$bandwidth)
  for (form in list(y ~ x, y ~ x + g)) {
    ours <- kde(form, data = dat, bandwidth = "mlcv")
    theirs <- at_np(form, np_fun("npcdensbw")(form, data = dat, bwmethod = "cv.ml", nmulti = 1))
    expect_equal(ours$cv_loglik, mlcv(ours), tolerance = 1e-10)
    expect_gte(mlcv(ours), mlcv(theirs) - 1e-8)
    ours <- kde(form, data = dat, bandwidth = "lscv")
    theirs <- at_np(form, np_fun("npcdensbw")(form, data = dat, bwmethod = "cv.ls", nmulti = 1))
    expect_equal(ours$cv_ls, lscv(ours), tolerance = 1e-10)
    expect_lte(lscv(ours), lscv(theirs) + 1e-8)
  }
})

test_that("the symmetric sums at the data equal the sums per query, for any thread count", {
  ns <- asNamespace("localmean")
  set.seed(12)
  n <- 700  # three blocks of tree positions
  dat <- data.frame(x = runif(n), z = rnorm(n))
  dat$y <- dat$x + rnorm(n)
  for (weights in list(NULL, runif(n))) {
    for (method in c("exact", "tree")) {
      fit <- kde(y ~ x + z, data = dat, bandwidth = c(0.1, 0.3, 0.2), weights = weights,
                 method = method)
      spec <- ns$with_scale(ns$cdens_search_specs(fit, 1L)$joint, c(0.1, 0.3, 0.2))
      z <- cbind(fit$x, fit$y)
      symmetric <- ns$engine_scale_moments(spec, z, at_data = TRUE)
      expect_equal(symmetric, ns$engine_scale_moments(spec, z), tolerance = 1e-13)
      expect_identical(ns$engine_scale_moments(spec, z, at_data = TRUE, n_threads = 2L),
                       symmetric)
      expect_equal(ns$engine_scale_moments(spec, z, derivatives = FALSE, at_data = TRUE),
                   symmetric[, 1L, drop = FALSE], tolerance = 1e-13)
    }
  }
  one <- kde(y ~ x, data = dat, bandwidth = "mlcv", n_threads = 1)
  expect_identical(kde(y ~ x, data = dat, bandwidth = "mlcv", n_threads = 2)$bandwidth,
                   one$bandwidth)
})

test_that("the joint's sums fused into the marginal's pass equal their own passes", {
  ns <- asNamespace("localmean")
  set.seed(13)
  n <- 700
  dat <- data.frame(x = runif(n), z = rnorm(n))
  dat$y <- dat$x + rnorm(n)
  h <- c(0.05, 0.3, 0.2)
  for (weights in list(NULL, runif(n))) {
    for (method in c("exact", "tree")) {
      fit <- kde(y ~ x + z, data = dat, bandwidth = h, weights = weights, method = method)
      specs <- ns$cdens_search_specs(fit, 1L)
      joint <- ns$with_scale(specs$joint, h)
      marginal <- ns$with_scale(specs$x, h[1:2])
      fused <- ns$engine_scale_moments(marginal, fit$x, at_data = TRUE, joint = joint,
                                       y = fit$y)
      expect_equal(fused$joint, ns$engine_scale_moments(joint, cbind(fit$x, fit$y),
                                                        at_data = TRUE), tolerance = 1e-13)
      expect_equal(fused$marginal, ns$engine_scale_moments(marginal, fit$x, at_data = TRUE),
                   tolerance = 1e-13)
      expect_identical(ns$engine_scale_moments(marginal, fit$x, at_data = TRUE, joint = joint,
                                               y = fit$y, n_threads = 2L), fused)
    }
  }
  # (a joint that reaches beyond the marginal's window has its own pass)
  fit <- kde(y ~ x, data = dat, bandwidth = c(0.05, 0.2))
  specs <- ns$cdens_search_specs(fit, 1L)
  joint <- ns$with_scale(specs$joint, c(0.05, 0.2))
  joint$method <- "exact"
  marginal <- ns$with_scale(specs$x, 0.05)
  marginal$method <- "tree"
  expect_null(ns$engine_scale_moments(marginal, fit$x, at_data = TRUE, joint = joint,
                                      y = fit$y))
})
