# Mode seeking: mean shift, blurring / self-local mean, MedoidShift and the principal-component
# shift against plain-R iterations, recovery of separated clusters, thread invariance, errors.

set.seed(7)
centres <- rbind(c(0, 0), c(4, 0), c(2, 4))
truth <- rep(1:3, c(60, 50, 40))
blobs <- centres[truth, ] + matrix(rnorm(300, sd = 0.4), ncol = 2)
same_partition <- function(a, b) {
  all(table(a, b) %in% c(0, as.vector(table(a))))  && length(unique(a)) == length(unique(b))
}

test_that("mean shift modes equal a plain-R iteration", {
  for (kernel in c("gaussian", "epanechnikov", "biweight")) {
    fit <- mean_shift(blobs, bandwidth = 0.9, kernel = kernel, tol = 1e-12, verbose = FALSE)
    for (i in c(1, 70, 150)) {
      ref <- mean_shift_ref(blobs[i, ], blobs, c(0.9, 0.9), kernel, tol = 1e-12)
      expect_equal(fit$point_modes[i, ], ref, tolerance = 1e-10, info = kernel, ignore_attr = TRUE)
    }
  }
  w <- runif(nrow(blobs))
  fit <- mean_shift(blobs, bandwidth = c(0.8, 1), weights = w, tol = 1e-12, verbose = FALSE)
  ref <- mean_shift_ref(blobs[5, ], blobs, c(0.8, 1), weights = w, tol = 1e-12)
  expect_equal(fit$point_modes[5, ], ref, tolerance = 1e-10, ignore_attr = TRUE)
  dens <- kde_ref(blobs, fit$modes, "gaussian", h = c(0.8, 1), weights = w)
  expect_equal(fit$mode_density, dens, tolerance = 1e-8)
})

# The fast climb (accelerate = TRUE: over-relaxed Gaussian steps, long steps within 6
# bandwidths, climbs stopping at modes of earlier rounds) stops by the plain climb's rule, so
# both end within about tol / (1 - rate) of the same mode: 1e-6 bandwidths at tol = 1e-10.
test_that("accelerated climbs end at the modes of the plain climb", {
  set.seed(11)
  centres3 <- rbind(c(0, 0, 0), c(3, 0, 0), c(0, 3, 0), c(0, 0, 3))
  x3 <- centres3[rep(1:4, each = 150), ] + matrix(rnorm(1800, sd = 0.6), ncol = 3)
  x3 <- x3[sample(nrow(x3)), ]
  for (kernel in c("gaussian", "epanechnikov")) {
    fast <- mean_shift(x3, bandwidth = 0.4, kernel = kernel, tol = 1e-10, verbose = FALSE)
    plain <- mean_shift(x3, bandwidth = 0.4, kernel = kernel, tol = 1e-10, accelerate = FALSE,
                        verbose = FALSE)
    expect_identical(fast$cluster, plain$cluster, info = kernel)
    expect_equal(fast$point_modes, plain$point_modes, tolerance = 1e-6, info = kernel)
    expect_equal(fast$modes, plain$modes, tolerance = 1e-6, info = kernel)
    expect_equal(fast$mode_density, plain$mode_density, tolerance = 1e-8, info = kernel)
    expect_true(all(fast$converged))
    # Climbs met the modes of earlier rounds: far fewer local means than plain steps.
    expect_lt(sum(fast$iterations), sum(plain$iterations) / 2)
    for (i in c(1, 250, 600)) {
      ref <- mean_shift_ref(x3[i, ], x3, rep(0.4, 3), kernel, tol = 1e-10)
      expect_equal(fast$point_modes[i, ], ref, tolerance = 1e-6, info = kernel,
                   ignore_attr = TRUE)
    }
  }
  expect_false(plain$accelerate)
  # Paths end where the points stopped; results do not depend on the thread count.
  a <- mean_shift(x3, bandwidth = 0.4, keep_path = TRUE, n_threads = 1, verbose = FALSE)
  b <- mean_shift(x3, bandwidth = 0.4, keep_path = TRUE, n_threads = 2, verbose = FALSE)
  expect_identical(a[c("cluster", "point_modes", "iterations", "paths")],
                   b[c("cluster", "point_modes", "iterations", "paths")])
  ends <- t(vapply(a$paths, function(p) p[nrow(p), ], numeric(3)))
  expect_equal(ends, a$point_modes, ignore_attr = TRUE)
  expect_error(mean_shift(x3, bandwidth = 0.4, accelerate = NA), "accelerate",
               class = "localmean_error")
  # Above 8 dimensions a mode is filed under its own grid cell only; weights; far-out points.
  x10 <- rbind(matrix(rnorm(2000), ncol = 10), matrix(rnorm(2000, 4), ncol = 10))
  w <- runif(nrow(x10))
  fast <- mean_shift(x10, bandwidth = 1.5, weights = w, tol = 1e-10, verbose = FALSE)
  plain <- mean_shift(x10, bandwidth = 1.5, weights = w, tol = 1e-10, accelerate = FALSE,
                      verbose = FALSE)
  expect_identical(fast$cluster, plain$cluster)
  expect_equal(fast$point_modes, plain$point_modes, tolerance = 1e-6)
  far <- rbind(c(0, 0), c(1e15, -1e15), c(-1e15, 1e15))
  expect_equal(mean_shift(far, bandwidth = 1, verbose = FALSE)$point_modes, far,
               ignore_attr = TRUE)
})

