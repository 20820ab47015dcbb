# Plain-R references: softmax(Q K' / h + log L) V with the time kernel as a log mask.
attention_ref <- function(q, k, v, h, log_time) {
  s <- q %*% t(k) / h + log_time
  a <- exp(s - apply(s, 1L, max))
  a <- a / rowSums(a)
  list(output = a %*% v, weights = a)
}
log_time_ref <- function(n, kind, w = Inf) {
  lag <- outer(seq_len(n), seq_len(n), "-")
  switch(kind,
    causal = ifelse(lag >= 0 & lag < w, 0, -Inf),
    window = ifelse(abs(lag) <= w, 0, -Inf),
    exponential = ifelse(lag >= 0, -lag / w, -Inf),
    none = matrix(0, n, n)
  )
}

test_that("temporal_local_mean is softmax attention for every time kernel", {
  set.seed(1)
  n <- 150
  x <- matrix(rnorm(n * 5), n)
  cases <- list(list("causal", NULL, Inf), list("causal", 10, 10), list("window", 7, 7),
                list("exponential", 5, 5), list("none", NULL, Inf))
  for (cs in cases) {
    ours <- temporal_local_mean(x, time_kernel = cs[[1]], time_bandwidth = cs[[2]],
                                scale = FALSE, n_threads = 1)
    ref <- attention_ref(x, x, x, sqrt(5), log_time_ref(n, cs[[1]], cs[[3]]))$output
    expect_equal(unname(ours), ref, tolerance = 1e-10, label = cs[[1]])
  }
})

test_that("projections give scaled dot-product self-attention", {
  set.seed(2)
  n <- 130
  x <- matrix(rnorm(n * 6), n)
  wq <- matrix(rnorm(6 * 3), 6)
  wk <- matrix(rnorm(6 * 3), 6)
  wv <- matrix(rnorm(6 * 2), 6)
  ours <- temporal_local_mean(x, wq = wq, wk = wk, wv = wv, scale = FALSE, n_threads = 1)
  ref <- attention_ref(x %*% wq, x %*% wk, x %*% wv, sqrt(3), log_time_ref(n, "causal"))
  expect_equal(dim(ours), c(n, 2L))
  expect_equal(unname(ours), ref$output, tolerance = 1e-10)
  # A bandwidth replaces sqrt(d_k).
  ours <- temporal_local_mean(x, bandwidth = 0.7, wq = wq, wk = wk, scale = FALSE,
                              n_threads = 1)
  ref <- attention_ref(x %*% wq, x %*% wk, x, 0.7, log_time_ref(n, "causal"))
  expect_equal(unname(ours), ref$output, tolerance = 1e-10)
})

test_that("distance kernels from the registry weight by kernel values", {
  set.seed(3)
  n <- 90
  x <- matrix(rnorm(n * 2), n)
  d2 <- as.matrix(stats::dist(x))^2
  for (kernel in c("gaussian", "epanechnikov", "laplace", "cauchy")) {
    ours <- temporal_local_mean(x, kernel = kernel, bandwidth = 2, time_kernel = "window",
                                time_bandwidth = 6, scale = FALSE, n_threads = 1)
    w <- kernel_weight_ref(sqrt(d2) / 2, kernel) * (abs(outer(1:n, 1:n, "-")) <= 6)
    expect_equal(unname(ours), unname((w / rowSums(w)) %*% x), tolerance = 1e-10,
                 label = kernel)
  }
})

test_that("streaming equals return_weights = TRUE, and threads do not change results", {
  set.seed(4)
  x <- matrix(rnorm(300 * 4), 300)
  for (tk in c("causal", "exponential")) {
    res <- temporal_local_mean(x, time_kernel = tk, time_bandwidth = 20,
                               return_weights = TRUE, n_threads = 1)
    expect_equal(res$output, temporal_local_mean(x, time_kernel = tk, time_bandwidth = 20,
                                                 n_threads = 1), tolerance = 1e-13)
    expect_equal(unname(res$weights %*% x), unname(res$output), tolerance = 1e-12)
    expect_equal(rowSums(res$weights), rep(1, 300), tolerance = 1e-12)
  }
  one <- temporal_local_mean(x, time_kernel = "none", n_threads = 1)
  two <- temporal_local_mean(x, time_kernel = "none", n_threads = 2)
  expect_identical(one, two)
})

