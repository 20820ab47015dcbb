# The package-wide conventions of the API (DESIGN.md, "API conventions"): argument order, one
# name per meaning, class names, threads and progress on everything that computes, plots that
# leave the random stream alone and check their graphical parameters.

# Every exported function, and the methods of the fitting generics, with their formals.
api_functions <- function() {
  ns <- asNamespace("localmean")
  exports <- getNamespaceExports("localmean")
  exports <- exports[vapply(exports, function(f) is.function(ns[[f]]), TRUE)]
  exports <- setdiff(exports, c("tidy", "glance", "augment", "kde", "local_poly", "local_mean",
                                "local_classify", "fuzzy_inference"))
  methods <- c("kde.default", "local_poly.default", "local_poly.formula",
               "local_classify.default", "local_classify.formula", "predict.local_poly",
               "predict.local_kde", "predict.local_classify", "predict.local_modes",
               "predict.local_embedding", "fuzzy_inference.default",
               "fuzzy_inference.formula")
  stats::setNames(lapply(c(exports, methods), function(f) names(formals(ns[[f]]))),
                  c(exports, methods))
}

test_that("arguments come in one order: data, kernel, bandwidth, ..., method, n_threads", {
  data_args <- c("x", "y", "u", "at", "formula", "data", "img", "object", "newdata", "model",
                 "over")
  tail_order <- c("weights", "subset", "na.action", "method", "n_threads", "verbose", "control",
                  "...")
  for (name in names(fns <- api_functions())) {
    args <- fns[[name]]
    if ("kernel" %in% args) {
      first <- seq_len(match("kernel", args) - 1L)
      expect_true(all(args[first] %in% data_args), info = name)
      if ("bandwidth" %in% args) {
        expect_identical(match("bandwidth", args), match("kernel", args) + 1L, info = name)
      }
    }
    tail_args <- args[args %in% tail_order]
    # the tail arguments come last, in this order
    expect_identical(tail_args, intersect(tail_order, args), info = name)
    if (length(tail_args)) {
      expect_identical(utils::tail(args, length(tail_args)), tail_args, info = name)
    }
  }
})

test_that("one name per meaning: n_iter counts iterations, k counts neighbours", {
  fns <- api_functions()
  all_args <- unlist(fns)
  for (old in c("n_iters", "steps", "epochs", "iters", "h", "q", "v")) {
    expect_false(old %in% all_args, info = old)
  }
  with_k <- names(fns)[vapply(fns, function(a) "k" %in% a, TRUE)]
  expect_setequal(with_k, c("lle", "embedding_quality", "local_impute", "nn"))
  with_n_iter <- names(fns)[vapply(fns, function(a) "n_iter" %in% a, TRUE)]
  expect_setequal(with_n_iter, c("self_local_mean", "hopfield", "qkv_fit", "trimap",
                                 "ordinal_embed", "diffusion_sample"))
  expect_identical(names(formals(temporal_local_mean))[6:8], c("wq", "wk", "wv"))
  # kde_bandwidth() names its selector as kde() does
  x <- faithful$eruptions
  expect_identical(kde_bandwidth(x, bandwidth = "plugin", verbose = FALSE),
                   kde(x, bandwidth = "plugin", verbose = FALSE)$bandwidth$h)
  expect_error(kde_bandwidth(x, method = "plugin"), "method", class = "localmean_error")
})

test_that("a user-given bandwidth is labelled \"user\" by every family", {
  expect_identical(local_poly(dist ~ speed, cars, bandwidth = 3, verbose = FALSE)$bandwidth_method,
                   "user")
  expect_identical(kde(faithful$eruptions, bandwidth = 0.3, verbose = FALSE)$bandwidth_method,
                   "user")
  ms <- mean_shift(faithful$eruptions, bandwidth = 0.3, verbose = FALSE)
  expect_identical(ms$bandwidth_method, "user")
  expect_identical(pc_shift(as.matrix(faithful), bandwidth = c(0.3, 5),
                            verbose = FALSE)$bandwidth_method, "user")
})

