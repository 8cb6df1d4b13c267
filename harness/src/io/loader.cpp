// Google Benchmark JSON -> ResultSet. See loader.hpp for the rules and docs/harness.md for users.
//
// Parser choice: simdjson's DOM API. It validates the whole document before a single value is used
// (so a truncated or malformed file can never yield a partial ResultSet), and on this machine parses a
// 150 MB results file in about a tenth of a second. When simdjson rejects a file, nlohmann's SAX
// parser reads it again (SyntaxLocator) to say where: line, column, the benchmark and the key being
// read, and whether the culprit is a bare NaN/Infinity (which Google Benchmark writes, unquoted, for a
// NaN or infinite counter).
#include "perfgate/loader.hpp"

#include <sys/mman.h>  // mmap: a zeroed, page-aligned input buffer

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "perfgate/context_keys.hpp"

namespace perfgate {

namespace {
LoadOptions& process_load_options() {
  static LoadOptions options;
  return options;
}
}  // namespace

const LoadOptions& default_load_options() { return process_load_options(); }

void set_default_load_options(const LoadOptions& options) { process_load_options() = options; }

std::uint64_t parse_byte_count(std::string_view text, const std::string& source) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value == 0) {
    throw InputError(source, "", "", fmt::format("not a positive byte count: '{}'", text));
  }
  return value;
}

namespace {

// Google Benchmark's JSON printed to a stream the program also printed to (--benchmark_format=json > FILE): its
// "{" line and "context" come after lines of the program's own. nullopt when the text starts with the JSON.
std::optional<std::string> json_after_other_output(std::string_view head) {
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] == '{' || head[first] == '[') return std::nullopt;
  const std::size_t open = head.find("\n{");
  if (open == std::string_view::npos || head.find("\"context\"", open) == std::string_view::npos) return std::nullopt;
  const auto line =
      static_cast<int>(std::count(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(open), '\n')) + 2;
  std::string before(head.substr(first, std::min<std::size_t>(open - first, 80)));
  std::replace(before.begin(), before.end(), '\n', ' ');
  return fmt::format(
      "not JSON from its first line: Google Benchmark's JSON starts at line {}, after other output ('{}'), "
      "which the program printed to the same stream; write the JSON alone with --benchmark_out=FILE.json "
      "--benchmark_out_format=json",
      line, before);
}

// Google Benchmark's console or CSV output handed over where its JSON was meant (a run's stdout saved to a file), or
// its JSON after the program's own output: what the file is and how to get the JSON. nullopt for anything else.
std::optional<std::string> other_benchmark_format(std::string_view text) {
  const std::string_view head = text.substr(0, 8192);
  const auto has_line_starting = [head](std::string_view prefix) {
    return head.rfind(prefix, 0) == 0 || head.find("\n" + std::string(prefix)) != std::string_view::npos;
  };
  const char* format = nullptr;
  if (has_line_starting("name,iterations,real_time,cpu_time,time_unit")) format = "CSV";
  const auto header = head.find("\nBenchmark ");
  if (header != std::string_view::npos) {
    const std::string_view line = head.substr(header + 1, head.find('\n', header + 1) - header - 1);
    if (line.find(" Time ") != std::string_view::npos && line.find(" CPU ") != std::string_view::npos &&
        line.find("Iterations") != std::string_view::npos)
      format = "console";
  }
  if (format != nullptr)
    return fmt::format(
        "not JSON: this is Google Benchmark's {} output; perfgate reads its JSON: run the binary with "
        "--benchmark_out=FILE.json --benchmark_out_format=json (or --benchmark_format=json to print it)",
        format);
  return json_after_other_output(head);
}

// ---------------------------------------------------------------------------------------------------
// Syntax-error locator: only runs after simdjson rejected a document. nlohmann's SAX parser reads the
// text again and names the first error and its byte; this handler keeps the path to it (the benchmark
// entry and the key being read), so the message says where in the data the file went wrong.
struct SyntaxProblem {
  bool found = false;
  std::string message;
  std::string benchmark;  // name (or benchmarks[i]) of the benchmarks[] entry being read, if any
  std::string field;      // key being read
};

