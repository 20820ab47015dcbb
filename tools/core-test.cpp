// Tests of the header-only core without R: the engine against a direct computation, and the same
// results from a serial and a std::thread parallel-for. Run by `make core-test`.
#include <localmean/binning.hpp>
#include <localmean/engine.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

using namespace localmean;

static int checks = 0, failures = 0;

static void expect(bool ok, const char* what) {
  ++checks;
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

// Splits [begin, end) over two std::threads.
static void two_threads(std::size_t begin, std::size_t end,
                        const std::function<void(std::size_t, std::size_t)>& fn) {
  const std::size_t mid = begin + (end - begin) / 2;
  std::thread other(fn, mid, end);
  fn(begin, mid);
  other.join();
}

int main() {
  const std::size_t n = 500, m = 40, d = 2;
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> x(n * d), y(n), q(m * d);
  for (auto& v : x) v = unif(rng) * 5.0;
  for (std::size_t i = 0; i < n; ++i) y[i] = std::sin(x[i]) + x[n + i];
  for (auto& v : q) v = unif(rng) * 5.0;
  const LocalData data(x.data(), n, d, y.data(), 1, nullptr);

  for (KernelType type : {KernelType::gaussian, KernelType::epanechnikov, KernelType::laplace}) {
    for (bool tree : {false, true}) {
      EngineSettings set;
      set.kernel = type;
      set.use_tree = tree;
      std::vector<double> serial(m), parallel(m);
      EngineOutput out;
      out.coef = serial.data();
      local_fit(data, q.data(), m, nullptr, set, out);
      out.coef = parallel.data();
      local_fit(data, q.data(), m, nullptr, set, out, two_threads);
      expect(serial == parallel, "serial and threaded fits are identical");
      // The local mean computed directly, untruncated.
      double worst = 0.0;
      for (std::size_t k = 0; k < m; ++k) {
        double sw = 0.0, swy = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
          const double u0 = x[i] - q[k], u1 = x[n + i] - q[m + k];
          const double w = kernel_value(type, std::sqrt(u0 * u0 + u1 * u1));
          sw += w;
          swy += w * y[i];
        }
        if (sw > 0.0) worst = std::max(worst, std::fabs(swy / sw - serial[k]));
      }
      expect(worst < 1e-10, "the engine equals the direct local mean");
    }
  }

  // The k-th neighbour distance against a sort.
  std::vector<double> radius(m);
  knn_radius(data.tree(), q.data(), m, 5, radius.data());
  for (std::size_t k = 0; k < m; ++k) {
    std::vector<double> dist(n);
    for (std::size_t i = 0; i < n; ++i)
      dist[i] = std::hypot(x[i] - q[k], x[n + i] - q[m + k]);
    std::nth_element(dist.begin(), dist.begin() + 4, dist.end());
    expect(std::fabs(dist[4] - radius[k]) < 1e-12, "kth_distance equals the 5th sorted distance");
  }
  // Chunked runs visit every item exactly once, whatever the chunk sizes become.
  std::vector<int> visits(100000, 0);
  run_chunked(visits.size(), 3, serial_for, {}, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) ++visits[i];
  });
  expect(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }),
         "run_chunked covers every item once");

  std::printf("core: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
