# qkv_fit() on a whole novel: tokens per second on 1 and 2 threads.
#
# Target: Pride and Prejudice (janeaustenr; tokenize_words(), about 122,000 tokens), vocabulary
# 5,000, dim 32, window 8, one layer, one epoch: the 1 -> 2 thread speed-up >= 1.7x. The fits on
# 1 and 2 threads must give identical parameters (same seed). Tokens per second count the
# training targets (tokens - 1) of the epoch, over the whole call (vocabulary, initialisation
# and training).
#
#   Rscript bench/bench-qkv.R
# Environment: BENCH_EPOCHS (1), BENCH_VOCAB (5000), BENCH_DIM (32), BENCH_WINDOW (8),
# BENCH_REPS (1), BENCH_THREADS ("1,2").

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
if (!requireNamespace("janeaustenr", quietly = TRUE)) stop("bench-qkv.R needs janeaustenr")
epochs <- env_num("BENCH_EPOCHS", 1)
vocab <- env_num("BENCH_VOCAB", 5000)
dim <- env_num("BENCH_DIM", 32)
window <- env_num("BENCH_WINDOW", 8)
reps <- env_num("BENCH_REPS", 1)
threads <- env_threads()

session_header()
tokens <- tokenize_words(janeaustenr::prideprejudice)
cat(sprintf("qkv_fit on Pride and Prejudice: %d tokens, vocabulary %d, dim %d, window %d, %d epoch%s\n",
            length(tokens), vocab, dim, window, epochs, if (epochs > 1) "s" else ""))
fits <- list()
rate <- numeric(0)
for (nt in threads) {
  tt <- time_it(function() {
    set.seed(1)
    fits[[as.character(nt)]] <<- qkv_fit(tokens, dim = dim, window = window, n_iter = epochs,
                                         vocab_size = vocab, n_threads = nt, verbose = FALSE)
  }, reps, warm_up = FALSE)
  rate[as.character(nt)] <- epochs * (length(tokens) - 1) / tt$median
  cat(sprintf("  %d thread%s: %s\n    %.0f tokens/s; final training loss %.4f\n", nt,
              if (nt > 1) "s" else "", fmt_times(tt), rate[[as.character(nt)]],
              utils::tail(fits[[as.character(nt)]]$epoch_loss, 1)))
}
if (all(c("1", "2") %in% names(rate))) {
  up <- rate[["2"]] / rate[["1"]]
  cat(sprintf("  1 -> 2 thread speed-up %.2fx; target >= 1.7x: %s\n", up,
              if (up >= 1.7) "met" else "MISSED"))
  cat("  identical parameters on 1 and 2 threads:",
      identical(fits[["1"]]$theta, fits[["2"]]$theta), "\n")
}
