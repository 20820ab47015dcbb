# Pieces shared by the base-graphics plot() methods: the bandwidth line under the title, colours
# that tell groups apart, room for a legend beside the points, and the mask of surfaces where
# there are no data.

# How the plot was smoothed, in a line under the title (density() says it in its axis label).
bandwidth_note <- function(text) {
  graphics::mtext(text, side = 3, line = 0.3, cex = 0.8, col = "grey30")
}

# Colours for k groups that stay distinguishable: Okabe-Ito (safe for colour-blind readers) up to
# 8, Tableau 10 up to 10, Green-Armytage's "Alphabet" up to 26, hues beyond.
group_colours <- function(k) {
  if (k <= 8L) return(unname(grDevices::palette.colors(9L, "Okabe-Ito")[seq_len(k) + 1L]))
  if (k <= 10L) return(unname(grDevices::palette.colors(k, "Tableau 10")))
  if (k <= 26L) return(unname(grDevices::palette.colors(k, "Alphabet")))
  grDevices::hcl.colors(k, "Dark 3")
}

# Limits that leave the right `share` of the plot empty, for a legend beside the points.
room_for_legend <- function(values, share = 0.25) {
  r <- range(values, finite = TRUE)
  c(r[1L], r[2L] + share / (1 - share) * diff(r))
}

# The corner of the plot region with the fewest of the points (x, y): where a legend hides least.
emptiest_corner <- function(x, y) {
  usr <- graphics::par("usr")
  fx <- (x - usr[1L]) / (usr[2L] - usr[1L])
  fy <- (y - usr[3L]) / (usr[4L] - usr[3L])
  left <- fx < 0.4
  right <- fx > 0.6
  top <- fy > 0.6
  bottom <- fy < 0.4
  counts <- c(topleft = sum(left & top), topright = sum(right & top),
              bottomleft = sum(left & bottom), bottomright = sum(right & bottom))
  names(counts)[which.min(counts)]
}

# Whether each grid point lies farther than `reach` scales from every data point (variables
# divided by `scale`): a fitted surface there would be extrapolation, so it is left blank.
far_from_data <- function(data, grid, scale, reach = 2) {
  data <- as.matrix(data)
  grid <- as.matrix(grid)
  storage.mode(data) <- storage.mode(grid) <- "double"
  nearest <- nearest_index(data, as.double(scale), grid, 1L)
  gap <- sweep(grid - data[nearest, , drop = FALSE], 2L, scale, `/`)
  rowSums(gap^2) > reach^2
}

# A typical local scale per variable for far_from_data(): the bandwidths when they are numbers,
# else Scott's rule for two variables (sd times n^(-1/6)).
local_scales <- function(data, bandwidth) {
  if (is.numeric(bandwidth) && length(bandwidth) == ncol(data) && all(bandwidth > 0)) {
    return(as.double(bandwidth))
  }
  s <- apply(data, 2L, stats::sd)
  s[!(s > 0)] <- 1
  s * nrow(data)^(-1 / 6)
}

# ---- Conditional plots for any number of predictors -------------------------------------------
# One panel per predictor, as mgcv's plot.gam draws one per term: the fit along that predictor
# with the others held at a typical point (numeric ones at their medians, categorical ones at
# their most frequent level), with its pointwise confidence band (regression) or the class
# probabilities (classification). The data below are shared by plot() and autoplot().

# The predictors of a fit in formula order: name, whether numeric, and its column in x or codes.
predictor_panels <- function(object) {
  num <- colnames(object$x)
  cat <- colnames(object$categorical$codes)
  panels <- data.frame(predictor = c(num, cat), numeric = rep(c(TRUE, FALSE),
                                                              c(length(num), length(cat))),
                       column = c(seq_along(num), seq_along(cat)), stringsAsFactors = FALSE)
  order <- match(panels$predictor, object$predictors$names)
  panels[order(order, na.last = TRUE), , drop = FALSE]
}

# n queries at the typical point of the predictors, with predictor `panel` set to `values`
# (grid values of a numeric predictor, level codes of a categorical one).
typical_queries <- function(object, panel, values) {
  n <- length(values)
  x <- matrix(apply(object$x, 2L, stats::median), n, ncol(object$x), byrow = TRUE,
              dimnames = list(NULL, colnames(object$x)))
  codes <- object$categorical$codes
  if (!is.null(codes)) {
    codes <- matrix(apply(codes, 2L, function(v) which.max(tabulate(v))), n, ncol(codes),
                    byrow = TRUE, dimnames = list(NULL, colnames(codes)))
  }
  if (panel$numeric) x[, panel$column] <- values else codes[, panel$column] <- values
  structure(list(x = x, codes = codes, ok = rep(TRUE, n)), class = "local_queries")
}

