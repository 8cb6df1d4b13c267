#include "perfgate/bench/skip.hpp"

#define PERFGATE_GBENCH_AT_LEAST_1_8 \
  (PERFGATE_GBENCH_VERSION_MAJOR > 1 || (PERFGATE_GBENCH_VERSION_MAJOR == 1 && PERFGATE_GBENCH_VERSION_MINOR >= 8))

namespace perfgate::bench {

void skip(benchmark::State& state, std::string_view reason) {
  const std::string message = std::string(kSkipPrefix) + std::string(reason);
#if PERFGATE_GBENCH_AT_LEAST_1_8
  state.SkipWithMessage(message);
#else
  state.SkipWithError(message.c_str());
#endif
}

void fail(benchmark::State& state, std::string_view message) {
  const std::string text(message);
  state.SkipWithError(text.c_str());
}

bool is_skip_message(std::string_view message) { return message.rfind(kSkipPrefix, 0) == 0; }

}  // namespace perfgate::bench
