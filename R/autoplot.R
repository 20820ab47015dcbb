# ggplot2 versions of the plots, registered with ggplot2::autoplot() when ggplot2 is loaded (it is
# only suggested). Data come from the tidiers, so both views show the same numbers.

#' Plot fits with ggplot2
#'
#' Methods for [ggplot2::autoplot()], available when ggplot2 is installed:
#' regression fits with their confidence bands (one numeric predictor, a
#' curve per level of categorical predictors) or as a surface (two numeric
#' predictors), and for any other predictors (or `which = "conditional"`) one
#' panel per predictor with the others at their medians or most frequent
#' levels, with pointwise bands and partial residuals; classifiers as a map of
#' the predicted class (two numeric predictors) or the class probabilities
#' along each predictor; densities (a curve in one dimension, highest-density-region
#' contours in two), mode clusters (points coloured by cluster, the modes,
#' and the paths when kept), principal-component shifts, embeddings
#' (coloured by `labels`) and imputations (the convergence of the
#' iterations).
#'
#' @param object A fitted model.
#' @param which `"fit"` (the fit's own view where it has one: a curve, a
#'   surface, curves per level, a class map; conditional panels otherwise) or
#'   `"conditional"` (one panel per predictor).
#' @param level Confidence level of the band.
#' @param interval The bands of regression fits: `"confidence"` (the tube
#'   formula) or `"bootstrap"` (`predict(interval = "bootstrap")` with `B`
#'   replicates); for a one-dimensional kde, `"none"` or `"bootstrap"` (the
#'   smoothed bootstrap's pointwise band at `level`).
#' @param B Bootstrap replicates of the bands.
#' @param n_grid Grid points per predictor.
#' @param probs Probabilities of the highest-density regions drawn in two
#'   dimensions.
#' @param paths Whether to draw the paths the points took, when the fit kept
#'   them (`keep_path = TRUE`).
#' @param labels Optional labels (one per point) to colour an embedding by.
#' @param ... Must be empty.
#' @return A ggplot object.
#' @family ecosystem
#' @name localmean-autoplot
#' @examplesIf requireNamespace("ggplot2", quietly = TRUE)
#' library(ggplot2)
#' autoplot(local_poly(dist ~ speed, data = cars, bandwidth = 5))
#' autoplot(kde(as.matrix(faithful)))
#' autoplot(local_poly(mpg ~ wt + hp + factor(cyl), data = mtcars,
#'                     bandwidth = c(1, 50, 0.3)))
#' autoplot(local_classify(Species ~ ., data = iris, bandwidth = 0.5))
NULL

check_ggplot2 <- function(call = rlang::caller_env()) {
  if (!requireNamespace("ggplot2", quietly = TRUE)) {
    abort("{.fn autoplot} needs the {.pkg ggplot2} package.", call = call)
  }
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_poly <- function(object, which = c("fit", "conditional"), level = 0.95,
                                n_grid = 200, interval = c("confidence", "bootstrap"),
                                B = 999, ...) {
  check_dots(...)
  check_ggplot2()
  which <- match_choice(which, c("fit", "conditional"))
  interval <- match_choice(interval, c("confidence", "bootstrap"))
  level <- check_level(level)
  n_grid <- check_count(n_grid, min = 2)
  if (which == "conditional" || !has_fit_view(object)) {
    return(autoplot_conditional(object, n_grid, level, interval, B))
  }
  d <- ncol(object$x)
  if (d == 2L && is.null(object$categorical)) return(autoplot_surface(object, n_grid))
  curves <- regression_curves(object, n_grid, level, interval, B)
  points <- data.frame(x = object$x[, 1L], y = object$y,
                       level = combination_labels(object$categorical, object$categorical$codes))
  p <- ggplot2::ggplot(curves, ggplot2::aes(x = .data$x))
  p <- if (is.null(object$categorical)) {
    p + ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$.lower, ymax = .data$.upper),
                             fill = "steelblue", alpha = 0.3) +
      ggplot2::geom_point(ggplot2::aes(y = .data$y), data = points, colour = "grey35") +
      ggplot2::geom_line(ggplot2::aes(y = .data$.fitted), colour = "steelblue", linewidth = 1)
  } else {
    p + ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$.lower, ymax = .data$.upper,
                                          fill = .data$level), alpha = 0.2) +
      ggplot2::geom_point(ggplot2::aes(y = .data$y, colour = .data$level), data = points) +
      ggplot2::geom_line(ggplot2::aes(y = .data$.fitted, colour = .data$level), linewidth = 1)
  }
  title <- paste(names(object$categorical$levels), collapse = ", ")
  p + ggplot2::labs(x = colnames(object$x), y = response_name(object), colour = title,
                    fill = title, title = fit_title(object),
                    subtitle = sprintf("bandwidth %s; %g%% pointwise %s band",
                                       bandwidth_label(object), 100 * level, interval))
}

