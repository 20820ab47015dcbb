# One small fit of every model class, for the tests that loop over classes (argument checks,
# tidiers, autoplot). Built on demand and kept for the session: each takes well under a second.
small_fits <- local({
  fits <- NULL
  function() {
    if (!is.null(fits)) return(fits)
    saved <- .Random.seed_or_null()
    on.exit(restore_seed(saved))
    set.seed(17)
    blobs <- rbind(matrix(rnorm(100, sd = 0.3), ncol = 2),
                   matrix(rnorm(100, mean = 2, sd = 0.3), ncol = 2))
    colnames(blobs) <- c("a", "b")
    arc <- runif(200, 0, pi)
    holes <- as.matrix(iris[, 1:4])
    holes[sample(length(holes), 30)] <- NA
    words <- c("the", "cat", "sat", "on", "mat", "dog", "ran")
    fits <<- list(
      local_poly = local_poly(dist ~ speed, cars, bandwidth = 5, verbose = FALSE),
      local_mean = local_mean(dist ~ speed, cars, bandwidth = 5, verbose = FALSE),
      binomial = local_poly(am ~ wt, data = mtcars, family = "binomial", bandwidth = 1.5,
                            verbose = FALSE),
      mixed = local_poly(mpg ~ wt + factor(cyl), data = mtcars, bandwidth = c(1, 0.1),
                         verbose = FALSE),
      local_classify = local_classify(Species ~ Sepal.Length + Sepal.Width, iris,
                                      bandwidth = 0.5, verbose = FALSE),
      kde_1d = kde(faithful$eruptions, verbose = FALSE),
      kde_2d = kde(as.matrix(faithful), verbose = FALSE),
      local_cdens = kde(waiting ~ eruptions, data = faithful[1:60, ], bandwidth = c(0.5, 6)),
      local_self = self_local_regression(dist ~ speed, cars, bandwidth = c(5, 10),
                                         verbose = FALSE),
      local_refits = localize(lm(dist ~ speed, cars), over = ~speed, bandwidth = 5,
                           at = data.frame(speed = c(8, 15, 22)), verbose = FALSE),
      mean_shift = mean_shift(blobs, bandwidth = 0.4, keep_path = TRUE, verbose = FALSE),
      medoid_shift = medoid_shift(blobs, bandwidth = 0.5, verbose = FALSE),
      local_ridges = pc_shift(cbind(cos(arc), sin(arc)) + rnorm(400, sd = 0.1), ndim = 1,
                            bandwidth = 0.15, verbose = FALSE),
      local_pca = local_pca(blobs, bandwidth = 0.5, verbose = FALSE),
      local_propagation = label_propagation(blobs, replace(rep(NA, 100), c(1, 51), c("a", "b")),
                                            verbose = FALSE),
      lle = lle(as.matrix(iris[, 1:4]) + rnorm(600, sd = 1e-3), k = 25, verbose = FALSE),
      trimap = trimap(iris[, 1:4], n_iter = 30, verbose = FALSE),
      local_imputation = local_impute(holes, verbose = FALSE),
      local_qkv = qkv_fit(sample(words, 1000, replace = TRUE), dim = 3, window = 3, n_iter = 1,
                          n_threads = 1, verbose = FALSE),
      local_fuzzy = fuzzy_inference(mpg ~ wt + hp, mtcars, rules = 3, verbose = FALSE)
    )
    fits
  }
})

.Random.seed_or_null <- function() {
  if (exists(".Random.seed", globalenv(), inherits = FALSE)) get(".Random.seed", globalenv())
}

restore_seed <- function(seed) {
  if (is.null(seed)) {
    if (exists(".Random.seed", globalenv(), inherits = FALSE)) {
      rm(".Random.seed", envir = globalenv())
    }
  } else {
    assign(".Random.seed", seed, globalenv())
  }
}
