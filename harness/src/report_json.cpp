// JSON verdicts for machines (schema "perfgate.report/1"; documented in docs/statistics.md).
// Written by hand into one buffer: a DOM (nlohmann) took ~0.85 s CPU for 10,000 benchmarks, more than
// the whole statistics engine; this writer takes a few tens of milliseconds.
#include <cmath>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "perfgate/report.hpp"
#include "report_internal.hpp"

namespace perfgate {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], 0 when invalid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len;
  unsigned min;
  unsigned cp;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1fu, min = 0x80;
  else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0fu, min = 0x800;
  else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

class Writer {
 public:
  std::string out;

  void str(std::string_view s) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
      const char c = s[i];
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') out += "\\\"";
      else if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (u < 0x20 || u == 0x7f) out += fmt::format("\\u{:04x}", u);
      else if (u < 0x80) out += c;
      else {
        const std::size_t len = utf8_sequence(s, i);
        if (len == 0) {
          out += "\\ufffd";  // invalid UTF-8 (the loader passes bytes through): replaced, never thrown on
          ++i;
          continue;
        }
        out.append(s.data() + i, len);
        i += len;
        continue;
      }
      ++i;
    }
    out += '"';
  }
  // Non-finite numbers become null; finite ones keep 10 significant digits (stable golden files, and far
  // more precise than any measurement).
  void num(double v) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    if (v == 0) v = 0;  // no "-0"
    fmt::format_to(std::back_inserter(out), "{:.10g}", v);
  }
  void integer(long long v) { fmt::format_to(std::back_inserter(out), "{}", v); }
  void boolean(bool v) { out += v ? "true" : "false"; }
  void null() { out += "null"; }
  void key(std::string_view k) {
    str(k);
    out += ": ";
  }
};

void side(Writer& w, const SideInfo& s) {
  w.out += "{";
  w.key("machine_class"); w.str(s.machine_class); w.out += ", ";
  w.key("commit"); w.str(s.commit); w.out += ", ";
  w.key("date"); w.str(s.date); w.out += ", ";
  w.key("host"); w.str(s.host); w.out += ", ";
  w.key("process_runs"); w.integer(s.process_runs); w.out += ", ";
  w.key("files"); w.out += "[";
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    if (i) w.out += ", ";
    w.str(s.files[i]);
  }
  w.out += "]}";
}

void metric(Writer& w, const MetricComparison& m) {
  w.out += "{";
  w.key("name"); w.str(m.name); w.out += ", ";
  w.key("kind"); w.str(metric_kind_name(m.kind)); w.out += ", ";
  w.key("gated"); w.boolean(m.gated); w.out += ", ";
  w.key("verdict"); if (m.gated) w.str(to_string(m.verdict)); else w.null(); w.out += ", ";
  w.key("baseline_median"); w.num(m.baseline_median); w.out += ", ";
  w.key("current_median"); w.num(m.current_median); w.out += ", ";
  w.key("change"); w.num(m.change); w.out += ", ";
  w.key("raw_change"); w.num(m.raw_change); w.out += ", ";
  w.key("common_shift"); w.num(m.common_shift); w.out += ", ";
  const bool iv = m.gated && m.interval_bounded;
  w.key("change_lower"); if (iv) w.num(m.change_lower); else w.null(); w.out += ", ";
  w.key("change_upper"); if (iv) w.num(m.change_upper); else w.null(); w.out += ", ";
  w.key("p_value"); if (m.gated) w.num(m.p_value); else w.null(); w.out += ", ";
  w.key("p_adjusted"); if (m.gated) w.num(m.p_adjusted); else w.null(); w.out += ", ";
  w.key("threshold"); w.num(m.threshold); w.out += ", ";
  w.key("detectable_change"); w.num(m.detectable_change); w.out += ", ";
  w.key("learned_noise"); w.boolean(m.learned_noise); w.out += ", ";
  w.key("n_baseline"); w.integer(static_cast<long long>(m.n_baseline)); w.out += ", ";
  w.key("n_current"); w.integer(static_cast<long long>(m.n_current)); w.out += ", ";
  w.key("runs_baseline"); w.integer(m.runs_baseline); w.out += ", ";
  w.key("runs_current"); w.integer(m.runs_current); w.out += ", ";
  w.key("dispersion"); w.num(m.dispersion); w.out += ", ";
  w.key("run_noise"); w.num(m.run_noise); w.out += ", ";
  w.key("run_noise_estimated"); w.boolean(m.run_noise_estimated); w.out += ", ";
  w.key("method"); w.str(m.method); w.out += ", ";
  w.key("reason"); w.str(m.reason);
  w.out += "}";
}

}  // namespace