# The fitted curve and its pointwise band over the one numeric predictor, per combination of the
# categorical predictors' levels (each over the range of its own data): x, .fitted, .lower,
# .upper, level.
regression_curves <- function(object, n_grid, level, interval = "confidence", B = 999) {
  categorical <- object$categorical
  if (is.null(categorical)) {
    grid <- seq(min(object$x), max(object$x), length.out = n_grid)
    band <- fit_band(object, stats::setNames(data.frame(grid), colnames(object$x)), interval,
                     level, B)
    return(data.frame(x = grid, .fitted = band[, "fit"], .lower = band[, "lwr"],
                      .upper = band[, "upr"], level = ""))
  }
  combos <- as.matrix(expand.grid(lapply(categorical$levels, seq_along), KEEP.OUT.ATTRS = FALSE))
  key <- function(codes) do.call(paste, as.data.frame(codes))
  point_combo <- match(key(categorical$codes), key(combos))
  curves <- lapply(seq_len(nrow(combos)), function(k) {
    own <- object$x[point_combo %in% k, 1L]
    if (length(unique(own)) < 2L) return(NULL)
    grid <- seq(min(own), max(own), length.out = n_grid)
    codes <- matrix(combos[k, ], n_grid, ncol(combos), byrow = TRUE,
                    dimnames = list(NULL, colnames(categorical$codes)))
    queries <- structure(list(x = matrix(grid, dimnames = list(NULL, colnames(object$x))),
                              codes = codes, ok = rep(TRUE, n_grid)), class = "local_queries")
    band <- fit_band(object, queries, interval, level, B)
    data.frame(x = grid, .fitted = band[, "fit"], .lower = band[, "lwr"],
               .upper = band[, "upr"], level = combination_labels(categorical, codes))
  })
  do.call(rbind, curves)
}

# "level, level" labels of categorical codes (one row per point); "" without categories.
combination_labels <- function(categorical, codes) {
  if (is.null(categorical)) return(rep("", if (is.null(codes)) 1L else nrow(codes)))
  parts <- lapply(seq_len(ncol(codes)), function(j) categorical$levels[[j]][codes[, j]])
  do.call(paste, c(parts, sep = ", "))
}