class SyntaxLocator final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit SyntaxLocator(std::string_view text) : s_(text) {}

  SyntaxProblem run() {
    if (s_.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      problem_.found = true;
      problem_.message = "malformed JSON at line 1 column 1 (byte 0): empty file (no JSON at all)";
      return problem_;
    }
    // Strict: content after the document is an error too. No exception escapes a SAX parse.
    nlohmann::json::sax_parse(s_.begin(), s_.end(), this);
    return problem_;
  }

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  // simdjson refuses an integer beyond 64 bits; nlohmann reads it as a float, so its text has no '.' or exponent.
  bool number_float(number_float_t, const string_t& text) override {
    if (text.find_first_of(".eE") != string_t::npos) return scalar();
    locate();
    problem_.message = fmt::format("the integer {} is out of range (it does not fit in 64 bits)", one_line(text));
    return false;
  }
  bool binary(binary_t&) override { return scalar(); }
  bool string(string_t& value) override {
    if (!frames_.empty() && frames_.back().object && frames_.back().key == "name") frames_.back().name = value;
    return scalar();
  }
  bool key(string_t& name) override {
    frames_.back().key = name;
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) override {
    // `position` counts the characters read, the one that failed included; past the end is the end of input.
    if (position > s_.size()) {
      locate();
      problem_.message =
          fmt::format("truncated JSON: the file ends inside {} open object(s)/array(s) (byte {}; cut short?)",
                      frames_.size(), s_.size());
      return false;
    }
    const std::size_t offset = token_start(position, last_token);
    if (root_done_) {
      fail(offset,
           fmt::format("unexpected '{}' after the end of the JSON document", one_line(s_.substr(position - 1, 1))));
    } else if (const char* what = non_finite_word(offset)) {
      fail(offset, fmt::format("{} is not a JSON number: the benchmark reported {} value (Google Benchmark writes it "
                               "unquoted)",
                               what, what[0] == 'N' ? "a NaN" : "an infinite"));
    } else {
      fail(offset, nlohmann_detail(e.what()));
    }
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::size_t index = 0;  // arrays: how many elements are complete (= the index of the current one)
    std::string key;        // objects: current key
    std::string name;       // objects: value of "name" when seen
  };

  bool scalar() {
    if (frames_.empty()) root_done_ = true;
    else if (!frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool open(bool object) {
    if (frames_.size() >= kMaxDepth) {
      locate();
      problem_.message = fmt::format("malformed JSON: nested deeper than {} levels", kMaxDepth);
      return false;
    }
    frames_.push_back(Frame{object, 0, {}, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return scalar();
  }

  // The start of the token that failed: nlohmann's `last_token` is the text read for it (control
  // characters spelled <U+0000>); when it is not the raw text, the failing character itself.
  std::size_t token_start(std::size_t position, const std::string& last_token) const {
    const std::size_t end = std::min(position, s_.size());
    if (last_token.size() <= end && s_.substr(end - last_token.size(), last_token.size()) == last_token) {
      return end - last_token.size();
    }
    return position == 0 ? 0 : position - 1;
  }
  // "NaN" or "Infinity" when a bare non-finite word (as Google Benchmark writes them) starts at `offset`.
  const char* non_finite_word(std::size_t offset) const {
    std::string_view rest = s_.substr(std::min(offset, s_.size()));
    if (!rest.empty() && (rest[0] == '-' || rest[0] == '+')) rest.remove_prefix(1);
    if (rest.rfind("NaN", 0) == 0 || rest.rfind("nan", 0) == 0) return "NaN";
    if (rest.rfind("Infinity", 0) == 0 || rest.rfind("inf", 0) == 0) return "Infinity";
    return nullptr;
  }
  // nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>".
  static std::string nlohmann_detail(std::string_view what) {
    const std::size_t column = what.find(", column ");
    const std::size_t colon = column == std::string_view::npos ? column : what.find(": ", column);
    if (colon != std::string_view::npos) return std::string(what.substr(colon + 2));
    const std::size_t bracket = what.find("] ");
    return std::string(bracket == std::string_view::npos ? what : what.substr(bracket + 2));
  }
  void fail(std::size_t offset, const std::string& what) {
    locate();
    std::size_t line = 1;
    std::size_t line_start = 0;
    for (std::size_t k = 0; k < offset; ++k) {
      if (s_[k] == '\n') {
        ++line;
        line_start = k + 1;
      }
    }
    problem_.message =
        fmt::format("malformed JSON at line {} column {} (byte {}): {}", line, offset - line_start + 1, offset, what);
  }
  // Names the benchmark entry and key being read: frames_[0] = root object, [1] = the "benchmarks"
  // array, [2] = one benchmark entry; elsewhere the path of keys and indices.
  void locate() {
    problem_.found = true;
    if (frames_.size() >= 2 && frames_[0].object && frames_[0].key == "benchmarks" && !frames_[1].object) {
      problem_.benchmark = frames_.size() >= 3 && !frames_[2].name.empty()
                               ? frames_[2].name
                               : fmt::format("benchmarks[{}]", frames_[1].index);
      if (frames_.size() >= 3 && frames_[2].object) problem_.field = frames_[2].key;
      return;
    }
    std::string path;
    for (const Frame& f : frames_) {
      if (f.object && !f.key.empty()) path += (path.empty() ? "" : ".") + f.key;
      if (!f.object) path += fmt::format("[{}]", f.index);
    }
    problem_.field = path;
  }

  // simdjson's DOM parser refuses documents nested deeper than this (DEFAULT_MAX_DEPTH): say so.
  static constexpr std::size_t kMaxDepth = simdjson::DEFAULT_MAX_DEPTH;
  std::string_view s_;
  std::vector<Frame> frames_;
  bool root_done_ = false;
  SyntaxProblem problem_;
};

// ---------------------------------------------------------------------------------------------------
// Document -> ResultSet.
using simdjson::dom::element;
using simdjson::dom::element_type;

enum class Key {
  name,
  family_index,
  per_family_instance_index,
  run_name,
  run_type,
  repetitions,
  repetition_index,
  threads,
  iterations,
  real_time,
  cpu_time,
  time_unit,
  aggregate_name,
  aggregate_unit,
  error_occurred,
  error_message,
  skipped,
  skip_message,
  label,
  process_run,
  big_o,
  cpu_coefficient,
  real_coefficient,
  rms,
  other
};

// Every key of a benchmarks[] entry that the loader reads or knows to ignore.
constexpr std::pair<std::string_view, Key> kKnownKeys[] = {
    {"rms", Key::rms},
    {"name", Key::name},
    {"big_o", Key::big_o},
    {"label", Key::label},
    {"skipped", Key::skipped},
    {"threads", Key::threads},
    {"cpu_time", Key::cpu_time},
    {"run_name", Key::run_name},
    {"run_type", Key::run_type},
    {"real_time", Key::real_time},
    {"time_unit", Key::time_unit},
    {"iterations", Key::iterations},
    {"repetitions", Key::repetitions},
    {"family_index", Key::family_index},
    {"skip_message", Key::skip_message},
    {"error_message", Key::error_message},
    {"aggregate_name", Key::aggregate_name},
    {"aggregate_unit", Key::aggregate_unit},
    {"error_occurred", Key::error_occurred},
    {"cpu_coefficient", Key::cpu_coefficient},
    {"real_coefficient", Key::real_coefficient},
    {"repetition_index", Key::repetition_index},
    {"perfgate_process_run", Key::process_run},
    {"per_family_instance_index", Key::per_family_instance_index},
};

// The known keys by length: a key is compared only with the (at most three) known keys of its own length.
struct KeysByLength {
  static constexpr std::size_t kLongest = 25;
  static constexpr std::size_t kMostOfOneLength = 3;
  std::array<std::array<std::pair<std::string_view, Key>, kMostOfOneLength>, kLongest + 1> keys{};
  std::array<std::size_t, kLongest + 1> count{};
};

// Evaluated at compile time: a known key longer than kLongest, or more than kMostOfOneLength of one length,
// fails the build.
constexpr KeysByLength keys_by_length() {
  KeysByLength t;
  for (const auto& known : kKnownKeys) t.keys.at(known.first.size()).at(t.count.at(known.first.size())++) = known;
  return t;
}

constexpr KeysByLength kKeysByLength = keys_by_length();

Key classify_key(std::string_view k) {
  // Called for every field of every entry (~3.5 million times for a 150 MB file): only the known keys of
  // k's length are compared.
  if (k.size() > KeysByLength::kLongest) return Key::other;
  const auto& candidates = kKeysByLength.keys[k.size()];
  for (std::size_t i = 0; i < kKeysByLength.count[k.size()]; ++i)
    if (std::memcmp(k.data(), candidates[i].first.data(), k.size()) == 0) return candidates[i].second;
  return Key::other;
}

bool looks_like_metric_counter(std::string_view k) {
  return k.rfind("phase.", 0) == 0 || k.rfind("pct.", 0) == 0 || (k.size() > 2 && k.substr(k.size() - 2) == "/s") ||
         k == "bytes_per_second" || k == "items_per_second";
}

const char* type_name(element_type t) {
  switch (t) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "something else";
}

// For accesses whose type was checked just before: a failure here would be a bug, not bad input.
void must(simdjson::error_code ec) {
  if (ec != simdjson::SUCCESS) throw std::logic_error(std::string("perfgate loader: ") + simdjson::error_message(ec));
}

bool is_number(element_type t) {
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

// A context value as a string: strings unescaped, anything else as minified JSON text.
std::string context_value(element v) {
  if (v.type() == element_type::STRING) {
    std::string_view s;
    if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  }
  return simdjson::minify(v);
}

// State of one benchmark within one process run of this file, for the repetition and duplicate checks.
struct RunState {
  bool seen = false;
  std::string raw_name;
  std::string time_unit;
  long long declared_repetitions = -1;
  std::vector<unsigned char> rep_seen;         // repetition indices < kDenseRepetitions seen
  std::unordered_set<long long> rep_seen_far;  // larger indices (rare; keeps memory bounded by entries)
  long long indexed = 0;                       // entries with a repetition_index
  long long family = -1;
  long long instance = -1;
  long long samples = 0;    // valid per-repetition entries
  long long unindexed = 0;  // entries without repetition_index
  long long failed_entries = 0;
  long long aggregate_entries = 0;
  std::size_t first_entry = 0;
};

constexpr long long kMaxRepetitions = 1'000'000;
constexpr long long kDenseRepetitions = 4096;
constexpr std::size_t kMaxCountersPerEntry = 256;
constexpr std::size_t kMaxBenchmarks = 1'000'000;  // per file; the performance target is 10,000
constexpr std::size_t kMaxStoredRuns = 10'000;     // process runs in one baseline file

constexpr std::string_view kNonFiniteNaN = "perfgate:non-finite:NaN";
constexpr std::string_view kNonFiniteInf = "perfgate:non-finite:Infinity";

bool is_non_finite_sentinel(element v) {
  std::string_view text;
  return v.type() == element_type::STRING && v.get_string().get(text) == simdjson::SUCCESS &&
         (text == kNonFiniteNaN || text == kNonFiniteInf);
}

std::string non_finite_message(element v) {
  std::string_view text;
  if (v.get_string().get(text) != simdjson::SUCCESS) text = {};
  return text == kNonFiniteNaN
             ? "NaN is not a JSON number: the benchmark reported a NaN value (Google Benchmark writes it unquoted)"
             : "Infinity is not a JSON number: the benchmark reported an infinite value (Google Benchmark writes it "
               "unquoted)";
}

// A field of an entry as read, and that the entry has it (the checks tell "missing" from a zero).
template <class Field, class Value>
void store_present(Field& field, bool& present, Value value) {
  field = value;
  present = true;
}

// The fields of one benchmarks[] entry as read, before they are checked and stored.
struct Entry {
  std::string_view raw_name;
  std::string_view run_type = "iteration";
  std::string_view run_name, time_unit, error_message, skip_message, aggregate_name, aggregate_unit, label;
  bool has_run_type = false, complexity = false;
  bool has_run_name = false, has_real = false, has_cpu = false, has_iterations = false, has_unit = false;
  bool error_occurred = false, skipped = false, has_rep_index = false, has_process_run = false;
  double real_time = 0, cpu_time = 0;
  long long iterations = 0, repetitions = -1, rep_index = -1, family = -1, instance = -1, process_run = 0;
};

// The first three names quoted, and how many more: a note names its benchmarks without growing with the file.
template <class Names>
std::string first_names_quoted(const Names& names) {
  constexpr std::size_t kNamed = 3;
  std::vector<std::string> quoted;
  for (const auto& n : names) {
    if (quoted.size() == kNamed) break;
    quoted.push_back("'" + n + "'");
  }
  const std::string more = names.size() > kNamed ? fmt::format(" and {} more", names.size() - kNamed) : std::string();
  return fmt::format("{}{}", fmt::join(quoted, ", "), more);
}

// An aggregate entry kept until the whole file is read (DocumentReader::use_aggregates_without_samples).
struct PendingAggregate {
  std::string base;  // the benchmark it aggregates (run_name)
  Entry entry;
  std::vector<std::pair<std::string_view, double>> counters;
};

class DocumentReader {
 public:
  DocumentReader(const std::string& file, ResultSet& out) : file_(file), out_(out) {}

  void read(element root) {
    if (root.type() != element_type::OBJECT) {
      throw InputError(file_, "", "",
                       fmt::format("unknown schema: the top level is {}, not an object (not Google Benchmark JSON)",
                                   type_name(root.type())));
    }
    simdjson::dom::object top;
    must(root.get_object().get(top));
    refuse_perfgate_document(top);
    const element benchmarks = top_member(top, "benchmarks", element_type::ARRAY, "array");
    // Google Benchmark always writes a context, but hand-made and converted files (its own compare tool's fixtures)
    // may hold the benchmarks alone: that is an empty context, not a refusal.
    element context;
    const bool has_context = top["context"].get(context) == simdjson::SUCCESS;
    if (has_context) (void)top_member(top, "context", element_type::OBJECT, "object");
    read_contexts(top, has_context ? std::optional<element>(context) : std::nullopt);
    simdjson::dom::array list;
    must(benchmarks.get_array().get(list));
    std::size_t index = 0;
    for (element entry : list) {
      read_entry(entry, index);
      ++index;
    }
    finish();
  }

 private:
  // perfgate's own JSON (a report's "schema": "perfgate.report/1", a merge record) is not a run: its benchmarks are
  // verdicts, which would load as entries without a measurement and leave nothing to compare.
  void refuse_perfgate_document(simdjson::dom::object top) const {
    std::string_view schema;
    if (top["schema"].get_string().get(schema) != simdjson::SUCCESS || schema.rfind("perfgate.", 0) != 0) return;
    const bool report = schema.rfind("perfgate.report/", 0) == 0;
    throw InputError(
        file_, "", "schema",
        fmt::format("a perfgate {} ({}), not Google Benchmark results{}", report ? "report" : "file", schema,
                    report ? ": give the run files it was made from (its baseline.files and "
                             "current.files; perfgate run and ab keep them in runs/ beside the report)"
                           : ""));
  }

  // The top-level member `key` of the document, which Google Benchmark JSON has as a `kind` (`type`).
  element top_member(simdjson::dom::object top, const char* key, element_type type, const char* kind) const {
    element member;
    if (top[key].get(member) != simdjson::SUCCESS) {
      throw InputError(
          file_, "", key,
          fmt::format("unknown schema: no \"{}\" {} (not Google Benchmark JSON --benchmark_format=json?)", key, kind));
    }
    if (member.type() != type) {
      throw InputError(file_, "", key, fmt::format("wrong type: {} instead of an {}", type_name(member.type()), kind));
    }
    return member;
  }

  void read_contexts(simdjson::dom::object top, std::optional<element> context) {
    RunContext base;
    base.source_file = file_;
    simdjson::dom::object ctx;
    if (context) {
      must(context->get_object().get(ctx));
      for (auto field : ctx) base.fields[std::string(field.key)] = context_value(field.value);
    }

    element runs;
    if (top["perfgate_process_runs"].get(runs) != simdjson::SUCCESS) {
      out_.contexts.push_back(std::move(base));
      stored_runs_ = false;
      return;
    }
    stored_runs_ = true;
    simdjson::dom::array list;
    if (runs.get_array().get(list) != simdjson::SUCCESS) {
      throw InputError(file_, "", "perfgate_process_runs",
                       fmt::format("wrong type: {} instead of an array of contexts", type_name(runs.type())));
    }
    std::size_t k = 0;
    for (element run : list) {
      if (k >= kMaxStoredRuns) {
        throw InputError(file_, "", "perfgate_process_runs", fmt::format("more than {} process runs", kMaxStoredRuns));
      }
      simdjson::dom::object run_ctx;
      if (run.get_object().get(run_ctx) != simdjson::SUCCESS) {
        throw InputError(file_, "", fmt::format("perfgate_process_runs[{}]", k),
                         fmt::format("wrong type: {} instead of an object", type_name(run.type())));
      }
      RunContext rc;
      rc.source_file = file_;
      for (auto field : run_ctx) rc.fields[std::string(field.key)] = context_value(field.value);
      // The baseline's own facts (machine, date, commit, command) apply to every stored run.
      for (const auto& [key, value] : base.fields) {
        if (key.rfind(context_keys::kBaselinePrefix, 0) == 0) rc.fields[key] = value;
      }
      out_.contexts.push_back(std::move(rc));
      ++k;
    }
    if (k == 0) {
      throw InputError(file_, "", "perfgate_process_runs", "empty: a baseline must hold at least one process run");
    }
  }

  [[noreturn]] void fail(std::string_view bench, std::string_view field, const std::string& detail) const {
    throw InputError(file_, std::string(bench), std::string(field), detail);
  }

  double number_field(element v, std::string_view bench, std::string_view key) const {
    double d = 0;
    if (in_aggregate_ && is_non_finite_sentinel(v)) return 0.0;  // aggregates are ignored
    if (!is_number(v.type()) || v.get_double().get(d) != simdjson::SUCCESS) {
      fail(bench, key, fmt::format("wrong type: {} instead of a number", type_name(v.type())));
    }
    if (!std::isfinite(d)) fail(bench, key, "not a finite number");
    return d;
  }

  long long integer_field(element v, std::string_view bench, std::string_view key, long long min_value) const {
    long long n = 0;
    const element_type t = v.type();
    if (t == element_type::INT64) {
      int64_t x = 0;
      must(v.get_int64().get(x));
      n = x;
    } else if (t == element_type::UINT64) {
      fail(bench, key, "integer out of range");
    } else if (t == element_type::DOUBLE) {
      fail(bench, key, "wrong type: a fractional number instead of an integer");
    } else {
      fail(bench, key, fmt::format("wrong type: {} instead of an integer", type_name(t)));
    }
    if (n < min_value) fail(bench, key, fmt::format("{} is out of range (must be >= {})", n, min_value));
    return n;
  }

  std::string_view string_field(element v, std::string_view bench, std::string_view key) const {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      fail(bench, key, fmt::format("wrong type: {} instead of a string", type_name(v.type())));
    }
    return s;
  }

  bool bool_field(element v, std::string_view bench, std::string_view key) const {
    bool b = false;
    if (v.get_bool().get(b) != simdjson::SUCCESS) {
      fail(bench, key, fmt::format("wrong type: {} instead of true/false", type_name(v.type())));
    }
    return b;
  }

  static double unit_to_ns(std::string_view unit, bool& ok) {
    ok = true;
    if (unit == "ns") return 1.0;
    if (unit == "us") return 1e3;
    if (unit == "ms") return 1e6;
    if (unit == "s") return 1e9;
    ok = false;
    return 0.0;
  }

  std::size_t benchmark_slot(std::string_view raw_name, std::string_view label) {
    // Repetitions of one benchmark usually follow each other: try the previous entry's name first.
    if (last_slot_ != kNoSlot && raw_name == last_name_) return last_slot_;
    const auto cached = raw_to_slot_.find(raw_name);
    if (cached != raw_to_slot_.end()) {
      last_name_ = raw_name;
      last_slot_ = cached->second;
      return cached->second;
    }
    std::string normalised = normalise_benchmark_name(std::string(raw_name));
    if (normalised.empty()) fail(label, "name", "empty benchmark name");
    std::size_t slot;
    const auto it = out_.index.find(normalised);
    if (it == out_.index.end()) {
      slot = out_.benchmarks.size();
      BenchmarkResult b;
      b.name = normalised;
      b.raw_name = std::string(raw_name);
      b.time_kind = time_kind_of_name(raw_name);
      b.time.name = "time";
      b.time.kind = MetricKind::latency;
      b.cpu_time.name = "cpu_time";
      b.cpu_time.kind = MetricKind::info;
      b.source_file = file_;
      out_.index.emplace(std::move(normalised), slot);
      out_.benchmarks.push_back(std::move(b));
      if (out_.benchmarks.size() > kMaxBenchmarks) {
        fail(raw_name, "name", fmt::format("more than {} benchmarks in one file", kMaxBenchmarks));
      }
      states_.emplace_back();  // grows per process run on demand
    } else {
      slot = it->second;
    }
    raw_to_slot_.emplace(raw_name, slot);
    last_name_ = raw_name;
    last_slot_ = slot;
    return slot;
  }

  // One benchmarks[] entry: a per-repetition sample, a failed or skipped repetition, or an aggregate (ignored).
  void read_entry(element entry, std::size_t index) {
    Entry e;
    const simdjson::dom::object obj = entry_object(entry, index);
    e.raw_name = entry_name(obj, index);
    check_non_finite_values(obj, e.raw_name);
    counters_.clear();
    non_finite_in_entry_.clear();
    for (auto field : obj) read_field(e, field.key, field.value);
    classify_old_style_aggregate(e);
    check_process_run(e);
    if (e.run_type == "aggregate") {
      read_aggregate(e);
      return;
    }
    check_iteration_entry(e);
    if (holds_no_time(e)) {
      ++timeless_entries_;
      return;
    }
    const std::size_t slot = benchmark_slot(e.raw_name, e.raw_name);
    BenchmarkResult& b = out_.benchmarks[slot];
    RunState& st = run_state(slot, e, index, b.name);
    count_repetition(st, e);
    for (std::string_view key : non_finite_in_entry_) non_finite_counters_[slot].insert(std::string(key));
    if (!e.label.empty()) b.label = std::string(e.label);
    if (e.error_occurred || e.skipped) {
      ++st.failed_entries;
      record_failure(b, e);
      return;
    }
    const auto [real_ns, cpu_ns] = measured_times_ns(st, e);
    append_sample(b, e, real_ns, cpu_ns);
    ++st.samples;
  }

  simdjson::dom::object entry_object(element entry, std::size_t index) const {
    simdjson::dom::object obj;
    if (entry.get_object().get(obj) != simdjson::SUCCESS) {
      fail(position(index), "", fmt::format("wrong type: {} instead of an object", type_name(entry.type())));
    }
    return obj;
  }

  static std::string position(std::size_t index) { return fmt::format("benchmarks[{}]", index); }

  std::string_view entry_name(simdjson::dom::object obj, std::size_t index) const {
    element name_el;
    if (obj["name"].get(name_el) != simdjson::SUCCESS) fail(position(index), "name", "missing");
    std::string_view raw_name;
    if (name_el.get_string().get(raw_name) != simdjson::SUCCESS) {
      fail(position(index), "name", fmt::format("wrong type: {} instead of a string", type_name(name_el.type())));
    }
    if (raw_name.empty()) fail(position(index), "name", "empty benchmark name");
    return raw_name;
  }

  // A non-finite value (see quote_non_finite_tokens) is tolerated in aggregates, which are ignored, and in user
  // counters (read_counter); in a field Google Benchmark defines (a time, say) it is bad input.
  void check_non_finite_values(simdjson::dom::object obj, std::string_view bench) {
    element rt;
    std::string_view rt_text;
    in_aggregate_ = obj["run_type"].get(rt) == simdjson::SUCCESS && rt.get_string().get(rt_text) == simdjson::SUCCESS &&
                    rt_text == "aggregate";
    for (auto field : obj) {
      if (is_non_finite_sentinel(field.value) && !in_aggregate_ && classify_key(field.key) != Key::other) {
        fail(bench, field.key, non_finite_message(field.value));
      }
    }
  }

  // One field of an entry: the fields Google Benchmark defines, else a user counter (or ignored metadata).
  void read_field(Entry& e, std::string_view key, element v) {
    const std::string_view bench = e.raw_name;
    switch (classify_key(key)) {
      case Key::name: break;
      case Key::run_type: store_present(e.run_type, e.has_run_type, string_field(v, bench, key)); break;
      case Key::run_name: store_present(e.run_name, e.has_run_name, string_field(v, bench, key)); break;
      case Key::real_time: store_present(e.real_time, e.has_real, number_field(v, bench, key)); break;
      case Key::cpu_time: store_present(e.cpu_time, e.has_cpu, number_field(v, bench, key)); break;
      case Key::time_unit: store_present(e.time_unit, e.has_unit, string_field(v, bench, key)); break;
      case Key::iterations: store_present(e.iterations, e.has_iterations, integer_field(v, bench, key, 0)); break;
      case Key::repetitions: e.repetitions = integer_field(v, bench, key, 1); break;
      case Key::repetition_index: store_present(e.rep_index, e.has_rep_index, integer_field(v, bench, key, 0)); break;
      case Key::threads: (void)integer_field(v, bench, key, 1); break;
      case Key::family_index: e.family = integer_field(v, bench, key, 0); break;
      case Key::per_family_instance_index: e.instance = integer_field(v, bench, key, 0); break;
      case Key::error_occurred: e.error_occurred = bool_field(v, bench, key); break;
      case Key::error_message: e.error_message = string_field(v, bench, key); break;
      case Key::skipped: read_skipped(e, key, v); break;
      case Key::skip_message: e.skip_message = string_field(v, bench, key); break;
      case Key::process_run: store_present(e.process_run, e.has_process_run, integer_field(v, bench, key, 0)); break;
      case Key::aggregate_name: e.aggregate_name = string_field(v, bench, key); break;
      case Key::aggregate_unit: e.aggregate_unit = string_field(v, bench, key); break;
      case Key::label: e.label = string_field(v, bench, key); break;
      case Key::big_o:
      case Key::cpu_coefficient:
      case Key::real_coefficient:
      case Key::rms: e.complexity = true; break;  // a ->Complexity() fit: reported, never compared
      case Key::other: read_counter(bench, key, v); break;
    }
  }

  // 1.8 writes true; tolerate the enum's integer form (1 = with message, 2 = with error) too.
  void read_skipped(Entry& e, std::string_view key, element v) const {
    if (v.type() != element_type::INT64) {
      e.skipped = bool_field(v, e.raw_name, key);
      return;
    }
    const long long s = integer_field(v, e.raw_name, key, 0);
    if (s == 2) {
      e.error_occurred = true;
    } else {
      e.skipped = s != 0;
    }
  }

  // A numeric field Google Benchmark does not define is a user counter; other non-numeric fields are metadata
  // from a newer Google Benchmark, ignored, unless the name says it is a counter.
  void read_counter(std::string_view bench, std::string_view key, element v) {
    if (is_non_finite_sentinel(v)) {
      // A rate over a zero count, say: the counter has no value to compare, the repetition's times still count.
      if (!in_aggregate_) non_finite_in_entry_.push_back(key);
      return;
    }
    if (!is_number(v.type())) {
      if (looks_like_metric_counter(key)) {
        fail(bench, key, fmt::format("wrong type: {} instead of a number (counter)", type_name(v.type())));
      }
      return;
    }
    double d = 0;
    must(v.get_double().get(d));
    if (counters_.size() >= kMaxCountersPerEntry) {
      fail(bench, key, fmt::format("more than {} counters in one entry", kMaxCountersPerEntry));
    }
    for (const auto& seen : counters_) {
      if (seen.first == key) fail(bench, key, "appears twice in one entry");
    }
    counters_.emplace_back(key, d);
  }

  void check_process_run(const Entry& e) const {
    if (e.has_process_run && !stored_runs_) {
      fail(e.raw_name, "perfgate_process_run", "present, but the file has no top-level \"perfgate_process_runs\"");
    }
    if (stored_runs_ && !e.has_process_run && e.run_type != "aggregate") {
      fail(e.raw_name, "perfgate_process_run", "missing (the file is a perfgate baseline with several process runs)");
    }
    if (e.process_run >= static_cast<long long>(out_.contexts.size())) {
      fail(e.raw_name, "perfgate_process_run",
           fmt::format("{} but the file holds {} process run(s)", e.process_run, out_.contexts.size()));
    }
  }

  void check_iteration_entry(const Entry& e) const {
    if (e.run_type != "iteration") {
      fail(e.raw_name, "run_type",
           fmt::format("unknown run_type '{}' (expected \"iteration\" or \"aggregate\")", e.run_type));
    }
    if (e.has_run_name && e.run_name != e.raw_name) {
      fail(e.raw_name, "run_name", fmt::format("'{}' differs from the name of a per-repetition entry", e.run_name));
    }
  }

  // The state of the entry's benchmark in its process run; a second benchmark of the same name is refused.
  RunState& run_state(std::size_t slot, const Entry& e, std::size_t index, const std::string& normalised) {
    auto& runs = states_[slot];
    const auto run = static_cast<std::size_t>(e.process_run);
    if (runs.size() <= run) runs.resize(run + 1);
    RunState& st = runs[run];
    if (!st.seen) {
      st.seen = true;
      st.raw_name = e.raw_name;
      st.family = e.family;
      st.instance = e.instance;
      st.first_entry = index;
      return st;
    }
    if (st.raw_name != e.raw_name) {
      fail(e.raw_name, "name",
           fmt::format("duplicate benchmark: '{}' and '{}' both normalise to '{}'", st.raw_name, e.raw_name,
                       normalised));
    }
    if ((e.family >= 0 && st.family >= 0 && e.family != st.family) ||
        (e.instance >= 0 && st.instance >= 0 && e.instance != st.instance)) {
      fail(e.raw_name, "family_index",
           fmt::format("duplicate benchmark name: benchmarks[{}] and benchmarks[{}] are different benchmarks "
                       "(family/instance index {}/{} vs {}/{}) with the same name",
                       st.first_entry, index, st.family, st.instance, e.family, e.instance));
    }
    return st;
  }

  // Repetition bookkeeping (failed entries included: they occupy their repetition slot).
  void count_repetition(RunState& st, const Entry& e) const {
    if (e.repetitions >= 0) check_declared_repetitions(st, e);
    if (!e.has_rep_index) {
      ++st.unindexed;
      return;
    }
    const long long limit = st.declared_repetitions >= 0 ? st.declared_repetitions : kMaxRepetitions;
    if (e.rep_index >= limit) {
      fail(e.raw_name, "repetition_index",
           fmt::format("{} is out of range for {} repetitions", e.rep_index, st.declared_repetitions));
    }
    if (!mark_repetition_seen(st, e.rep_index)) {
      fail(e.raw_name, "repetition_index",
           fmt::format("repetition {} appears twice (duplicate benchmark name in one run?)", e.rep_index));
    }
    ++st.indexed;
  }

  void check_declared_repetitions(RunState& st, const Entry& e) const {
    if (e.repetitions > kMaxRepetitions) {
      fail(e.raw_name, "repetitions", fmt::format("{} is implausibly large", e.repetitions));
    }
    if (st.declared_repetitions < 0) {
      st.declared_repetitions = e.repetitions;
    } else if (st.declared_repetitions != e.repetitions) {
      fail(e.raw_name, "repetitions",
           fmt::format("{} here but {} in an earlier repetition of the same benchmark (duplicate name?)", e.repetitions,
                       st.declared_repetitions));
    }
  }

  // false when the repetition index was seen before.
  static bool mark_repetition_seen(RunState& st, long long rep_index) {
    if (rep_index >= kDenseRepetitions) return st.rep_seen_far.insert(rep_index).second;
    const auto k = static_cast<std::size_t>(rep_index);
    if (st.rep_seen.size() <= k) st.rep_seen.resize(k + 1, 0);
    const bool fresh = st.rep_seen[k] == 0;
    st.rep_seen[k] = 1;
    return fresh;
  }

  // A failed or skipped repetition: the benchmark's first error or skip message is kept.
  static void record_failure(BenchmarkResult& b, const Entry& e) {
    const std::string_view message = e.error_occurred ? e.error_message : e.skip_message;
    const std::string_view prefix = "skipped:";
    if (e.skipped || message.rfind(prefix, 0) == 0) {
      if (!b.skip_reason) {
        std::string_view reason = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
        while (!reason.empty() && reason.front() == ' ') reason.remove_prefix(1);
        b.skip_reason = std::string(reason);
      }
    } else if (!b.error) {
      b.error = message.empty() ? std::string("error_occurred without a message") : std::string(message);
    }
  }

  // A measured repetition: every time field must be there and sane. Its real and CPU time in ns.
  std::pair<double, double> measured_times_ns(RunState& st, const Entry& e) const {
    const std::string_view bench = e.raw_name;
    if (!e.has_real) fail(bench, "real_time", "missing");
    if (!e.has_cpu) fail(bench, "cpu_time", "missing");
    if (!e.has_unit) fail(bench, "time_unit", "missing");
    if (!e.has_iterations) fail(bench, "iterations", "missing");
    bool unit_ok = false;
    const double scale = unit_to_ns(e.time_unit, unit_ok);
    if (!unit_ok)
      fail(bench, "time_unit", fmt::format("unknown time unit '{}' (expected ns, us, ms or s)", e.time_unit));
    if (st.time_unit.empty()) {
      st.time_unit = std::string(e.time_unit);
    } else if (st.time_unit != e.time_unit) {
      fail(bench, "time_unit",
           fmt::format("'{}' here but '{}' in an earlier repetition of the same benchmark", e.time_unit, st.time_unit));
    }
    if (!(e.real_time > 0)) fail(bench, "real_time", fmt::format("{} is not a positive time", e.real_time));
    if (!(e.cpu_time >= 0)) fail(bench, "cpu_time", fmt::format("{} is a negative time", e.cpu_time));
    if (e.iterations < 1)
      fail(bench, "iterations", fmt::format("{} iterations for a measured repetition", e.iterations));
    const double real_ns = e.real_time * scale;
    const double cpu_ns = e.cpu_time * scale;
    if (!std::isfinite(real_ns) || !std::isfinite(cpu_ns)) fail(bench, "real_time", "overflows when converted to ns");
    return {real_ns, cpu_ns};
  }

  void append_sample(BenchmarkResult& b, const Entry& e, double real_ns, double cpu_ns) const {
    const int run = static_cast<int>(e.process_run) + run_offset_;
    b.time.samples.push_back(real_ns);
    b.time.process_run.push_back(run);
    b.cpu_time.samples.push_back(cpu_ns);
    b.cpu_time.process_run.push_back(run);
    b.iterations.push_back(e.iterations);
    for (const auto& [counter_name, value] : counters_) {
      if (!std::isfinite(value)) fail(e.raw_name, counter_name, "not a finite number");
      Metric& m = counter_metric(b, counter_name, e.raw_name);
      m.samples.push_back(value);
      m.process_run.push_back(run);
    }
  }

  // The benchmark's metric of a counter, added on its first sample.
  Metric& counter_metric(BenchmarkResult& b, std::string_view counter_name, std::string_view bench) const {
    for (Metric& c : b.counters) {
      if (c.name == counter_name) return c;
    }
    if (b.counters.size() >= kMaxCountersPerEntry) {
      fail(bench, counter_name, fmt::format("more than {} different counters in one benchmark", kMaxCountersPerEntry));
    }
    Metric fresh;
    fresh.name = std::string(counter_name);
    fresh.kind = classify_counter(fresh.name);
    b.counters.push_back(std::move(fresh));
    return b.counters.back();
  }

  // An entry with none of the time fields is no measurement (hand-made files such as Google Benchmark's own
  // ordering fixtures): noted, not refused. One field present and another missing is still bad input.
  static bool holds_no_time(const Entry& e) {
    return !e.has_real && !e.has_cpu && !e.has_unit && !e.has_iterations && !e.error_occurred && !e.skipped;
  }

  void finish() {
    use_aggregates_without_samples();
    leave_out_non_finite_counters();
    if (timeless_entries_ > 0)
      out_.add_load_note(file_, fmt::format("{} entr{} without real_time, cpu_time, time_unit or iterations: no "
                                            "measurement, nothing to compare",
                                            timeless_entries_, timeless_entries_ == 1 ? "y" : "ies"));
    for (std::size_t slot = 0; slot < out_.benchmarks.size(); ++slot) {
      BenchmarkResult& b = out_.benchmarks[slot];
      std::sort(b.counters.begin(), b.counters.end(), [](const Metric& x, const Metric& y) { return x.name < y.name; });
      const bool failed = b.error || b.skip_reason;  // a failed/skipped benchmark may stop early
      for (std::size_t run = 0; run < states_[slot].size(); ++run) {
        const RunState& st = states_[slot][run];
        if (!st.seen) continue;
        check_counters_complete(b, st, run);
        if (!failed) check_repetitions_complete(st, run);
      }
    }
  }

  // A counter NaN or infinite in any repetition of a benchmark is left out of that benchmark altogether (its
  // finite repetitions alone would be a biased sample), and the file gets one note per counter.
  void leave_out_non_finite_counters() {
    std::map<std::string, std::vector<std::string>> benchmarks_by_counter;
    for (const auto& [slot, names] : non_finite_counters_) {
      BenchmarkResult& b = out_.benchmarks[slot];
      for (const std::string& name : names) {
        std::erase_if(b.counters, [&name](const Metric& c) { return c.name == name; });
        b.non_finite_counters.insert(name);
        benchmarks_by_counter[name].push_back(b.raw_name.empty() ? b.name : b.raw_name);
      }
    }
    for (const auto& [counter, benchmarks] : benchmarks_by_counter)
      out_.add_load_note(file_, non_finite_counter_note(counter, benchmarks));
  }

  static std::string non_finite_counter_note(const std::string& counter, const std::vector<std::string>& benchmarks) {
    return fmt::format(
        "counter '{}' of {} is NaN or infinite in some repetitions (the benchmark divided by zero, say): left out of "
        "the comparison; the times still count",
        counter, first_names_quoted(benchmarks));
  }

  // ---- aggregates -------------------------------------------------------------------------------------------
  // Google Benchmark before 1.5 wrote no run_type: its aggregates are "<name>_mean" etc. after the repetitions of
  // <name>, and its complexity fits carry big_o / rms.
  void classify_old_style_aggregate(Entry& e) {
    if (e.has_run_type) return;
    if (e.complexity) {
      e.run_type = "aggregate";
      return;
    }
    for (std::string_view suffix : {"_mean", "_median", "_stddev", "_cv"}) {
      const std::string_view name = e.raw_name;
      if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) continue;
      const std::string_view base = name.substr(0, name.size() - suffix.size());
      if (raw_to_slot_.find(base) == raw_to_slot_.end()) return;  // a benchmark that happens to end so
      e.run_type = "aggregate";
      e.aggregate_name = suffix.substr(1);
      store_present(e.run_name, e.has_run_name, base);
      return;
    }
  }

  // A complexity fit (BigO, RMS) is noted; any other aggregate is kept until finish(), where it becomes the level
  // of a benchmark that has no per-repetition entry in its process run (aggregate-only files).
  void read_aggregate(const Entry& e) {
    const std::string_view base = e.has_run_name ? e.run_name : e.raw_name;
    if (e.complexity || e.aggregate_name == "BigO" || e.aggregate_name == "RMS") {
      // BigO and RMS make one note: add_load_note keeps one per text and file.
      out_.add_load_note(
          file_, fmt::format("'{}' holds a complexity fit (BigO/RMS): shown by Google Benchmark, not compared", base));
      return;
    }
    aggregates_.push_back(PendingAggregate{std::string(base), e, counters_});
  }

  // Where an aggregate may stand for a process run's level: the median first, then the mean, then an unnamed
  // aggregate (old files); a spread (stddev, cv, any percentage) never. -1: not a level.
  static int level_rank(const PendingAggregate& a) {
    if (a.entry.aggregate_unit == "percentage" || !a.entry.has_real) return -1;
    if (a.entry.aggregate_name == "median") return 0;
    if (a.entry.aggregate_name == "mean") return 1;
    if (a.entry.aggregate_name.empty()) return 2;
    return -1;
  }

  bool has_samples_in_run(std::string_view base, long long run) const {
    const auto it = raw_to_slot_.find(base);
    if (it == raw_to_slot_.end()) return false;
    const auto& runs = states_[it->second];
    return static_cast<std::size_t>(run) < runs.size() && runs[static_cast<std::size_t>(run)].seen;
  }

  // Benchmarks with aggregates and no per-repetition entry in a process run: their best aggregate is that run's one
  // level (--benchmark_report_aggregates_only files are judged from what they hold), and the file gets a note.
  void use_aggregates_without_samples() {
    std::map<std::pair<std::string, long long>, const PendingAggregate*> best;
    std::map<std::pair<std::string, long long>, std::vector<std::string>> names;
    for (const PendingAggregate& a : aggregates_) {
      if (has_samples_in_run(a.base, a.entry.process_run)) continue;
      const auto key = std::make_pair(a.base, a.entry.process_run);
      names[key].push_back(a.entry.aggregate_name.empty() ? std::string("unnamed")
                                                          : std::string(a.entry.aggregate_name));
      const int rank = level_rank(a);
      auto& chosen = best[key];
      if (rank >= 0 && (chosen == nullptr || rank < level_rank(*chosen))) chosen = &a;
    }
    std::set<std::string> used;
    for (const auto& [key, chosen] : best) {
      if (chosen == nullptr) {
        out_.add_load_note(file_, fmt::format("'{}' has only {} aggregate(s) and no repetition: nothing to compare",
                                              key.first, fmt::join(names[key], "/")));
        continue;
      }
      add_aggregate_level(*chosen);
      used.insert(key.first);
    }
    if (!used.empty()) out_.add_load_note(file_, aggregates_only_note(used));
  }

  // Names the benchmarks, so that the files of several process runs of one binary share the note.
  static std::string aggregates_only_note(const std::set<std::string>& names) {
    const bool one = names.size() == 1;
    return fmt::format(
        "{} hold{} aggregates only (ReportAggregatesOnly() in the benchmark, or "
        "--benchmark_report_aggregates_only): each process run gives {} one sample, its median (else mean), so only "
        "several process runs per side can judge {}",
        first_names_quoted(names), one ? "s" : "", one ? "it" : "each of them", one ? "it" : "them");
  }

  void add_aggregate_level(const PendingAggregate& a) {
    Entry e = a.entry;
    e.raw_name = a.base;
    e.run_type = "iteration";
    if (!e.has_iterations) store_present(e.iterations, e.has_iterations, 1LL);
    const std::size_t slot = benchmark_slot(e.raw_name, e.raw_name);
    BenchmarkResult& b = out_.benchmarks[slot];
    RunState& st = run_state(slot, e, 0, b.name);
    counters_ = a.counters;
    const auto [real_ns, cpu_ns] = measured_times_ns(st, e);
    append_sample(b, e, real_ns, cpu_ns);
    ++st.samples;
    b.aggregate_level = e.aggregate_name.empty() ? "aggregate" : std::string(e.aggregate_name);
    if (!e.label.empty()) b.label = std::string(e.label);
  }

  // Every counter must have a value in every measured repetition of this run (failed benchmarks
  // included: their measured repetitions are kept, and samples must stay aligned).
  void check_counters_complete(const BenchmarkResult& b, const RunState& st, std::size_t run) const {
    const int global_run = static_cast<int>(run) + run_offset_;
    for (const Metric& c : b.counters) {
      const auto n = std::count(c.process_run.begin(), c.process_run.end(), global_run);
      if (n != st.samples) {
        fail(st.raw_name, c.name,
             fmt::format("counter present in {} of {} repetitions (a counter must be set in every repetition)", n,
                         st.samples));
      }
    }
  }

  void check_repetitions_complete(const RunState& st, std::size_t run) const {
    const std::string& bench = st.raw_name;
    if (st.samples == 0) fail(bench, "real_time", "no measured repetition");
    if (st.declared_repetitions < 0) {
      if (st.unindexed > 0 && st.indexed > 0) {
        fail(bench, "repetition_index", "present in some repetitions and absent in others");
      }
      return;
    }
    const long long entries = st.samples + st.failed_entries;
    if (st.unindexed == 0 && entries < st.declared_repetitions) fail_missing_repetition(st, run, entries);
    if (entries != st.declared_repetitions) {
      fail(bench, "repetitions",
           fmt::format("{} per-repetition entries but \"repetitions\" says {}", entries, st.declared_repetitions));
    }
  }

  // Indices are distinct and below the declared count (checked per entry), so fewer entries
  // than declared means some index is absent: name the first one.
  [[noreturn]] void fail_missing_repetition(const RunState& st, std::size_t run, long long entries) const {
    const long long scan = std::min(st.declared_repetitions, kDenseRepetitions);
    long long missing = -1;
    for (long long k = 0; k < scan && missing < 0; ++k) {
      const auto ku = static_cast<std::size_t>(k);
      if (ku >= st.rep_seen.size() || st.rep_seen[ku] == 0) missing = k;
    }
    const std::string where = stored_runs_ ? fmt::format(" (stored process run {})", run) : std::string();
    if (missing >= 0) {
      fail(st.raw_name, "repetition_index",
           fmt::format("missing repetition: index {} of {} is absent{}", missing, st.declared_repetitions, where));
    }
    fail(st.raw_name, "repetition_index",
         fmt::format("missing repetitions: {} of {} present{}", entries, st.declared_repetitions, where));
  }

  const std::string& file_;
  ResultSet& out_;
  bool in_aggregate_ = false;
  bool stored_runs_ = false;
  int run_offset_ = 0;  // parse_results always starts from an empty ResultSet
  std::vector<std::vector<RunState>> states_;
  std::unordered_map<std::string_view, std::size_t> raw_to_slot_;  // views into the DOM's string buffer
  static constexpr std::size_t kNoSlot = static_cast<std::size_t>(-1);
  std::string_view last_name_;
  std::size_t last_slot_ = kNoSlot;
  std::vector<PendingAggregate> aggregates_;  // never grows after finish() starts: raw_to_slot_ may view its names
  std::size_t timeless_entries_ = 0;
  std::vector<std::pair<std::string_view, double>> counters_;
  std::vector<std::string_view> non_finite_in_entry_;                 // user counters of this entry written NaN/inf
  std::map<std::size_t, std::set<std::string>> non_finite_counters_;  // slot -> its counters left out
};

// Note: transparent huge pages (madvise) for the input and parser buffers were tried and dropped: on
// the project's VM they made the load time vary by 2x (compaction stalls) for no gain in the median.

// Google Benchmark writes a non-finite double unquoted (NaN, -nan, inf, Infinity): the coefficient of
// variation of a counter that is constant over the repetitions is 0/0, so any run with repetitions
// and, say, a "throttled" flag holds one in its "_cv" aggregate. Those bare tokens are replaced by a
// quoted sentinel, and the reader accepts the sentinel in aggregates (which it ignores) only; in a
// per-repetition entry it is still bad input, reported with the field.
std::string quote_non_finite_tokens(std::string_view text, bool& replaced) {
  static constexpr std::string_view kWords[] = {"Infinity", "NaN", "nan", "inf"};
  std::string out;
  out.reserve(text.size() + 64);
  bool in_string = false;
  replaced = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.push_back(c);
      continue;
    }
    const std::size_t start = (c == '-' || c == '+') ? i + 1 : i;
    bool matched = false;
    for (std::string_view w : kWords) {
      if (text.substr(start, w.size()) == w) {
        const std::size_t end = start + w.size();
        const bool word_ends = end >= text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])));
        if (!word_ends) continue;
        out.append("\"").append(w[0] == 'N' || w[0] == 'n' ? kNonFiniteNaN : kNonFiniteInf).append("\"");
        i = end - 1;
        matched = replaced = true;
        break;
      }
    }
    if (!matched) out.push_back(c);
  }
  return out;
}

