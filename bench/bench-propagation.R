# Label propagation (issue 33, part 2) against supervised local_classify() fitted on the labelled
# points alone: accuracy on the unlabelled points as the labelled share falls.
# Rerun: R_LIBS=<lib> Rscript bench/bench-propagation.R (BENCH_REPS replications, default 5).
library(localmean)
reps <- as.integer(Sys.getenv("BENCH_REPS", "5"))
cat("load average:", readLines("/proc/loadavg"), "\n")

moons <- function(n) {
  t <- runif(n, 0, pi)
  upper <- rbinom(n, 1, 0.5) == 1
  x <- cbind(x1 = ifelse(upper, cos(t), 1 - cos(t)), x2 = ifelse(upper, sin(t), 0.5 - sin(t))) +
    matrix(rnorm(2 * n, sd = 0.1), n)
  list(x = x, y = factor(ifelse(upper, "upper", "lower")))
}
iris_data <- function(n) list(x = as.matrix(iris[, 1:4]), y = iris$Species)

# At least one labelled point of every class, the rest drawn at random.
label_some <- function(y, share) {
  keep <- unlist(lapply(split(seq_along(y), y), function(i) i[sample.int(length(i), 1L)]))
  extra <- max(0L, round(share * length(y)) - length(keep))
  keep <- c(keep, sample(setdiff(seq_along(y), keep), extra))
  labels <- y
  labels[-keep] <- NA
  labels
}

accuracy <- function(data, share) {
  labels <- label_some(data$y, share)
  free <- is.na(labels)
  prop <- suppressWarnings(label_propagation(data$x, labels, n_threads = 1, verbose = FALSE))
  train <- data.frame(data$x[!free, , drop = FALSE], y = droplevels(labels[!free]))
  sup <- local_classify(y ~ ., data = train, bandwidth = nn(min(10, nrow(train) - 1)),
                        kernel = "tricube", n_threads = 1, verbose = FALSE)
  pred <- predict(sup, as.data.frame(data$x[free, , drop = FALSE]))
  c(propagation = mean(prop$fitted[free] == data$y[free]),
    supervised = mean(as.character(pred) == as.character(data$y[free])),
    iterations = prop$iterations)
}

rows <- list()
for (set in c("moons", "iris")) {
  for (share in c(0.5, 0.1, 0.05, 0.02)) {
    set.seed(1)
    res <- replicate(reps, accuracy(if (set == "moons") moons(1000) else iris_data(), share))
    rows[[length(rows) + 1L]] <- data.frame(data = set, labelled = share,
                                            propagation = mean(res["propagation", ]),
                                            supervised = mean(res["supervised", ]),
                                            iterations = stats::median(res["iterations", ]))
  }
}
print(do.call(rbind, rows), digits = 3, row.names = FALSE)
