# Reproduces the regression figure of Song (2026), "The General Theory of Localization Methods":
# a noisy sine curve fitted by local linear regression and by the local mean, the
# cross-validation curves that chose their bandwidths, the derivative, and a surface in two
# predictors. PNG files go to the folder named by the environment variable LOCALMEAN_DEMO_DIR,
# else to a folder in the session's temporary directory (a demo writes nothing into the user's
# working directory unless asked to).

library(localmean)

out_dir <- Sys.getenv("LOCALMEAN_DEMO_DIR")
if (!nzchar(out_dir)) out_dir <- file.path(tempdir(), "localmean-demo")
dir.create(out_dir, showWarnings = FALSE, recursive = TRUE)
cat("localmean demo: writing PNG files to", normalizePath(out_dir), "\n")

save_png <- function(name, draw, width = 900, height = 600) {
  path <- file.path(out_dir, name)
  grDevices::png(path, width = width, height = height, res = 110)
  on.exit(grDevices::dev.off())
  draw()
  cat("  wrote", path, "\n")
}

# The data: y = sin(2 pi x) + noise.
set.seed(42)
n <- 500
sim <- data.frame(x = runif(n))
sim$y <- sin(2 * pi * sim$x) + rnorm(n, sd = 0.3)
grid <- data.frame(x = seq(0, 1, length.out = 401))
truth <- sin(2 * pi * grid$x)

# Local linear regression and the local mean, both with leave-one-out CV bandwidths.
ll <- local_poly(y ~ x, data = sim, verbose = FALSE)
nw <- local_mean(y ~ x, data = sim, verbose = FALSE)
print(ll)
print(nw)

save_png("regression-fits.png", function() {
  plot(y ~ x, data = sim, col = "grey60", pch = 1, cex = 0.7,
       main = "Local linear regression and the local mean")
  lines(grid$x, truth, lty = 2, lwd = 1.5)
  lines(grid$x, predict(ll, grid), col = "steelblue", lwd = 2.5)
  lines(grid$x, predict(nw, grid), col = "darkorange", lwd = 2.5)
  legend("topright", bty = "n", lty = c(2, 1, 1), lwd = c(1.5, 2.5, 2.5),
         col = c("black", "steelblue", "darkorange"),
         legend = c("sin(2 pi x)",
                    sprintf("local linear, h = %.3f", ll$bandwidth),
                    sprintf("local mean, h = %.3f", nw$bandwidth)))
})

save_png("regression-bandwidth.png", function() {
  ylim <- range(ll$cv_curve$score, nw$cv_curve$score, finite = TRUE)
  plot(ll, which = "bandwidth", ylim = ylim, col = "steelblue",
       main = "Leave-one-out cross-validation")
  lines(nw$cv_curve$x, nw$cv_curve$score, type = "b", pch = 20, col = "darkorange")
  abline(v = nw$bandwidth, lty = 2, col = "darkorange")
  legend("topleft", bty = "n", col = c("steelblue", "darkorange"), pch = 20, lty = 1,
         legend = c("local linear", "local mean"))
})

# The derivative from a local quadratic fit, against the true 2 pi cos(2 pi x).
lq <- local_poly(y ~ x, data = sim, degree = 2, verbose = FALSE)
d1 <- predict(lq, grid, deriv = 1, se.fit = TRUE)
save_png("regression-derivative.png", function() {
  band <- c(d1$fit + 2 * d1$se.fit, rev(d1$fit - 2 * d1$se.fit))
  plot(grid$x, d1$fit, type = "n", ylim = range(band, -2 * pi, 2 * pi), xlab = "x",
       ylab = "dy/dx", main = "First derivative, local quadratic fit")
  polygon(c(grid$x, rev(grid$x)), band, border = NA, col = adjustcolor("steelblue", 0.25))
  lines(grid$x, d1$fit, col = "steelblue", lwd = 2.5)
  lines(grid$x, 2 * pi * cos(2 * pi * grid$x), lty = 2, lwd = 1.5)
  legend("top", bty = "n", lty = c(2, 1), lwd = c(1.5, 2.5), col = c("black", "steelblue"),
         legend = c("2 pi cos(2 pi x)", "estimate +- 2 se"))
})

# A surface in two predictors.
set.seed(7)
sim2 <- data.frame(x1 = runif(1000), x2 = runif(1000))
sim2$z <- sin(2 * pi * sim2$x1) * cos(pi * sim2$x2) + rnorm(1000, sd = 0.2)
surf <- local_poly(z ~ x1 + x2, data = sim2, verbose = FALSE)
print(surf)
save_png("regression-surface.png", function() {
  plot(surf, main = "Local linear fit of sin(2 pi x1) cos(pi x2) + noise")
}, height = 700)

cat("localmean demo: done\n")
