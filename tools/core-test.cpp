// Tests of the header-only core without R: the engine against a direct computation, and the same
// results from a serial and a std::thread parallel-for. Run by `make core-test`.
#include <localmean/binning.hpp>
#include <localmean/engine.hpp>
#include <localmean/modes.hpp>
#include <localmean/sequence.hpp>

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

  // Sample-point scales: the weight sum with point i stretched by s_i, against a direct sum.
  std::vector<double> point_scale(n);
  for (auto& v : point_scale) v = 0.2 + unif(rng);
  const LocalData stretched(x.data(), n, d, y.data(), 1, nullptr, point_scale.data());
  for (bool tree : {false, true}) {
    EngineSettings set;
    set.kernel = KernelType::biweight;
    set.use_tree = tree;
    std::vector<double> coef(m), wsum(m);
    EngineOutput out;
    out.coef = coef.data();
    out.wsum = wsum.data();
    local_fit(stretched, q.data(), m, nullptr, set, out);
    double worst = 0.0;
    for (std::size_t k = 0; k < m; ++k) {
      double sw = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const double r = std::hypot(x[i] - q[k], x[n + i] - q[m + k]) / point_scale[i];
        sw += r <= 1.0 ? (1 - r * r) * (1 - r * r) : 0.0;
      }
      worst = std::max(worst, std::fabs(sw - wsum[k]));
    }
    expect(worst < 1e-10, "point scales stretch every point's kernel");
  }

  // Jacobi eigen-decomposition: A v = lambda v.
  std::vector<double> a = {4, 1, 0.5, 1, 3, 0.2, 0.5, 0.2, 1}, a0 = a, values, vectors;
  symmetric_eigen(a, 3, values, vectors);
  double resid = 0.0;
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t i = 0; i < 3; ++i) {
      double av = 0.0;
      for (std::size_t j = 0; j < 3; ++j) av += a0[i * 3 + j] * vectors[j * 3 + k];
      resid = std::max(resid, std::fabs(av - values[k] * vectors[i * 3 + k]));
    }
  expect(resid < 1e-12, "symmetric_eigen solves A v = lambda v");

  // Mean shift: a point started anywhere ends at a fixed point of the local mean, identically
  // with one or two threads.
  const std::vector<double> coords = shift_values(x.data(), n, d, false);
  const LocalData cloud(x.data(), n, d, coords.data(), d, nullptr);
  EngineSettings gauss;
  gauss.kernel = KernelType::gaussian;
  ShiftSettings shift;
  shift.tol = 1e-10;
  std::vector<double> p1(q), p2(q);
  std::vector<int> iters(m);
  ShiftOutput sout;
  sout.iterations = iters.data();
  shift_points(cloud, p1.data(), m, gauss, shift, sout);
  shift_points(cloud, p2.data(), m, gauss, shift, sout, two_threads);
  expect(p1 == p2, "serial and threaded mean shift are identical");
  double moved = 0.0;
  for (std::size_t k = 0; k < m; ++k) {
    double sw = 0.0, sx = 0.0, sy = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double w = std::exp(-0.5 * (std::pow(x[i] - p1[k], 2) + std::pow(x[n + i] - p1[m + k], 2)));
      sw += w;
      sx += w * x[i];
      sy += w * x[n + i];
    }
    moved = std::max(moved, std::hypot(sx / sw - p1[k], sy / sw - p1[m + k]));
  }
  expect(moved < 1e-8, "mean shift stops at a fixed point of the local mean");

  // Temporal local mean: causal attention against a direct two-pass softmax, the same with two
  // threads; the QKV trainer gives identical parameters with one and two threads.
  {
    const std::size_t T = 200, dk = 3, dv = 2;
    std::vector<double> tq(T * dk), tk(T * dk), tv(T * dv), o1(T * dv), o2(T * dv), w(T * T);
    for (auto& v : tq) v = unif(rng) * 4 - 2;
    for (auto& v : tk) v = unif(rng) * 4 - 2;
    for (auto& v : tv) v = unif(rng);
    TemporalSettings ts;
    ts.bandwidth = std::sqrt(3.0);
    temporal_local_mean(tq.data(), T, tk.data(), T, dk, tv.data(), dv, ts, o1.data(), w.data());
    temporal_local_mean(tq.data(), T, tk.data(), T, dk, tv.data(), dv, ts, o2.data(), nullptr,
                        two_threads);
    expect(o1 == o2, "serial and threaded temporal local means are identical");
    double worst = 0.0, worst_w = 0.0;
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> sc(t + 1);
      double mx = -1e300, sum = 0.0;
      for (std::size_t s = 0; s <= t; ++s) {
        sc[s] = (tq[t * 3] * tk[s * 3] + tq[t * 3 + 1] * tk[s * 3 + 1] +
                 tq[t * 3 + 2] * tk[s * 3 + 2]) / std::sqrt(3.0);
        mx = std::max(mx, sc[s]);
      }
      for (std::size_t s = 0; s <= t; ++s) sum += (sc[s] = std::exp(sc[s] - mx));
      for (std::size_t c = 0; c < dv; ++c) {
        double y = 0.0;
        for (std::size_t s = 0; s <= t; ++s) y += sc[s] / sum * tv[s * dv + c];
        worst = std::max(worst, std::fabs(y - o1[t * dv + c]));
      }
      for (std::size_t s = 0; s < T; ++s)
        worst_w = std::max(worst_w, std::fabs((s <= t ? sc[s] / sum : 0.0) - w[t * T + s]));
    }
    expect(worst < 1e-12, "the temporal local mean equals causal softmax attention");
    expect(worst_w < 1e-12, "its weights equal the softmax weights");

    const QkvShape shape(6, 3, 3, 2);
    std::vector<int> tokens(400);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 7 + i / 3) % 6;
    std::vector<double> theta(shape.size);
    for (auto& v : theta) v = unif(rng) * 0.2 - 0.1;
    std::vector<double> th1(theta), th2(theta);
    std::vector<int> order = {2, 0, 1, 3};
    QkvSettings qs;
    qs.batch = 100;
    QkvTrace tr1, tr2;
    qkv_train(shape, th1.data(), tokens.data(), tokens.size(), nullptr, 0, order.data(), qs, tr1);
    qkv_train(shape, th2.data(), tokens.data(), tokens.size(), nullptr, 0, order.data(), qs, tr2,
              two_threads);
    expect(th1 == th2, "serial and threaded QKV training are identical");
    expect(tr1.batch_loss.back() < tr1.batch_loss.front(), "QKV training lowers the loss");
  }

  std::printf("core: %d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
