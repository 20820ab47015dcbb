# Sequences: the temporal local mean (self-attention), modern Hopfield retrieval, and the discrete
# query-key-value kernel learned from text (qkv_fit) with its methods.

#' Temporal local mean and self-attention
#'
#' The temporal self-local mean of a sequence \eqn{x_1, \dots, x_T}{x_1, ..., x_T}:
#' \deqn{y_t = \sum_s K(q_t, k_s) L(t, s) v_s \big/ \sum_s K(q_t, k_s) L(t, s),}{
#'  y_t = sum_s K(q_t, k_s) L(t, s) v_s / sum_s K(q_t, k_s) L(t, s),}
#' with queries \eqn{q_t = x_t W_Q}{q_t = x_t W_Q}, keys
#' \eqn{k_s = x_s W_K}{k_s = x_s W_K} and values \eqn{v_s = x_s W_V}{v_s = x_s W_V} (each projection is the
#' identity when not given), a content kernel \eqn{K}{K} and a time kernel \eqn{L}{L}. With the
#' default `kernel = "softmax"`, \eqn{K(q, k) = \exp(q \cdot k / h)}{K(q, k) = exp(q . k / h)} with
#' \eqn{h = \sqrt{d_k}}{h = sqrt(d_k)}, `time_kernel = "causal"` and `scale = FALSE` this is exactly
#' causal scaled dot-product self-attention, \eqn{\mathrm{softmax}(QK'/\sqrt{d_k} + M)
#' V}{softmax(QK'/sqrt(d_k) + M) V} with the mask \eqn{M}{M}.
#'
#' **Scaling.** By default (`scale = TRUE`) the queries and keys are computed
#' from the columns of `x` standardised (centred and divided by their standard
#' deviations), so that the content kernel compares values on a common scale
#' whatever the units; the values \eqn{v_s}{v_s} keep the units of `x`. On raw
#' data in large units the exponential kernel puts all the weight on the
#' largest past value (a running maximum for a positive series); use `scale =
#' FALSE` for attention on `x` as it is (for example with learned projections).
#'
#' Content kernels: `"softmax"` (the exponential dot product, bandwidth
#' \eqn{h}{h} dividing the dot product) or any distance kernel of the registry
#' ([kernels()]), \eqn{k(\|q_t - k_s\| / h)}{k(||q_t - k_s|| / h)} with default
#' \eqn{h = \sqrt{d_k}}{h = sqrt(d_k)}. Time kernels:
#' - `"causal"`: keys \eqn{s \le t}{s <= t}; with a `time_bandwidth` \eqn{w}{w}, only the
#'   last ones, \eqn{t - s < w}{t - s < w} (a causal window of \eqn{w}{w} steps);
#' - `"window"`: the two-sided window \eqn{|t - s| \le w}{|t - s| <= w}, `time_bandwidth`
#'   the half-width \eqn{w}{w};
#' - `"exponential"`: keys \eqn{s \le t}{s <= t} weighted by
#'   \eqn{\exp(-(t - s)/w)}{exp(-(t - s)/w)} (a memory that fades);
#' - `"none"`: every key.
#'
#' The sums are streamed in C++ with an online softmax (a running maximum
#' of the log weights, and sums rescaled when it grows), so memory is
#' \eqn{O(T d)}{O(T d)}: no \eqn{T \times T}{T x T} matrix is formed unless
#' `return_weights = TRUE`, which is allowed for \eqn{T \le 5000}{T <= 5000} only. The
#' work is split over queries; each query sums its keys in a fixed order, so
#' the result does not depend on the number of threads. A query whose
#' weights are all zero (possible with compact kernels) gets `NaN`.
#'
#' @param x The sequence: a numeric matrix with one row per time step (a
#'   vector is one variable), at least 2 rows.
#' @param kernel `"softmax"` or a distance kernel name from [kernels()].
#' @param bandwidth The content bandwidth \eqn{h}{h}; default \eqn{\sqrt{d_k}}{sqrt(d_k)}.
#' @param time_kernel One of `"causal"`, `"window"`, `"exponential"`,
#'   `"none"`.
#' @param time_bandwidth Steps: the causal window length, the half-width of
#'   `"window"` or the decay scale of `"exponential"` (needed by the last two).
#' @param wq,wk,wv Optional query, key and value projection matrices with
#'   `ncol(x)` rows: `wq` and `wk` with the same number of columns
#'   \eqn{d_k}{d_k}, `wv` with \eqn{d_v}{d_v} columns.
#' @param scale Standardise the columns of `x` before the query and key
#'   projections (see Scaling); `FALSE` uses `x` as it is.
#' @param return_weights Also return the \eqn{T \times T}{T x T} weights.
#' @inheritParams lle
#' @param ... Not used.
#' @return A \eqn{T \times d_v}{T x d_v} matrix; with `return_weights = TRUE` a list
#'   with that matrix as `output` and `weights`, whose row \eqn{t}{t} holds the
#'   normalised weights of query \eqn{t}{t}.
#' @references Vaswani, A., Shazeer, N., Parmar, N., Uszkoreit, J., Jones, L.,
#'   Gomez, A. N., Kaiser, L. and Polosukhin, I. (2017). Attention is all you
#'   need. *Advances in Neural Information Processing Systems* 30.
#'   \doi{10.48550/arXiv.1706.03762}
#' @family sequences
#' @export
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(50 * 4), 50)
#' y <- temporal_local_mean(x, scale = FALSE)
#' # The same as causal scaled dot-product attention:
#' s <- x %*% t(x) / 2
#' s[upper.tri(s)] <- -Inf
#' a <- exp(s - apply(s, 1, max))
#' max(abs(y - (a / rowSums(a)) %*% x))
#' # A Gaussian kernel on content, a two-sided window of 5 steps in time:
#' y2 <- temporal_local_mean(x, kernel = "gaussian", time_kernel = "window",
#'                           time_bandwidth = 5)
temporal_local_mean <- function(x, kernel = "softmax", bandwidth = NULL, time_kernel = "causal",
                                time_bandwidth = NULL, wq = NULL, wk = NULL, wv = NULL,
                                scale = TRUE, return_weights = FALSE, n_threads = NULL,
                                verbose = interactive(), ...) {
  check_dots(...)
  x <- check_sequence(x)
  kernel <- check_choice(kernel, c("softmax", kernel_names()))
  time_kernel <- check_choice(time_kernel, c("causal", "window", "exponential", "none"))
  check_flag(return_weights)
  scale <- check_flag(scale)
  n <- nrow(x)
  wq <- check_projection(wq, ncol(x))
  wk <- check_projection(wk, ncol(x))
  wv <- check_projection(wv, ncol(x))
  content <- if (scale) standardise_columns(x) else x
  xq <- if (is.null(wq)) content else content %*% wq
  xk <- if (is.null(wk)) content else content %*% wk
  if (ncol(xq) != ncol(xk)) {
    abort("{.arg wq} and {.arg wk} must have the same number of columns ({ncol(xq)} and
          {ncol(xk)}).")
  }
  xv <- if (is.null(wv)) x else x %*% wv
  bandwidth <- if (is.null(bandwidth)) sqrt(ncol(xq)) else check_positive(bandwidth)
  time_bandwidth <- check_time_bandwidth(time_bandwidth, time_kernel)
  if (return_weights && n > max_weight_steps) {
    abort(c("{.arg return_weights} = TRUE needs a {n} x {n} matrix.",
            i = "The weights are returned for at most {max_weight_steps} steps."))
  }
  # One transposed copy per distinct matrix: without projections or scaling x serves as all three.
  tc <- if (is.null(wq) || is.null(wk)) t(content)
  tq <- if (is.null(wq)) tc else t(xq)
  tk <- if (is.null(wk)) tc else t(xk)
  tv <- if (!is.null(wv)) t(xv) else if (!scale && !is.null(tc)) tc else t(x)
  res <- cpp_temporal_local_mean(tq, tk, tv, kernel, bandwidth, time_kernel, time_bandwidth,
                                 return_weights, n_threads(n_threads), check_flag(verbose))
  out <- res$mean
  colnames(out) <- colnames(xv)
  if (!return_weights) return(out)
  list(output = out, weights = t(res$weights))
}

