# Plain-R references for the tests: readable loops, no cleverness, nothing from the package.

kernel_names_ref <- c("gaussian", "epanechnikov", "uniform", "triangular", "biweight",
                      "triweight", "tricube", "cosine", "laplace", "cauchy")

compact_ref <- c(gaussian = FALSE, epanechnikov = TRUE, uniform = TRUE, triangular = TRUE,
                 biweight = TRUE, triweight = TRUE, tricube = TRUE, cosine = TRUE,
                 laplace = FALSE, cauchy = FALSE)

# Kernel densities on the line, in their standard form (compact kernels on [-1, 1]).
kernel_density_ref <- function(u, kernel) {
  a <- abs(u)
  inside <- as.numeric(a <= 1)
  switch(kernel,
    gaussian = exp(-u^2 / 2) / sqrt(2 * pi),
    epanechnikov = 3 / 4 * (1 - u^2) * inside,
    uniform = 1 / 2 * inside,
    triangular = (1 - a) * inside,
    biweight = 15 / 16 * (1 - u^2)^2 * inside,
    triweight = 35 / 32 * (1 - u^2)^3 * inside,
    tricube = 70 / 81 * (1 - a^3)^3 * inside,
    cosine = pi / 4 * cos(pi * u / 2) * inside,
    laplace = exp(-a) / 2,
    cauchy = 1 / (pi * (1 + u^2)),
    stop("unknown kernel ", kernel)
  )
}

# The localization weight of a point at scaled distance r >= 0 (the constant does not matter),
# untruncated unless a cut-off is given: the engine's own cut-offs (8 sd for the Gaussian, 32
# scales for the Laplace, counted from the nearest point) drop at most exp(-32) of the weight.
kernel_weight_ref <- function(r, kernel, cutoff = Inf) {
  w <- kernel_density_ref(r, kernel)
  if (kernel == "uniform") w <- 0.5 * as.numeric(r <= 1)
  w[r > cutoff] <- 0
  w
}

# Monomial exponents of the local polynomial in d variables: every exponent vector of total
# degree 0, 1, ..., degree (the order does not matter to the tests).
powers_ref <- function(d, degree) {
  grid <- as.matrix(expand.grid(rep(list(0:degree), d)))
  grid <- grid[rowSums(grid) <= degree, , drop = FALSE]
  grid <- grid[order(rowSums(grid), -grid[, 1]), , drop = FALSE]
  unname(grid)
}

# Local polynomial regression by brute force. For every query q (row of `query`):
#   u_i = (x_i - q) / h per variable, w_i = prior_i * k(||u_i||),
#   beta = solve(X' W X, X' W y) with X the monomials of u (scaled for conditioning),
# then the coefficients are converted back to the original units. `h` may be a matrix with one
# row per query (adaptive bandwidths). Returns the coefficient matrix (m x terms, original units),
# the operators A_q (terms x n, coef = A_q y) and the exponents of the terms.
local_poly_ref <- function(x, y, query, h, kernel, degree, prior = NULL, cutoff = NULL) {
  x <- as.matrix(x)
  query <- as.matrix(query)
  n <- nrow(x)
  d <- ncol(x)
  m <- nrow(query)
  if (is.null(prior)) prior <- rep(1, n)
  h <- if (is.matrix(h)) h else matrix(rep_len(h, d), m, d, byrow = TRUE)
  powers <- powers_ref(d, degree)
  nb <- nrow(powers)
  coef <- matrix(NA_real_, m, nb)
  ops <- vector("list", m)
  for (q in seq_len(m)) {
    u <- sweep(sweep(x, 2, query[q, ], "-"), 2, h[q, ], "/")
    r <- sqrt(rowSums(u^2))
    w <- prior * kernel_weight_ref(r, kernel, cutoff)
    X <- matrix(1, n, nb)
    for (b in seq_len(nb)) {
      for (j in seq_len(d)) X[, b] <- X[, b] * u[, j]^powers[b, j]
    }
    A <- solve(crossprod(X, w * X), t(w * X))
    # back to the original units: the coefficient of prod (x_j - q_j)^p_j
    unit <- apply(powers, 1, function(p) prod(h[q, ]^p))
    A <- A / unit
    ops[[q]] <- A
    coef[q, ] <- drop(A %*% y)
  }
  list(coef = coef, ops = ops, powers = powers)
}

# Column of the term holding the `deriv`-th pure partial derivative in variable j.
term_ref <- function(powers, j, deriv) {
  target <- rep(0, ncol(powers))
  target[j] <- deriv
  which(apply(powers, 1, function(p) all(p == target)))
}

