// perfgate_load_bench FILE...: times load_results() on the given files (the loader part of the
// harness performance target; compare_scale.sh times the whole `perfgate compare`).
// Prints the wall time of each load, the benchmarks/samples loaded and the peak RSS.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "perfgate/loader.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE... (each file loaded separately, then all merged)\n", argv[0]);
    return 2;
  }
  try {
    using clock = std::chrono::steady_clock;
    std::vector<std::string> files(argv + 1, argv + argc);
    double total = 0;
    for (const std::string& f : files) {
      const auto t0 = clock::now();
      const perfgate::ResultSet rs = perfgate::load_result_file(f);
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      total += s;
      std::size_t samples = 0;
      for (const auto& b : rs.benchmarks) {
        samples += b.time.samples.size();
        for (const auto& c : b.counters) samples += c.samples.size();
      }
      std::printf("load %s: %.3f s, %zu benchmarks, %zu samples (time + counters)\n", f.c_str(), s,
                  rs.benchmarks.size(), samples);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("total load time %.3f s, peak RSS %.1f MiB\n", total, static_cast<double>(ru.ru_maxrss) / 1024.0);
  } catch (const perfgate::InputError& e) {
    std::fprintf(stderr, "perfgate_load_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