# The columns centred and divided by their standard deviations (a constant column is centred only).
standardise_columns <- function(x) {
  centred <- sweep(x, 2L, colMeans(x))
  spread <- sqrt(colSums(centred^2) / (nrow(x) - 1))
  sweep(centred, 2L, ifelse(spread > 0, spread, 1), `/`)
}

# The longest sequence whose T x T weights are returned (200 MB of doubles).
max_weight_steps <- 5000L

# A numeric sequence of at least two steps (rows).
check_sequence <- function(x, arg = rlang::caller_arg(x), call = rlang::caller_env()) {
  force(arg)
  if (is.numeric(x) && is.null(dim(x))) x <- matrix(x, ncol = 1L)
  if (is.data.frame(x)) x <- check_predictors(x, arg = arg, call = call)
  if (!is.matrix(x) || !is.numeric(x)) {
    abort("{.arg {arg}} must be a numeric matrix with one row per time step.", call = call)
  }
  if (nrow(x) < 2L) {
    abort("{.arg {arg}} has {nrow(x)} time step{?s}; at least 2 are needed.", call = call)
  }
  if (ncol(x) == 0L) abort("{.arg {arg}} has no columns.", call = call)
  # No copies of a long sequence: convert only integers, check finiteness in C++.
  if (!is.double(x)) storage.mode(x) <- "double"
  if (!cpp_all_finite(x)) {
    abort("{.arg {arg}} has missing or non-finite values.", call = call)
  }
  x
}

check_projection <- function(m, d, arg = rlang::caller_arg(m), call = rlang::caller_env()) {
  force(arg)
  if (is.null(m)) return(NULL)
  if (!is.matrix(m) || !is.numeric(m) || any(!is.finite(m))) {
    abort("{.arg {arg}} must be a finite numeric matrix.", call = call)
  }
  if (nrow(m) != d) {
    abort("{.arg {arg}} has {nrow(m)} row{?s} but the sequence has {d} column{?s}.", call = call)
  }
  if (ncol(m) == 0L) abort("{.arg {arg}} has no columns.", call = call)
  m
}

check_time_bandwidth <- function(w, time_kernel, call = rlang::caller_env()) {
  if (time_kernel == "none") return(Inf)
  if (is.null(w)) {
    if (time_kernel == "causal") return(Inf)
    abort("{.arg time_bandwidth} is needed by the {.val {time_kernel}} time kernel.",
          call = call)
  }
  if (!is.numeric(w) || length(w) != 1L || is.na(w) || w <= 0) {
    abort("{.arg time_bandwidth} must be a positive number of steps.", call = call)
  }
  if (time_kernel == "window" && !is.finite(w)) {
    abort("{.arg time_bandwidth} must be finite for the {.val window} time kernel.", call = call)
  }
  as.double(w)
}

