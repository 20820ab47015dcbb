# The loss registry (losses.hpp, R/likelihood.R) and its new losses, each against a plain-R
# per-query reference at a fixed bandwidth: Gamma (log link) against glm(), Huber and bisquare
# against an rlm-style IRLS (and MASS::rlm), the check loss against an exact enumeration.

set.seed(29)
n <- 120
x <- sort(runif(n))
q <- c(0.13, 0.5, 0.77)
h <- 0.12
kern <- function(v) dnorm((x - v) / h)

test_that("the registry's facts agree with stats' family objects", {
  tab <- losses()
  expect_true(all(c("gaussian", "binomial", "poisson", "Gamma", "multinomial", "huber",
                    "bisquare", "quantile") %in% tab$loss))
  mu <- c(0.1, 0.4, 0.9)
  yv <- c(0, 0.5, 1)
  for (loss in tab$loss[tab$kind == "likelihood" | tab$kind == "least squares"]) {
    row <- tab[tab$loss == loss, ]
    ref <- get(loss, envir = asNamespace("stats"))(link = row$link)
    f <- localmean:::family_of(loss)
    eval_loss <- function(what, v, y = numeric(0)) {
      localmean:::cpp_loss_eval(loss, what, v, y, NA_real_)
    }
    eta <- ref$linkfun(mu)
    expect_equal(eval_loss("linkfun", mu), eta, info = loss)
    expect_equal(eval_loss("linkinv", eta), mu, info = loss)
    expect_equal(eval_loss("linkinv", eval_loss("linkfun", mu)), mu, info = loss)
    expect_equal(eval_loss("mu.eta", eta), ref$mu.eta(eta), info = loss)
    expect_equal(eval_loss("variance", mu), ref$variance(mu), info = loss)
    y <- if (row$y_open) yv + 0.2 else yv
    expect_equal(eval_loss("dev.resids", mu, y), ref$dev.resids(y, mu, 1), info = loss)
    expect_equal(row$canonical, ref$link == switch(ref$family, gaussian = "identity",
      binomial = , quasibinomial = "logit", poisson = , quasipoisson = "log",
      Gamma = "inverse"), info = loss)
    expect_identical(f$link, row$link)
  }
  r <- c(-3, -0.5, 0, 0.4, 6)
  huber <- localmean:::family_of("huber", 1.345)
  expect_equal(huber$rho(r), ifelse(abs(r) <= 1.345, r^2 / 2, 1.345 * (abs(r) - 1.345 / 2)))
  expect_equal(huber$psi(r), pmax(-1.345, pmin(1.345, r)))
  expect_equal(localmean:::cpp_loss_eval("huber", "weight", r, numeric(0), 1.345),
               MASS::psi.huber(r, k = 1.345))
  expect_equal(localmean:::cpp_loss_eval("bisquare", "weight", r, numeric(0), 4.685),
               MASS::psi.bisquare(r, c = 4.685))
  expect_equal(localmean:::cpp_loss_eval("bisquare", "psi", r, numeric(0), 4.685),
               r * MASS::psi.bisquare(r, c = 4.685))
  check <- localmean:::family_of("quantile", 0.3)
  expect_equal(check$rho(r), r * (0.3 - (r < 0)))
  expect_equal(tab$tuning[match(c("huber", "bisquare", "quantile"), tab$loss)],
               c(1.345, 4.685, 0.5))
})

test_that("local Gamma fits (log link) equal per-query glm() with kernel weights", {
  y <- rgamma(n, shape = 3, rate = 3 / exp(1 + sin(2 * pi * x)))
  for (degree in 0:2) {
    fit <- local_poly(x, y, degree = degree, family = "Gamma", bandwidth = h, verbose = FALSE)
    ref <- vapply(q, function(v) {
      u <- x - v
      design <- if (degree == 0) matrix(1, n) else cbind(1, outer(u, seq_len(degree), `^`))
      g <- glm.fit(design, y, weights = kern(v), family = Gamma(link = "log"),
                   control = glm.control(epsilon = 1e-14, maxit = 100))
      g$coefficients[[1]]
    }, 1)
    expect_equal(predict(fit, q, type = "link"), ref, tolerance = 1e-6, info = degree)
    expect_equal(predict(fit, q), exp(ref), tolerance = 1e-6)
  }
  fam <- local_poly(x, y, family = Gamma(link = "log"), bandwidth = h, verbose = FALSE)
  expect_equal(fitted(fam), fitted(local_poly(x, y, family = "Gamma", bandwidth = h,
                                               verbose = FALSE)))
  expect_equal(deviance(fam), sum(Gamma()$dev.resids(y, fitted(fam), 1)))
  expect_error(local_poly(x, y, family = Gamma(), bandwidth = h, verbose = FALSE),
               class = "localmean_error", regexp = "log")
  expect_error(local_poly(x, y - 2, family = "Gamma", bandwidth = h, verbose = FALSE),
               class = "localmean_error", regexp = "\\(0, Inf\\)")
})

