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
