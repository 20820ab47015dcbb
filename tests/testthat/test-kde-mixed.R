# kde() with categorical columns: the generalized product kernel, checked against a
# brute-force product-kernel density written here (the agreement with np::npudens, 4e-15, is
# measured by bench/bench-kde-mixed.R: np is not a dependency).

# Discrete kernels with unit mass over the levels (codes 1..c), as documented in kde():
# Aitchison-Aitken for unordered columns, Li-Racine divided by its sum over the levels for
# ordered ones.
ref_discrete <- function(q, l, c, lambda, ordered) {
  if (!ordered) return(ifelse(q == l, 1 - lambda, lambda / (c - 1)))
  lambda^abs(q - l) / sum(lambda^abs(seq_len(c) - l))
}

# f(x, z) = sum_i w_i prod_j dnorm((x_j - x_ij) / h_j) / h_j prod_k L_k(z_k, z_ik), one query
# at a time, one data point at a time.
ref_mixed_kde <- function(data, bandwidth, newdata, weights = NULL) {
  n <- nrow(data)
  w <- if (is.null(weights)) rep(1 / n, n) else weights / sum(weights)
  names(bandwidth) <- names(data)
  vapply(seq_len(nrow(newdata)), function(q) {
    total <- 0
    for (i in seq_len(n)) {
      k <- 1
      for (v in names(data)) {
        col <- data[[v]]
        if (is.numeric(col)) {
          k <- k * stats::dnorm((newdata[[v]][q] - col[i]) / bandwidth[[v]]) / bandwidth[[v]]
        } else {
          f <- factor(col)
          lev <- levels(f)
          k <- k * ref_discrete(match(as.character(newdata[[v]][q]), lev),
                                match(as.character(col[i]), lev), length(lev), bandwidth[[v]],
                                is.ordered(col))
        }
      }
      total <- total + w[i] * k
    }
    total
  }, 1)
}

mixed_data <- function(n = 60, seed = 1) {
  set.seed(seed)
  data.frame(x = stats::rnorm(n), y = stats::runif(n),
             g = sample(c("a", "b", "c"), n, TRUE),
             o = factor(sample(c("lo", "mid", "hi", "top"), n, TRUE),
                        levels = c("lo", "mid", "hi", "top"), ordered = TRUE),
             b = stats::runif(n) > 0.4, stringsAsFactors = TRUE)
}

test_that("mixed densities match a brute-force product kernel", {
  d <- mixed_data()
  d$s <- as.character(d$g)
  nd <- d[c(1, 5, 9, 20), ]
  nd$x <- nd$x + 0.1
  cases <- list(list(cols = c("x", "g"), bw = c(0.5, 0.3)),
                list(cols = c("s", "y"), bw = c(0.6, 0.2)),
                list(cols = c("x", "o"), bw = c(0.4, 0.6)),
                list(cols = c("b", "x"), bw = c(0.25, 0.3)),
                list(cols = c("x", "o", "y", "b"), bw = c(0.6, 0.2, 0.3, 0.1)),
                list(cols = c("g", "x", "y"), bw = c(0, 0.5, 0.2)),
                list(cols = c("o", "g"), bw = c(1, 2 / 3)))
  for (case in cases) {
    data <- d[case$cols]
    fit <- kde(data, bandwidth = case$bw, n_threads = 1)
    expect_equal(predict(fit, nd), ref_mixed_kde(data, case$bw, nd), tolerance = 1e-10)
    wts <- seq_len(nrow(d))
    fit_w <- kde(data, bandwidth = case$bw, weights = wts, n_threads = 1)
    expect_equal(predict(fit_w, nd), ref_mixed_kde(data, case$bw, nd, wts), tolerance = 1e-10)
  }
})