# M-estimation of one window as MASS::rlm(wt.method = "case", scale.est = "MAD"): from the
# weighted least-squares fit, scale the weighted MAD of the residuals, IRLS weights
# w * psi(r / s) / (r / s), iterated to a fixed point.
rlm_ref <- function(design, y, w, weight_fun) {
  beta <- lm.wfit(design, y, w)$coefficients
  for (i in 1:500) {
    r <- drop(y - design %*% beta)
    s <- localmean:::weighted_mad(r, w)
    new <- lm.wfit(design, y, w * weight_fun(r / s))$coefficients
    if (max(abs(new - beta)) < 1e-13) break
    beta <- new
  }
  new
}

test_that("Huber and bisquare fits equal a per-query rlm-style IRLS and MASS::rlm", {
  y <- sin(2 * pi * x) + rt(n, df = 2) / 3
  y[c(20, 60, 100)] <- y[c(20, 60, 100)] + 5
  control <- local_control(max_iter = 100, tol = 1e-11)
  for (loss in c("huber", "bisquare")) {
    weight_fun <- if (loss == "huber") function(u) MASS::psi.huber(u, k = 1.345) else
      function(u) MASS::psi.bisquare(u, c = 4.685)
    for (degree in 0:2) {
      fit <- local_poly(x, y, degree = degree, family = loss, bandwidth = h, control = control,
                        verbose = FALSE)
      ref <- vapply(q, function(v) {
        design <- if (degree == 0) matrix(1, n) else cbind(1, outer(x - v, seq_len(degree), `^`))
        rlm_ref(design, y, kern(v), weight_fun)[[1]]
      }, 1)
      expect_equal(predict(fit, q), ref, tolerance = 1e-6, info = paste(loss, degree))
    }
    psi <- if (loss == "huber") MASS::psi.huber else MASS::psi.bisquare
    fit <- local_poly(x, y, family = loss, bandwidth = h, control = control, verbose = FALSE)
    rlm_fit <- MASS::rlm(cbind(1, x - q[2]), y, weights = kern(q[2]), wt.method = "case",
                         psi = psi, scale.est = "MAD", acc = 1e-13, maxit = 500,
                         test.vec = "coef")
    expect_equal(predict(fit, q[2]), unname(coef(rlm_fit)[1]), tolerance = 1e-6, info = loss)
  }
  # a robust fit ignores the outliers that pull least squares
  ls <- local_poly(x, y, bandwidth = h, verbose = FALSE)
  hub <- local_poly(x, y, family = "huber", tuning = 1, bandwidth = h, verbose = FALSE)
  truth <- sin(2 * pi * x[60])
  expect_lt(abs(fitted(hub)[60] - truth), abs(fitted(ls)[60] - truth))
  expect_error(local_poly(x, y, family = "huber", tuning = -1, bandwidth = h),
               class = "localmean_error", regexp = "tuning")
  expect_error(predict(hub, 0.5, se.fit = TRUE), class = "localmean_error",
               regexp = "not available")
  expect_output(print(hub), "huber \\(tuning = 1\\)")
})

