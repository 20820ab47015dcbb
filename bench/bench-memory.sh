#!/bin/sh
# Peak resident set size and time of bench-memory.R for each case, measured by GNU time.
# Usage (from the package root):  sh bench/bench-memory.sh [binned] [tree] [full]
# Needs /usr/bin/time (Debian/Ubuntu: apt-get install -y time).
dir=$(dirname "$0")
cases=${*:-"binned tree full"}
if [ ! -x /usr/bin/time ]; then
  echo "/usr/bin/time is missing: apt-get install -y time" >&2
  exit 1
fi
for c in $cases; do
  log=$(mktemp)
  /usr/bin/time -v Rscript "$dir/bench-memory.R" "$c" 2> "$log"
  status=$?
  grep -v '^\s' "$log"   # R's own messages, if any
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log")
  user=$(sed -n 's/.*User time (seconds): //p' "$log")
  echo "GNU time ($c): exit $status, Maximum resident set size $rss kB = $((rss / 1024)) MB, elapsed $wall (whole process, including R start-up and data generation), user $user s"
  if [ "$status" -ne 0 ]; then echo "  target < 300 MB: not measured (the R script failed)"
  elif [ -n "$rss" ] && [ "$rss" -lt $((300 * 1024)) ]; then echo "  target < 300 MB: met"
  else echo "  target < 300 MB: MISSED"; fi
  echo
  rm -f "$log"
done
