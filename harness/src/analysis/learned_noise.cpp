#include "perfgate/learned_noise.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perfgate/loader.hpp"

namespace perfgate {
namespace {

using nlohmann::json;

// `where` by value: GCC 13's -Wdangling-reference takes a temporary bound to a reference parameter of a function
// that returns a reference for a dangling one, although the result refers into `object`.
const json& required(const json& object, const char* key, std::string_view where, const std::string& source) {
  const auto it = object.find(key);
  if (it == object.end()) throw InputError(source, "", std::string(where) + key, "missing");
  return *it;
}

std::string string_field(const json& j, const std::string& field, const std::string& source) {
  if (!j.is_string()) throw InputError(source, "", field, "must be a string");
  return j.get<std::string>();
}

int count_field(const json& j, const std::string& field, const std::string& source) {
  if (!j.is_number_integer() || j.get<long long>() < 0 || j.get<long long>() > 1000000)
    throw InputError(source, "", field, "must be an integer in [0, 1000000]");
  return j.get<int>();
}

double noise_field(const json& j, const std::string& field, const std::string& source) {
  if (!j.is_number()) throw InputError(source, "", field, "must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v < 0 || v >= 1)
    throw InputError(source, "", field, fmt::format("must be in [0, 1), got {}", v));
  return v;
}

void check_keys(const json& object, std::initializer_list<const char*> allowed, const std::string& where,
                const std::string& source) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (const char* k : allowed) known = known || it.key() == k;
    if (!known) throw InputError(source, "", where + it.key(), "unknown key");
  }
}

LearnedBand parse_band(const json& b, const std::string& where, const std::string& source,
                       std::pair<std::string, std::string>& key) {
  if (!b.is_object()) throw InputError(source, "", where, "must be an object");
  check_keys(b, {"benchmark", "metric", "relative_sd", "sessions", "relative_sd_common_mode", "sessions_common_mode"},
             where + ".", source);
  key.first = string_field(required(b, "benchmark", where + ".", source), where + ".benchmark", source);
  key.second = string_field(required(b, "metric", where + ".", source), where + ".metric", source);
  if (key.first.empty()) throw InputError(source, "", where + ".benchmark", "must not be empty");
  if (key.second.empty()) throw InputError(source, "", where + ".metric", "must not be empty");
  LearnedBand band;
  band.relative_sd = noise_field(required(b, "relative_sd", where + ".", source), where + ".relative_sd", source);
  band.sessions = count_field(required(b, "sessions", where + ".", source), where + ".sessions", source);
  if (const auto it = b.find("relative_sd_common_mode"); it != b.end() && !it->is_null()) {
    band.relative_sd_common_mode = noise_field(*it, where + ".relative_sd_common_mode", source);
    band.sessions_common_mode =
        count_field(required(b, "sessions_common_mode", where + ".", source), where + ".sessions_common_mode", source);
  }
  return band;
}

void parse_header(const json& j, const std::string& source, LearnedNoiseTable& t) {
  const int version = count_field(required(j, "perfgate_noise", "", source), "perfgate_noise", source);
  if (version > kNoiseSnapshotVersion)
    throw InputError(source, "", "perfgate_noise",
                     fmt::format("format version {} is newer than this perfgate understands ({}); upgrade perfgate",
                                 version, kNoiseSnapshotVersion));
  if (version < 1) throw InputError(source, "", "perfgate_noise", "must be >= 1");
  t.machine_class = string_field(required(j, "machine_class", "", source), "machine_class", source);
  if (const auto it = j.find("source"); it != j.end()) t.source = string_field(*it, "source", source);
  if (const auto it = j.find("learned_at"); it != j.end()) t.learned_at = string_field(*it, "learned_at", source);
  if (const auto it = j.find("window"); it != j.end()) t.window = count_field(*it, "window", source);
  if (const auto it = j.find("min_sessions"); it != j.end()) t.min_sessions = count_field(*it, "min_sessions", source);
  if (const auto it = j.find("history_sessions"); it != j.end())
    t.history_sessions = count_field(*it, "history_sessions", source);
  if (t.min_sessions < 2) throw InputError(source, "", "min_sessions", "must be >= 2");
}

void parse_borrowing(const json& j, const std::string& source, LearnedNoiseTable& t) {
  if (j.contains("bands")) throw InputError(source, "", "bands", "a borrowing snapshot holds no bands of its own");
  t.borrow_file = string_field(j["borrow_from"], "borrow_from", source);
  if (t.borrow_file.empty()) throw InputError(source, "", "borrow_from", "must not be empty");
  const json& widen = required(j, "widen", "", source);
  if (!widen.is_number() || !(widen.get<double>() >= 1.0) || !std::isfinite(widen.get<double>()))
    throw InputError(source, "", "widen", "must be a number >= 1 (a borrowed band is never narrowed)");
  t.widen = widen.get<double>();
  if (const auto it = j.find("own_sessions"); it != j.end()) t.own_sessions = count_field(*it, "own_sessions", source);
}

// The sibling's bands, widened, under the borrowing class's name.
void resolve_borrowing(LearnedNoiseTable& t, const std::string& file) {
  const std::string sibling_file = (std::filesystem::path(file).parent_path() / t.borrow_file).string();
  const LearnedNoiseTable sibling =
      parse_noise_snapshot(read_config_file(sibling_file, "learned-noise snapshot", 64u << 20), sibling_file);
  if (!sibling.borrow_file.empty())
    throw InputError(file, "", "borrow_from",
                     fmt::format("{} borrows in turn: borrow from a class that learned its "
                                 "own bands",
                                 sibling_file));
  t.borrowed_from = sibling.machine_class;
  t.window = sibling.window;
  t.min_sessions = sibling.min_sessions;
  t.history_sessions = sibling.history_sessions;
  t.learned_at = sibling.learned_at;
  for (auto [key, band] : sibling.bands) {
    band.relative_sd *= t.widen;
    if (band.relative_sd_common_mode) *band.relative_sd_common_mode *= t.widen;
    t.bands.emplace(key, band);
  }
}

}  // namespace