# The weighted check-loss minimum of one window, exactly: local constant, the weighted quantile
# (the smallest y whose cumulative weight share reaches tau); local linear in one predictor, the
# best line through two window points.
check_loss <- function(r, w, tau) sum(w * r * (tau - (r < 0)))
quantile_ref <- function(v, y, tau, degree) {
  w <- kern(v)
  if (degree == 0) {
    o <- order(y)
    return(y[o][which(cumsum(w[o]) / sum(w) >= tau)[1]])
  }
  best <- Inf
  for (i in 1:(n - 1)) for (j in (i + 1):n) {
    b <- (y[j] - y[i]) / (x[j] - x[i])
    a <- y[i] + b * (v - x[i])
    val <- check_loss(y - a - b * (x - v), w, tau)
    if (val < best) {
      best <- val
      coef <- a
    }
  }
  coef
}

test_that("quantile fits equal the exact weighted check-loss minimum", {
  y <- sin(2 * pi * x) + rnorm(n, sd = 0.3)
  for (tau in c(0.5, 0.2, 0.9)) {
    for (degree in 0:1) {
      fit <- local_poly(x, y, degree = degree, family = "quantile", tau = tau,
                        bandwidth = h, verbose = FALSE)
      ref <- vapply(q, quantile_ref, 1, y = y, tau = tau, degree = degree)
      expect_equal(predict(fit, q), ref, tolerance = 1e-6, info = paste(tau, degree))
    }
  }
  # degree 2: the check loss at the fit is no larger than at any nearby coefficients
  fit <- local_poly(x, y, degree = 2, family = "quantile", tau = 0.7, bandwidth = h,
                    verbose = FALSE)
  design <- cbind(1, x - q[2], (x - q[2])^2)
  res <- localmean:::engine_run(fit$spec, matrix(q[2]))
  beta <- res$coef[1, , 1]
  best <- check_loss(y - design %*% beta, kern(q[2]), 0.7)
  for (k in 1:50) {
    other <- beta + rnorm(3, sd = 1e-3)
    expect_gte(check_loss(y - design %*% other, kern(q[2]), 0.7), best - 1e-12)
  }
  expect_error(local_poly(x, y, family = "quantile", tau = 1, bandwidth = h),
               class = "localmean_error", regexp = "tau")
})

test_that("quantile fits equal quantreg::rq() with kernel weights", {
  skip_if_not_installed("quantreg")
  y <- sin(2 * pi * x) + rnorm(n, sd = 0.3)
  fit <- local_poly(x, y, degree = 2, family = "quantile", tau = 0.25, bandwidth = h,
                    verbose = FALSE)
  ref <- vapply(q, function(v) {
    u <- x - v
    unname(coef(quantreg::rq(y ~ u + I(u^2), tau = 0.25, weights = kern(v)))[1])
  }, 1)
  expect_equal(predict(fit, q), ref, tolerance = 1e-6)
})

test_that("robust and quantile bandwidths by leave-one-out; threads do not matter", {
  y <- sin(2 * pi * x) + rt(n, df = 2) / 3
  fit <- local_poly(x, y, family = "quantile", tau = 0.5, verbose = FALSE)
  expect_identical(fit$bandwidth_method, "cv")
  expect_true(is.finite(fit$bandwidth))
  expect_error(local_poly(x, y, family = "huber", bandwidth = "gcv"),
               class = "localmean_error", regexp = "cv")
  one <- local_poly(x, y, family = "bisquare", bandwidth = h, n_threads = 1, verbose = FALSE)
  two <- local_poly(x, y, family = "bisquare", bandwidth = h, n_threads = 2, verbose = FALSE)
  expect_identical(fitted(one), fitted(two))
})

test_that("windows that do not converge give NA with one warning", {
  y <- sin(2 * pi * x) + rnorm(n)
  expect_warning(fit <- local_poly(x, y, family = "bisquare", bandwidth = h,
                                   control = local_control(max_iter = 1), verbose = FALSE),
                 class = "localmean_warning", regexp = "did not converge")
  expect_true(anyNA(fitted(fit)))
})