autoplot_surface <- function(object, n_grid) {
  vars <- colnames(object$x)
  axes <- lapply(1:2, function(j) {
    seq(min(object$x[, j]), max(object$x[, j]), length.out = min(n_grid, 80L))
  })
  grid <- stats::setNames(expand.grid(axes, KEEP.OUT.ATTRS = FALSE), vars)
  grid$.fitted <- as.vector(predict(object, grid))
  points <- stats::setNames(as.data.frame(object$x), vars)
  ggplot2::ggplot(grid, ggplot2::aes(x = .data[[vars[1L]]], y = .data[[vars[2L]]])) +
    ggplot2::geom_raster(ggplot2::aes(fill = .data$.fitted)) +
    ggplot2::geom_point(data = points, size = 0.6, colour = "grey20") +
    ggplot2::scale_fill_viridis_c(name = response_name(object)) +
    ggplot2::labs(title = fit_title(object),
                  subtitle = paste("bandwidth", bandwidth_label(object)))
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_kde <- function(object, probs = c(0.25, 0.5, 0.75, 0.95),
                               interval = c("none", "bootstrap"), level = 0.95, B = 999, ...) {
  check_dots(...)
  check_ggplot2()
  interval <- match_choice(interval, c("none", "bootstrap"))
  if (interval == "bootstrap" && object$d != 1L) {
    abort("{.code interval = \"bootstrap\"} draws the band of a one-dimensional density.")
  }
  if (!is.null(object$categorical) || object$d > 2L || length(object$grid) == 0L) {
    abort("{.fn autoplot} draws numeric densities in one or two dimensions with a grid;
           use {.fn plot} or {.fn tidy}.")
  }
  grid <- as.data.frame(object)
  vars <- object$vars
  points <- as.data.frame(kde_data(object), optional = TRUE)
  title <- sprintf("Kernel density: %s kernel, bandwidth %s (%s)", object$kernel,
                   format_bandwidth_value(object), object$bandwidth_method)
  if (object$d == 1L) {
    p <- ggplot2::ggplot(grid, ggplot2::aes(x = .data[[vars]], y = .data$density))
    if (interval == "bootstrap") {
      band <- predict(object, grid[[vars]], interval = "bootstrap", level = level, B = B,
                      verbose = FALSE)
      grid$.lower <- band[, "lwr"]
      grid$.upper <- band[, "upr"]
      p <- p + ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$.lower, ymax = .data$.upper),
                                    data = grid, fill = "steelblue", alpha = 0.3)
    }
    return(p + ggplot2::geom_line(colour = "steelblue", linewidth = 1) +
             ggplot2::geom_rug(ggplot2::aes(x = .data[[vars]]), data = points,
                               inherit.aes = FALSE, alpha = 0.3) +
             ggplot2::labs(title = title, x = vars, y = "density"))
  }
  # bands between successive region levels; the highest is the smallest region
  levels <- sort(hdr_levels(object, probs))
  ggplot2::ggplot(grid, ggplot2::aes(x = .data[[vars[1L]]], y = .data[[vars[2L]]])) +
    ggplot2::geom_contour_filled(ggplot2::aes(z = .data$density), breaks = c(levels, Inf)) +
    ggplot2::geom_contour(ggplot2::aes(z = .data$density), breaks = unname(levels),
                          colour = "grey20", linewidth = 0.3) +
    ggplot2::geom_point(data = points, size = 0.5, colour = "grey30") +
    ggplot2::scale_fill_manual(values = grDevices::hcl.colors(length(levels), "YlOrRd",
                                                              rev = TRUE),
                               labels = names(levels), name = "Highest-density\nregion",
                               drop = FALSE) +
    ggplot2::labs(title = title)
}

