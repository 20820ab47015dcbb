// Parallel work in chunks: the core receives the caller's parallel-for and a monitor (progress
// and interrupts, called on the calling thread between chunks), so that it needs no R API.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>

namespace localmean {

// Runs fn(begin, end) over [0, total) in chunks on the caller's parallel-for; between chunks the
// monitor (called on the calling thread) reports progress and returns false to stop.
using ParallelFor = std::function<void(std::size_t, std::size_t,
                                       const std::function<void(std::size_t, std::size_t)>&)>;
using Monitor = std::function<bool(std::size_t done, std::size_t total)>;

inline void serial_for(std::size_t begin, std::size_t end,
                       const std::function<void(std::size_t, std::size_t)>& fn) {
  fn(begin, end);
}

// Chunks start at `chunk` items and are resized so that each takes about 0.1 s, keeping the
// main thread responsive (interrupts, progress) without paying a parallel launch per few items.
// The chunking never changes a result: every item is computed on its own.
inline bool run_chunked(std::size_t total, std::size_t chunk, const ParallelFor& parallel_for,
                        const Monitor& monitor,
                        const std::function<void(std::size_t, std::size_t)>& fn) {
  const double target = 0.1;  // seconds per chunk
  chunk = std::max<std::size_t>(chunk, 1);
  for (std::size_t start = 0, stop = 0; start < total; start = stop) {
    stop = std::min(total, start + chunk);
    const auto began = std::chrono::steady_clock::now();
    parallel_for(start, stop, fn);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (monitor && !monitor(stop, total)) return false;
    const double grow = took > 0.0 ? std::min(4.0, std::max(0.25, target / took)) : 4.0;
    chunk = std::max<std::size_t>(1, static_cast<std::size_t>(chunk * grow));
  }
  return true;
}

// A first chunk of about `work` point visits (about 0.05 s on one core).
inline std::size_t chunk_size(std::size_t n_data, double work = 2e7) {
  return std::max<std::size_t>(16, static_cast<std::size_t>(work / std::max<double>(n_data, 1.0)));
}

}  // namespace localmean