test_that("separated mixtures are recovered exactly by every method", {
  ms <- mean_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_true(same_partition(ms$cluster, truth))
  expect_equal(ms$size, c(60, 50, 40))
  expect_true(all(ms$converged))
  expect_lt(max(abs(ms$modes - centres)), 0.25)
  blur <- mean_shift(blobs, bandwidth = 0.8, blurring = TRUE, verbose = FALSE)
  expect_true(same_partition(blur$cluster, truth))
  med <- medoid_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_true(same_partition(med$cluster, truth))
  # MedoidShift centres are data points.
  expect_true(all(apply(med$modes, 1, function(m) any(colSums(abs(t(blobs) - m)) == 0))))
  uni <- mean_shift(blobs, bandwidth = 1.5, kernel = "uniform", verbose = FALSE)
  expect_true(same_partition(uni$cluster, truth))
})

test_that("seeds climb alone and the points join the nearest mode", {
  full <- mean_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  binned <- mean_shift(blobs, bandwidth = 0.8, seeds = "bin", keep_path = TRUE, verbose = FALSE)
  expect_true(same_partition(binned$cluster, truth))
  expect_lt(max(abs(binned$modes - full$modes)), 1e-6)
  expect_length(binned$iterations, nrow(binned$seeds))
  cells <- unique(floor(blobs / 0.8))
  expect_equal(nrow(binned$seeds), nrow(cells))
  given <- mean_shift(blobs, bandwidth = 0.8, seeds = centres, verbose = FALSE)
  expect_true(same_partition(given$cluster, truth))
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(binned, paths = TRUE))
  expect_error(mean_shift(blobs, bandwidth = 1, seeds = "grid"), "seeds",
               class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, seeds = matrix(0, 2, 3)), "seeds",
               class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, seeds = "bin", min_bin_freq = 1e4),
               "min_bin_freq", class = "localmean_error")
})

test_that("predict assigns the training points to their own clusters", {
  ms <- mean_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_equal(predict(ms, blobs), ms$cluster)
  expect_equal(predict(ms, rbind(c(0.1, 0), c(2, 3.9))), ms$cluster[c(1, 150)])
  med <- medoid_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_equal(predict(med, centres), med$cluster[c(1, 61, 111)])
  far <- mean_shift(blobs, bandwidth = 0.8, kernel = "epanechnikov", verbose = FALSE)
  expect_true(is.na(predict(far, c(50, 50))))
})

test_that("MedoidShift moves to the minimiser of the weighted squared distances", {
  fit <- medoid_shift(blobs, bandwidth = 0.7, max_iter = 1, verbose = FALSE)
  h <- 0.7
  for (i in c(3, 80, 140)) {
    k <- exp(-rowSums(sweep(blobs, 2, blobs[i, ])^2) / (2 * h^2))
    cost <- apply(blobs, 1, function(p) sum(k * rowSums(sweep(blobs, 2, p)^2)))
    expect_equal(fit$parent[i], which.min(cost))
  }
  roots <- fit$root
  expect_true(all(fit$parent[roots] == roots))
})