# The derivative estimates (m x d) of order 1 or 2 from reference coefficients.
deriv_ref <- function(ref, deriv) {
  d <- ncol(ref$powers)
  sapply(seq_len(d), function(j) factorial(deriv) * ref$coef[, term_ref(ref$powers, j, deriv)])
}

# The smoother matrix L (n x n): row i holds the equivalent-kernel weights at x_i.
smoother_matrix_ref <- function(x, y, h, kernel, degree, prior = NULL) {
  ref <- local_poly_ref(x, y, x, h, kernel, degree, prior)
  t(vapply(ref$ops, function(A) A[1, ], numeric(NROW(x))))
}

# Leave-one-out CV score by refitting without each point in turn.
loo_cv_ref <- function(x, y, h, kernel, degree) {
  x <- as.matrix(x)
  err <- vapply(seq_len(nrow(x)), function(i) {
    fit <- local_poly_ref(x[-i, , drop = FALSE], y[-i], x[i, , drop = FALSE], h, kernel, degree)
    y[i] - fit$coef[1, 1]
  }, numeric(1))
  mean(err^2)
}

# k-nearest-neighbour sets, ties at the k-th distance included.
knn_sets_ref <- function(x, query, k) {
  x <- as.matrix(x)
  query <- as.matrix(query)
  lapply(seq_len(nrow(query)), function(q) {
    dist <- sqrt(colSums((t(x) - query[q, ])^2))
    kth <- sort(dist)[k]
    which(dist <= kth * (1 + 1e-9) + 1e-12)
  })
}

# Distance from each query to its k-th nearest data point.
knn_radius_ref <- function(x, query, k) {
  x <- as.matrix(x)
  query <- as.matrix(query)
  vapply(seq_len(nrow(query)), function(q) {
    sort(sqrt(colSums((t(x) - query[q, ])^2)))[k]
  }, numeric(1))
}

# A smooth test surface and data in one and two dimensions.
make_data_1d <- function(n, seed = 1, sd = 0.2) {
  set.seed(seed)
  x <- runif(n)
  list(x = x, y = sin(2 * pi * x) + rnorm(n, sd = sd))
}

make_data_2d <- function(n, seed = 2, sd = 0.2) {
  set.seed(seed)
  x <- cbind(x1 = runif(n), x2 = runif(n))
  list(x = x, y = sin(2 * pi * x[, 1]) + x[, 2]^2 + rnorm(n, sd = sd))
}

# Bandwidths that give every window enough points for a quadratic fit.
ref_bandwidth <- function(kernel, d) {
  base <- switch(kernel, gaussian = 0.12, laplace = 0.08, cauchy = 0.06, 0.3)
  if (d == 1) base else base * c(1.2, 1.5)
}

quiet_fit <- function(expr) suppressWarnings(expr)

# Kernel density estimate by brute force: f(q) = sum_i w_i k(||(q - x_i) / h_i||) / (C prod(h_i))
# with C = int k(||u||) du over R^d by numerical integration of the radial profile, and either
# per-variable scales `h`, a bandwidth matrix `H` (k(||A^-1 (q - x_i)||) / (C det A), H = A A'),
# or sample-point scales h_i * `scale` (`point`). Weights are normalised to sum 1.
kde_ref <- function(x, query, kernel, h = NULL, H = NULL, point = NULL, scale = NULL,
                    weights = NULL) {
  x <- as.matrix(x)
  query <- as.matrix(query)
  d <- ncol(x)
  w <- if (is.null(weights)) rep(1 / nrow(x), nrow(x)) else weights / sum(weights)
  profile <- function(r) kernel_weight_ref(r, kernel)
  upper <- if (compact_ref[[kernel]]) 1 else Inf
  area <- 2 * pi^(d / 2) / gamma(d / 2)
  C <- area * integrate(function(r) r^(d - 1) * profile(r), 0, upper, rel.tol = 1e-12)$value
  if (d == 1L) C <- integrate(profile, -upper, upper, rel.tol = 1e-12)$value
  apply(query, 1L, function(q) {
    diffs <- sweep(x, 2L, q, `-`)
    if (!is.null(H)) {
      A <- t(chol(H))
      u <- t(solve(A, t(diffs)))
      return(sum(w * profile(sqrt(rowSums(u^2)))) / (C * det(A)))
    }
    if (!is.null(point)) {
      u <- sweep(diffs, 2L, scale, `/`) / point
      return(sum(w * profile(sqrt(rowSums(u^2))) / point^d) / (C * prod(scale)))
    }
    u <- sweep(diffs, 2L, h, `/`)
    sum(w * profile(sqrt(rowSums(u^2)))) / (C * prod(h))
  })
}