ResultSet parse_padded(simdjson::dom::parser& parser, const char* data, std::size_t size, const std::string& file) {
  // A UTF-8 byte order mark (written by some Windows tools) is not JSON, but says nothing wrong about the data.
  if (size >= 3 && std::memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
    data += 3;
    size -= 3;
  }
  element root;
  const simdjson::error_code ec = parser.parse(data, size, false).get(root);
  if (ec != simdjson::SUCCESS) {
    bool replaced = false;
    const std::string quoted = quote_non_finite_tokens(std::string_view(data, size), replaced);
    if (replaced) {
      simdjson::dom::parser retry;
      const simdjson::padded_string padded(quoted);
      if (retry.parse(padded).get(root) == simdjson::SUCCESS) {
        ResultSet out;
        DocumentReader(file, out).read(root);
        return out;
      }
    }
    if (auto other = other_benchmark_format(std::string_view(data, size))) throw InputError(file, "", "", *other);
    SyntaxProblem p = SyntaxLocator(std::string_view(data, size)).run();
    if (p.found) throw InputError(file, p.benchmark, p.field, p.message);
    throw InputError(file, "", "", fmt::format("invalid JSON: {}", simdjson::error_message(ec)));
  }
  ResultSet out;
  DocumentReader(file, out).read(root);
  return out;
}