# Where each panel is evaluated: a grid over the range of a numeric predictor, every level of
# a categorical one. A data frame: predictor, numeric, x (the value, or the level's index),
# level (the level's name; NA for numeric predictors).
panel_points <- function(object, panel, n_grid) {
  if (panel$numeric) {
    v <- object$x[, panel$column]
    grid <- seq(min(v), max(v), length.out = n_grid)
    return(data.frame(predictor = panel$predictor, numeric = TRUE, x = grid, level = NA_character_,
                      stringsAsFactors = FALSE))
  }
  levels <- object$categorical$levels[[panel$column]]
  data.frame(predictor = panel$predictor, numeric = FALSE, x = seq_along(levels),
             level = levels, stringsAsFactors = FALSE)
}

# The conditional curves of a regression fit with their pointwise bands: panel_points() columns
# and .fitted, .lower, .upper (NA where the fit gives no band).
conditional_curves <- function(object, n_grid, level, interval = "confidence", B = 999) {
  panels <- predictor_panels(object)
  curves <- lapply(seq_len(nrow(panels)), function(k) {
    at <- panel_points(object, panels[k, ], n_grid)
    queries <- typical_queries(object, panels[k, ], at$x)
    band <- tryCatch(suppressWarnings(fit_band(object, queries, interval, level, B)),
                     localmean_error = function(e) NULL)
    if (is.null(band)) {
      fit <- suppressWarnings(predict(object, queries))
      band <- cbind(fit = fit, lwr = NA_real_, upr = NA_real_)
    }
    cbind(at, .fitted = band[, "fit"], .lower = band[, "lwr"], .upper = band[, "upr"])
  })
  out <- do.call(rbind, curves)
  out$predictor <- factor(out$predictor, levels = panels$predictor)
  out
}

# Partial residuals for the panels of a least-squares fit (a point's residual added to the
# conditional curve at its own value, as mgcv and visreg show them); NULL for likelihood fits.
# At most `max_points` points per panel, evenly spaced in the data's order.
partial_residuals <- function(object, curves, max_points = 2000L) {
  if (!is.null(object$deviance) || is.null(object$residuals)) return(NULL)
  n <- length(object$residuals)
  keep <- unique(round(seq(1, n, length.out = min(n, max_points))))
  keep <- keep[is.finite(object$residuals[keep])]
  panels <- predictor_panels(object)
  out <- lapply(seq_len(nrow(panels)), function(k) {
    panel <- panels[k, ]
    curve <- curves[curves$predictor == panel$predictor, ]
    at <- if (panel$numeric) object$x[keep, panel$column] else
      object$categorical$codes[keep, panel$column]
    base <- if (panel$numeric) stats::approx(curve$x, curve$.fitted, at, rule = 2)$y else
      curve$.fitted[match(at, curve$x)]
    data.frame(predictor = panel$predictor, numeric = panel$numeric, x = at,
               y = object$residuals[keep] + base)
  })
  out <- do.call(rbind, out)
  out$predictor <- factor(out$predictor, levels = panels$predictor)
  out
}

# The conditional class probabilities of a classifier: panel_points() columns, class and .prob
# (one row per point and class).
conditional_probabilities <- function(object, n_grid) {
  panels <- predictor_panels(object)
  rows <- lapply(seq_len(nrow(panels)), function(k) {
    at <- panel_points(object, panels[k, ], n_grid)
    queries <- typical_queries(object, panels[k, ], at$x)
    prob <- class_probabilities(object, suppressWarnings(
      predict_engine(object, queries, FALSE, NULL, FALSE)))
    at <- at[rep(seq_len(nrow(at)), times = length(object$levels)), , drop = FALSE]
    cbind(at, class = factor(rep(object$levels, each = nrow(prob)), levels = object$levels),
          .prob = as.vector(prob))
  })
  out <- do.call(rbind, rows)
  rownames(out) <- NULL
  out$predictor <- factor(out$predictor, levels = panels$predictor)
  out
}

# The subtitle of a conditional plot: where the other predictors are held.
conditional_note <- function(object) {
  d <- length(predictor_panels(object)$predictor)
  if (d < 2L) return("")
  "other predictors at their medians (numeric) or most frequent levels"
}

# A grid of panels with room for an overall title (two lines) above them and, when `legend`,
# a strip below for a shared legend. Returns the old par() to restore.
open_panels <- function(d, legend = FALSE) {
  dims <- if (d <= 3L) c(1L, d) else grDevices::n2mfrow(d)
  graphics::par(mfrow = dims, oma = c(if (legend) 3 else 0, 0, 4, 0),
                mar = c(4.1, 4.1, 1.2, 1), mgp = c(2.6, 0.7, 0), las = 1)
}

# The overall title of a panel grid and two lines under it (the bandwidths, the typical point).
panel_titles <- function(title, ...) {
  graphics::mtext(title, side = 3, line = 2.4, outer = TRUE, font = 2, cex = 1.1)
  notes <- c(...)
  for (i in seq_along(notes)) {
    graphics::mtext(notes[i], side = 3, line = 1.3 - 1.1 * (i - 1), outer = TRUE, cex = 0.8,
                    col = "grey30")
  }
}