# Mean shift of one point by plain iteration of the local mean, stopping when a step (in
# bandwidths) is shorter than tol.
mean_shift_ref <- function(p, x, h, kernel = "gaussian", tol = 1e-8, max_iter = 500,
                           weights = rep(1, nrow(x))) {
  for (it in seq_len(max_iter)) {
    u <- sweep(sweep(x, 2L, p), 2L, h, `/`)
    w <- weights * kernel_weight_ref(sqrt(rowSums(u^2)), kernel)
    nxt <- colSums(w * x) / sum(w)
    step <- sqrt(sum(((nxt - p) / h)^2))
    p <- nxt
    if (step < tol) break
  }
  p
}

# k nearest neighbours of every row of x (itself excluded), by sorting all distances; ties to
# the lower index.
knn_ref <- function(x, k) {
  d <- unname(as.matrix(stats::dist(x)))
  diag(d) <- Inf
  t(apply(d, 1L, function(r) order(r)[seq_len(k)]))
}

# LLE by its definition: reconstruction weights from regularised local Gram solves, then the
# bottom eigenvectors of (I - W)'(I - W) by a dense eigen-decomposition.
lle_ref <- function(x, k, ndim, reg) {
  n <- nrow(x)
  nb <- knn_ref(x, k)
  w <- matrix(0, n, n)
  for (i in seq_len(n)) {
    z <- sweep(x[nb[i, ], , drop = FALSE], 2L, x[i, ])
    gram <- z %*% t(z)
    gram <- gram + diag(reg * sum(diag(gram)), k)
    wi <- solve(gram, rep(1, k))
    w[i, nb[i, ]] <- wi / sum(wi)
  }
  m <- t(diag(n) - w) %*% (diag(n) - w)
  e <- eigen(m, symmetric = TRUE)
  e$vectors[, n - seq_len(ndim), drop = FALSE]
}

# Share of the variance of `target` explained by linear maps of `layout` (1: same subspace).
subspace_fit <- function(layout, target) {
  fit <- stats::lm.fit(cbind(1, layout), target)
  1 - sum(fit$residuals^2) / sum(scale(target, scale = FALSE)^2)
}

swiss_roll <- function(n, seed = 1) {
  set.seed(seed)
  t <- 1.5 * pi * (1 + 2 * stats::runif(n))
  h <- 21 * stats::runif(n)
  cbind(t * cos(t), h, t * sin(t))
}

# Plain kNN imputation: every missing entry is the mean of the observed values of its row's k
# nearest rows (squared distance over shared entries times p / number shared), the column mean
# when none of them observes it.
knn_impute_ref <- function(x, k) {
  obs <- !is.na(x)
  o <- obs + 0
  x0 <- x
  x0[!obs] <- 0
  out <- x
  p <- ncol(x)
  # sum_c o_ic o_jc (x_ic - x_jc)^2 for all pairs, expanded into matrix products
  num <- tcrossprod(x0^2, o) + tcrossprod(o, x0^2) - 2 * tcrossprod(x0)
  den <- tcrossprod(o)
  for (i in which(rowSums(!obs) > 0 & rowSums(obs) > 0)) {
    d <- ifelse(den[i, ] > 0, p * num[i, ] / den[i, ], Inf)
    d[i] <- Inf
    nb <- order(d)[seq_len(k)]
    for (c in which(!obs[i, ])) {
      v <- x[nb, c]
      out[i, c] <- if (all(is.na(v))) mean(x[, c], na.rm = TRUE) else mean(v, na.rm = TRUE)
    }
  }
  out
}

# Column-mean imputation.
mean_impute_ref <- function(x) {
  m <- colMeans(x, na.rm = TRUE)
  x[is.na(x)] <- m[col(x)[is.na(x)]]
  x
}