test_that("the self-local mean is one local mean per step", {
  x <- blobs[, 1]
  one <- self_local_mean(x, n_iter = 1, bandwidth = 0.5, verbose = FALSE)
  ref <- vapply(x, function(p) {
    w <- exp(-(x - p)^2 / (2 * 0.25))
    sum(w * x) / sum(w)
  }, 1)
  expect_equal(one, ref, tolerance = 1e-12)
  two <- self_local_mean(x, n_iter = 2, bandwidth = 0.5, verbose = FALSE)
  expect_equal(two, self_local_mean(one, n_iter = 1, bandwidth = 0.5, verbose = FALSE))
  expect_equal(self_local_mean(blobs, n_iter = 0, bandwidth = 1, verbose = FALSE), blobs,
               ignore_attr = TRUE)
})

test_that("the principal-component shift settles on the ridge", {
  set.seed(3)
  t <- runif(300, 0, pi)
  arc <- cbind(cos(t), sin(t)) + matrix(rnorm(600, sd = 0.05), ncol = 2)
  fit <- pc_shift(arc, ndim = 1, bandwidth = 0.12, verbose = FALSE)
  r <- sqrt(rowSums(fit$points^2))
  inner <- t > 0.3 & t < pi - 0.3
  expect_lt(max(abs(r[inner] - 1)), 0.03)
  expect_true(all(fit$converged))
  # A plain-R subspace-constrained step for one point, iterated.
  p <- arc[10, ]
  for (it in 1:500) {
    w <- exp(-rowSums(sweep(arc, 2, p)^2) / (2 * 0.12^2))
    m <- colSums(w * arc) / sum(w)
    cv <- crossprod(sqrt(w / sum(w)) * sweep(arc, 2, m)) / 0.12^2
    v <- eigen(cv, symmetric = TRUE)$vectors[, 2]
    nxt <- p + v * sum(v * (m - p))
    done <- sqrt(sum((nxt - p)^2)) / 0.12 < 1e-8
    p <- nxt
    if (done) break
  }
  expect_equal(fit$points[10, ], p, tolerance = 1e-6, ignore_attr = TRUE)
  ms <- pc_shift(blobs, ndim = 0, bandwidth = 0.8, tol = 1e-12, verbose = FALSE)
  expect_equal(ms$points, mean_shift(blobs, bandwidth = 0.8, tol = 1e-12, verbose = FALSE)$point_modes,
               tolerance = 1e-10, ignore_attr = TRUE)
})

test_that("results do not depend on the thread count", {
  a <- mean_shift(blobs, bandwidth = 0.6, n_threads = 1, verbose = FALSE)
  b <- mean_shift(blobs, bandwidth = 0.6, n_threads = 2, verbose = FALSE)
  expect_identical(a$point_modes, b$point_modes)
  expect_identical(medoid_shift(blobs, bandwidth = 0.6, n_threads = 1, verbose = FALSE)$cluster,
                   medoid_shift(blobs, bandwidth = 0.6, n_threads = 2, verbose = FALSE)$cluster)
  expect_identical(pc_shift(blobs, bandwidth = 0.6, n_threads = 1, verbose = FALSE)$points,
                   pc_shift(blobs, bandwidth = 0.6, n_threads = 2, verbose = FALSE)$points)
})

test_that("edge cases give documented results", {
  none <- mean_shift(blobs, bandwidth = 0.8, max_iter = 0, verbose = FALSE)
  expect_equal(none$point_modes, blobs, ignore_attr = TRUE)
  expect_true(all(none$iterations == 0))
  same <- mean_shift(matrix(1, 5, 2), bandwidth = 1, verbose = FALSE)
  expect_equal(same$size, 5)
  single <- mean_shift(c(3), bandwidth = 1, verbose = FALSE)
  expect_equal(single$modes[1, 1], c(x = 3))
  paths <- mean_shift(blobs, bandwidth = 0.8, keep_path = TRUE, verbose = FALSE)$paths
  expect_length(paths, nrow(blobs))
  expect_equal(paths[[1]][1, ], blobs[1, ])
})