test_that("every result class carries the local_ prefix", {
  for (name in names(fits <- small_fits())) {
    expect_match(class(fits[[name]])[1L], "^local_", info = name)
  }
  expect_s3_class(nn(5), "local_nn")
  expect_s3_class(local_control(), "local_control")
})

test_that("every function that computes takes n_threads and verbose, validated", {
  fns <- api_functions()
  no_work <- c("kernels", "kernel_value", "user_kernel", "losses", "nn", "local_control", "n_threads", "read_idx",
               "fashion_mnist", "fashion_mnist_path", "tokenize_words", "word_cooccurrence",
               "plot_images", "attention_weights",
               "local_denoiser")  # stores the data; its predict() computes
  for (name in setdiff(names(fns), no_work)) {
    expect_true(all(c("n_threads", "verbose") %in% fns[[name]]), info = name)
  }
  fits <- small_fits()
  bad_threads <- list(
    asym_mds = function() asym_mds(diag(3) + 0.1, n_threads = 0, verbose = FALSE),
    hopfield = function() hopfield(diag(3), c(1, 0, 0), n_threads = 0, verbose = FALSE),
    kde_bandwidth = function() kde_bandwidth(faithful$eruptions, n_threads = 0, verbose = FALSE),
    predict_embedding = function() predict(fits$lle, iris[1:3, 1:4], n_threads = 0),
    predict_modes = function() predict(fits$mean_shift, c(0, 0), n_threads = 0)
  )
  for (name in names(bad_threads)) {
    expect_error(bad_threads[[name]](), "n_threads", class = "localmean_error", info = name)
  }
  expect_error(asym_mds(diag(3) + 0.1, verbose = NA), "verbose", class = "localmean_error")
  expect_error(hopfield(diag(3), c(1, 0, 0), verbose = "yes"), "verbose",
               class = "localmean_error")
  expect_error(predict(fits$mean_shift, c(0, 0), verbose = 1), "verbose",
               class = "localmean_error")
  # the new arguments change nothing but the display
  expect_identical(predict(fits$lle, iris[1:5, 1:4], n_threads = 1),
                   predict(fits$lle, iris[1:5, 1:4], n_threads = 2, verbose = TRUE))
  expect_identical(hopfield(diag(3), c(1, 0.2, 0), n_iter = 3, n_threads = 1, verbose = FALSE),
                   hopfield(diag(3), c(1, 0.2, 0), n_iter = 3, n_threads = 2, verbose = FALSE))
})

test_that("asym_mds() keeps its loss finite: no optimiser warning on sparse similarities", {
  co <- word_cooccurrence(rep(c("the cat sat on the mat", "a dog ate the bone"), 20),
                          vocab_size = 10)
  expect_no_warning(fit <- asym_mds(co$prob, verbose = FALSE))
  expect_true(is.finite(fit$loss))
})

test_that("plots leave the random stream alone and leak no warnings", {
  fits <- small_fits()
  one_d <- mean_shift(c(faithful$eruptions), bandwidth = 0.3, verbose = FALSE)
  embedding <- asym_mds(word_cooccurrence(rep(c("the cat sat on the mat", "a dog ate the bone"),
                                              20), vocab_size = 10)$prob, verbose = FALSE)
  objects <- c(fits, list(one_d = one_d, asym_mds = embedding))
  png(file <- tempfile(fileext = ".png"))
  on.exit({
    grDevices::dev.off()
    unlink(file)
  })
  set.seed(3)
  for (name in names(objects)) {
    before <- .Random.seed
    expect_no_warning(plot(objects[[name]]), message = name)
    expect_identical(.Random.seed, before, info = name)
  }
  before <- .Random.seed
  plot(fits$mean_shift, paths = TRUE)
  plot(fits$medoid_shift, paths = TRUE)
  plot(fits$local_qkv, type = "loss")
  expect_identical(.Random.seed, before)
})