test_that("quantile fits on tied, rounded data (cars) converge and reach the exact optimum", {
  # on main before the jittered pivots, ties cycled the pivots: NA at 2 to 22 of 50 points
  for (tau in c(0.1, 0.5, 0.9)) for (degree in 0:2) {
    fit <- local_poly(dist ~ speed, data = cars, family = "quantile", tau = tau,
                      degree = degree, bandwidth = 4, verbose = FALSE)
    expect_false(anyNA(fitted(fit)), info = paste(tau, degree))
  }
  # the local check loss at the fit equals the best line through two data points
  local_loss <- function(b, x0, tau, h) {
    w <- dnorm((cars$speed - x0) / h)
    r <- cars$dist - b[1] - b[2] * (cars$speed - x0)
    sum(w * r * (tau - (r < 0)))
  }
  for (case in list(c(10, 0.9, 4), c(15, 0.5, 2), c(20, 0.1, 3))) {
    x0 <- case[1]; tau <- case[2]; h <- case[3]
    u <- cars$speed - x0
    pairs <- utils::combn(50, 2)
    pairs <- pairs[, u[pairs[1, ]] != u[pairs[2, ]], drop = FALSE]
    best <- min(apply(pairs, 2L, function(p) {
      slope <- diff(cars$dist[p]) / diff(u[p])
      local_loss(c(cars$dist[p[1]] - slope * u[p[1]], slope), x0, tau, h)
    }))
    fit <- local_poly(dist ~ speed, data = cars, family = "quantile", tau = tau, bandwidth = h,
                      verbose = FALSE)
    ours <- local_loss(coef(fit, newdata = data.frame(speed = x0)), x0, tau, h)
    expect_equal(ours, best, tolerance = 1e-10)
  }
})

test_that("n_robust reproduces loess(family = 'symmetric') and its robustness weights", {
  set.seed(12)
  x <- sort(runif(120, 0, 10))
  y <- sin(x) + rnorm(120, sd = 0.3)
  y[c(10, 50, 90)] <- y[c(10, 50, 90)] + c(6, -5, 8)
  for (degree in 1:2) {
    lo <- stats::loess(y ~ x, span = 0.4, degree = degree, family = "symmetric",
                       surface = "direct")
    fit <- local_poly(x, y, kernel = "tricube", bandwidth = nn(floor(0.4 * 120)),
                      degree = degree, n_robust = 3, verbose = FALSE)
    expect_equal(fitted(fit), unname(fitted(lo)), tolerance = 1e-6)
    expect_equal(predict(fit, c(2.5, 7.5)), unname(predict(lo, c(2.5, 7.5))), tolerance = 1e-6)
  }
  expect_identical(fit$n_robust, 3L)
  expect_true(all(fit$robustness_weights[c(10, 50, 90)] < 0.2))
  # the weights in plain R: bisquare of r / (6 median |r|)
  r <- c(-3, 0.5, 1, 2, 0.001)
  cmad <- 6 * median(abs(r))
  expect_equal(localmean:::robustness_weights(r),
               ifelse(abs(r) > 0.999 * cmad, 0, ifelse(abs(r) <= 0.001 * cmad, 1,
                                                          (1 - (r / cmad)^2)^2)))
  expect_error(local_poly(x, y, bandwidth = 1, family = "huber", n_robust = 2),
               class = "localmean_error", regexp = "n_robust")
  expect_error(local_poly(x, y, bandwidth = 1, n_robust = -1), class = "localmean_error",
               regexp = "n_robust")
})

test_that("n_robust searches the nn() radii once for every iteration", {
  set.seed(13)
  x <- runif(200, 0, 10)
  y <- sin(x) + rnorm(200, sd = 0.3)
  # count the neighbour searches of a compact kernel's radii
  searches <- new.env()
  searches$n <- 0
  ns <- asNamespace("localmean")
  trace("cpp_knn_distinct_radius", substitute(assign("n", e$n + 1, envir = e),
                                               list(e = searches)), where = ns, print = FALSE)
  on.exit(untrace("cpp_knn_distinct_radius", where = ns), add = TRUE)
  fit <- local_poly(x, y, kernel = "tricube", bandwidth = nn(60), n_robust = 3, verbose = FALSE)
  # the radii of the data points: searched by the first fit, reused by the three refits
  expect_identical(searches$n, 1)
  expect_null(fit$nn$memo)
  # the same fit as the refits done one by one, each searching its own radii
  manual <- local_poly(x, y, kernel = "tricube", bandwidth = nn(60), verbose = FALSE)
  for (i in 1:3) {
    manual <- local_poly(x, y, kernel = "tricube", bandwidth = nn(60), verbose = FALSE,
                         weights = localmean:::robustness_weights(residuals(manual)))
  }
  expect_identical(fitted(fit), fitted(manual))
})