// What the file loaders keep between calls (one per thread): the parser and the input buffer.
// `perfgate compare` loads the baseline, then the current run; reusing buffers that are already
// faulted in saves ~0.1-0.2 s of page faults per 150 MB file. release_loader_memory() frees both.
struct LoaderCache {
  simdjson::dom::parser parser;
  char* buffer = nullptr;
  std::size_t capacity = 0;

  LoaderCache() = default;
  LoaderCache(const LoaderCache&) = delete;
  LoaderCache& operator=(const LoaderCache&) = delete;
  ~LoaderCache() { release(); }

  void release() {
    if (buffer != nullptr) ::munmap(buffer, capacity);
    buffer = nullptr;
    capacity = 0;
    parser = simdjson::dom::parser();
  }
  char* input(std::size_t bytes) {  // at least bytes + SIMDJSON_PADDING, or nullptr
    const std::size_t need = bytes + simdjson::SIMDJSON_PADDING;
    if (buffer != nullptr && capacity >= need) return buffer;
    if (buffer != nullptr) ::munmap(buffer, capacity);
    buffer = nullptr;
    capacity = 0;
    void* mem = ::mmap(nullptr, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    buffer = static_cast<char*>(mem);
    capacity = need;
    return buffer;
  }
};

LoaderCache& loader_cache() {
  static thread_local LoaderCache cache;
  return cache;
}

// A folder given where a results file goes: how to name the JSON files in it instead.
std::string directory_message(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> json;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json") json.push_back(it->path().filename().string());
  std::sort(json.begin(), json.end());
  if (json.empty()) return "is a directory, not a results file (it holds no .json file)";
  const std::string quoted = "'" + (fs::path(dir) / "*.json").string() + "'";
  return fmt::format(
      "is a directory, not a results file: name its files ({} .json there: {}{}), as a comma list or "
      "a quoted pattern such as {}",
      json.size(), json.front(), json.size() > 1 ? ", ..." : "", quoted);
}

ResultSet load_one(LoaderCache& cache, const std::string& file, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec || !fs::exists(status)) {
    const std::string why = ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file";
    throw InputError(file, "", "", fmt::format("cannot open: {}", why));
  }
  if (fs::is_directory(status)) throw InputError(file, "", "", directory_message(file));
  if (!fs::is_regular_file(status)) throw InputError(file, "", "", "not a regular file");
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw InputError(file, "", "", fmt::format("cannot read its size: {}", ec.message()));
  if (size > options.max_file_bytes) {
    throw InputError(
        file, "", "",
        fmt::format("file is {:.1f} MiB, above the {:.1f} MiB limit for a results file; refused without "
                    "reading (raise PERFGATE_MAX_INPUT_BYTES if it is genuine)",
                    static_cast<double>(size) / 1048576.0, static_cast<double>(options.max_file_bytes) / 1048576.0));
  }
  const auto n = static_cast<std::size_t>(size);
  char* buffer = cache.input(n);
  if (buffer == nullptr) throw InputError(file, "", "", "out of memory reading the file");
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) throw InputError(file, "", "", fmt::format("cannot open: {}", std::strerror(errno)));
  const std::size_t got = std::fread(buffer, 1, n, f);
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) throw InputError(file, "", "", "read error");
  std::memset(buffer + got, 0, simdjson::SIMDJSON_PADDING);
  return parse_padded(cache.parser, buffer, got, file);
}

}  // namespace