test_that("methods print, summarise and plot", {
  ms <- mean_shift(blobs, bandwidth = 0.8, keep_path = TRUE, verbose = FALSE)
  expect_output(print(ms), "<local_modes> mean shift: 3 clusters from 150 points")
  expect_output(print(summary(ms)), "Modes:")
  med <- medoid_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_output(print(med), "MedoidShift: 3 clusters")
  pc <- pc_shift(blobs, bandwidth = 0.8, verbose = FALSE)
  expect_output(print(pc), "1-dimensional ridges")
  pdf(NULL)
  on.exit(grDevices::dev.off())
  expect_silent(plot(ms, paths = TRUE))
  expect_silent(plot(med, paths = TRUE))
  expect_silent(plot(pc))
  expect_silent(plot(mean_shift(cbind(blobs, 1), bandwidth = 0.8, verbose = FALSE)))
  expect_error(plot(mean_shift(blobs, bandwidth = 0.8, verbose = FALSE), paths = TRUE),
               "keep_path", class = "localmean_error")
})

test_that("bad input gives classed errors naming the argument", {
  expect_error(mean_shift(blobs, bandwidth = -1), "bandwidth", class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = "cv"), "bandwidth", class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = c(1, 2, 3)), "bandwidth", class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, max_iter = -1), "max_iter",
               class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, tol = NA), "tol", class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, merge_tol = 0), "merge_tol",
               class = "localmean_error")
  expect_error(mean_shift(3, bandwidth = "auto"), "at least 2", class = "localmean_error")
  expect_error(mean_shift(cbind(1:5, 2)), "spread", class = "localmean_error")
  expect_error(pc_shift(blobs, ndim = 2, bandwidth = 1), "ndim", class = "localmean_error")
  expect_error(medoid_shift(blobs, bandwidth = 1, max_iter = 0), "max_iter",
               class = "localmean_error")
  expect_error(self_local_mean(blobs, n_iter = -1), "n_iter", class = "localmean_error")
  expect_error(mean_shift(blobs, bandwidth = 1, kernel = "box"), "kernel",
               class = "localmean_error")
})

test_that("local_control() sets the mode methods' cut-off; they never bin", {
  set.seed(9)
  x <- matrix(rnorm(200), ncol = 2)
  wide <- mean_shift(x, bandwidth = 0.5, verbose = FALSE)
  cut <- mean_shift(x, bandwidth = 0.5, control = local_control(cutoff = 1), verbose = FALSE)
  expect_false(isTRUE(all.equal(wide$point_modes, cut$point_modes)))
  # with a cut-off of one bandwidth the Gaussian climbs like a truncated kernel: every move is
  # the local mean of the points within one bandwidth, weighted by the Gaussian
  step <- self_local_mean(x, n_iter = 1, bandwidth = 0.5, control = local_control(cutoff = 1),
                          verbose = FALSE)
  ref <- t(apply(x, 1, function(p) {
    r2 <- colSums((t(x) - p)^2) / 0.25
    w <- exp(-r2 / 2) * (r2 <= 1)
    colSums(w * x) / sum(w)
  }))
  expect_equal(unname(step), ref, tolerance = 1e-10)
  expect_error(mean_shift(x, bandwidth = 0.5, control = local_control(gridsize = 101)),
               "gridsize", class = "localmean_error")
})

# A plain-R Gaussian product-kernel density (the normalising constant does not matter here).
gauss_density <- function(data, points, h) {
  apply(points, 1L, function(p) mean(exp(-colSums(((t(data) - p) / h)^2) / 2)))
}

test_that("the default bandwidth targets the density gradient: 2 clusters on faithful and iris", {
  x <- scale(faithful)
  fit <- mean_shift(x, verbose = FALSE)
  n <- nrow(x)
  # the normal-scale rule for the gradient, h = (4 / ((d + 4) n))^(1 / (d + 6)) s
  expect_equal(unname(fit$bandwidth), rep((4 / (6 * n))^(1 / 8), 2))
  expect_identical(fit$size, c(175L, 97L))
  expect_identical(fit$bandwidth_method, "auto")
  iris4 <- scale(iris[, 1:4])
  fit <- mean_shift(iris4, verbose = FALSE)
  expect_identical(fit$size, c(100L, 50L))
  expect_true(same_partition(fit$cluster, iris$Species == "setosa"))
  # medoid_shift() shares the default and finds the same two clusters on faithful
  expect_identical(medoid_shift(x, verbose = FALSE)$size, c(175L, 97L))
  # the plug-in for the gradient stays available by name
  plug <- mean_shift(x, bandwidth = "plugin", verbose = FALSE)
  expect_equal(plug$bandwidth, localmean:::bw_gradient(x))
})