test_that("plot() methods reject unknown parameters and pass graphical ones", {
  fits <- small_fits()
  png(file <- tempfile(fileext = ".png"))
  on.exit({
    grDevices::dev.off()
    unlink(file)
  })
  for (name in c("local_poly", "local_classify", "kde_1d", "kde_2d", "mean_shift", "local_ridges",
                 "local_pca", "local_propagation", "lle", "local_imputation", "local_qkv")) {
    err <- tryCatch(plot(fits[[name]], colour = "red"), error = identity)
    expect_s3_class(err, "localmean_error")
    expect_match(conditionMessage(err), "colour", info = name)
    expect_no_error(plot(fits[[name]], cex.main = 0.9), message = name)
  }
  expect_error(plot(fits$local_poly, lwdd = 2), "Did you mean .*lwd", class = "localmean_error")
  expect_error(plot(fits$mean_shift, pths = TRUE), "Did you mean .*paths",
               class = "localmean_error")
  expect_error(plot_images(matrix(runif(32), 2), image_dim = c(4, 4), colour = 1),
               class = "localmean_error")
})

test_that("mean_shift(min_size =) keeps every large cluster and only joins clusters that meet", {
  x <- scale(iris[, 1:4])
  fit <- mean_shift(x, bandwidth = 0.3, verbose = FALSE)
  plain <- mean_shift(x, bandwidth = 0.3, min_size = 1, verbose = FALSE)
  expect_lt(length(fit$size), length(plain$size))
  expect_identical(fit$min_size, 2L)
  expect_identical(sort(fit$size), sort(tabulate(fit$cluster)))
  # every cluster of at least min_size points is kept with its mode
  for (i in which(plain$size >= 2L)) {
    gap <- colSums((t(fit$modes) - plain$modes[i, ])^2)
    expect_equal(min(gap), 0, info = i)
  }
  # larger min_size, fewer clusters; predict() sends training points where the fit did
  few <- mean_shift(x, bandwidth = 0.3, min_size = 30, verbose = FALSE)
  expect_lt(length(few$size), length(fit$size))
  expect_identical(predict(few, x[1:20, ], n_threads = 1), few$cluster[1:20])
  expect_error(mean_shift(x, min_size = 0), "min_size", class = "localmean_error")
})

test_that("with seeds = \"bin\", predict() agrees with the fit on the training points", {
  set.seed(5)
  x <- rbind(matrix(rnorm(400, sd = 0.4), ncol = 2), matrix(rnorm(400, 3, 0.4), ncol = 2))
  for (min_size in c(1, 10)) {
    fit <- mean_shift(x, bandwidth = 0.5, seeds = "bin", min_size = min_size, verbose = FALSE)
    expect_identical(predict(fit, x, n_threads = 1), fit$cluster, info = min_size)
    expect_identical(predict(fit, x, n_threads = 2), fit$cluster, info = min_size)
  }
  fit <- mean_shift(scale(iris[, 1:4]), seeds = "bin", verbose = FALSE)
  expect_identical(predict(fit, scale(iris[, 1:4])), fit$cluster)
})

test_that("group colours are distinct for up to 26 groups, without warnings", {
  for (k in 1:30) {
    expect_no_warning(cols <- group_colours(k))
    expect_length(cols, k)
    if (k <= 26L) expect_false(anyDuplicated(cols) > 0L, info = k)
  }
})

test_that("far_from_data() masks grid points beyond the reach of every data point", {
  data <- cbind(c(0, 1), c(0, 0))
  grid <- rbind(c(0, 0.5), c(5, 0), c(0.5, 0), c(1, 2.1))
  expect_identical(far_from_data(data, grid, scale = c(1, 1), reach = 2),
                   c(FALSE, TRUE, FALSE, TRUE))
  expect_identical(far_from_data(data, grid, scale = c(1, 10), reach = 2),
                   c(FALSE, TRUE, FALSE, FALSE))
})

test_that("checking a plot's parameters opens no graphics device", {
  skip_if(grDevices::dev.cur() != 1L, "a device is already open")
  fits <- small_fits()
  expect_error(plot(fits$kde_1d, colour = 1), class = "localmean_error")
  expect_identical(grDevices::dev.cur(), c(`null device` = 1L))
})