test_that("bad input to temporal_local_mean gives clear errors", {
  x <- matrix(rnorm(40), 10)
  expect_error(temporal_local_mean(x[1, , drop = FALSE]), "at least 2", class = "localmean_error")
  expect_error(temporal_local_mean(matrix(numeric(0), 0, 4)), "at least 2")
  expect_error(temporal_local_mean(x, wq = diag(3)), "q.*3 rows")
  expect_error(temporal_local_mean(x, wq = diag(4), wk = diag(4)[, 1:2]), "same number of columns")
  expect_error(temporal_local_mean(x, time_kernel = "window"), "time_bandwidth.*needed")
  expect_error(temporal_local_mean(x, time_kernel = "window", time_bandwidth = 0),
               "time_bandwidth.*positive")
  expect_error(temporal_local_mean(x, time_bandwidth = -1), "time_bandwidth")
  expect_error(temporal_local_mean(x, kernel = "nope"), "kernel")
  expect_error(temporal_local_mean(matrix(0, 5001, 1), return_weights = TRUE), "5000")
})

test_that("hopfield retrieves stored patterns from corrupted queries", {
  set.seed(5)
  patterns <- sign(matrix(rnorm(8 * 100), 8))
  flip <- matrix(ifelse(runif(8 * 100) < 0.25, -1, 1), 8)
  res <- hopfield(patterns, patterns * flip, beta = 0.5, n_iter = 2)
  expect_equal(sign(res$retrieved), patterns)
  expect_equal(unname(apply(res$attention, 1L, which.max)), 1:8)
  expect_equal(rowSums(res$attention), rep(1, 8), tolerance = 1e-12)
  # One step is one softmax local mean.
  q <- patterns[3, ] * flip[3, ]
  a <- exp(0.1 * patterns %*% q - max(0.1 * patterns %*% q))
  expect_equal(drop(hopfield(patterns, q, beta = 0.1)$retrieved),
               drop(t(patterns) %*% (a / sum(a))), tolerance = 1e-12)
  expect_error(hopfield(patterns, rnorm(5)), "5 columns")
})

test_that("tokenize_words splits words and punctuation", {
  expect_equal(tokenize_words("It's a truth, universally acknowledged."),
               c("it's", "a", "truth", "universally", "acknowledged"))
  expect_equal(tokenize_words(c("Mr. Darcy!", NA), lower = FALSE, punctuation = TRUE),
               c("Mr", ".", "Darcy", "!"))
  expect_error(tokenize_words(1), "character")
})

# Each token is determined (90% of the time) by the token two steps back.
markov2_tokens <- function(n, seed) {
  set.seed(seed)
  nxt <- stats::setNames(c(2:8, 1), 1:8)
  tok <- c("1", "4")
  for (i in 3:n) {
    tok[i] <- if (runif(1) < 0.9) as.character(nxt[[tok[i - 2]]]) else as.character(sample(8, 1))
  }
  tok
}

test_that("qkv_fit learns a dependence two steps back", {
  tok <- markov2_tokens(12000, 6)
  set.seed(7)
  # lr 0.05: the learning rate decays to 0 over the 129 mini-batches (at 0.02 too slow to learn it)
  fit <- qkv_fit(tok, dim = 4, window = 4, n_iter = 3, lr = 0.05, validation = 0.1,
                 n_threads = 1, verbose = FALSE)
  expect_s3_class(fit, "local_qkv")
  expect_lt(utils::tail(fit$epoch_loss, 1), fit$epoch_loss[1])
  expect_lt(mean(utils::tail(fit$batch_loss, 10)), mean(fit$batch_loss[1:5]))
  # The time kernel puts its weight on lag 1 (the token before the current one).
  expect_equal(unname(which.max(fit$lag_weights)), 2L)
  test <- markov2_tokens(600, 8)
  ctx <- lapply(3:600, function(i) test[(i - 2):(i - 1)])
  acc <- mean(predict(fit, ctx, type = "token") == test[3:600])
  expect_gt(acc, 0.8)  # chance is 1/8
  s <- summary(fit)
  expect_lt(s$perplexity, s$unigram_perplexity / 2)
  expect_equal(nobs(fit), 10800L)
  expect_output(print(s), "Held-out perplexity")
})

# A model of the given shape with its parameters set at random (not trained): the comparisons
# below hold at any fixed parameters.
qkv_at_random <- function(tok, seed, ...) {
  set.seed(seed)
  fit <- qkv_fit(tok, n_iter = 1, n_threads = 1, verbose = FALSE, ...)
  fit$theta <- stats::rnorm(length(fit$theta), sd = 0.7)
  fit
}