std::string render_json(const ComparisonReport& r, const ReportOptions& o) {
  const auto& opt = r.options;
  Writer w;
  w.out.reserve(1024 + r.benchmarks.size() * 1500);
  w.out += "{\n ";
  w.key("schema"); w.str("perfgate.report/1"); w.out += ",\n ";
  w.key("title"); w.str(o.title); w.out += ",\n ";
  w.key("outcome"); w.str(outcome_word(r.exit_code)); w.out += ",\n ";
  w.key("exit_code"); w.integer(r.exit_code); w.out += ",\n ";
  w.key("summary"); w.str(summary_line(r)); w.out += ",\n ";
  w.key("counts");
  w.out += "{";
  const std::pair<const char*, int> counts[] = {{"regression", r.counts.regression}, {"improvement", r.counts.improvement},
                                                {"unchanged", r.counts.unchanged},   {"noisy", r.counts.noisy},
                                                {"missing", r.counts.missing},       {"new", r.counts.new_benchmark},
                                                {"failed", r.counts.failed},         {"skipped", r.counts.skipped},
                                                {"total", r.counts.total()}};
  bool first = true;
  for (const auto& [k, v] : counts) {
    if (!first) w.out += ", ";
    first = false;
    w.key(k);
    w.integer(v);
  }
  w.out += "},\n ";
  w.key("notes");
  w.out += "[";
  for (std::size_t i = 0; i < r.notes.size(); ++i) {
    if (i) w.out += ", ";
    w.str(r.notes[i]);
  }
  w.out += "],\n ";
  w.key("options");
  w.out += "{";
  w.key("alpha"); w.num(opt.alpha); w.out += ", ";
  w.key("default_threshold");
  w.num(opt.threshold_override ? *opt.threshold_override : opt.config.default_threshold.value_or(opt.threshold));
  w.out += ", ";
  w.key("threshold_from_flag"); w.boolean(opt.threshold_override.has_value()); w.out += ", ";
  w.key("threshold_config"); w.str(opt.config.source); w.out += ", ";
  w.key("correction");
  w.str(opt.correction == Correction::benjamini_hochberg ? "benjamini-hochberg"
        : opt.correction == Correction::holm             ? "holm"
                                                         : "none");
  w.out += ", ";
  w.key("interval"); w.str(opt.interval == IntervalMethod::bootstrap ? "bootstrap" : "hodges-lehmann"); w.out += ", ";
  w.key("run_noise"); w.num(opt.run_noise); w.out += ", ";
  w.key("run_noise_df"); w.num(opt.run_noise_df); w.out += ", ";
  w.key("session_noise"); w.num(opt.session_noise); w.out += ", ";
  w.key("paired_runs"); w.boolean(opt.paired_runs); w.out += ", ";
  w.key("common_mode"); w.boolean(opt.common_mode); w.out += ", ";
  w.key("contention_check"); w.boolean(opt.contention_check); w.out += ", ";
  w.key("cpu_run_noise"); w.num(opt.cpu_run_noise); w.out += ", ";
  w.key("max_dispersion"); w.num(opt.max_dispersion); w.out += ", ";
  w.key("min_samples"); w.integer(opt.min_samples);
  w.out += "},\n ";
  w.key("baseline"); side(w, r.baseline); w.out += ",\n ";
  w.key("current"); side(w, r.current); w.out += ",\n ";
  w.key("suite_drift");
  w.out += "{";
  first = true;
  for (const auto& [suite, d] : r.suite_drift) {
    if (!first) w.out += ", ";
    first = false;
    w.key(suite);
    w.out += "{";
    w.key("shift"); w.num(d.shift); w.out += ", ";
    w.key("spread"); w.num(d.spread); w.out += ", ";
    w.key("metrics"); w.integer(d.metrics);
    w.out += "}";
  }
  w.out += "},\n ";
  w.key("machine_mismatch_allowed"); w.boolean(r.machine_mismatch_allowed); w.out += ",\n ";
  w.key("command"); w.str(o.command); w.out += ",\n ";
  w.key("benchmarks");
  w.out += "[";
  first = true;
  for (const BenchmarkComparison* b : r.sorted()) {
    w.out += first ? "\n  {" : ",\n  {";
    first = false;
    w.key("name"); w.str(b->name); w.out += ", ";
    w.key("raw_name"); w.str(b->raw_name); w.out += ", ";
    w.key("suite"); w.str(b->suite); w.out += ",\n   ";
    w.key("verdict"); w.str(to_string(b->verdict)); w.out += ", ";
    w.key("driver"); if (b->driver.empty()) w.null(); else w.str(b->driver); w.out += ", ";
    w.key("threshold"); w.num(b->threshold); w.out += ", ";
    w.key("detectable_change"); w.num(b->detectable_change()); w.out += ",\n   ";
    w.key("reason"); w.str(b->reason); w.out += ",\n   ";
    w.key("message"); if (b->message) w.str(*b->message); else w.null(); w.out += ",\n   ";
    w.key("contention_baseline"); w.num(b->contention_baseline); w.out += ", ";
    w.key("contention_current"); w.num(b->contention_current); w.out += ", ";
    w.key("cpu_time_change"); w.num(b->cpu_time_change); w.out += ",\n   ";
    w.key("metrics");
    w.out += "[";
    for (std::size_t i = 0; i < b->metrics.size(); ++i) {
      w.out += i ? ",\n    " : "\n    ";
      metric(w, b->metrics[i]);
    }
    w.out += b->metrics.empty() ? "]}" : "\n   ]}";
  }
  w.out += first ? "]\n}\n" : "\n ]\n}\n";
  return std::move(w.out);
}

}  // namespace perfgate