test_that("mean shift agrees with ks::kms() at the same bandwidth and near its default", {
  skip_on_cran()
  skip_if_not_installed("ks")
  for (x in list(scale(faithful), scale(iris[, 1:4]))) {
    fit <- mean_shift(x, verbose = FALSE)
    peer <- ks::kms(x, H = diag(fit$bandwidth^2))
    expect_true(same_partition(fit$cluster, peer$label))
    first <- match(seq_along(fit$size), fit$cluster)  # a point of every cluster
    modes <- peer$mode[peer$label[first], , drop = FALSE]
    expect_equal(unname(fit$modes), unname(modes), tolerance = 1e-4)
  }
  # ks's default (the unconstrained plug-in for the gradient) splits faithful's lower cluster in
  # two (sizes 176, 55, 41); the upper cluster and its mode agree
  x <- scale(faithful)
  fit <- mean_shift(x, verbose = FALSE)
  peer <- ks::kms(x)
  upper <- as.integer(names(which.max(table(peer$label[fit$cluster == 1L]))))
  expect_lte(sum(xor(fit$cluster == 1L, peer$label == upper)), 2)
  expect_lt(max(abs(fit$modes[1L, ] - peer$mode[upper, ])), 0.1)
})

test_that("min_size never merges points that did not meet, and tiny clusters warn", {
  x <- scale(faithful)
  # no point moves: every point stays with its duplicates (faithful has repeated rows)
  expect_warning(fit <- mean_shift(x, bandwidth = 1e-6, verbose = FALSE), "too small")
  key <- paste(x[, 1L], x[, 2L])
  expect_identical(length(fit$size), length(unique(key)))
  expect_true(same_partition(fit$cluster, key))
  expect_identical(nrow(fit$absorbed_modes), 0L)
  expect_warning(mean_shift(scale(iris[, 1:4]), bandwidth = 1e-6, min_size = 1, verbose = FALSE),
                 "too small")
  # a far group of 3 points is below min_size but stays its own cluster
  set.seed(4)
  far <- rbind(matrix(rnorm(200), ncol = 2), matrix(rnorm(6, mean = 20, sd = 0.1), ncol = 2))
  fit <- mean_shift(far, bandwidth = 1, min_size = 10, verbose = FALSE)
  expect_identical(fit$size, c(100L, 3L))
  expect_identical(fit$cluster, rep(1:2, c(100, 3)))
  expect_identical(predict(fit, far[99:103, ]), fit$cluster[99:103])
})

test_that("a small cluster joins a large one exactly when no valley lies between their modes", {
  x <- scale(iris[, 1:4])
  h <- rep(0.2, 4)
  plain <- mean_shift(x, bandwidth = h, min_size = 1, verbose = FALSE)
  fit <- mean_shift(x, bandwidth = h, min_size = 5, verbose = FALSE)
  expect_gt(length(fit$size), 1L)
  expect_lt(length(fit$size), length(plain$size))
  large <- which(plain$size >= 5L)
  # every large cluster is kept with its mode
  for (i in large) {
    gap <- colSums((t(fit$modes) - plain$modes[i, ])^2)
    expect_equal(min(gap), 0, info = i)
  }
  for (j in which(plain$size < 5L)) {
    members <- which(plain$cluster == j)
    expect_length(unique(fit$cluster[members]), 1L)
    near <- large[which.min(colSums(((t(plain$modes[large, ]) - plain$modes[j, ]) / h)^2))]
    segment <- t(vapply(seq(0, 1, length.out = 17), function(s) {
      plain$modes[j, ] + s * (plain$modes[near, ] - plain$modes[j, ])
    }, numeric(4)))
    dens <- gauss_density(x, segment, h)
    joined <- fit$cluster[members[1L]] == fit$cluster[which(plain$cluster == near)[1L]]
    expect_identical(joined, min(dens) >= 0.8 * dens[1L], info = j)
  }
})