test_that("the C++ Transformer equals its plain-R forward pass (2 layers, 2 heads, feed-forward)", {
  tok <- markov2_tokens(3000, 9)
  shapes <- list(list(layers = 2, heads = 2, hidden = 6), list(layers = 1, heads = 1, hidden = 0),
                 list(layers = 3, heads = 4, hidden = 5))
  for (sh in shapes) {
    fit <- qkv_at_random(tok, 10, dim = 4, window = 3, layers = sh$layers, heads = sh$heads,
                         hidden = sh$hidden)
    expect_false(fit$shape$two_sided)
    label <- paste(unlist(sh), collapse = "/")
    ctx <- tok[20:28]
    ids <- localmean:::token_ids(ctx, fit$vocab)
    fw <- qkv_forward_ref(fit, ids)
    expect_equal(predict(fit, ctx), fw$probs[9, ], tolerance = 1e-10, ignore_attr = TRUE,
                 label = label)
    # every position's prediction, from contexts ending there
    p <- predict(fit, lapply(3:9, function(i) ctx[seq_len(i)]))
    expect_equal(unname(p), fw$probs[3:9, ], tolerance = 1e-10, label = label)
    for (l in seq_len(sh$layers)) for (h in seq_len(sh$heads)) {
      a <- attention_weights(fit, ctx, layer = l, head = h)
      expect_equal(unname(a), fw$attention[[l]][[h]], tolerance = 1e-10, label = label)
      expect_true(all(a[upper.tri(a)] == 0))
      expect_true(all(a[outer(1:9, 1:9, "-") >= 3] == 0))
    }
    avg <- Reduce(`+`, fw$attention[[sh$layers]]) / sh$heads
    expect_equal(unname(attention_weights(fit, ctx, layer = sh$layers)), avg, tolerance = 1e-10)
  }
})

test_that("a two-sided model equals its plain-R forward pass and predicts the masked token", {
  tok <- markov2_tokens(3000, 9)
  fit <- qkv_at_random(tok, 11, dim = 4, window = 3, layers = 2, heads = 2, hidden = 6,
                       time_kernel = "window")
  expect_true(fit$shape$two_sided)
  expect_identical(utils::tail(fit$vocab, 2), c("<unk>", "<mask>"))
  ctx <- c(tok[20:24], "<mask>", tok[26:31])
  ids <- localmean:::token_ids(ctx, fit$vocab)
  fw <- qkv_forward_ref(fit, ids)
  expect_equal(predict(fit, ctx), fw$probs[6, ], tolerance = 1e-10, ignore_attr = TRUE)
  for (l in 1:2) for (h in 1:2) {
    a <- attention_weights(fit, ctx, layer = l, head = h)
    expect_equal(unname(a), fw$attention[[l]][[h]], tolerance = 1e-10)
    expect_true(all(a[abs(outer(1:12, 1:12, "-")) >= 3] == 0))
    expect_gt(sum(a[upper.tri(a)]), 1)  # it looks ahead
  }
  # tokens beyond the receptive field (2 layers x 2 on each side) do not matter
  far <- c("1", "1", ctx, "2", "2")
  expect_equal(predict(fit, far), predict(fit, ctx), tolerance = 1e-12)
  expect_error(predict(fit, tok[1:5]), "<mask>", class = "localmean_error")
})

