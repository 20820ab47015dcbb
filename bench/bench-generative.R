# Generative local means (issue 19): local_score() and diffusion_sample() on a 2-D Gaussian mixture.
#
#   * local_score() at m = 1e5 points from n = 1e5 data in 2-D (Gaussian kernel, bandwidth 0.1 on
#     data of spread about 1): time with method "auto" (the kd-tree), "binned" and "exact" on a
#     subset; accuracy against the exact strategy: the largest error in units of 1 / h (the
#     score's scale) and the median error relative to the score at each point.
#   * diffusion_sample() of 1e4 points from n = 1e4 data (ddim, 100 levels, default "rot" floor;
#     and langevin, 30 levels x 5 steps): time, and accuracy as the energy distance to fresh draws
#     from the true mixture, against the same distance for fresh draws (the floor's smoothing
#     and the training sample add to it), on 2,000 of the samples.
#
#   Rscript bench/bench-generative.R
# Environment: BENCH_N (1e5), BENCH_N_DIFF (1e4), BENCH_REPS (3), BENCH_THREADS ("1,2").
suppressPackageStartupMessages(library(localmean))
source(file.path("bench", "common.R"))

n <- env_num("BENCH_N", 1e5)
n_diff <- env_num("BENCH_N_DIFF", 1e4)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()

centres <- rbind(c(0, 0), c(3, 0), c(1.5, 2.5))
draw_mixture <- function(n) {
  k <- sample.int(3L, n, replace = TRUE, prob = c(0.4, 0.3, 0.3))
  centres[k, ] + matrix(rnorm(2 * n, sd = 0.5), n)
}
energy <- function(a, b) {
  d <- as.matrix(dist(rbind(a, b)))
  i <- seq_len(nrow(a))
  j <- nrow(a) + seq_len(nrow(b))
  2 * mean(d[i, j]) - mean(d[i, i]) - mean(d[j, j])
}

set.seed(1)
x <- draw_mixture(n)
h <- 0.1
cat(sprintf("local_score(): m = n = %g, 2-D, Gaussian, h = %g\n", n, h))
sub <- x[seq(1, n, length.out = 2000), ]
exact_sub <- local_score(x, at = sub, bandwidth = h, method = "exact", verbose = FALSE)$score
for (method in c("auto", "binned")) {
  for (t in threads) {
    res <- NULL
    tt <- time_it(function() res <<- local_score(x, bandwidth = h, method = method,
                                                   n_threads = t, verbose = FALSE), reps)
    diff <- sqrt(rowSums((res$score[seq(1, n, length.out = 2000), ] - exact_sub)^2))
    rel <- stats::median(diff / sqrt(rowSums(exact_sub^2)))
    cat(sprintf("  %-6s (%s), %d thread(s): %s\n", method, res$method, t, fmt_times(tt)))
    cat(sprintf("         vs exact: max error x h %.2e, median relative error %.2e\n",
                max(diff) * h, rel))
  }
}
tt <- time_it(function() local_score(x, at = sub, bandwidth = h, method = "exact",
                                     n_threads = max(threads), verbose = FALSE), 1)
cat(sprintf("  exact at 2,000 points, %d thread(s): %s (x %.0f for all 1e5 points)\n",
            max(threads), fmt_times(tt), n / 2000))

set.seed(2)
train <- draw_mixture(n_diff)
fresh <- draw_mixture(2000)
base <- energy(draw_mixture(2000), fresh)
cat(sprintf("\ndiffusion_sample(): %g samples from n = %g, 2-D mixture\n", n_diff, n_diff))
cat(sprintf("  energy distance between two sets of 2,000 fresh draws: %.5f\n", base))
for (sampler in c("ddim", "langevin")) {
  n_iter <- if (sampler == "langevin") 30 else 100
  for (t in threads) {
    res <- NULL
    tt <- time_it(function() {
      set.seed(3)
      res <<- diffusion_sample(train, n = n_diff, sampler = sampler, n_iter = n_iter,
                               n_threads = t, verbose = FALSE)
    }, reps, warm_up = FALSE)
    e <- energy(res$samples[seq_len(2000), ], fresh)
    cat(sprintf("  %-8s n_iter %d (%d local means, %s), %d thread(s): %s\n", sampler, n_iter,
                res$local_means, res$method, t, fmt_times(tt)))
    cat(sprintf("           energy distance to fresh draws %.5f (%.1fx the fresh-vs-fresh value)\n",
                e, e / base))
  }
}