test_that("the grid estimate and the probability table hold the density of every cell", {
  d <- mixed_data()
  fit <- kde(d[c("x", "o")], bandwidth = c(0.5, 0.4), gridsize = 101, n_threads = 1)
  expect_identical(dim(fit$estimate), c(101L, 4L))
  expect_identical(dimnames(fit$estimate)$o, c("lo", "mid", "hi", "top"))
  cells <- expand.grid(x = fit$grid$x, o = levels(d$o))
  cells$o <- factor(cells$o, levels(d$o), ordered = TRUE)
  expect_equal(as.vector(fit$estimate), ref_mixed_kde(d[c("x", "o")], c(0.5, 0.4), cells),
               tolerance = 1e-10)
  frame <- as.data.frame(fit)
  expect_identical(names(frame), c("x", "o", "density"))
  expect_equal(frame$density, as.vector(fit$estimate))
  tab <- kde(d[c("g", "b", "o")], bandwidth = c(0.2, 0.1, 0.5))
  expect_identical(dim(tab$estimate), c(3L, 2L, 4L))
  cells <- expand.grid(g = levels(d$g), b = c(FALSE, TRUE), o = levels(d$o))
  expect_equal(as.vector(tab$estimate), ref_mixed_kde(d[c("g", "b", "o")], c(0.2, 0.1, 0.5), cells),
               tolerance = 1e-10)
})

test_that("mixed estimates sum and integrate to one", {
  d <- mixed_data(200)
  tab <- kde(d[c("g", "o", "b")], bandwidth = c(0.3, 0.7, 0.2))
  expect_equal(sum(tab$estimate), 1, tolerance = 1e-12)
  expect_equal(summary(tab)$integral, 1, tolerance = 1e-12)
  one <- kde(d[c("x", "g", "o")], bandwidth = c(0.3, 0.2, 0.9), n_threads = 1)
  expect_equal(summary(one)$integral, 1, tolerance = 1e-4)  # the grid ends 3 h beyond the data
  two <- kde(d[c("x", "y", "g")], bandwidth = c(0.4, 0.1, 0.5), gridsize = 81, n_threads = 1)
  expect_identical(dim(two$estimate), c(81L, 81L, 3L))
  expect_equal(summary(two)$integral, 1, tolerance = 1e-3)
  # the ordered kernel at lambda = 1 spreads every point evenly over the levels
  flat <- kde(d["o"], bandwidth = 1)
  expect_equal(as.vector(flat$estimate), rep(1 / 4, 4), tolerance = 1e-14)
})

test_that("kde() takes formulas with factor terms", {
  fit <- kde(~ eruptions + factor(waiting > 70), faithful, bandwidth = c(0.3, 0.1), n_threads = 1)
  nd <- data.frame(eruptions = c(2, 4.5), waiting = c(55, 80))
  ref <- ref_mixed_kde(data.frame(e = faithful$eruptions, f = factor(faithful$waiting > 70)),
                       c(0.3, 0.1), data.frame(e = nd$eruptions, f = factor(nd$waiting > 70)))
  expect_equal(predict(fit, nd), ref, tolerance = 1e-10)
  expect_equal(predict(fit, rbind(nd, data.frame(eruptions = NA, waiting = 60)))[1:2], ref)
  expect_true(is.na(predict(fit, rbind(nd, data.frame(eruptions = NA, waiting = 60)))[3]))
})

test_that("the rule of thumb takes h from the numeric rule and lambda = n^(-2/(4 + d))", {
  d <- mixed_data(100)
  bw <- kde_bandwidth(d[c("x", "y", "g", "o")], bandwidth = "rot")
  expect_named(bw, c("x", "y", "g", "o"))
  expect_equal(bw[1:2], kde_bandwidth(as.matrix(d[c("x", "y")]), bandwidth = "rot"))
  expect_equal(unname(bw[3:4]), rep(100^(-2 / 6), 2))
  fit <- kde(d[c("x", "g")], kernel = "epanechnikov", n_threads = 1)
  expect_equal(fit$bandwidth$h,
               unname(kde_bandwidth(d$x, bandwidth = "rot", kernel = "epanechnikov")))
  expect_equal(fit$bandwidth$lambda, min(2 / 3, 100^(-2 / 5)))
})