#' Modern Hopfield retrieval
#'
#' Retrieves stored patterns by iterating the local mean with the
#' exponential kernel (Ramsauer et al., 2021):
#' \deqn{\xi \leftarrow \sum_i \exp(\beta\, \xi \cdot x_i)\, x_i \big/ \sum_i \exp(\beta\, \xi \cdot
#'   x_i),}{
#'  xi <- sum_i exp(beta xi . x_i) x_i / sum_i exp(beta xi . x_i),}
#' the update of a modern Hopfield network, which is attention with the stored patterns as
#' keys and values. Large `beta` retrieves single patterns; small `beta` gives averages (metastable
#' states).
#'
#' **Normalising the patterns.** The kernel is the exponential of the raw dot
#' product, and `hopfield()` does not rescale anything: a pattern with a
#' larger norm attracts every query more strongly, and the `beta` that
#' separates the patterns depends on their scale. Put the patterns (and the
#' queries) on one scale first: entries of +1 and -1 as in the example, or
#' unit length, `patterns / sqrt(rowSums(patterns^2))`. Roughly, pattern i is
#' retrieved when `beta` times its separation, its squared norm minus its
#' largest dot product with another pattern, well exceeds the log of the
#' number of patterns (Ramsauer et al., 2021); unit-length
#' patterns of dimension d therefore need a `beta` about d times larger than
#' the same patterns with entries of +1 and -1.
#'
#' @param patterns The stored patterns, one per row (a numeric matrix).
#' @param query The states to start from: a matrix with the same columns, or
#'   one vector.
#' @param beta Inverse temperature (positive).
#' @param n_iter Number of updates (at most 1e7).
#' @inheritParams temporal_local_mean
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A list with `retrieved` (one row per query) and `attention` (the
#'   weights over the stored patterns of the last update, one row per query).
#' @references Ramsauer, H., Schafl, B., Lehner, J., Seidl, P., Widrich, M.,
#'   Gruber, L., Holzleitner, M., Pavlovic, M., Sandve, G. K., Greiff, V.,
#'   Kreil, D., Kopp, M., Klambauer, G., Brandstetter, J. and Hochreiter, S.
#'   (2021). Hopfield networks is all you need. *International Conference on
#'   Learning Representations*. \doi{10.48550/arXiv.2008.02217}
#' @family sequences
#' @export
#' @examples
#' set.seed(1)
#' patterns <- sign(matrix(rnorm(5 * 64), 5))
#' noisy <- patterns[2, ] * ifelse(runif(64) < 0.2, -1, 1)
#' res <- hopfield(patterns, noisy, beta = 0.5)
#' round(res$attention, 3)
hopfield <- function(patterns, query, beta = 1, n_iter = 1, n_threads = NULL,
                     verbose = interactive(), ...) {
  check_dots(...)
  if (!is.matrix(patterns) || !is.numeric(patterns) || any(!is.finite(patterns)) ||
      nrow(patterns) == 0L) {
    abort("{.arg patterns} must be a finite numeric matrix with one pattern per row.")
  }
  if (is.numeric(query) && is.null(dim(query))) query <- matrix(query, nrow = 1L)
  if (!is.matrix(query) || !is.numeric(query) || any(!is.finite(query))) {
    abort("{.arg query} must be a finite numeric vector or matrix.")
  }
  if (ncol(query) != ncol(patterns)) {
    abort("{.arg query} has {ncol(query)} column{?s} but {.arg patterns} has {ncol(patterns)}.")
  }
  beta <- check_positive(beta)
  n_iter <- check_size(check_count(n_iter), size_limits$iterations, "updates", "n_iter")
  storage.mode(patterns) <- storage.mode(query) <- "double"
  threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  xi <- t(query)
  pt <- t(patterns)
  if (verbose && n_iter > 1L) cli::cli_progress_bar("Hopfield updates", total = n_iter)
  for (i in seq_len(n_iter)) {
    res <- cpp_temporal_local_mean(xi, pt, pt, "softmax", 1 / beta, "none", Inf, i == n_iter,
                                   threads, FALSE)
    xi <- t(res$mean)
    if (verbose && n_iter > 1L) cli::cli_progress_update()
  }
  retrieved <- t(xi)
  colnames(retrieved) <- colnames(patterns)
  attention <- t(res$weights)
  colnames(attention) <- rownames(patterns)
  list(retrieved = retrieved, attention = attention)
}

#' Split text into words
#'
#' Base-R tokenizer: runs of letters (with inner apostrophes, as in
#' "don't") and, with `punctuation = TRUE`, the marks `. , ; : ! ?` as
#' tokens of their own.
#'
#' @param text A character vector (lines or paragraphs).
#' @param lower Convert to lower case.
#' @param punctuation Keep sentence punctuation as tokens.
#' @param ... Must be empty: a misspelt or unknown argument is an error.
#' @return A character vector of tokens, in order.
#' @family sequences
#' @export
#' @examples
#' tokenize_words("It is a truth universally acknowledged, that a single man...")
#' tokenize_words("Don't panic!", lower = FALSE, punctuation = TRUE)
tokenize_words <- function(text, lower = TRUE, punctuation = FALSE, ...) {
  check_dots(...)
  if (!is.character(text)) abort("{.arg text} must be a character vector.")
  check_flag(lower)
  check_flag(punctuation)
  text <- text[!is.na(text)]
  text <- gsub("\u2019", "'", text, fixed = TRUE)
  if (lower) text <- tolower(text)
  pattern <- if (punctuation) "[[:alpha:]]+('[[:alpha:]]+)*|[.,;:!?]" else
    "[[:alpha:]]+('[[:alpha:]]+)*"
  unlist(regmatches(text, gregexpr(pattern, text, perl = TRUE)), use.names = FALSE)
}

unk_token <- "<unk>"
# The input hiding the token to predict, in the vocabulary of two-sided models.
mask_token <- "<mask>"
# The share of positions masked per pass in training two-sided models (and in their validation).
qkv_mask_rate <- 0.15

# The largest embedding dimension, and the most entries of one vocabulary x dim table (2^26
# doubles, 512 MB): limits on the model's memory.
qkv_max_dim <- 512L
qkv_max_table <- 2^26
# The most layers and the widest feed-forward block.
qkv_max_layers <- 64L
qkv_max_hidden <- 8192L

# The model's size, as the C++ core takes it.
qkv_shape <- function(vocab, dim, window, layers = 1L, heads = 1L, hidden = 0L,
                      two_sided = FALSE) {
  list(vocab = vocab, dim = dim, window = window, layers = layers, heads = heads, hidden = hidden,
       two_sided = two_sided)
}

# The parameter blocks of theta, read from the C++ model (QkvShape in sequence.hpp): `start`
# (0-based offsets) and `size` by block name, and the `total` size.
qkv_layout <- function(shape) cpp_qkv_layout(shape)

# Piece `layer` of a block of theta (per-layer blocks hold the layers one after the other): a
# vector of length nrow, or with ncol the core's row-major nrow x ncol matrix.
qkv_block <- function(theta, layout, name, nrow, ncol = NULL, layer = 1L) {
  piece <- nrow * if (is.null(ncol)) 1L else ncol
  i <- layout$start[[name]] + (layer - 1L) * piece + seq_len(piece)
  if (is.null(ncol)) return(theta[i])
  matrix(theta[i], nrow, ncol, byrow = TRUE)
}

# Layer normalisation of the rows of x, as in the C++ core.
layer_norm_rows <- function(x, gain, bias) {
  centred <- x - rowMeans(x)
  z <- centred / sqrt(rowMeans(centred^2) + 1e-5)
  sweep(sweep(z, 2L, gain, `*`), 2L, bias, `+`)
}

#' Learn a discrete query-key-value kernel from text: a Transformer of local means
#'
#' Learns a stack of causal temporal local means on a token sequence, the
#' Transformer built as a hierarchical local model. Every word \eqn{w}{w} has an
#' embedding \eqn{E_w}{E_w} (`dim` numbers); layer \eqn{l}{l} maps the
#' representations \eqn{x_t}{x_t} to
#' \deqn{y = LN(x),\quad o_t^{(h)} = \sum_s a_{ts}^{(h)} (y_s W_V)^{(h)},\quad a_{ts}^{(h)}
#'   \propto \exp\big((y_t W_Q)^{(h)} \cdot (y_s W_K)^{(h)} / \sqrt{d_h} + b^{(h)}_{t-s}\big),}{
#'  y = LN(x), o_t(h) = sum_s a_ts(h) (y_s W_V)(h), a_ts(h) propto exp((y_t W_Q)(h) . (y_s W_K)(h) /
#'  sqrt(d_h) + b(h)_(t-s)),}
#' over the keys \eqn{t - window < s \le t}{t - window < s <= t}: one local mean per head
#' \eqn{h}{h} on its \eqn{d_h = dim / heads}{d_h = dim / heads} coordinates, with a
#' learned time kernel \eqn{b^{(h)}}{b(h)} (a log weight per lag). The heads' means
#' side by side are projected and added to the input (a residual),
#' \eqn{x' = x + o W_O}{x' = x + o W_O}, then the position-wise feed-forward block
#' \eqn{x'' = x' + \mathrm{relu}(LN(x') W_1 + c_1) W_2 + c_2}{x'' = x' + relu(LN(x') W_1 + c_1)
#' W_2 + c_2} (`hidden` units; `hidden = 0` leaves it out). \eqn{LN}{LN} is layer
#' normalisation with a learned gain and bias. The last layer's
#' normalised output \eqn{z_t}{z_t} predicts the next token through a softmax,
#' \eqn{p(x_{t+1}) = \mathrm{softmax}(W z_t + c)}{p(x_(t+1)) = softmax(W z_t + c)}. With
#' `layers = 1` and `heads = 1` the local mean is the discrete query-key-value kernel:
#' word \eqn{w}{w} looks at word \eqn{w'}{w'} with weight
#' \eqn{\exp(Q_w \cdot K_{w'} / \sqrt{dim})}{exp(Q_w . K_w' / sqrt(dim))}
#' (`query`, `key` in the result). The loss is the
#' mean cross-entropy, minimised by Adam in C++ (the package's own gradient
#' code) on mini-batches of `batch_size` consecutive targets visited in
#' random order. The learning rate rises linearly to `lr` over the first 2%
#' of the mini-batches and then falls linearly to 0 at the end of the last
#' pass (a short training gains most from the cooling down); the residual
#' branches start at a scale divided by \eqn{\sqrt{layers}}{sqrt(layers)}, so that
#' each layer of a deep stack starts as a small change to its input.
#'
#' **Two-sided models.** With `time_kernel = "window"` every local mean sees
#' the tokens less than `window` steps away on both sides (an encoder, as
#' BERT's), so the next token would be in view. The model instead learns to
#' fill in masked tokens: in each pass a random 15% of the positions show the
#' token `"<mask>"` (added to the vocabulary), and the loss is the
#' cross-entropy of the hidden tokens there. The held-out perplexity is that
#' of the masked tokens of the validation text (masked once, at random), and
#' [predict()] gives the probabilities of the token behind the first
#' `"<mask>"` of a context.
#'
#' The vocabulary is the `vocab_size - 1` most frequent tokens (ties in
#' order of first appearance) and the explicit unknown token `"<unk>"`,
#' which every other token (in training, validation and [predict()]) maps
#' to. Each mini-batch is cut into 4 fixed shards whose gradients are summed
#' in order, so the fit does not depend on the number of threads; all random
#' numbers (initial weights, batch order) come from R, so `set.seed()` makes
#' a fit reproducible. The progress bar and interrupts are handled between
#' batches on the main thread.
#'
#' @param tokens A character vector of tokens in text order, e.g. from
#'   [tokenize_words()] (at least 2).
#' @param dim Embedding dimension (at most 512, smaller than the vocabulary).
#' @param window The time kernel's reach: each local mean sees the last
#'   `window` tokens (the current one included), or two-sided the tokens
#'   less than `window` steps away.
#' @param layers Number of layers (local means with their feed-forward
#'   blocks), at most 64.
#' @param n_iter Passes over the tokens (epochs); at most 1e7 mini-batches in
#'   all (`n_iter` times batches per pass).
#' @param lr Adam's peak learning rate (see Details for its schedule).
#' @param vocab_size Largest vocabulary, `"<unk>"` included.
#' @param validation Held-out text for the perplexity: a fraction in
#'   \eqn{[0, 1)}{[0, 1)} of the tokens (taken from the end) or a character vector
#'   of tokens.
#' @param batch_size Targets per mini-batch.
#' @param heads Heads per layer; must divide `dim`.
#' @param hidden Width of each feed-forward block (0 for none); the default
#'   is the Transformer's usual 4 times `dim`.
#' @param time_kernel The local means' time kernel: `"causal"` (keys up to
#'   the current token, the last `window` of them; the model predicts the
#'   next token) or `"window"` (two-sided: keys less than `window` tokens
#'   away on either side; the model predicts masked tokens, see Details).
#' @inheritParams temporal_local_mean
#' @return An object of class `local_qkv`: a list with `vocab`, `counts`
#'   (training frequencies), `embedding`, `query`, `key`, `value` (layer 1's,
#'   for every word) and `output` (vocab x dim matrices with the words as row
#'   names), `output_bias`, `lag_weights` (the time kernels' log weights, a
#'   row per layer and head, a column per lag 0, 1, ... or two-sided per
#'   offset), `theta` (all
#'   parameters), the loss trace (`batch_loss`, `epoch_loss`, `valid_loss`),
#'   `n_tokens` and the settings.
#' @family sequences
#' @seealso [predict.local_qkv()], [attention_weights()], [plot.local_qkv()]
#' @export
#' @examples
#' set.seed(1)
#' words <- c("the", "cat", "sat", "on", "mat", "dog", "ran")
#' tokens <- sample(words, 2000, replace = TRUE)
#' fit <- qkv_fit(tokens, dim = 4, window = 3, n_iter = 1, n_threads = 1)
#' fit
#' predict(fit, c("the", "cat"), type = "token")
#' # Two layers of two heads with feed-forward blocks:
#' fit2 <- qkv_fit(tokens, dim = 4, window = 3, layers = 2, heads = 2, hidden = 8,
#'                 n_iter = 1, n_threads = 1)
#' round(attention_weights(fit2, c("the", "cat", "sat", "on"), layer = 2, head = 1), 2)
qkv_fit <- function(tokens, dim = 16, window = 8, layers = 1, n_iter = 5, lr = 0.03,
                    vocab_size = 5000, validation = 0, batch_size = 256, heads = 1,
                    hidden = 4 * dim, time_kernel = "causal", n_threads = NULL,
                    verbose = interactive(), ...) {
  check_dots(...)
  if (is.factor(tokens)) tokens <- as.character(tokens)
  if (!is.character(tokens) || anyNA(tokens)) {
    abort("{.arg tokens} must be a character vector of tokens without NA, e.g. from
          {.fn tokenize_words}.")
  }
  dim <- check_count(dim)
  window <- check_count(window)
  layers <- check_count(layers)
  if (layers > qkv_max_layers) abort("{.arg layers} must be at most {qkv_max_layers}.")
  heads <- check_count(heads)
  if (dim %% heads != 0L) {
    abort(c("{.arg heads} ({heads}) must divide {.arg dim} ({dim}).",
            i = "Each head takes dim / heads of the embedding's coordinates."))
  }
  hidden <- check_count(hidden, min = 0)
  if (hidden > qkv_max_hidden) abort("{.arg hidden} must be at most {qkv_max_hidden}.")
  # the model's local means see the last `window` tokens, or `window` - 1 on each side
  time_kernel <- check_choice(time_kernel, c("causal", "window"))
  two_sided <- time_kernel == "window"
  n_iter <- check_count(n_iter)
  lr <- check_positive(lr)
  vocab_size <- check_count(vocab_size, min = 2)
  batch_size <- check_count(batch_size)
  if (is.character(validation)) {
    valid_tokens <- validation
  } else {
    if (!is.numeric(validation) || length(validation) != 1L || is.na(validation) ||
        validation < 0 || validation >= 1) {
      abort("{.arg validation} must be a fraction in [0, 1) or a character vector of tokens.")
    }
    n_valid <- floor(length(tokens) * validation)
    valid_tokens <- utils::tail(tokens, n_valid)
    tokens <- utils::head(tokens, length(tokens) - n_valid)
  }
  if (length(tokens) < 2L) {
    abort("{.arg tokens} has {length(tokens)} training token{?s}; at least 2 are needed.")
  }
  # Each lag has its own parameters: lags beyond the training tokens would never be fitted.
  if (window >= length(tokens)) {
    abort("{.arg window} ({window}) must be below the number of training tokens ({length(tokens)}).")
  }
  counts <- table(factor(tokens, levels = unique(tokens)))
  counts <- counts[order(-counts, seq_along(counts))]
  keep <- names(counts)[seq_len(min(length(counts), vocab_size - 1L))]
  vocab <- c(setdiff(keep, c(unk_token, mask_token)), unk_token, if (two_sided) mask_token)
  n_vocab <- length(vocab)
  if (dim > qkv_max_dim) abort("{.arg dim} must be at most {qkv_max_dim}.")
  if (dim >= n_vocab) {
    abort(c("{.arg dim} ({dim}) is too large for the vocabulary of {n_vocab} tokens.",
            i = "Use a {.arg dim} below the vocabulary size."))
  }
  if (as.double(n_vocab) * dim > qkv_max_table) {
    abort("{.arg vocab_size} times {.arg dim} is too large ({n_vocab} x {dim}).")
  }
  ids <- token_ids(tokens, vocab)
  valid_ids <- token_ids(valid_tokens, vocab)
  train_counts <- tabulate(ids + 1L, n_vocab)

  shape <- qkv_shape(n_vocab, dim, window, layers, heads, hidden, two_sided)
  lay <- qkv_layout(shape)
  theta <- qkv_init(lay, shape, train_counts)
  span <- length(ids) - if (two_sided) 0L else 1L
  n_batches <- ceiling(span / batch_size)
  check_size(n_batches * n_iter, size_limits$iterations, "mini-batches", "n_iter")
  order <- as.integer(replicate(n_iter, sample.int(n_batches)) - 1L)
  train <- qkv_text(ids, vocab, two_sided, if (two_sided) n_iter else 1L)
  valid <- qkv_text(valid_ids, vocab, two_sided, 1L)
  res <- cpp_qkv_train(shape, theta, train$input, train$target, drop(valid$input),
                       drop(valid$target), order, lr, batch_size, n_iter, n_threads(n_threads),
                       check_flag(verbose))
  check_diverged(c(res$theta, res$batch_loss), "lr")
  fit <- new_local_qkv(res, shape, lay, vocab, train_counts, length(ids), drop(valid$target),
                       list(lr = lr, n_iter = n_iter, batch_size = batch_size,
                            time_kernel = time_kernel))
  fit$call <- match.call()  # for update()
  fit
}

# 0-based ids; tokens outside the vocabulary become "<unk>".
token_ids <- function(tokens, vocab) {
  id <- match(tokens, vocab)
  id[is.na(id)] <- match(unk_token, vocab)
  as.integer(id - 1L)
}

# What the model reads and predicts, as `columns` n-column matrices `input` and `target`
# (0-based ids, target -1 where there is none). Causal: the tokens, and the next token as
# target. Two-sided: in each column a random share qkv_mask_rate of the positions (R's random
# numbers) shows the mask token, and only those have a target, the token hidden.
qkv_text <- function(ids, vocab, two_sided, columns) {
  n <- length(ids)
  if (!two_sided) {
    return(list(input = matrix(ids, n, 1L), target = matrix(c(ids[-1L], -1L)[seq_len(n)], n, 1L)))
  }
  masked <- matrix(stats::runif(n * columns) < qkv_mask_rate, n, columns)
  mask_id <- match(mask_token, vocab) - 1L
  list(input = matrix(ifelse(masked, mask_id, ids), n, columns),
       target = matrix(ifelse(masked, ids, -1L), n, columns))
}

# Initial parameters from R's random numbers: embeddings of standard deviation 1 (each layer
# normalises its input), weight matrices of standard deviation 1 / sqrt(fan-in) (the scale of
# their input kept), the query and key maps at half that (the kernel starts almost flat), the
# residual branches (mix, w2) at half that divided by sqrt(layers) (as GPT-2 divides by
# sqrt(2 * layers): the 2 * layers branches together start at the scale of the one-layer model's
# two, so a deep stack starts near it; measured in bench/README.md, issue 33),
# layer-norm gains 1, and the output bias at the log unigram frequencies (half a count added, so
# that every token has a finite bias).
qkv_init <- function(lay, shape, counts) {
  theta <- numeric(lay$total)
  fill <- function(name, sd) {
    i <- lay$start[[name]] + seq_len(lay$size[[name]])
    theta[i] <<- stats::rnorm(length(i), sd = sd)
  }
  ones <- function(name) theta[lay$start[[name]] + seq_len(lay$size[[name]])] <<- 1
  d <- shape$dim
  fill("embed", 1)
  fill("query", 0.5 / sqrt(d))
  fill("key", 0.5 / sqrt(d))
  fill("value", 1 / sqrt(d))
  resid <- 0.5 / sqrt(shape$layers)
  fill("mix", resid / sqrt(d))
  fill("w1", 1 / sqrt(d))
  fill("w2", resid / sqrt(max(1L, shape$hidden)))
  fill("output", 1 / sqrt(d))
  for (name in c("ln1_gain", "ln2_gain", "final_gain")) ones(name)
  lp <- log((counts + 0.5) / sum(counts + 0.5))
  theta[lay$start[["output_bias"]] + seq_len(shape$vocab)] <- lp - mean(lp)
  theta
}

new_local_qkv <- function(res, shape, lay, vocab, counts, n_tokens, valid_targets, settings) {
  theta <- res$theta
  d <- shape$dim
  block <- function(name, nrow, ncol = NULL, layer = 1L) {
    qkv_block(theta, lay, name, nrow, ncol, layer)
  }
  # Layer 1's query, key and value of every word: its embedding normalised and projected.
  y <- layer_norm_rows(block("embed", shape$vocab, d), block("ln1_gain", d), block("ln1_bias", d))
  word <- function(name) {
    m <- if (name %in% c("embed", "output")) block(name, shape$vocab, d) else y %*% block(name, d, d)
    rownames(m) <- vocab
    m
  }
  w <- shape$window
  n_lags <- if (isTRUE(shape$two_sided)) 2L * w - 1L else w
  lags <- t(vapply(seq_len(shape$layers * shape$heads), function(i) {
    block("lag", n_lags, layer = i)
  }, numeric(n_lags)))
  # causal: by lag t - s; two-sided: by offset s - t
  dimnames(lags) <- list(sprintf("layer %d, head %d", rep(seq_len(shape$layers), each = shape$heads),
                                 rep(seq_len(shape$heads), shape$layers)),
                         if (n_lags > w) sprintf("%+d", seq(1L - w, w - 1L)) else
                           paste0("lag", seq_len(w) - 1L))
  structure(list(
    vocab = vocab, counts = stats::setNames(counts, vocab), embedding = word("embed"),
    query = word("query"), key = word("key"), value = word("value"), output = word("output"),
    output_bias = stats::setNames(block("output_bias", shape$vocab), vocab),
    lag_weights = lags, theta = theta, shape = shape, batch_loss = res$batch_loss,
    epoch_loss = res$epoch_loss, valid_loss = res$valid_loss, n_tokens = n_tokens,
    n_valid = sum(valid_targets >= 0L), unigram_loss = unigram_loss(counts, valid_targets),
    settings = settings
  ), class = "local_qkv")
}

# Cross-entropy of the held-out tokens under the training frequencies (add-one smoothing): the
# baseline a model of context has to beat.
unigram_loss <- function(counts, valid_targets) {
  valid_targets <- valid_targets[valid_targets >= 0L]
  if (length(valid_targets) == 0L) return(NA_real_)
  p <- (counts + 1) / sum(counts + 1)
  -mean(log(p[valid_targets + 1L]))
}

#' Methods for QKV models
#'
#' `print()` and `summary()` describe the fit (`summary()` adds the loss per
#' epoch and the held-out perplexity against the unigram baseline);
#' `predict()` gives next-token probabilities or the most likely next token
#' after a context; `plot()` draws the learned word graph, the loss curve or
#' the attention graph of every layer over a sentence.
#'
#' In `predict()`, tokens outside the vocabulary map to `"<unk>"`; a single
#' string with spaces is split by [tokenize_words()]. The predicted token
#' (`type = "token"`) is the most probable one other than `"<unk>"`. For a
#' two-sided model (`time_kernel = "window"`) the context must contain
#' `"<mask>"`: the prediction is for the token it hides (the first one).
#'
#' The graph (`type = "graph"`) shows the learned content kernel among the
#' `top` most frequent words: for query word \eqn{i}{i} and key word \eqn{j}{j},
#' the weight \eqn{\exp(Q_i \cdot K_j / \sqrt{dim})}{exp(Q_i . K_j / sqrt(dim))} normalised over the
#' `top` keys (the attention word \eqn{i}{i} would pay to \eqn{j}{j} with all of
#' them in its window). The strongest `2 * top` weights between different
#' words are drawn as arrows from query to key on a circle, words ordered
#' by a clustering of their kernel rows, line width by weight. With several
#' heads the kernel is averaged over the heads, or is head `head`'s.
#'
#' The attention graph (`type = "attention"`) draws, for the `tokens` given,
#' one panel per layer: the tokens in order along a line, an arc from each
#' position to every earlier position it draws on with weight above 0.05
#' (wider and darker for larger weights, averaged over the heads or of head
#' `head`), and under each token a disc sized by its weight on itself.
#'
#' @param x,object A `local_qkv`.
#' @param context Tokens before the word to predict: a character vector, or
#'   a list of them for several predictions.
#' @param type For `predict()`: `"prob"` (probabilities) or `"token"`. For
#'   `plot()`: `"graph"`, `"loss"` or `"attention"`.
#' @param top Number of frequent words in the graph.
#' @param tokens For `type = "attention"`: the sentence, a character vector
#'   of 2 to 60 tokens or one string (split by [tokenize_words()]).
#' @param head The head whose weights `plot()` draws; `NULL` averages them.
#' @param ... Passed to the plotting functions; not used otherwise.
#' @return `predict()`: a named probability vector (a matrix with a row per
#'   context for a list), or the predicted tokens. `plot()`: the graph's
#'   edges (invisibly) for `"graph"`, the object for `"loss"` and
#'   `"attention"`.
#' @name local_qkv-methods
#' @family sequences
#' @examples
#' set.seed(1)
#' # Each word determines the word two steps later.
#' nxt <- c(a = "b", b = "c", c = "d", d = "e", e = "a")
#' tokens <- c("a", "c")
#' for (i in 3:3000) {
#'   tokens[i] <- if (runif(1) < 0.8) nxt[[tokens[i - 2]]] else sample(names(nxt), 1)
#' }
#' fit <- qkv_fit(tokens, dim = 3, window = 3, n_iter = 3, validation = 0.1,
#'                n_threads = 1)
#' summary(fit)
#' predict(fit, c("a", "c"))
#' plot(fit, top = 5)
NULL

#' @rdname local_qkv-methods
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @export
print.local_qkv <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  s <- x$shape
  last <- utils::tail(x$epoch_loss, 1)
  print_fields(
    sprintf("<local_qkv> %d layer%s of %d head%s, %s, vocabulary %d (with <unk>), dim %d, %s %d",
            s$layers, if (s$layers > 1L) "s" else "", s$heads, if (s$heads > 1L) "s" else "",
            if (s$hidden > 0L) sprintf("feed-forward width %d", s$hidden) else "no feed-forward",
            s$vocab, s$dim, if (isTRUE(s$two_sided)) "two-sided masked-token model, window" else
              "window", s$window),
    list(Trained = sprintf("%d tokens, %d epoch%s", x$n_tokens, length(x$epoch_loss),
                           if (length(x$epoch_loss) > 1L) "s" else ""),
         `Training loss` = sprintf("%s (perplexity %s)", format(last, digits = digits),
                                   format(exp(last), digits = digits)),
         `Held-out perplexity` = if (length(x$valid_loss)) {
           sprintf("%s on %d tokens (unigram: %s)",
                   format(exp(utils::tail(x$valid_loss, 1)), digits = digits), x$n_valid,
                   format(exp(x$unigram_loss), digits = digits))
         }))
  invisible(x)
}

#' @rdname local_qkv-methods
#' @export
summary.local_qkv <- function(object, ..., digits = NULL) {
  check_dots(...)
  ep <- seq_along(object$epoch_loss)
  loss <- data.frame(epoch = ep, train_loss = object$epoch_loss,
                     train_perplexity = exp(object$epoch_loss))
  if (length(object$valid_loss)) {
    loss$valid_loss <- object$valid_loss
    loss$valid_perplexity <- exp(object$valid_loss)
  }
  structure(list(fit = object, loss = loss,
                 perplexity = if (length(object$valid_loss))
                   exp(utils::tail(object$valid_loss, 1)) else NA_real_,
                 unigram_perplexity = exp(object$unigram_loss),
                 lag_weights = object$lag_weights, digits = check_digits(digits)),
            class = "summary.local_qkv")
}

#' @export
print.summary.local_qkv <- function(x, ..., digits = x$digits) {
  check_dots(...)
  digits <- print_summary_fit(x, digits)
  cat("\nLoss by epoch:\n")
  print_trimmed(x$loss, digits = digits, row.names = FALSE)
  if (!is.na(x$perplexity)) {
    cat("Held-out perplexity ", format(x$perplexity, digits = digits), " against ",
        format(x$unigram_perplexity, digits = digits), " for word frequencies alone\n",
        sep = "")
  }
  cat(if (isTRUE(x$fit$shape$two_sided)) "\nTime kernels (log weight by offset s - t):\n" else
    "\nTime kernels (log weight by lag):\n")
  print(round(x$lag_weights, 2))
  invisible(x)
}

#' @rdname local_qkv-methods
#' @export
nobs.local_qkv <- function(object, ...) {
  check_dots(...)
  object$n_tokens
}

# The part of a context the prediction depends on, as ids, and the position predicted (0-based):
# causal, the next token after the last `layers * (window - 1) + 1` tokens; two-sided, the token
# behind the first "<mask>" with `layers * (window - 1)` tokens on each side.
qkv_context <- function(object, ctx, call = rlang::caller_env()) {
  s <- object$shape
  reach <- s$layers * (s$window - 1L)
  if (!isTRUE(s$two_sided)) {
    return(list(ids = token_ids(utils::tail(ctx, reach + 1L), object$vocab),
                at = as.integer(min(length(ctx), reach + 1L) - 1L)))
  }
  at <- match(mask_token, ctx)
  if (is.na(at)) {
    abort(c("{.arg context} must contain {.val {mask_token}} for a two-sided model.",
            i = "The model predicts the token behind the mask from both sides."), call = call)
  }
  keep <- max(1L, at - reach):min(length(ctx), at + reach)
  list(ids = token_ids(ctx[keep], object$vocab), at = as.integer(at - keep[1L]))
}

#' @rdname local_qkv-methods
#' @export
predict.local_qkv <- function(object, context, type = c("prob", "token"), ...) {
  check_dots(...)
  type <- match_choice(type, c("prob", "token"))
  several <- is.list(context)
  contexts <- if (several) context else list(context)
  ids <- lapply(seq_along(contexts), function(i) {
    ctx <- contexts[[i]]
    if (is.factor(ctx)) ctx <- as.character(ctx)
    if (!is.character(ctx) || anyNA(ctx) || length(ctx) == 0L) {
      abort("{.arg context} must hold non-empty character vectors of tokens.")
    }
    if (length(ctx) == 1L && grepl("[[:space:]]", ctx)) ctx <- tokenize_words(ctx)
    qkv_context(object, ctx)
  })
  probs <- t(cpp_qkv_predict(object$shape, object$theta, lapply(ids, `[[`, "ids"),
                             vapply(ids, `[[`, 0L, "at")))
  colnames(probs) <- object$vocab
  if (type == "token") {
    keep <- !object$vocab %in% c(unk_token, mask_token)
    return(object$vocab[keep][apply(probs[, keep, drop = FALSE], 1L, which.max)])
  }
  if (several) probs else probs[1L, ]
}

#' Attention weights of a fitted model
#'
#' The weights \eqn{a_{ts}}{a_ts} of one local mean of a fitted model over a
#' token sequence: row \eqn{t}{t} holds how much position \eqn{t}{t} draws on each
#' position \eqn{s}{s} (zero outside the window: later positions for a causal
#' model).
#'
#' @param object A fitted model, e.g. from [qkv_fit()].
#' @param tokens A character vector of tokens (unknown ones map to
#'   `"<unk>"`).
#' @param layer Which layer's local mean (from 1 to the model's `layers`).
#' @param head Which head of that layer (from 1 to the model's `heads`);
#'   `NULL` averages the heads' weights.
#' @param ... Passed to methods.
#' @return A square matrix with the tokens as row and column names.
#' @family sequences
#' @export
#' @examples
#' set.seed(1)
#' tokens <- sample(c("a", "b", "c", "d"), 500, replace = TRUE)
#' fit <- qkv_fit(tokens, dim = 2, window = 3, n_iter = 1, n_threads = 1)
#' round(attention_weights(fit, c("a", "b", "c", "a")), 2)
attention_weights <- function(object, tokens, ...) UseMethod("attention_weights")

#' @rdname attention_weights
#' @export
attention_weights.local_qkv <- function(object, tokens, layer = 1, head = NULL, ...) {
  check_dots(...)
  if (!is.character(tokens) || anyNA(tokens) || length(tokens) == 0L) {
    abort("{.arg tokens} must be a non-empty character vector.")
  }
  s <- object$shape
  layer <- check_count(layer)
  if (layer > s$layers) abort("{.arg layer} must be at most {s$layers}.")
  heads <- if (is.null(head)) seq_len(s$heads) else check_count(head)
  if (max(heads) > s$heads) abort("{.arg head} must be at most {s$heads}.")
  ids <- token_ids(tokens, object$vocab)
  a <- Reduce(`+`, lapply(heads, function(h) {
    t(cpp_qkv_attention(s, object$theta, ids, layer, h))
  })) / length(heads)
  dimnames(a) <- list(tokens, tokens)
  a
}

# The softmax of every row of a score matrix.
softmax_rows <- function(s) {
  p <- exp(s - apply(s, 1L, max))
  p / rowSums(p)
}

#' @rdname local_qkv-methods
#' @export
plot.local_qkv <- function(x, type = c("graph", "loss", "attention"), top = 40, tokens = NULL,
                           head = NULL, ...) {
  check_graphics_dots(...)
  type <- match_choice(type, c("graph", "loss", "attention"))
  if (type == "attention") return(plot_attention_layers(x, tokens, head, ...))
  if (type == "loss") {
    bl <- x$batch_loss
    nb <- length(bl) / length(x$epoch_loss)
    graphics::plot(seq_along(bl) / nb, bl, type = "l", col = "grey70", xlab = "epoch",
                   ylab = "cross-entropy", main = "Training loss", ...)
    k <- max(1L, round(nb / 10))  # the moving average spans a tenth of an epoch
    graphics::lines(seq_along(bl) / nb, stats::filter(bl, rep(1 / k, k), sides = 1), lwd = 2)
    if (length(x$valid_loss)) {
      graphics::points(seq_along(x$valid_loss), x$valid_loss, col = "firebrick", pch = 19)
      graphics::legend("topright", c("mini-batches", "moving average", "held out"),
                       col = c("grey70", "black", "firebrick"), lty = c(1, 1, NA),
                       pch = c(NA, NA, 19), lwd = c(1, 2, NA), bty = "n")
    }
    return(invisible(x))
  }
  top <- check_count(top, min = 2)
  words <- setdiff(names(sort(x$counts, decreasing = TRUE)), unk_token)
  words <- words[seq_len(min(top, length(words)))]
  kern <- word_kernel(x, words, head)
  n <- length(words)
  ord <- if (n > 2L) stats::hclust(stats::dist(kern))$order else seq_len(n)
  angle <- 2 * pi * (seq_len(n) - 1) / n
  pos <- matrix(NA_real_, n, 2L)
  pos[ord, ] <- cbind(cos(angle), sin(angle))
  off <- kern
  diag(off) <- 0
  n_edges <- min(2L * n, n * (n - 1L))
  strongest <- order(off, decreasing = TRUE)[seq_len(n_edges)]
  edges <- data.frame(from = words[row(off)[strongest]], to = words[col(off)[strongest]],
                      weight = off[strongest])
  # Words as markers on the unit circle with their labels just outside; every arrow runs from
  # the query word's marker to the key word's, its head at the key's marker, shifted a little to
  # its right so that the two directions between a pair of words stay apart.
  lim <- c(-1.35, 1.35)
  graphics::plot(NA, xlim = lim, ylim = lim, asp = 1, axes = FALSE, xlab = "", ylab = "",
                 main = "Learned word kernel of layer 1 (query -> key)", ...)
  graphics::mtext(sprintf("the %d strongest attention weights among the %d most frequent words",
                          nrow(edges), n), side = 3, line = 0.3, cex = 0.8, col = "grey30")
  from <- match(edges$from, words)
  to <- match(edges$to, words)
  # Line widths from 0.5 (weakest edge) to 4.5 (strongest); equal weights give 0.5.
  lwd <- 0.5 + 4 * (edges$weight - min(edges$weight)) /
    max(1e-12, diff(range(edges$weight)))
  dx <- pos[to, 1] - pos[from, 1]
  dy <- pos[to, 2] - pos[from, 2]
  len <- sqrt(dx^2 + dy^2)
  # the markers' radius in user units: neighbours on the circle are 2 sin(pi / n) apart, so every
  # shortened arrow keeps a length (arrows() warns on zero-length ones)
  gap <- min(0.07, 0.4 * sin(pi / n))
  keep <- len > 2 * gap
  ux <- dx[keep] / len[keep]
  uy <- dy[keep] / len[keep]
  shift <- gap / 3
  graphics::arrows(pos[from[keep], 1] + gap * ux + shift * uy,
                   pos[from[keep], 2] + gap * uy - shift * ux,
                   pos[to[keep], 1] - gap * ux + shift * uy,
                   pos[to[keep], 2] - gap * uy - shift * ux, length = 0.08, angle = 25,
                   lwd = lwd[keep], col = grDevices::adjustcolor("steelblue", 0.7))
  graphics::points(pos, pch = 21, cex = if (n > 20L) 1.2 else 1.8, bg = "white", col = "grey30",
                   lwd = 1.2)
  side <- ifelse(pos[, 1] < -0.2, 2, ifelse(pos[, 1] > 0.2, 4, ifelse(pos[, 2] > 0, 3, 1)))
  graphics::text(pos[, 1] * 1.1, pos[, 2] * 1.1, words, cex = 0.8, pos = side, offset = 0.2,
                 xpd = TRUE)
  invisible(edges)
}

# Layer 1's kernel among `words`: per head the softmax over the words of the query-key scores,
# averaged over the heads (or of head `head`).
word_kernel <- function(x, words, head) {
  s <- x$shape
  heads <- if (is.null(head)) seq_len(s$heads) else check_count(head)
  if (max(heads) > s$heads) abort("{.arg head} must be at most {s$heads}.")
  dh <- s$dim / s$heads
  Reduce(`+`, lapply(heads, function(h) {
    cols <- (h - 1L) * dh + seq_len(dh)
    softmax_rows(x$query[words, cols, drop = FALSE] %*% t(x$key[words, cols, drop = FALSE]) /
                   sqrt(dh))
  })) / length(heads)
}

# The tokens of a two-sided attention plot written on the line itself, where arcs leave above
# and below: each in a box shaded by the token's weight on itself, the text shrunk until
# neighbouring boxes do not overlap (long tokens abbreviated where that would make it unreadable).
label_tokens_on_line <- function(tokens, own) {
  fit_cex <- 0.85 * 0.9 / max(graphics::strwidth(tokens, cex = 0.9))
  if (fit_cex < 0.55) tokens <- abbreviate(tokens, minlength = 4L, named = FALSE)
  cex <- min(0.9, 0.85 * 0.9 / max(graphics::strwidth(tokens, cex = 0.9)))
  half_w <- graphics::strwidth(tokens, cex = cex) / 2 + 0.04
  half_h <- graphics::strheight("Mg", cex = cex) * 0.8
  at <- seq_along(tokens)
  graphics::rect(at - half_w, -half_h, at + half_w, half_h, col = "white", border = NA)
  graphics::rect(at - half_w, -half_h, at + half_w, half_h, border = "steelblue",
                 col = grDevices::rgb(70, 130, 180, 255 * (0.1 + 0.6 * own), maxColorValue = 255))
  graphics::text(at, 0, tokens, cex = cex)
}

# The attention graph of every layer over a token sequence, one panel per layer: the tokens in
# order along a line, an arc from each position to every earlier position it draws on (width and
# darkness by weight, weights below 0.05 left out), a disc under each token for its own weight
# (two-sided models: the tokens on the line, label_tokens_on_line()).
plot_attention_layers <- function(x, tokens, head, ...) {
  if (is.null(tokens)) abort("{.arg tokens} is needed for {.code type = \"attention\"}.")
  if (length(tokens) == 1L && is.character(tokens) && grepl("[[:space:]]", tokens)) {
    tokens <- tokenize_words(tokens, punctuation = TRUE)
  }
  if (!is.character(tokens) || anyNA(tokens) || length(tokens) < 2L || length(tokens) > 60L) {
    abort("{.arg tokens} must be a character vector of 2 to 60 tokens.")
  }
  L <- x$shape$layers
  n <- length(tokens)
  op <- graphics::par(mfrow = c(L, 1L), mar = c(4, 2, 1.6, 2))
  on.exit(graphics::par(op))
  reach <- min(x$shape$window - 1L, n - 1L)
  for (l in seq_len(L)) {
    a <- attention_weights(x, tokens, layer = l, head = head)
    two_sided <- isTRUE(x$shape$two_sided)
    below <- if (two_sided) 0.55 * max(1, reach) else 0.08
    graphics::plot(NA, xlim = c(0.5, n + 0.5), ylim = c(-below, 0.55 * max(1, reach)), axes = FALSE,
                   xlab = "", ylab = "", main = sprintf("Layer %d", l), cex.main = 1.1, ...)
    if (!two_sided) {
      # the tokens slanted under their positions, so that long words do not overlap
      graphics::text(seq_len(n), graphics::grconvertY(graphics::grconvertY(-below, "user", "lines") -
                                                        0.3, "lines", "user"),
                     tokens, srt = 35, adj = c(1, 1), xpd = NA, cex = 0.9)
    }
    # arcs to earlier positions above the line, to later ones (two-sided models) below it
    pair <- which(a > 0.05 & row(a) != col(a), arr.ind = TRUE)
    u <- seq(0, pi, length.out = 30)
    for (e in seq_len(nrow(pair))) {
      t <- pair[e, 1L]
      s <- pair[e, 2L]
      w <- a[t, s]
      graphics::lines((t + s) / 2 + (t - s) / 2 * cos(u), 0.5 * (t - s) * sin(u),
                      lwd = 0.5 + 4 * w, col = grDevices::gray(0.15, alpha = 0.15 + 0.85 * w))
    }
    if (two_sided) {
      label_tokens_on_line(tokens, diag(a))
    } else {
      graphics::points(seq_len(n), rep(0, n), pch = 21, bg = "steelblue", col = "white",
                       cex = 0.5 + 2.5 * diag(a))
    }
  }
  invisible(x)
}
