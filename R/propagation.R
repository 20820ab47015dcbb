#' Label propagation: semi-supervised classification by iterated local means
#'
#' `label_propagation()` spreads the labels of a few points to the unlabelled
#' rest. Every point carries a distribution over the classes; the labelled
#' points keep theirs (their class, with probability one) and every unlabelled
#' point is moved, again and again, to the local mean of the distributions
#' of the other points around it (the sums of `K(x_i, x_j) p(x_j)` and of
#' `K(x_i, x_j)` over `j` other than `i`, divided), until they stop changing. This is relaxation labeling, and label propagation on
#' the kernel graph (Zhu and Ghahramani, 2002): the limit is the harmonic
#' function of the graph with the labelled points fixed, so that a class
#' reaches an unlabelled point along chains of near neighbours, through
#' dense regions, where a supervised classifier of the labelled points alone
#' draws its boundary between them.
#'
#' The kernel graph is found once by the engine: the windows of the kernel at
#' the data points, each point's edge to itself left out (which leaves the
#' limit unchanged and speeds the sweeps up), made symmetric (points `i` and
#' `j` linked with weight `K_i(x_j) + K_j(x_i)`, so that with `nn()` windows,
#' whose radii differ, a point reaches every point whose window holds it).
#' The iterations are sparse products over it, in C++. With the default
#' `nn(10)` bandwidth every point's window reaches its 10 nearest neighbours
#' (variables standardised). Points that no chain connects to a labelled point
#' get `NA` probabilities, with a warning. The iterations stop when no
#' probability moved by more than `tol` in the last sweep; where the graph
#' mixes slowly (few labels, weak links), the probabilities can still be
#' farther than that from their limit: a smaller `tol` gets closer.
#'
#' @param x Numeric predictors: a vector, matrix or data frame.
#' @param y The classes of the labelled points and `NA` for the others:
#'   a factor, character or logical vector with one element per row of `x`.
#' @param kernel A kernel of [kernels()] (a compact one keeps the graph sparse).
#' @param bandwidth A positive number, one per variable, or [nn()] (the
#'   default, `nn(10)`).
#' @param max_iter Maximum number of iterations.
#' @param tol The iterations stop when no probability changes by more than
#'   `tol`.
#' @inheritParams mean_shift
#' @return An object of class `local_propagation`: `prob` (a matrix of class
#'   probabilities, one row per point), `fitted` (the most probable class),
#'   `labels`, `labelled` (logical), `iterations`, `converged`, `change` (the
#'   largest change of the last iteration), `x`, `kernel`, `bandwidth`, `spec`
#'   (the engine specification, for `predict()`) and `call`.
#' @references Zhu, X. and Ghahramani, Z. (2002). Learning from labeled and
#'   unlabeled data with label propagation. Technical report CMU-CALD-02-107,
#'   Carnegie Mellon University.
#'
#'   Rosenfeld, A., Hummel, R. A. and Zucker, S. W. (1976). Scene labeling by
#'   relaxation operations. *IEEE Transactions on Systems, Man, and
#'   Cybernetics* SMC-6, 420-433.
#' @family regression
#' @export
#' @examples
#' labels <- iris$Species
#' set.seed(1)
#' labels[-sample(150, 6)] <- NA   # six labelled flowers
#' fit <- label_propagation(iris[, 1:4], labels, verbose = FALSE)
#' fit
#' table(fit$fitted, iris$Species)
label_propagation <- function(x, y, kernel = "tricube", bandwidth = nn(10),
                              max_iter = 10000, tol = 1e-4, method = "auto", n_threads = NULL,
                              verbose = interactive(), control = local_control(), ...) {
  check_dots(...)
  x <- check_predictors(x)
  labels <- check_labels(y, nrow(x))
  kernel <- check_kernel(kernel)
  max_iter <- check_count(max_iter)
  tol <- check_positive(tol, zero = TRUE)
  n_threads <- n_threads(n_threads)
  verbose <- check_flag(verbose)
  spec <- propagation_spec(x, kernel, bandwidth, method, check_control(control), n_threads,
                           verbose)
  graph <- symmetric_graph(kernel_graph(spec, x, self = FALSE), nrow(x))
  res <- propagate(graph, labels, max_iter, tol)
  unreached <- is.na(res$prob[, 1L])
  if (any(unreached)) {
    warn(c("{sum(unreached)} point{?s} {?is/are} connected to no labelled point: their
            probabilities are NA.", i = "Use a larger {.arg bandwidth}."),
         class = "localmean_unreached")
  }
  if (!res$converged) {
    warn("The propagation did not converge in {max_iter} iterations (largest change
          {signif(res$change, 3)}).", class = "localmean_no_convergence")
  }
  fitted <- factor(levels(labels)[max.col(res$prob, ties.method = "first")],
                   levels = levels(labels))
  structure(list(prob = res$prob, fitted = fitted, labels = labels, labelled = !is.na(labels),
                 iterations = res$iterations, converged = res$converged, change = res$change,
                 x = x, kernel = kernel, bandwidth = bandwidth, spec = spec,
                 call = match.call()),
            class = "local_propagation")
}

check_labels <- function(labels, n, arg = "y", call = rlang::caller_env()) {
  if (!(is.factor(labels) || is.character(labels) || is.logical(labels)) ||
      length(labels) != n) {
    abort("{.arg {arg}} must be a factor, character or logical vector with one element per row
           of {.arg x} ({n}).", call = call)
  }
  labels <- droplevels(as.factor(labels))
  if (all(is.na(labels))) abort("{.arg {arg}} has no labelled point (all NA).", call = call)
  labels
}

# The engine specification of the kernel graph: a fixed bandwidth or nn(k) radii.
propagation_spec <- function(x, kernel, bandwidth, method, control, n_threads, verbose,
                             call = rlang::caller_env()) {
  method <- check_choice(method, c("auto", "tree", "exact"), call = call)
  d <- ncol(x)
  nn <- NULL
  h <- NULL
  if (inherits(bandwidth, "local_nn")) {
    if (!is.numeric(bandwidth$k) || bandwidth$k >= nrow(x)) {
      abort("{.arg bandwidth}: {.code nn(k)} needs a whole k below the number of points
             ({nrow(x)}).", call = call)
    }
    scale <- if (bandwidth$scale) apply(x, 2L, stats::sd) else rep(1, d)
    scale[!(scale > 0)] <- 1
    nn <- list(k = bandwidth$k, scale = scale, standardise = bandwidth$scale)
  } else if (is.numeric(bandwidth) && length(bandwidth) %in% c(1L, d) &&
             all(is.finite(bandwidth)) && all(bandwidth > 0)) {
    h <- rep_len(as.double(bandwidth), d)
  } else {
    abort("{.arg bandwidth} must be a positive number, one per variable ({d}), or {.fn nn}.",
          call = call)
  }
  # (degree 1: nn() radii then reach beyond the nearest distinct distance, so that a compact
  # kernel, which vanishes at the radius, gives some other point positive weight even when the
  # k nearest are copies of the point; see nn_radius())
  engine_spec(x, kernel, h, nn = nn, degree = 1L, method = method, control = control,
              binnable = FALSE, n_threads = n_threads, verbose = verbose, call = call)
}

# The kernel graph at the queries: for every query i the rows j of its window and K(x_i, x_j),
# without the edge from a data point to itself when `self = FALSE` (the queries are the data).
kernel_graph <- function(spec, queries, self = TRUE) {
  win <- engine_windows(spec, queries)
  graph <- list(from = rep.int(seq_len(nrow(queries)), win$size), to = unlist(win$rows),
                weight = unlist(win$weights))
  if (!self) graph <- lapply(graph, `[`, graph$from != graph$to)
  sums <- rowsum(graph$weight, graph$from)
  graph$wsum <- numeric(nrow(queries))
  graph$wsum[as.integer(rownames(sums))] <- sums
  graph
}

# The graph with every edge also in the other direction: i and j linked with weight
# K_i(x_j) + K_j(x_i). With nn() windows (whose radii differ between points) a point whose window
# holds only its own copies (tied data) is still reached from the windows that hold it. A
# symmetric kernel (a fixed bandwidth) only doubles every weight, which leaves local means alone.
symmetric_graph <- function(graph, n) {
  from <- c(graph$from, graph$to)
  order <- order(from)
  both <- list(from = from[order], to = c(graph$to, graph$from)[order],
               weight = rep(graph$weight, 2L)[order])
  sums <- rowsum(both$weight, both$from)
  both$wsum <- numeric(n)
  both$wsum[as.integer(rownames(sums))] <- sums
  both
}

# Iterated local means of the class distributions over the graph, the labelled rows fixed. The
# unlabelled rows start at zero, so that a row no chain of the graph links to a labelled point
# stays at zero (NA in the result) rather than at a made-up start.
propagate <- function(graph, labels, max_iter, tol) {
  n <- length(labels)
  labelled <- !is.na(labels)
  prob <- matrix(0, n, nlevels(labels))
  prob[cbind(which(labelled), as.integer(labels[labelled]))] <- 1
  free <- which(!labelled)
  keep <- !labelled[graph$from]
  res <- propagate_labels(prob, free, match(graph$from[keep], free), graph$to[keep],
                          graph$weight[keep], graph$wsum[free], max_iter, tol)
  prob <- res$prob
  mass <- rowSums(prob)
  prob[mass < 1e-12, ] <- NA_real_
  prob <- prob / rowSums(prob)
  colnames(prob) <- levels(labels)
  list(prob = prob, iterations = res$iterations, converged = res$change <= tol,
       change = res$change)
}

#' Methods for label propagation
#'
#' `predict()` classifies new points by one local mean of the propagated
#' distributions: `p(x*) = sum_j K(x*, x_j) p(x_j) / sum_j K(x*, x_j)`,
#' with the kernel and bandwidth of the fit (`NA` where the window holds no
#' point, and for rows of `newdata` with a missing value). `plot()` draws
#' two-dimensional data (or the first two variables)
#' coloured by the propagated class, the labelled points as large circles.
#'
#' @param object,x A `local_propagation` object.
#' @param newdata New points with the variables of the fit; `NULL` for the
#'   fitted classes or probabilities.
#' @param type `"class"` or `"prob"`.
#' @param digits Significant digits of the numbers that `print()` and
#'   `summary()` show; `NULL` for `max(3, getOption("digits") - 3)`.
#' @inheritParams mean_shift
#' @param ... Graphical parameters for `plot()`; unused otherwise.
#' @return `predict()`: a factor of classes or a matrix of probabilities;
#'   `summary()`: an object of class `summary.local_propagation`.
#' @name local_propagation
#' @family regression
NULL

#' @rdname local_propagation
#' @export
predict.local_propagation <- function(object, newdata = NULL, type = c("class", "prob"),
                                      n_threads = NULL, verbose = interactive(), ...) {
  check_dots(...)
  type <- match.arg(type)
  if (is.null(newdata)) return(if (type == "class") object$fitted else object$prob)
  rows <- if (is.null(dim(newdata))) {
    if (ncol(object$x) > 1L) !anyNA(newdata) else !is.na(newdata)
  } else {
    stats::complete.cases(newdata)
  }
  prob <- matrix(NA_real_, length(rows), ncol(object$prob),
                 dimnames = list(NULL, colnames(object$prob)))
  if (any(rows)) {
    kept <- if (is.null(dim(newdata))) newdata[!is.na(newdata)] else newdata[rows, , drop = FALSE]
    points <- kde_points(list(x = object$x), kept)
    spec <- object$spec
    spec$n_threads <- n_threads(n_threads)
    spec$verbose <- check_flag(verbose)
    graph <- kernel_graph(spec, points)
    known <- !is.na(object$prob[graph$to, 1L])
    sums <- rowsum(graph$weight[known] * object$prob[graph$to[known], , drop = FALSE],
                   graph$from[known])
    local <- matrix(NA_real_, nrow(points), ncol(prob))
    total <- rowSums(sums)
    local[as.integer(rownames(sums)), ] <- sums / ifelse(total > 0, total, NA_real_)
    prob[rows, ] <- local
  }
  if (type == "prob") return(prob)
  labels <- levels(object$labels)
  factor(labels[max.col(prob, ties.method = "first")], levels = labels)
}

#' @rdname local_propagation
#' @export
print.local_propagation <- function(x, ..., digits = NULL) {
  check_dots(...)
  digits <- check_digits(digits)
  n <- nrow(x$x)
  labelled <- sum(x$labelled)
  print_fields(
    sprintf("<local_propagation> %d of %d points labelled, %d classes, %s kernel", labelled, n,
            nlevels(x$labels), x$kernel),
    list(Bandwidth = if (inherits(x$bandwidth, "local_nn")) {
           sprintf("nn(%d)", x$bandwidth$k)
         } else {
           named_values(x$bandwidth, colnames(x$x), digits)
         },
         Iterations = sprintf("%d (%s, largest last change %s)", x$iterations,
                              if (x$converged) "converged" else "not converged",
                              format(signif(x$change, digits))),
         `Classes found` = paste0(names(table(x$fitted)), " ", table(x$fitted), collapse = ", "),
         Unreached = if (anyNA(x$prob[, 1L])) sprintf("%d points", sum(is.na(x$prob[, 1L])))))
  invisible(x)
}

#' @rdname local_propagation
#' @export
summary.local_propagation <- function(object, ..., digits = NULL) {
  check_dots(...)
  free <- !object$labelled
  confidence <- apply(object$prob[free, , drop = FALSE], 1L, max)
  structure(list(fit = object, confidence = summary(confidence), digits = check_digits(digits)),
            class = "summary.local_propagation")
}

#' @export
print.summary.local_propagation <- function(x, ..., digits = x$digits) {
  check_dots(...)
  print_summary_sections(x, x$fit, list(
    "Largest class probability of the unlabelled points" = x$confidence), digits)
}

#' @rdname local_propagation
#' @export
plot.local_propagation <- function(x, ...) {
  check_graphics_dots(...)
  xy <- if (ncol(x$x) >= 2L) x$x[, 1:2] else cbind(x$x, strip_jitter(nrow(x$x)))
  cols <- group_colours(nlevels(x$labels))
  class_col <- ifelse(is.na(x$fitted), "grey70", cols[as.integer(x$fitted)])
  plot_with_defaults(xy, NULL, col = grDevices::adjustcolor(class_col, 0.7), pch = 20,
                     xlim = room_for_legend(xy[, 1L]), xlab = colnames(x$x)[1L],
                     ylab = if (ncol(x$x) >= 2L) colnames(x$x)[2L] else "",
                     main = sprintf("Label propagation from %d labelled points",
                                    sum(x$labelled)), ...)
  seed <- which(x$labelled)
  graphics::points(xy[seed, , drop = FALSE], bg = cols[as.integer(x$labels[seed])], pch = 21,
                   cex = 1.6)
  graphics::legend("topright", levels(x$labels), col = cols, pch = 20, bg = "white",
                   box.col = "grey70", cex = 0.85)
  invisible(x)
}

#' @rdname localmean-tidiers
#' @export
tidy.local_propagation <- function(x, ...) {
  check_dots(...)
  out <- data.frame(.row = seq_len(nrow(x$x)), labelled = x$labelled, .class = x$fitted)
  for (level in colnames(x$prob)) out[[paste0(".prob_", level)]] <- x$prob[, level]
  as_tidy_frame(out)
}

#' @rdname localmean-tidiers
#' @export
glance.local_propagation <- function(x, ...) {
  check_dots(...)
  glance_row(nobs = nrow(x$x), labelled = sum(x$labelled), classes = nlevels(x$labels),
             kernel = x$kernel, iterations = x$iterations, converged = x$converged,
             unreached = sum(is.na(x$prob[, 1L])))
}

#' @rdname localmean-as-matrix
#' @export
as.matrix.local_propagation <- function(x, ...) {
  check_dots(...)
  x$prob
}
