#!/bin/sh
# Install what building, testing and checking localmean needs, skipping what is already there.
# Debian's r-cran-* binaries where apt-get is usable (as root), CRAN otherwise.
set -e
R_PKGS="rlang Rcpp RcppEigen RcppParallel RSpectra cli testthat roxygen2 knitr rmarkdown KernSmooth ks future future.apply uwot janeaustenr locfit generics ggplot2 tibble callr"
SYS_TOOLS="pandoc qpdf tidy pngquant"

missing_r() {
  Rscript -e 'p <- commandArgs(TRUE); cat(p[!vapply(p, requireNamespace, TRUE, quietly = TRUE)])' $R_PKGS
}

need_r=$(missing_r)
need_sys=""
for tool in $SYS_TOOLS; do command -v "$tool" >/dev/null 2>&1 || need_sys="$need_sys $tool"; done

if [ -n "$need_r$need_sys" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  debs="$need_sys"
  for p in $need_r; do debs="$debs r-cran-$(echo "$p" | tr 'A-Z' 'a-z')"; done
  echo "install-deps: apt-get install$debs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $debs || echo "install-deps: some Debian packages failed; trying CRAN"
fi

# Fashion-MNIST from Debian, for the tests that compare the shipped subset with the full test set
# (optional: those tests skip without it).
if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null 2>&1 &&
   [ "$(id -u)" = 0 ]; then
  echo "install-deps: apt-get install dataset-fashion-mnist"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends dataset-fashion-mnist ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends dataset-fashion-mnist; }; } ||
    echo "install-deps: dataset-fashion-mnist not installed (optional)"
fi

need_r=$(missing_r)
if [ -n "$need_r" ]; then
  echo "install-deps: install.packages from CRAN: $need_r"
  Rscript -e 'install.packages(commandArgs(TRUE), Ncpus = 2)' $need_r
fi
need_r=$(missing_r)
if [ -n "$need_r" ]; then echo "install-deps: still missing: $need_r" >&2; exit 1; fi
echo "install-deps: all dependencies present"