test_that("the C++ gradient matches central differences in every parameter", {
  tok <- markov2_tokens(40, 17)
  for (sh in list(list(layers = 2, heads = 2, hidden = 3, time_kernel = "causal"),
                  list(layers = 1, heads = 1, hidden = 0, time_kernel = "causal"),
                  list(layers = 2, heads = 2, hidden = 3, time_kernel = "window"))) {
    fit <- qkv_at_random(tok, 18, dim = 4, window = 3, layers = sh$layers, heads = sh$heads,
                         hidden = sh$hidden, time_kernel = sh$time_kernel)
    ids <- localmean:::token_ids(tok, fit$vocab)
    if (sh$time_kernel == "causal") {
      input <- ids
      target <- c(ids[-1], -1L)
    } else {  # every third token masked and predicted
      masked <- seq_along(ids) %% 3 == 0
      input <- ifelse(masked, length(fit$vocab) - 1L, ids)
      target <- ifelse(masked, ids, -1L)
    }
    th <- fit$theta
    g <- localmean:::cpp_qkv_gradient(fit$shape, th, input, target)$gradient
    loss <- function(theta) localmean:::cpp_qkv_gradient(fit$shape, theta, input, target)$loss
    lay <- localmean:::qkv_layout(fit$shape)
    # every parameter of every block (the blocks of the shape are all present)
    expect_true(all(lay$size[setdiff(names(lay$size),
                                     if (sh$hidden == 0) c("ln2_gain", "ln2_bias", "w1", "c1",
                                                           "w2", "c2"))] > 0))
    numeric_g <- vapply(seq_along(th), function(i) {
      e <- replace(numeric(length(th)), i, 1e-5)
      (loss(th + e) - loss(th - e)) / 2e-5
    }, 1)
    block <- rep(names(lay$size), lay$size)
    for (b in unique(block)) {
      expect_equal(g[block == b], numeric_g[block == b], tolerance = 1e-6,
                   label = paste(b, paste(unlist(sh), collapse = "/")))
    }
  }
})

test_that("qkv_fit is reproducible and does not depend on the number of threads", {
  tok <- markov2_tokens(2000, 11)
  for (tk in c("causal", "window")) {
    fits <- lapply(c(1, 2, 1), function(th) {
      set.seed(12)
      qkv_fit(tok, dim = 4, window = 3, layers = 2, heads = 2, hidden = 4, n_iter = 1,
              batch_size = 64, time_kernel = tk, n_threads = th, verbose = FALSE)
    })
    expect_identical(fits[[1]]$theta, fits[[2]]$theta)
    expect_identical(fits[[1]]$theta, fits[[3]]$theta)
    expect_identical(fits[[1]]$batch_loss, fits[[2]]$batch_loss)
    g <- glance(fits[[1]])
    expect_identical(c(g$layers, g$heads, g$hidden), c(2L, 2L, 4L))
  }
})

test_that("a two-sided model learns the masked token from both sides", {
  tok <- markov2_tokens(8000, 40)
  set.seed(41)
  fit <- qkv_fit(tok, dim = 6, window = 3, layers = 1, heads = 2, n_iter = 4, lr = 0.02,
                 validation = 0.15, time_kernel = "window", batch_size = 64, n_threads = 1,
                 verbose = FALSE)
  s <- summary(fit)
  expect_lt(s$perplexity, s$unigram_perplexity / 3)  # the tokens two back and two ahead tell it
  expect_equal(predict(fit, c("1", "5", "<mask>", "6", "3"), type = "token"), "2")
  expect_output(print(fit), "two-sided")
})

test_that("deeper models learn what one layer cannot: a dependence beyond the window", {
  # Each token is determined by the token four steps back; with a window of 3 one layer cannot
  # see it, two layers can (their receptive field is 5 tokens).
  set.seed(30)
  nxt <- stats::setNames(c(2:6, 1), 1:6)
  tok <- as.character(sample(6, 4))
  for (i in 5:6000) {
    tok[i] <- if (runif(1) < 0.9) as.character(nxt[[tok[i - 4]]]) else as.character(sample(6, 1))
  }
  perplexity <- vapply(1:2, function(layers) {
    set.seed(31)
    fit <- qkv_fit(tok, dim = 6, window = 3, layers = layers, heads = 2, n_iter = 4, lr = 0.02,
                   validation = 0.15, batch_size = 64, n_threads = 1, verbose = FALSE)
    summary(fit)$perplexity
  }, 1)
  expect_gt(perplexity[1], 4)      # about chance (6)
  expect_lt(perplexity[2], 2.5)    # the rule, 90% of the time
})

