#!/bin/sh
# Times bench-hot-paths.R on two builds of localmean installed in libraries A and B, alternating
# A and B for ROUNDS rounds (default 3) so that both see the same machine state:
#   sh bench/compare-builds.sh /tmp/lib-base /tmp/lib-new 3
# Each line of output: round, build, path, seconds (the minimum of BENCH_REPS runs).
a=$1
b=$2
rounds=${3:-3}
dir=$(dirname "$0")
r=1
while [ "$r" -le "$rounds" ]; do
  for lib in "$a" "$b"; do
    R_LIBS="$lib" Rscript "$dir/bench-hot-paths.R" 2>&1 | sed "s|^|$r $lib |"
  done
  r=$((r + 1))
done