const LearnedBand* LearnedNoiseTable::usable(const std::string& benchmark, const std::string& metric) const {
  const auto it = bands.find({benchmark, metric});
  if (it == bands.end() || it->second.sessions < min_sessions) return nullptr;
  return &it->second;
}

std::size_t LearnedNoiseTable::usable_count() const {
  std::size_t n = 0;
  for (const auto& [key, band] : bands) n += band.sessions >= min_sessions ? 1 : 0;
  return n;
}

LearnedNoiseTable parse_noise_snapshot(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(source, "", "", fmt::format("malformed JSON: {}", e.what()));
  }
  if (!j.is_object()) throw InputError(source, "", "", "the top level must be an object");
  check_keys(j,
             {"perfgate_noise", "machine_class", "source", "learned_at", "window", "min_sessions", "history_sessions",
              "bands", "borrow_from", "widen", "own_sessions"},
             "", source);
  LearnedNoiseTable t;
  parse_header(j, source, t);
  if (j.contains("borrow_from")) {
    parse_borrowing(j, source, t);
    return t;
  }
  const json& bands = required(j, "bands", "", source);
  if (!bands.is_array()) throw InputError(source, "", "bands", "must be an array");
  for (std::size_t i = 0; i < bands.size(); ++i) {
    std::pair<std::string, std::string> key;
    const std::string where = fmt::format("bands[{}]", i);
    LearnedBand band = parse_band(bands[i], where, source, key);
    if (!t.bands.emplace(key, band).second)
      throw InputError(source, key.first, where, fmt::format("metric '{}' listed twice", key.second));
  }
  if (t.source.empty()) t.source = source;
  return t;
}

LearnedNoiseTable load_noise_snapshot(const std::string& file) {
  LearnedNoiseTable t = parse_noise_snapshot(read_config_file(file, "learned-noise snapshot", 64u << 20), file);
  if (!t.borrow_file.empty()) resolve_borrowing(t, file);
  t.source = file;  // the gate names the file it used; the file's own "source" says where it came from
  return t;
}

std::string noise_snapshot_json(const LearnedNoiseTable& t) {
  json header = json::object();
  header["perfgate_noise"] = kNoiseSnapshotVersion;
  header["machine_class"] = t.machine_class;
  header["source"] = t.source;
  header["learned_at"] = t.learned_at;
  header["window"] = t.window;
  header["min_sessions"] = t.min_sessions;
  header["history_sessions"] = t.history_sessions;
  // One band per line: the reviewed diff of a refresh shows exactly which bands moved.
  std::string out = header.dump(1);
  out.erase(out.find_last_of('}'));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  out += ",\n \"bands\": [";
  bool first = true;
  for (const auto& [key, band] : t.bands) {
    json b = {{"benchmark", key.first},
              {"metric", key.second},
              {"relative_sd", band.relative_sd},
              {"sessions", band.sessions}};
    if (band.relative_sd_common_mode) {
      b["relative_sd_common_mode"] = *band.relative_sd_common_mode;
      b["sessions_common_mode"] = band.sessions_common_mode;
    }
    out += (first ? "\n  " : ",\n  ") + b.dump();
    first = false;
  }
  out += t.bands.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

std::string empty_history_note(const std::string& history_url, const std::string& history_class,
                               const std::string& judged_by) {
  return fmt::format(
      "history {}: no session of class {} in it (perfgate history record adds one; ci/perf.sh records each main "
      "job): {} judges",
      history_url, history_class, judged_by);
}

}  // namespace perfgate
