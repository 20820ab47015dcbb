#!/bin/sh
# What the hand-written -O3 rules and the strip step of src/Makevars buy (issue 29, item 5). From
# the package root:
#   sh bench/bench-build.sh [ROUNDS]
# Installs the working tree three times into private libraries under $BENCH_BUILD_DIR (default
# /tmp/localmean-bench-build):
#   shipped   src/Makevars as it is (-O3 rules for the hot objects, strip)
#   no-O3     a copy of the tree whose src/Makevars lacks the -O3 rules (R's -O2 everywhere)
#   no-strip  as shipped, with LOCALMEAN_NO_STRIP=1 (the strip step skipped)
# prints each one's installed size (du -sk) and its shared library's size, then runs
# bench-build.R (median of BENCH_REPS runs per path, default 5) on `shipped` and `no-O3` for
# ROUNDS rounds (default 5), each run in its own R process, alternating the builds and which one
# goes first, and prints per path the median over the rounds of each build and the ratio
# no-O3 / shipped (CPU seconds: see bench-build.R). The load average is printed before and after
# the timings. BENCH_REUSE=1 skips the installs and reuses the libraries of an earlier run.
set -e
rounds=${1:-5}
dir=${BENCH_BUILD_DIR:-/tmp/localmean-bench-build}
here=$(cd "$(dirname "$0")" && pwd)
if [ "${BENCH_REUSE:-0}" != 1 ]; then
rm -rf "$dir"
mkdir -p "$dir/tree" "$dir/shipped" "$dir/no-O3" "$dir/no-strip"

install_to() {  # library, source tree, extra environment
  lib=$1
  src=$2
  shift 2
  rm -f "$src"/src/*.so  # relink, so that the strip step runs (or not) for this build
  env MAKEFLAGS=-j1 "$@" R CMD INSTALL --no-test-load -l "$lib" "$src" > "$lib.log" 2>&1 ||
    { tail -20 "$lib.log"; exit 1; }
}
install_to "$dir/shipped" .
install_to "$dir/no-strip" . LOCALMEAN_NO_STRIP=1
# The copy without the rules `x.o: x.cpp` and their recipes.
tar --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='core-test*' --exclude='*.tar.gz' \
  --exclude=localmean.Rcheck -cf - . | (cd "$dir/tree" && tar -xf -)
awk '/^[A-Za-z_]+\.o:/ { skip = 1; next } skip && /^\t/ { next } { skip = 0; print }' \
  src/Makevars > "$dir/tree/src/Makevars"
install_to "$dir/no-O3" "$dir/tree"
fi

echo "installed size (du -sk) and shared library (bytes):"
for b in shipped no-O3 no-strip; do
  printf '  %-9s %6s kB  %9s bytes\n' "$b" "$(du -sk "$dir/$b/localmean" | cut -f1)" \
    "$(wc -c < "$dir/$b/localmean/libs/localmean.so")"
done

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
out="$dir/times.txt"
: > "$out"
r=1
while [ "$r" -le "$rounds" ]; do
  if [ $((r % 2)) -eq 1 ]; then order="shipped no-O3"; else order="no-O3 shipped"; fi
  for b in $order; do
    R_LIBS="$dir/$b" Rscript "$here/bench-build.R" | sed "s|^|$r $b |" >> "$out"
  done
  r=$((r + 1))
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
Rscript -e '
t <- read.table(commandArgs(TRUE)[1], col.names = c("round", "build", "path", "seconds"))
med <- tapply(t$seconds, list(t$path, t$build), median)
cat(sprintf("%-22s %9s %9s %8s\n", "path (median s)", "shipped", "no-O3", "ratio"))
for (p in rownames(med))
  cat(sprintf("%-22s %9.4f %9.4f %8.2f\n", p, med[p, "shipped"], med[p, "no-O3"],
              med[p, "no-O3"] / med[p, "shipped"]))
' "$out"