test_that("pc_shift merges tied rows: the same ridges, in a fraction of the time", {
  x <- as.matrix(faithful)
  tied <- x[rep(seq_len(nrow(x)), 3L), ]
  untied <- tied + 1e-12 * seq_len(nrow(tied))  # no ties: every row climbs
  a <- pc_shift(tied, bandwidth = c(0.3, 5), verbose = FALSE)
  b <- pc_shift(untied, bandwidth = c(0.3, 5), verbose = FALSE)
  expect_equal(a$points, b$points, tolerance = 1e-6)
  expect_identical(a$points[1:272, ], a$points[273:544, ])
  w <- pc_shift(tied, bandwidth = c(0.3, 5), weights = rep(1:2, length.out = 816),
                keep_path = TRUE, verbose = FALSE)
  wb <- pc_shift(untied, bandwidth = c(0.3, 5), weights = rep(1:2, length.out = 816),
                 keep_path = TRUE, verbose = FALSE)
  expect_equal(w$points, wb$points, tolerance = 1e-6)
  expect_length(w$paths, 816L)
})

test_that("pc_shift on 1e5 tied rows finishes in seconds", {
  skip_on_cran()
  big <- as.matrix(faithful)[rep(seq_len(nrow(faithful)), length.out = 1e5), ]
  time <- system.time(fit <- pc_shift(big, verbose = FALSE))[["elapsed"]]
  expect_lt(time, 20)
  expect_equal(dim(fit$points), c(1e5, 2))
})

test_that("medoid_shift has min_size: ripple clusters join, far ones stay, tiny ones warn", {
  x <- scale(iris[, 1:4])
  h <- rep(0.3, 4)
  plain <- medoid_shift(x, bandwidth = h, min_size = 1, verbose = FALSE)
  fit <- medoid_shift(x, bandwidth = h, min_size = 5, verbose = FALSE)
  expect_lt(length(fit$size), length(plain$size))
  expect_identical(fit$min_size, 5L)
  # a joined cluster moves whole into a large one; large clusters keep their points
  for (j in seq_along(plain$size)) {
    expect_length(unique(fit$cluster[plain$cluster == j]), 1L)
  }
  expect_identical(predict(fit, x[1:5, ]), fit$cluster[1:5])
  set.seed(4)
  far <- rbind(matrix(rnorm(200), ncol = 2), matrix(rnorm(6, mean = 20, sd = 0.1), ncol = 2))
  expect_identical(medoid_shift(far, bandwidth = 1, min_size = 10, verbose = FALSE)$size,
                   c(100L, 3L))
  expect_warning(medoid_shift(x, bandwidth = 1e-6, verbose = FALSE), "too small",
                 class = "localmean_warning")
  expect_error(medoid_shift(x, min_size = 0), "min_size", class = "localmean_error")
})

test_that("blurring and climbing merge tied rows with the same result", {
  x <- as.matrix(faithful)
  tied <- x[rep(seq_len(nrow(x)), 3L), ]
  untied <- tied + 1e-12 * seq_len(nrow(tied))
  expect_equal(self_local_mean(tied, bandwidth = c(0.3, 5), n_iter = 3, verbose = FALSE),
               self_local_mean(untied, bandwidth = c(0.3, 5), n_iter = 3, verbose = FALSE),
               tolerance = 1e-8)
  a <- mean_shift(tied, bandwidth = c(0.3, 5), verbose = FALSE)
  b <- mean_shift(untied, bandwidth = c(0.3, 5), verbose = FALSE)
  expect_identical(a$size, b$size)
  expect_true(same_partition(a$cluster, b$cluster))
})

test_that("mean shift and self_local_mean on 1e5 tied rows finish in seconds", {
  skip_on_cran()
  big <- as.matrix(faithful)[rep(seq_len(nrow(faithful)), length.out = 1e5), ]
  expect_lt(system.time(fit <- mean_shift(big, verbose = FALSE))[["elapsed"]], 20)
  expect_identical(length(fit$size), 2L)
  expect_lt(system.time(self_local_mean(big, verbose = FALSE))[["elapsed"]], 20)
})