format_bandwidth_value <- function(object) {
  h <- object$bandwidth$h
  if (is.null(h)) return(object$bandwidth$type)
  paste(signif(h, 3), collapse = ", ")
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_modes <- function(object, paths = FALSE, ...) {
  check_dots(...)
  check_ggplot2()
  check_flag(paths)
  if (ncol(object$x) < 2L) abort("{.fn autoplot} draws mode clusters of two or more variables.")
  vars <- mode_vars(object)[1:2]
  points <- augment(object)
  modes <- tidy(object)
  p <- ggplot2::ggplot(points, ggplot2::aes(x = .data[[vars[1L]]], y = .data[[vars[2L]]]))
  if (paths && length(object$paths)) {
    trails <- do.call(rbind, lapply(seq_along(object$paths), function(i) {
      path <- object$paths[[i]]
      data.frame(a = path[, 1L], b = path[, 2L], point = i,
                 .cluster = factor(object$cluster[i], levels = levels(points$.cluster)))
    }))
    names(trails)[1:2] <- vars
    p <- p + ggplot2::geom_path(ggplot2::aes(group = .data$point, colour = .data$.cluster),
                                data = trails, alpha = 0.4, linewidth = 0.3)
  }
  algorithm <- if (object$algorithm == "medoid_shift") "MedoidShift" else "Mean shift"
  p + ggplot2::geom_point(ggplot2::aes(colour = .data$.cluster), size = 1.2) +
    ggplot2::geom_point(data = modes, shape = 4, size = 4, stroke = 1.5, colour = "black") +
    ggplot2::labs(colour = "cluster", title = sprintf("%s: %d cluster%s", algorithm,
                                                      nrow(modes), if (nrow(modes) != 1L) "s"),
                  subtitle = sprintf("bandwidth %s, modes marked x",
                                     paste(signif(unique(object$bandwidth), 3), collapse = ", ")))
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_ridges <- function(object, ...) {
  check_dots(...)
  check_ggplot2()
  if (ncol(object$x) < 2L) abort("{.fn autoplot} draws shifts of two or more variables.")
  data <- augment(object)
  vars <- names(pc_points(object))[1:2]
  ridge <- paste0(".fitted_", vars)
  ggplot2::ggplot(data, ggplot2::aes(x = .data[[vars[1L]]], y = .data[[vars[2L]]])) +
    ggplot2::geom_point(colour = "grey60", size = 0.8) +
    ggplot2::geom_point(ggplot2::aes(x = .data[[ridge[1L]]], y = .data[[ridge[2L]]]),
                        colour = "firebrick", size = 0.8) +
    ggplot2::labs(title = sprintf("Principal-component shift onto a %d-dimensional ridge",
                                  object$ndim),
                  subtitle = "grey: data, red: the points on the ridge")
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_embedding <- function(object, labels = NULL, ...) {
  check_dots(...)
  check_ggplot2()
  layout <- as.data.frame(object)
  dims <- grep("^V|^dim", names(layout), value = TRUE)
  names(layout)[match(dims, names(layout))] <- paste0("dim", seq_along(dims))
  if (length(dims) == 1L) layout$dim2 <- 0
  if (!is.null(labels)) {
    if (length(labels) != nrow(object$layout) || object$method == "asym_mds") {
      abort("{.arg labels} must have one label per point ({nrow(object$layout)}).")
    }
    layout$label <- as.factor(labels)
  }
  mapping <- if (!is.null(labels)) {
    ggplot2::aes(x = .data$dim1, y = .data$dim2, colour = .data$label)
  } else if (object$method == "asym_mds") {
    ggplot2::aes(x = .data$dim1, y = .data$dim2, colour = .data$role)
  } else {
    ggplot2::aes(x = .data$dim1, y = .data$dim2)
  }
  ggplot2::ggplot(layout, mapping) +
    ggplot2::geom_point(size = 1.2, alpha = 0.8) +
    ggplot2::labs(title = embedding_names[[object$method]], x = "dim1",
                  y = if (length(dims) > 1L) "dim2" else "", colour = NULL) +
    ggplot2::theme(legend.position = "right")
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_imputation <- function(object, ...) {
  check_dots(...)
  check_ggplot2()
  change <- data.frame(iteration = seq_along(object$change), change = object$change)
  ggplot2::ggplot(change, ggplot2::aes(x = .data$iteration, y = .data$change)) +
    ggplot2::geom_line(colour = "steelblue") +
    ggplot2::geom_point(colour = "steelblue") +
    ggplot2::scale_y_log10() +
    ggplot2::labs(title = "Convergence of the local imputation",
                  subtitle = sprintf("%d cells imputed, %s after %d iterations",
                                     sum(object$missing),
                                     if (object$converged) "converged" else "not converged",
                                     object$iterations),
                  y = "relative change (log scale)")
}

# One facet per predictor: the conditional curve with its band (numeric predictors), a point
# with its interval per level (categorical ones, labelled under the interval), partial
# residuals for least-squares fits.
autoplot_conditional <- function(object, n_grid, level, interval = "confidence", B = 999) {
  curves <- conditional_curves(object, n_grid, level, interval, B)
  points <- partial_residuals(object, curves)
  lines <- curves[curves$numeric, , drop = FALSE]
  dots <- curves[!curves$numeric, , drop = FALSE]
  p <- ggplot2::ggplot(curves, ggplot2::aes(x = .data$x, y = .data$.fitted))
  if (!is.null(points)) {
    factor_rows <- !points$numeric
    points$x[factor_rows] <- spread_within(points$x[factor_rows],
                                           paste(points$predictor, points$x)[factor_rows])
    p <- p + ggplot2::geom_point(ggplot2::aes(y = .data$y), data = points, colour = "grey35",
                                 alpha = 0.5, size = 0.9)
  }
  if (nrow(lines)) {
    p <- p + ggplot2::geom_ribbon(ggplot2::aes(ymin = .data$.lower, ymax = .data$.upper),
                                  data = lines, fill = "steelblue", alpha = 0.3) +
      ggplot2::geom_line(data = lines, colour = "steelblue", linewidth = 1)
  }
  if (nrow(dots)) {
    p <- p + ggplot2::geom_pointrange(ggplot2::aes(ymin = .data$.lower, ymax = .data$.upper),
                                      data = dots, colour = "steelblue") +
      ggplot2::geom_text(ggplot2::aes(y = .data$.lower, label = .data$level), data = dots,
                         vjust = 1.6, size = 3)
  }
  p + ggplot2::facet_wrap(ggplot2::vars(.data$predictor), scales = "free_x") +
    ggplot2::labs(x = NULL, y = response_name(object), title = fit_title(object),
                  subtitle = sprintf("%s; %g%% pointwise bands\n%s", fit_bandwidth_note(object),
                                     100 * level, conditional_note(object)))
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_classify <- function(object, which = c("fit", "conditional"), n_grid = 150,
                                    ...) {
  check_dots(...)
  check_ggplot2()
  which <- match_choice(which, c("fit", "conditional"))
  map <- which == "fit" && ncol(object$x) == 2L && is.null(object$categorical)
  n_grid <- check_n_grid(n_grid, if (map) 2L else 1L)
  title <- fit_title(object)
  colours <- ggplot2::scale_colour_manual(values = group_colours(length(object$levels)),
                                          name = response_name(object), drop = FALSE,
                                          aesthetics = c("colour", "fill"))
  if (map) {
    vars <- colnames(object$x)
    axes <- lapply(1:2, function(j) {
      seq(min(object$x[, j]), max(object$x[, j]), length.out = n_grid)
    })
    grid <- stats::setNames(expand.grid(axes, KEEP.OUT.ATTRS = FALSE), vars)
    grid$class <- suppressWarnings(predict(object, grid))
    grid$class[far_from_data(object$x, grid[vars], local_scales(
      object$x, if (is.null(object$nn)) object$bandwidth))] <- NA
    points <- stats::setNames(as.data.frame(object$x), vars)
    points$class <- factor(object$y, levels = object$levels)
    return(ggplot2::ggplot(grid, ggplot2::aes(x = .data[[vars[1L]]], y = .data[[vars[2L]]])) +
             ggplot2::geom_raster(ggplot2::aes(fill = .data$class), alpha = 0.3,
                                  data = grid[!is.na(grid$class), ]) +
             ggplot2::geom_point(ggplot2::aes(colour = .data$class), data = points) +
             colours + ggplot2::labs(title = title, subtitle = fit_bandwidth_note(object)))
  }
  probs <- conditional_probabilities(object, n_grid)
  lines <- probs[probs$numeric, , drop = FALSE]
  bars <- probs[!probs$numeric, , drop = FALSE]
  p <- ggplot2::ggplot(probs, ggplot2::aes(x = .data$x, y = .data$.prob))
  if (nrow(lines)) {
    p <- p + ggplot2::geom_line(ggplot2::aes(colour = .data$class), data = lines, linewidth = 1)
  }
  if (nrow(bars)) {
    p <- p + ggplot2::geom_col(ggplot2::aes(fill = .data$class), data = bars, width = 0.7) +
      ggplot2::geom_text(ggplot2::aes(y = 0, label = .data$level),
                         data = bars[bars$class == object$levels[1L], ], vjust = 1.4, size = 3)
  }
  p + colours + ggplot2::facet_wrap(ggplot2::vars(.data$predictor), scales = "free_x") +
    ggplot2::labs(x = NULL, y = "probability", title = title,
                  subtitle = paste(c(fit_bandwidth_note(object), conditional_note(object)),
                                   collapse = "\n"))
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_pca <- function(object, ...) {
  check_dots(...)
  check_ggplot2()
  if (ncol(object$x) != 2L) {
    counts <- as.data.frame(table(dimension = factor(object$dimension,
                                                      levels = seq_len(ncol(object$x)))))
    return(ggplot2::ggplot(counts, ggplot2::aes(x = .data$dimension, y = .data$Freq)) +
             ggplot2::geom_col(fill = "grey60") +
             ggplot2::labs(x = "local intrinsic dimension", y = "points", title = "Local PCA"))
  }
  vars <- colnames(object$x)
  shown <- sample_rows(nrow(object$at), 30L)
  shown <- shown[!is.na(object$dimension[shown])]
  axes <- do.call(rbind, lapply(1:2, function(k) {
    half <- t(matrix(object$axes[, k, shown], 2L)) * sqrt(object$variances[shown, k])
    data.frame(x = object$at[shown, 1L] - half[, 1L], y = object$at[shown, 2L] - half[, 2L],
               xend = object$at[shown, 1L] + half[, 1L],
               yend = object$at[shown, 2L] + half[, 2L], axis = factor(k, 1:2))
  }))
  data <- stats::setNames(as.data.frame(object$x), c("x", "y"))
  p <- ggplot2::ggplot(data, ggplot2::aes(x = .data$x, y = .data$y)) +
    ggplot2::geom_point(colour = "grey75", size = 0.8) +
    ggplot2::geom_segment(ggplot2::aes(xend = .data$xend, yend = .data$yend,
                                       colour = .data$axis), data = axes, linewidth = 0.8) +
    ggplot2::scale_colour_manual(values = c("grey10", "steelblue"))
  # equal scales where the variables' spreads are alike (as plot() draws them)
  spread <- apply(object$x, 2L, stats::sd)
  if (max(spread) <= 5 * min(spread)) p <- p + ggplot2::coord_equal()
  p + ggplot2::labs(x = vars[1L], y = vars[2L], colour = "axis", title = "Local principal axes",
                    subtitle = "one local standard deviation along each axis")
}

#' @rdname localmean-autoplot
#' @exportS3Method ggplot2::autoplot
autoplot.local_propagation <- function(object, ...) {
  check_dots(...)
  check_ggplot2()
  if (ncol(object$x) < 2L) abort("{.fn autoplot} draws propagations of two or more variables.")
  vars <- colnames(object$x)[1:2]
  data <- data.frame(x = object$x[, 1L], y = object$x[, 2L], class = object$fitted,
                     label = object$labels, labelled = object$labelled)
  ggplot2::ggplot(data, ggplot2::aes(x = .data$x, y = .data$y)) +
    ggplot2::geom_point(ggplot2::aes(colour = .data$class), size = 1, alpha = 0.7) +
    ggplot2::geom_point(ggplot2::aes(fill = .data$label), data = data[data$labelled, ],
                        shape = 21, size = 3, colour = "black", show.legend = FALSE) +
    ggplot2::scale_colour_manual(values = group_colours(nlevels(object$labels)),
                                 na.value = "grey70", aesthetics = c("colour", "fill")) +
    ggplot2::labs(x = vars[1L], y = vars[2L], colour = "class",
                  title = sprintf("Label propagation from %d labelled points",
                                  sum(object$labelled)),
                  subtitle = "large circles: the labelled points")
}