test_that("unknown tokens map to <unk>, and bad input to qkv_fit gives clear errors", {
  tok <- markov2_tokens(1000, 13)
  set.seed(14)
  fit <- qkv_fit(tok, dim = 2, window = 2, n_iter = 1, vocab_size = 6, n_threads = 1,
                 verbose = FALSE)
  expect_equal(length(fit$vocab), 6L)
  expect_equal(utils::tail(fit$vocab, 1), "<unk>")
  expect_equal(predict(fit, c("1", "zebra")), predict(fit, c("1", "<unk>")))
  expect_equal(sum(predict(fit, c("1", "2"))), 1, tolerance = 1e-12)
  expect_false("<unk>" %in% predict(fit, list("1", c("2", "3")), type = "token"))
  expect_error(qkv_fit(tok, dim = 20), "too large for the vocabulary", class = "localmean_error")
  expect_error(qkv_fit("a"), "at least 2")
  expect_error(qkv_fit(character(0)), "at least 2")
  expect_error(qkv_fit(tok, window = 0), "window")
  expect_error(qkv_fit(tok, layers = 0), "layers", class = "localmean_error")
  expect_error(qkv_fit(tok, layers = 65), "layers", class = "localmean_error")
  expect_error(qkv_fit(tok, dim = 4, heads = 3), "heads.*divide.*dim", class = "localmean_error")
  expect_error(qkv_fit(tok, heads = 0), "heads", class = "localmean_error")
  expect_error(qkv_fit(tok, hidden = -1), "hidden", class = "localmean_error")
  expect_error(qkv_fit(tok, hidden = 1.5), "hidden", class = "localmean_error")
  expect_error(qkv_fit(tok, time_kernel = "exponential"), "time_kernel.*causal",
               class = "localmean_error")
  expect_error(qkv_fit(tok, time_kernel = "bogus"), "time_kernel", class = "localmean_error")
  expect_error(attention_weights(fit, c("1", "2"), head = 2), "head", class = "localmean_error")
  expect_error(plot(fit, type = "attention"), "tokens", class = "localmean_error")
  expect_error(qkv_fit(1:10), "character vector")
  expect_error(qkv_fit(tok, validation = 1.5), "validation")
  expect_error(predict(fit, character(0)), "context")
  expect_error(attention_weights(fit, c("1", "2"), layer = 2), "layer", class = "localmean_error")
})

test_that("plots draw without error", {
  tok <- markov2_tokens(1500, 15)
  set.seed(16)
  fit <- qkv_fit(tok, dim = 2, window = 3, n_iter = 2, validation = 0.2, n_threads = 1,
                 verbose = FALSE)
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off())
  edges <- plot(fit, top = 6)
  expect_true(all(c("from", "to", "weight") %in% names(edges)))
  expect_equal(nrow(edges), 12L)
  expect_silent(plot(fit, type = "loss"))
  set.seed(17)
  deep <- qkv_fit(tok, dim = 4, window = 3, layers = 3, heads = 2, n_iter = 1, n_threads = 1,
                  verbose = FALSE)
  expect_identical(plot(deep, type = "attention", tokens = tok[1:12]), deep)
  expect_silent(plot(deep, type = "attention", tokens = "the cat sat on the mat", head = 2))
  expect_equal(nrow(plot(deep, top = 6, head = 1)), 12L)
  set.seed(18)
  masked <- qkv_fit(tok, dim = 4, window = 3, n_iter = 1, n_threads = 1, time_kernel = "window",
                    verbose = FALSE)
  expect_silent(plot(masked, type = "attention", tokens = c(tok[1:8], strrep("x", 40))))
})

test_that("the parameter layout comes from the C++ model and is the one it uses", {
  shape <- localmean:::qkv_shape(7L, 4L, 3L, 2L, 2L, 5L)
  lay <- localmean:::qkv_layout(shape)
  sizes <- c(embed = 28, ln1_gain = 8, ln1_bias = 8, query = 32, key = 32, value = 32, lag = 12,
             mix = 32, ln2_gain = 8, ln2_bias = 8, w1 = 40, c1 = 10, w2 = 40, c2 = 8,
             final_gain = 4, final_bias = 4, output = 28, output_bias = 7)
  expect_equal(lay$size, sizes)
  expect_equal(lay$start, cumsum(sizes) - sizes)
  expect_equal(lay$total, sum(sizes))
  none <- localmean:::qkv_layout(localmean:::qkv_shape(7L, 4L, 3L, 2L, 2L, 0L))
  ff <- c("ln2_gain", "ln2_bias", "w1", "c1", "w2", "c2")
  expect_equal(unname(none$size[ff]), rep(0, 6))
  # A large log weight at lag 2 for one layer and head makes that head look two back.
  tok <- markov2_tokens(800, 19)
  set.seed(20)
  fit <- qkv_fit(tok, dim = 4, window = 4, layers = 2, heads = 2, n_iter = 1, n_threads = 1,
                 verbose = FALSE)
  lay <- localmean:::qkv_layout(fit$shape)
  expect_equal(lay$total, length(fit$theta))
  for (layer in 1:2) for (head in 1:2) {
    fit2 <- fit
    fit2$theta[lay$start[["lag"]] + ((layer - 1) * 2 + head - 1) * 4 + 3L] <- 50
    a <- attention_weights(fit2, tok[1:12], layer = layer, head = head)
    expect_equal(unname(a[cbind(3:12, 1:10)]), rep(1, 10), tolerance = 1e-12)
    other <- attention_weights(fit2, tok[1:12], layer = layer, head = 3 - head)
    expect_lt(mean(other[cbind(3:12, 1:10)]), 0.9)
  }
})

