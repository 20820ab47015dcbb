# qkv_fit() as a Transformer on a whole novel: the models of vignette("attention").
#
# Target (issue 33, item 1): the vignette's deepest model (4 layers, 2 heads) trains in under a
# minute on 2 cores; its validation perplexity is below the 2-layer, the 1-layer and the unigram
# model's. Pride and Prejudice (janeaustenr; tokenize_words(punctuation = TRUE), about 140,000
# tokens), vocabulary 600, dim 16, window 8, 3 epochs, the last 10% held out, as in the vignette.
# Each fit is timed once (they run 10 to 60 s); the thread check refits the deepest model on 1
# thread and compares its parameters with the 2-thread fit's.
#
#   Rscript bench/bench-transformer.R
# Environment: BENCH_EPOCHS (3), BENCH_THREADS ("2"), BENCH_CHECK_THREADS (1: refit on 1 thread).

suppressPackageStartupMessages(library(localmean))
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)[1])),
                 "common.R"))
if (!requireNamespace("janeaustenr", quietly = TRUE)) stop("bench-transformer.R needs janeaustenr")
epochs <- env_num("BENCH_EPOCHS", 3)
threads <- as.integer(Sys.getenv("BENCH_THREADS", "2"))
check_threads <- env_num("BENCH_CHECK_THREADS", 1) > 0

session_header()
tokens <- tokenize_words(janeaustenr::prideprejudice, punctuation = TRUE)
shapes <- list(c(layers = 1, heads = 1), c(layers = 2, heads = 2), c(layers = 4, heads = 2))
fit_model <- function(sh, nt) {
  set.seed(42)
  qkv_fit(tokens, dim = 16, window = 8, layers = sh[["layers"]], heads = sh[["heads"]],
          vocab_size = 600, n_iter = epochs, validation = 0.1, n_threads = nt, verbose = FALSE)
}
cat(sprintf("Pride and Prejudice: %d tokens, vocabulary 600, dim 16, window 8, %d epochs, %d thread%s\n",
            length(tokens), epochs, threads, if (threads > 1) "s" else ""))
fits <- list()
seconds <- numeric(0)
for (sh in shapes) {
  key <- sprintf("%d layer%s, %d head%s", sh[["layers"]], if (sh[["layers"]] > 1) "s" else "",
                 sh[["heads"]], if (sh[["heads"]] > 1) "s" else "")
  tt <- time_it(function() fits[[key]] <<- fit_model(sh, threads), 1, warm_up = FALSE)
  seconds[key] <- tt$median
  cat(sprintf("  %-17s %s; validation perplexity %.2f\n", key, fmt_times(tt, 1),
              summary(fits[[key]])$perplexity))
}
unigram <- summary(fits[[1]])$unigram_perplexity
ppl <- vapply(fits, function(f) summary(f)$perplexity, 1)
cat(sprintf("  unigram validation perplexity %.2f\n", unigram))
deepest <- names(fits)[length(fits)]
cat(sprintf("  deepest model's training %.1f s; target < 60 s on 2 cores: %s\n", seconds[[deepest]],
            if (seconds[[deepest]] < 60) "met" else "MISSED"))
falls <- all(diff(c(unigram, ppl)) < 0)
cat(sprintf("  perplexity falls from the unigram to 1, 2 and 4 layers (%s): %s\n",
            paste(sprintf("%.2f", c(unigram, ppl)), collapse = " > "), if (falls) "met" else "MISSED"))
if (check_threads) {
  one <- fit_model(shapes[[length(shapes)]], 1L)
  cat("  identical parameters on 1 and", threads, "threads:",
      identical(one$theta, fits[[deepest]]$theta), "\n")
}
cat("  load average at end:", readLines("/proc/loadavg", warn = FALSE), "\n")