# Non-local means by its definition: mirrored edges, weights
# exp(-max(mean squared patch difference - 2 sigma^2, 0) / h^2) over the search window.
nl_means_ref <- function(img, patch, search, h, sigma) {
  hp <- patch %/% 2
  hs <- search %/% 2
  mirror <- function(i, n) {
    while (i < 1 || i > n) i <- if (i < 1) 1 - i else 2 * n + 1 - i
    i
  }
  at <- function(r, c) img[mirror(r, nrow(img)), mirror(c, ncol(img))]
  patch_at <- function(r, c) {
    outer(-hp:hp, -hp:hp, Vectorize(function(a, b) at(r + a, c + b)))
  }
  out <- img
  for (r in seq_len(nrow(img))) for (c in seq_len(ncol(img))) {
    p0 <- patch_at(r, c)
    sw <- swx <- 0
    for (dy in -hs:hs) for (dx in -hs:hs) {
      d2 <- mean((p0 - patch_at(r + dy, c + dx))^2)
      w <- exp(-max(d2 - 2 * sigma^2, 0) / h^2)
      sw <- sw + w
      swx <- swx + w * at(r + dy, c + dx)
    }
    out[r, c] <- swx / sw
  }
  out
}

psnr_ref <- function(estimate, truth, peak = 1) 10 * log10(peak^2 / mean((estimate - truth)^2))

# The QKV model's forward pass in plain R (the reference for the C++ core): every layer's T x T
# attention per head, and the probabilities at every position (of the next token, or two-sided
# of the token there).
qkv_forward_ref <- function(object, ids) {
  s <- object$shape
  lay <- localmean:::qkv_layout(s)
  th <- object$theta
  # Piece `l` of a block: per-layer blocks hold the layers in turn, matrices row-major.
  blk <- function(name, nrow, ncol = 1, l = 1) {
    i <- lay$start[[name]] + (l - 1) * nrow * ncol + seq_len(nrow * ncol)
    matrix(th[i], nrow, ncol, byrow = TRUE)
  }
  vec <- function(name, n, l = 1) drop(blk(name, n, 1, l))
  softmax_rows <- function(sc) {
    p <- exp(sc - apply(sc, 1L, max))
    p / rowSums(p)
  }
  layer_norm <- function(x, gain, bias) {
    out <- x
    for (t in seq_len(nrow(x))) {
      z <- x[t, ] - mean(x[t, ])
      out[t, ] <- gain * z / sqrt(mean(z^2) + 1e-5) + bias
    }
    out
  }
  n <- length(ids)
  d <- s$dim
  dh <- d / s$heads
  lag <- outer(seq_len(n), seq_len(n), "-")  # t - s
  two <- isTRUE(s$two_sided)
  n_lags <- if (two) 2 * s$window - 1 else s$window
  inside <- if (two) abs(lag) < s$window else lag >= 0 & lag < s$window
  # the time kernel's index: the lag t - s, or two-sided the offset s - t + window - 1
  slot <- if (two) s$window - lag else lag + 1L
  x <- blk("embed", s$vocab, d)[ids + 1L, , drop = FALSE]
  attention <- list()
  for (l in seq_len(s$layers)) {
    y <- layer_norm(x, vec("ln1_gain", d, l), vec("ln1_bias", d, l))
    q <- y %*% blk("query", d, d, l)
    k <- y %*% blk("key", d, d, l)
    v <- y %*% blk("value", d, d, l)
    o <- matrix(0, n, d)
    attention[[l]] <- list()
    for (h in seq_len(s$heads)) {
      cols <- (h - 1) * dh + seq_len(dh)
      b <- vec("lag", n_lags, (l - 1) * s$heads + h)
      sc <- q[, cols, drop = FALSE] %*% t(k[, cols, drop = FALSE]) / sqrt(dh)
      sc[inside] <- sc[inside] + b[slot[inside]]
      sc[!inside] <- -Inf
      a <- softmax_rows(sc)
      attention[[l]][[h]] <- a
      o[, cols] <- a %*% v[, cols, drop = FALSE]
    }
    x <- x + o %*% blk("mix", d, d, l)
    if (s$hidden > 0) {
      y2 <- layer_norm(x, vec("ln2_gain", d, l), vec("ln2_bias", d, l))
      z <- sweep(y2 %*% blk("w1", d, s$hidden, l), 2L, vec("c1", s$hidden, l), "+")
      x <- x + sweep(pmax(z, 0) %*% blk("w2", s$hidden, d, l), 2L, vec("c2", d, l), "+")
    }
  }
  z <- layer_norm(x, vec("final_gain", d), vec("final_bias", d))
  logits <- sweep(z %*% t(blk("output", s$vocab, d)), 2L, vec("output_bias", s$vocab), "+")
  list(attention = attention, probs = softmax_rows(logits))
}

# A function of np, the peer of several comparisons: np is not a declared dependency, so its
# functions are looked up rather than imported with `::`.
np_fun <- function(name) getExportedValue("np", name)