ResultSet parse_results(std::string_view json, const std::string& source_name) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  return parse_padded(parser, padded.data(), padded.size(), source_name);
}

void release_loader_memory() { loader_cache().release(); }

ResultSet load_result_file(const std::string& file, const LoadOptions& options) {
  return load_one(loader_cache(), file, options);
}

namespace {

void shift_process_runs(BenchmarkResult& b, int offset) {
  for (Metric* m : {&b.time, &b.cpu_time}) {
    for (int& r : m->process_run) r += offset;
  }
  for (Metric& c : b.counters) {
    for (int& r : c.process_run) r += offset;
  }
}

// Two files' entries of one benchmark must be timed alike and, where both measured it, carry the same counters.
void check_mergeable(const BenchmarkResult& a, const BenchmarkResult& b) {
  if (a.time_kind != b.time_kind) {
    throw InputError(b.source_file, b.raw_name, "name",
                     fmt::format("timed with {} here but {} in {} ('{}'): not comparable", b.time_kind, a.time_kind,
                                 a.source_file, a.raw_name));
  }
  if (a.time.samples.empty() || b.time.samples.empty()) return;
  for (const Metric& c : b.counters) {
    if (a.counter(c.name) == nullptr) {
      throw InputError(b.source_file, b.raw_name, c.name,
                       fmt::format("counter absent from the same benchmark in {}", a.source_file));
    }
  }
  for (const Metric& c : a.counters) {
    if (b.counter(c.name) == nullptr) {
      throw InputError(b.source_file, b.raw_name, c.name,
                       fmt::format("counter present in {} but absent here", a.source_file));
    }
  }
}

void append_samples(Metric& dst, const Metric& src) {
  dst.samples.insert(dst.samples.end(), src.samples.begin(), src.samples.end());
  dst.process_run.insert(dst.process_run.end(), src.process_run.begin(), src.process_run.end());
}

// A counter one file left out as non-finite is left out of the benchmark in every file of the side, so that the side's
// process runs keep the same counters.
void leave_out_each_others_non_finite_counters(BenchmarkResult& a, BenchmarkResult& b) {
  for (const std::string& name : b.non_finite_counters)
    std::erase_if(a.counters, [&name](const Metric& c) { return c.name == name; });
  for (const std::string& name : a.non_finite_counters)
    std::erase_if(b.counters, [&name](const Metric& c) { return c.name == name; });
  a.non_finite_counters.insert(b.non_finite_counters.begin(), b.non_finite_counters.end());
}

// b's samples appended to a's (counters kept sorted by name); the first failure or skip message wins.
void append_benchmark(BenchmarkResult& a, BenchmarkResult&& b) {
  append_samples(a.time, b.time);
  append_samples(a.cpu_time, b.cpu_time);
  a.iterations.insert(a.iterations.end(), b.iterations.begin(), b.iterations.end());
  for (Metric& c : b.counters) {
    auto pos = std::lower_bound(a.counters.begin(), a.counters.end(), c.name,
                                [](const Metric& m, const std::string& n) { return m.name < n; });
    if (pos != a.counters.end() && pos->name == c.name) {
      append_samples(*pos, c);
    } else {
      a.counters.insert(pos, std::move(c));
    }
  }
  if (!a.error && b.error) a.error = std::move(b.error);
  if (!a.skip_reason && b.skip_reason) a.skip_reason = std::move(b.skip_reason);
  if (a.aggregate_level.empty()) a.aggregate_level = std::move(b.aggregate_level);
  if (!b.label.empty()) a.label = std::move(b.label);
}

}  // namespace

