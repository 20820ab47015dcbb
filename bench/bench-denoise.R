# Non-local means on a 512 x 512 image: time on 1 and 2 threads and the PSNR gained.
#
# Target: local_denoise(img, patch = 7, search = 21) under 5 s on 2 threads.
# Image: 19 x 19 Fashion-MNIST test images (grey levels scaled to [0, 1]) tiled and cropped to
# 512 x 512, plus Gaussian noise of sd BENCH_SIGMA (0.1, a PSNR of 20 dB; fixed seed). h = NULL:
# the noise sd is estimated (Immerkaer) and h = 0.8 sigma. PSNR with peak 1.
#
#   Rscript bench/bench-denoise.R
# Environment: BENCH_SIZE (512), BENCH_SIGMA (0.1), BENCH_REPS (3), BENCH_THREADS ("1,2").

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
size <- env_num("BENCH_SIZE", 512)
sigma <- env_num("BENCH_SIGMA", 0.1)
reps <- env_num("BENCH_REPS", 3)
threads <- env_threads()

session_header()
test <- fashion_mnist("test")
per_side <- ceiling(size / 28)
tiles <- lapply(seq_len(per_side^2), function(i) matrix(test$x[i, ] / 255, 28, byrow = TRUE))
rows <- lapply(seq_len(per_side), function(r) do.call(cbind, tiles[(r - 1) * per_side + seq_len(per_side)]))
clean <- do.call(rbind, rows)[seq_len(size), seq_len(size)]
set.seed(20260601)
noisy <- clean + matrix(stats::rnorm(size * size, sd = sigma), size)
psnr <- function(a) 10 * log10(1 / mean((a - clean)^2))
cat(sprintf("%d x %d image, noise sd %.2f, patch 7, search 21\n", size, size, sigma))
out <- list()
for (th in threads) {
  tt <- time_it(function() out[[as.character(th)]] <<- local_denoise(noisy, patch = 7, search = 21, n_threads = th,
                                                                      verbose = FALSE), reps)
  cat(sprintf("local_denoise, %d thread%s: %s\n", th, if (th > 1) "s" else "", fmt_times(tt, 3)))
}
res <- out[[1]]
if (length(out) > 1) {
  cat("identical results on", paste(names(out), collapse = " and "), "threads:",
      all(vapply(out, identical, TRUE, res)), "\n")
}
cat(sprintf("estimated sigma %.4f (true %.2f), h %.4f\n", attr(res, "sigma"), sigma, attr(res, "bandwidth")))
cat(sprintf("PSNR noisy %.2f dB -> denoised %.2f dB (+%.2f dB)\n", psnr(noisy), psnr(res),
            psnr(res) - psnr(noisy)))