test_that("attention_weights() is the plain-R softmax of the learned kernel", {
  tok <- markov2_tokens(1500, 21)
  set.seed(22)
  fit <- qkv_fit(tok, dim = 3, window = 3, n_iter = 1, n_threads = 1, verbose = FALSE)
  ctx <- tok[100:140]
  n <- length(ctx)
  ids <- match(ctx, fit$vocab)
  lag <- outer(seq_len(n), seq_len(n), "-")
  bias <- matrix(fit$lag_weights[1, pmin(pmax(lag, 0), 2) + 1], n)
  ref <- attention_ref(fit$query[ids, ], fit$key[ids, ], fit$value[ids, ], sqrt(3),
                       log_time_ref(n, "causal", 3) + bias)
  a <- attention_weights(fit, ctx)
  expect_equal(unname(a), unname(ref$weights), tolerance = 1e-12)
  expect_equal(dimnames(a), list(ctx, ctx))
  expect_error(localmean:::cpp_qkv_attention(fit$shape, fit$theta, c(0L, 99L), 1L, 1L),
               "out of range")
})

test_that("qkv_fit refuses absurd training lengths and bad choices with classed errors", {
  tokens <- rep(c("the", "cat", "sat", "on", "mat"), 60)
  expect_error(qkv_fit(tokens, dim = 2, window = 2, n_iter = 1e9, verbose = FALSE),
               class = "localmean_error", regexp = "n_iter")
  fit <- qkv_fit(tokens, dim = 2, window = 2, n_iter = 1, n_threads = 1, verbose = FALSE)
  expect_error(predict(fit, c("the", "cat"), type = "bogus"), class = "localmean_error",
               regexp = "type")
  expect_error(plot(fit, type = NA), class = "localmean_error", regexp = "type")
})

test_that("a qkv_fit window beyond the training tokens is an error, not a hang (issue 18)", {
  tokens <- rep(c("a", "b", "c"), 10)
  expect_error(qkv_fit(tokens, dim = 2, window = 1e9, n_iter = 1, verbose = FALSE), "window",
               class = "localmean_error")
})

test_that("temporal_local_mean() standardises the columns for the kernel by default", {
  x <- matrix(LakeHuron)
  # on raw data in feet above sea level the softmax weights fall on the largest past value
  raw <- temporal_local_mean(x, scale = FALSE, n_threads = 1)
  expect_equal(raw[, 1L], cummax(x[, 1L]))
  # by default: attention with queries and keys from the standardised series, values in feet
  z <- (x - mean(x)) / sd(x)
  ref <- attention_ref(z, z, x, 1, log_time_ref(nrow(x), "causal"))$output
  ours <- temporal_local_mean(x, n_threads = 1)
  expect_equal(unname(ours), ref, tolerance = 1e-10)
  expect_gt(mean(ours[, 1L] < cummax(x[, 1L]) - 0.5), 0.5)
  # the same for any units, and with projections the standardised columns are projected
  expect_equal(temporal_local_mean(x / 3.28, n_threads = 1), ours / 3.28, tolerance = 1e-10)
  set.seed(5)
  y <- cbind(a = rnorm(60, 100, 10), b = rnorm(60, -5, 0.1), c = 1)
  wq <- matrix(rnorm(6), 3)
  wk <- matrix(rnorm(6), 3)
  zs <- cbind(scale(y[, 1:2]), 0)
  ref <- attention_ref(zs %*% wq, zs %*% wk, y, sqrt(2), log_time_ref(60, "causal"))$output
  expect_equal(unname(temporal_local_mean(y, wq = wq, wk = wk, n_threads = 1)), unname(ref),
               tolerance = 1e-10)
  expect_error(temporal_local_mean(x, scale = NA), "scale", class = "localmean_error")
})
