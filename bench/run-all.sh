#!/bin/sh
# Runs every benchmark in sequence, one R process each (from the package root):
#   sh bench/run-all.sh 2>&1 | tee bench/results.txt
# Keep the machine otherwise idle: the timings are wall-clock (each script prints how much CPU
# other processes used meanwhile).
dir=$(dirname "$0")
echo "################ bench-binned.R (default malloc)"
Rscript "$dir/bench-binned.R"
echo
echo "################ bench-binned.R (malloc keeps freed memory: no first-touch page faults)"
MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=4294967295 Rscript "$dir/bench-binned.R"
echo
echo "################ bench-kde.R (default malloc)"
Rscript "$dir/bench-kde.R"
echo
echo "################ bench-kde.R (malloc keeps freed memory: no first-touch page faults)"
MALLOC_MMAP_THRESHOLD_=2147483647 MALLOC_TRIM_THRESHOLD_=4294967295 Rscript "$dir/bench-kde.R"
echo
for f in bench-exact.R bench-cv.R bench-kde-exact.R bench-meanshift.R bench-lle.R bench-trimap.R \
    bench-attention.R bench-qkv.R bench-impute.R bench-denoise.R bench-likelihood.R bench-bands.R \
    bench-selectors-mixed.R bench-np-mixed.R bench-kde-mixed.R bench-metric.R bench-conditional.R; do
  echo "################ $f"
  Rscript "$dir/$f"
  echo
done
echo "################ bench-memory.sh"
sh "$dir/bench-memory.sh" binned tree