# The LSCV criterion by brute force over all pairs: sum_z int f^2 with the Gaussian convolution
# and the sum over levels of products of discrete kernels, and the leave-one-out mean.
ref_lscv <- function(data, h, lambda) {
  num <- as.matrix(data[vapply(data, is.numeric, TRUE)])
  cats <- data[!vapply(data, is.numeric, TRUE)]
  n <- nrow(data)
  conv <- matrix(1, n, n)
  kern <- matrix(1, n, n)
  for (j in seq_len(ncol(num))) {
    diff <- outer(num[, j], num[, j], `-`)
    conv <- conv * stats::dnorm(diff, sd = sqrt(2) * h[j])
    kern <- kern * stats::dnorm(diff, sd = h[j])
  }
  for (k in seq_along(cats)) {
    f <- factor(cats[[k]])
    c <- nlevels(f)
    code <- as.integer(f)
    # table[z, l] = L(z, l): column l is the kernel's distribution of levels around level l
    table <- vapply(seq_len(c), function(l) {
      ref_discrete(seq_len(c), l, c, lambda[k], is.ordered(f))
    }, numeric(c))
    conv <- conv * (t(table) %*% table)[code, code]
    kern <- kern * table[code, code]
  }
  diag(kern) <- 0
  sum(conv) / n^2 - 2 * sum(kern) / (n * (n - 1))
}

test_that("the mixed LSCV criterion matches a brute-force sum over pairs", {
  d <- mixed_data(70)
  for (cols in list(c("x", "g"), c("x", "y", "o", "b"), c("o", "g"))) {
    data <- d[cols]
    p <- localmean:::split_predictors(data)
    lscv <- localmean:::lscv_mixed_criterion(p$x, p$categorical, NULL, 1L)
    num <- vapply(data, is.numeric, TRUE)
    h <- c(0.4, 0.2)[seq_len(sum(num))]
    lambda <- c(0.3, 0.4, 0.2)[seq_len(sum(!num))]
    expect_equal(lscv$criterion(h, lambda), ref_lscv(data, h, lambda), tolerance = 1e-10)
  }
})

test_that("mixed LSCV bandwidths minimise the brute-force criterion", {
  d <- mixed_data(150, seed = 3)
  d$x <- d$x + 2 * as.integer(d$g)
  for (cols in list(c("x", "g"), c("x", "o"))) {
    data <- d[cols]
    ours <- kde_bandwidth(data, bandwidth = "lscv", n_threads = 1)
    upper <- if (is.ordered(data[[2]])) 1 else 2 / 3
    crit <- function(theta) ref_lscv(data, exp(theta[1]), upper * stats::plogis(theta[2]))
    best <- Inf
    for (start in list(c(log(0.3), 0), c(log(1), -2), c(log(0.1), 2))) {
      best <- min(best, stats::optim(start, crit, control = list(reltol = 1e-12))$value)
    }
    value <- ref_lscv(data, ours[[1]], ours[[2]])
    expect_lte(value, best + 0.01 * abs(best))
  }
  table_only <- d[c("o", "g")]
  ours <- kde_bandwidth(table_only, bandwidth = "lscv")
  best <- stats::optim(c(0, 0), function(t) {
    ref_lscv(table_only, numeric(0), c(1, 2 / 3) * stats::plogis(t))
  })$value
  expect_lte(ref_lscv(table_only, numeric(0), ours), best + 0.01 * abs(best))
  fit <- kde(d[c("x", "g")], bandwidth = "lscv", n_threads = 1)
  expect_identical(fit$bandwidth_method, "lscv")
  expect_equal(c(fit$bandwidth$h, fit$bandwidth$lambda),
               unname(kde_bandwidth(d[c("x", "g")], bandwidth = "lscv", n_threads = 1)))
})