# Spreads the points of a categorical panel across their level (deterministic, no random
# numbers): offsets within +-0.25 by their rank within the group (the level).
spread_within <- function(x, group = x) {
  offset <- stats::ave(seq_along(x), group, FUN = function(i) {
    if (length(i) < 2L) 0 else (seq_along(i) - 1) / (length(i) - 1) - 0.5
  })
  x + 0.5 * offset
}

# Base graphics: one panel per predictor of a regression fit. Returns the curves drawn.
plot_conditional <- function(object, n_grid, level, ..., interval = "confidence", B = 999) {
  curves <- conditional_curves(object, n_grid, level, interval, B)
  points <- partial_residuals(object, curves)
  panels <- levels(curves$predictor)
  old <- open_panels(length(panels))
  on.exit(graphics::par(old))
  for (p in panels) {
    curve <- curves[curves$predictor == p, ]
    own <- if (!is.null(points)) points[points$predictor == p, ]
    ylim <- range(curve$.fitted, curve$.lower, curve$.upper, own$y, object$y, finite = TRUE)
    numeric <- curve$numeric[1L]
    xlim <- if (numeric) range(curve$x) else c(0.5, nrow(curve) + 0.5)
    plot_with_defaults(xlim, ylim, type = "n", xlab = p, ylab = response_name(object),
                       xaxt = if (numeric) "s" else "n", ...)
    if (!numeric) graphics::axis(1, at = curve$x, labels = curve$level)
    if (!is.null(own)) {
      px <- if (numeric) own$x else spread_within(own$x)
      graphics::points(px, own$y, pch = 20, col = grDevices::adjustcolor("grey35", 0.5))
    }
    if (numeric) {
      draw_band(curve$x, cbind(lwr = curve$.lower, upr = curve$.upper), "steelblue", 0.3)
      graphics::lines(curve$x, curve$.fitted, col = "steelblue", lwd = 2)
      graphics::rug(object$x[, match(p, colnames(object$x))], col = "grey40", ticksize = 0.02)
    } else {
      graphics::segments(curve$x, curve$.lower, curve$x, curve$.upper, col = "steelblue",
                         lwd = 3)
      graphics::points(curve$x, curve$.fitted, pch = 21, bg = "steelblue", col = "white",
                       cex = 1.6)
    }
    if (!any(is.finite(curve$.fitted))) {
      graphics::text(mean(xlim), mean(ylim), "no local fit here", col = "grey30")
    }
  }
  panel_titles(fit_title(object),
               sprintf("%s; %g%% pointwise bands", fit_bandwidth_note(object), 100 * level),
               conditional_note(object))
  invisible(curves)
}

# Base graphics: the class probabilities along each predictor of a classifier, a shared legend
# below. Returns the probabilities drawn.
plot_class_probabilities <- function(object, n_grid, ...) {
  probs <- conditional_probabilities(object, n_grid)
  panels <- levels(probs$predictor)
  cols <- group_colours(length(object$levels))
  old <- open_panels(length(panels), legend = TRUE)
  on.exit(graphics::par(old))
  for (p in panels) {
    own <- probs[probs$predictor == p, ]
    numeric <- own$numeric[1L]
    at <- unique(own$x)
    xlim <- if (numeric) range(at) else c(0.5, length(at) + 0.5)
    # room under zero for the rugs of the data's classes
    plot_with_defaults(xlim, c(if (numeric) -0.07 else 0, 1), type = "n", xlab = p,
                       ylab = "probability", xaxt = if (numeric) "s" else "n", ...)
    if (numeric) {
      for (k in seq_along(object$levels)) {
        line <- own[own$class == object$levels[k], ]
        graphics::lines(line$x, line$.prob, col = cols[k], lwd = 2)
      }
      column <- match(p, colnames(object$x))
      for (k in seq_along(object$levels)) {
        graphics::rug(object$x[as.integer(object$y) == k, column], col = cols[k],
                      ticksize = 0.03)
      }
    } else {
      graphics::axis(1, at = at, labels = own$level[seq_along(at)])
      # stacked bars: the probabilities of the classes at each level add up to one
      prob <- matrix(own$.prob, length(at))
      top <- t(apply(prob, 1L, cumsum))
      bottom <- top - prob
      for (k in seq_along(object$levels)) {
        graphics::rect(at - 0.35, bottom[, k], at + 0.35, top[, k], col = cols[k],
                       border = "white")
      }
    }
  }
  panel_titles(fit_title(object), fit_bandwidth_note(object), conditional_note(object))
  legend_below(object$levels, cols, response_name(object))
  invisible(probs)
}

# A horizontal legend, "title: labels", in the strip below a grid of panels.
legend_below <- function(labels, cols, title) {
  graphics::par(fig = c(0, 1, 0, 1), oma = c(0, 0, 0, 0), mar = c(0, 0, 0, 0), new = TRUE)
  graphics::plot.new()
  graphics::legend("bottom", legend = c(paste0(title, ":"), labels), col = c(NA, cols),
                   lwd = 3, horiz = TRUE, bty = "n", inset = 0.01, cex = 0.9, xpd = TRUE)
}