void merge_results(ResultSet& into, ResultSet&& from) {
  const int offset = static_cast<int>(into.contexts.size());
  for (RunContext& c : from.contexts) into.contexts.push_back(std::move(c));
  into.add_load_notes(from.load_notes);
  for (BenchmarkResult& b : from.benchmarks) {
    shift_process_runs(b, offset);
    const auto it = into.index.find(b.name);
    if (it == into.index.end()) {
      into.index.emplace(b.name, into.benchmarks.size());
      into.benchmarks.push_back(std::move(b));
      continue;
    }
    BenchmarkResult& a = into.benchmarks[it->second];
    leave_out_each_others_non_finite_counters(a, b);
    check_mergeable(a, b);
    append_benchmark(a, std::move(b));
  }
}

ResultSet load_results(const std::vector<std::string>& files, const LoadOptions& options) {
  if (files.empty()) throw InputError("", "", "", "no results file given");
  ResultSet all;
  for (const std::string& file : files) {
    ResultSet one = load_one(loader_cache(), file, options);
    if (all.contexts.empty() && all.benchmarks.empty()) {
      all = std::move(one);
    } else {
      merge_results(all, std::move(one));
    }
  }
  return all;
}

std::string read_config_file(const std::string& file, const std::string& what, std::size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(file, "", "", "is a directory, expected a JSON file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", "", "cannot open " + what);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > max_bytes)
    throw InputError(file, "", "", fmt::format("{} larger than {} MiB", what, max_bytes >> 20));
  return text;
}

}  // namespace perfgate