test_that("mixed fits are identical for 1 and 2 threads", {
  d <- mixed_data(300)
  one <- kde(d[c("x", "y", "o")], bandwidth = "lscv", gridsize = 31, n_threads = 1)
  two <- kde(d[c("x", "y", "o")], bandwidth = "lscv", gridsize = 31, n_threads = 2)
  expect_identical(one$bandwidth, two$bandwidth)
  expect_identical(one$estimate, two$estimate)
  expect_identical(predict(one, d[1:50, ], n_threads = 1), predict(one, d[1:50, ], n_threads = 2))
})

test_that("simulate() draws levels from the kernel and logLik() sums the log density", {
  d <- mixed_data(100)
  tab <- kde(d[c("g", "o")], bandwidth = c(0.4, 0.5))
  sims <- simulate(tab, 40000, seed = 2)
  expect_s3_class(sims$o, "ordered")
  freq <- table(sims$g, sims$o) / nrow(sims)
  expect_equal(as.vector(freq), as.vector(tab$estimate), tolerance = 0.02)
  fit <- kde(d[c("x", "b")], bandwidth = c(0.3, 0.2), n_threads = 1)
  sims <- simulate(fit, 20000, seed = 3)
  expect_type(sims$b, "logical")
  expect_named(sims, c("x", "b"))
  # P(b) from the estimate: the data's share of TRUE moved by lambda towards the other level
  p_true <- mean(d$b) * 0.8 + (1 - mean(d$b)) * 0.2
  expect_equal(mean(sims$b), p_true, tolerance = 0.02)
  expect_equal(as.numeric(logLik(fit)), sum(log(predict(fit, d[c("x", "b")]))))
  expect_identical(simulate(fit, 10, seed = 4), simulate(fit, 10, seed = 4))
})

test_that("print, summary and plot describe mixed fits", {
  d <- mixed_data(100)
  fit <- kde(d[c("x", "g")], bandwidth = c(0.3, 0.2), n_threads = 1)
  expect_output(print(fit), "1 numeric and 1 categorical")
  expect_output(print(fit), "g lambda \\(unordered\\) = 0.2")
  expect_output(print(summary(fit)), "Highest cell +: x = ")
  tab <- kde(d[c("g", "o")], bandwidth = c(0.2, 0.3))
  expect_output(print(tab), "Probability table : 3 x 4 cells")
  file <- tempfile(fileext = ".png")
  grDevices::png(file)
  expect_invisible(plot(fit))
  expect_invisible(plot(tab))
  grDevices::dev.off()
  expect_gt(file.size(file), 0)
  expect_error(plot(kde(d[c("x", "y", "g")], bandwidth = c(0.3, 0.1, 0.2), gridsize = 11)),
               class = "localmean_error")
})

test_that("bad mixed input gives localmean errors", {
  d <- mixed_data()
  fit <- kde(d[c("x", "g")], bandwidth = c(0.3, 0.2), n_threads = 1)
  expect_error(predict(fit, data.frame(x = 0, g = "z")), "has not seen",
               class = "localmean_error")
  expect_error(predict(fit, data.frame(x = 0)), "lacks", class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bandwidth = c(0.3, 0.7)), "must lie in",
               class = "localmean_error")
  expect_error(kde(d[c("x", "o")], bandwidth = c(0.3, -0.1)), "must lie in",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bandwidth = 0.3), "one value per predictor",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bandwidth = c(-1, 0.2)), "positive",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bandwidth = "plugin"), "numeric data only",
               class = "localmean_error")
  expect_error(kde_bandwidth(d[c("x", "g")], bandwidth = "isj"), "numeric data only",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bandwidth = nn(5)), "one number per column",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], bounds = c(-5, 5)), "numeric data only",
               class = "localmean_error")
  expect_error(kde(d[c("x", "g")], method = "binned"), class = "localmean_error")
  expect_error(predict(fit, d[1:3, ], rtol = 0.1), "numeric data only",
               class = "localmean_error")
  d$g[3] <- NA
  expect_error(kde(d[c("x", "g")]), "missing", class = "localmean_error")
})
