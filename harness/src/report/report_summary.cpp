// The Markdown summary: what a pull-request comment or a job summary shows. Its sections are also the top of the
// full report. Every list in it is cut at a count and says how many more there are and where, and the whole is
// cut at ReportOptions::summary_max_chars, so its size is bounded whatever the run.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "perfgate/report.hpp"
#include "report/report_internal.hpp"

namespace perfgate {
namespace report_detail {
namespace {

constexpr std::size_t kNameBytes = 200;     // a name longer than this is cut in the summary (whole in the full report)
constexpr std::size_t kMessageBytes = 300;  // a failure or skip message, likewise
constexpr std::size_t kNotJudgedLines = 12;
constexpr std::size_t kImprovementRows = 10;  // good news needs no action: a short list, the rest in the full report
constexpr std::size_t kRunNotes = 20;         // the run's own notes, folded at the end of the summary

std::string share_text(double share) {
  if (share >= 0.095) return fmt::format("{:.0f}%", 100 * share);
  if (share >= 0.0095) return fmt::format("{:.1f}%", 100 * share);
  return fmt::format("{:.2g}%", 100 * share);
}

std::string name_md(const std::string& name) {
  return "<code>" + escape_name_markdown(cut(name, kNameBytes)) + "</code>";
}

// "`a`, `b`, `c` and 4 more"
std::string names_md(const std::vector<std::string>& names, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < max; ++i) out += (i ? ", " : "") + name_md(names[i]);
  if (names.size() > max) out += fmt::format(" and {} more", names.size() - max);
  return out;
}

std::vector<std::string> names_of(const std::vector<const BenchmarkComparison*>& members) {
  std::vector<std::string> out;
  out.reserve(members.size());
  for (const auto* b : members) out.push_back(b->name);
  return out;
}

// Advice as a sentence of its own: its first letter upper-case.
std::string sentence(std::string text) {
  if (!text.empty() && text[0] >= 'a' && text[0] <= 'z') text[0] = static_cast<char>(text[0] - 'a' + 'A');
  return text;
}

std::string escape_md(std::string_view text) { return escape_markdown(text); }

std::string where_the_rest_is(const ReportOptions& o, bool full) {
  if (full) return "in the Results below";
  if (o.full_report_link.empty()) return "in the full report";
  return fmt::format("in the [full report]({})", o.full_report_link);
}

// "- name: what changed; 95% interval ..." of a regressed, failed or improved benchmark, without the line's end.
std::string change_item(const BenchmarkComparison& b, double confidence) {
  std::string md = "- " + name_md(b.name) + ": " + what_changed(b, escape_md);
  const MetricComparison* m = b.verdict == Verdict::failed ? nullptr : b.driving_metric();
  if (m != nullptr && m->interval_bounded)
    md += fmt::format("; {:.0f}% interval {}", confidence, interval_in_words(*m));
  return md;
}

// One item per failed or regressed benchmark, a sentence each: a list uses the page's width, where a table of long
// names squeezes the words into tall cells and pushes "not judged" off the first screen.
void regressions_section(std::string& md, const ComparisonReport& r, const SummaryModel& s, const ReportOptions& o,
                         bool full) {
  if (s.regressions.empty()) return;
  std::string heading = regressions_heading(s);
  heading[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(heading[0])));
  md += "### " + heading + "\n\n";
  const double confidence = 100 * (1 - r.options.alpha);
  std::size_t shown = 0;
  for (const auto* b : s.regressions) {
    if (shown++ == o.summary_max_rows) break;
    md += change_item(*b, confidence);
    if (const std::string d = detectable_in_words(*b); !d.empty()) md += "; smallest detectable " + d;
    const auto cause = o.likeliest_causes.find(b->name);
    if (cause != o.likeliest_causes.end())
      md += ". Likeliest cause: " + escape_markdown(cut(cause->second, kMessageBytes));
    md += "\n";
  }
  md += "\n";
  if (s.regressions.size() > o.summary_max_rows)
    md += fmt::format("{} more failed or regressed benchmarks are listed {}.\n\n",
                      s.regressions.size() - o.summary_max_rows, where_the_rest_is(o, full));
}

// The improved benchmarks, largest first, in the regressions' words: a change that made things faster is named, not
// only counted. After the notes, which say whether the verdict can be trusted at all.
void improvements_section(std::string& md, const ComparisonReport& r, const SummaryModel& s, const ReportOptions& o,
                          bool full) {
  if (s.improvements.empty()) return;
  md += "### Improvements\n\n";
  const double confidence = 100 * (1 - r.options.alpha);
  for (std::size_t i = 0; i < s.improvements.size() && i < kImprovementRows; ++i) {
    md += change_item(*s.improvements[i], confidence) + "\n";
  }
  md += "\n";
  if (s.improvements.size() > kImprovementRows)
    md += fmt::format("{} more improved benchmarks are listed {}.\n\n", s.improvements.size() - kImprovementRows,
                      where_the_rest_is(o, full));
}

std::string not_judged_line(const NotJudgedLine& line, const ReportOptions& o) {
  std::string out = fmt::format("- **{} {}**", line.members.size(), escape_markdown(line.what));
  const bool skips = line.what == "skipped";
  // A skip reason says enough with its suites when many benchmarks share it; other lines name their benchmarks.
  if (skips && line.members.size() > o.summary_max_names) {
    std::vector<std::string> suites;
    for (const auto& suite : line.suites) suites.push_back(suite);
    out += " in " + names_md(suites, o.summary_max_names);
  } else {
    out += " (" + names_md(names_of(line.members), o.summary_max_names) + ")";
  }
  if (!line.reason.empty()) out += ": " + escape_markdown(cut(line.reason, kMessageBytes));
  if (!line.advice.empty()) out += "; " + escape_markdown(line.advice);
  return out + "\n";
}

void not_judged_section(std::string& md, const SummaryModel& s, const ReportOptions& o, bool full) {
  if (s.not_judged.empty()) return;
  md += "### Not judged\n\n";
  for (std::size_t i = 0; i < s.not_judged.size() && i < kNotJudgedLines; ++i)
    md += not_judged_line(s.not_judged[i], o);
  if (s.not_judged.size() > kNotJudgedLines)
    md += fmt::format("- {} more reasons are listed {}.\n", s.not_judged.size() - kNotJudgedLines,
                      full ? "under Skipped below" : where_the_rest_is(o, full));
  md += "\n";
}

void suite_row(std::string& md, const std::string& name, const VerdictCounts& c) {
  const auto bold = [](int n) { return n == 0 ? std::string("0") : fmt::format("**{}**", n); };
  md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", name, c.total(), bold(c.failed), bold(c.regression),
                    c.improvement, c.unchanged, c.noisy, c.missing + c.new_benchmark + c.skipped);
}

void add_counts(VerdictCounts& into, const VerdictCounts& c) {
  into.regression += c.regression;
  into.improvement += c.improvement;
  into.unchanged += c.unchanged;
  into.noisy += c.noisy;
  into.missing += c.missing;
  into.new_benchmark += c.new_benchmark;
  into.failed += c.failed;
  into.skipped += c.skipped;
}

void suites_section(std::string& md, const SummaryModel& s, const ReportOptions& o) {
  if (s.suites.empty()) return;
  md += "### Per suite\n\n";
  md += "| suite | benchmarks | failed | regressed | improved | unchanged | too noisy | not judged |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  VerdictCounts rest, all;
  for (std::size_t i = 0; i < s.suites.size(); ++i) {
    add_counts(all, s.suites[i].counts);
    if (i < o.summary_max_suites) suite_row(md, name_md(s.suites[i].suite), s.suites[i].counts);
    else add_counts(rest, s.suites[i].counts);
  }
  if (s.suites.size() > o.summary_max_suites)
    suite_row(md, fmt::format("{} more suites", s.suites.size() - o.summary_max_suites), rest);
  if (s.suites.size() > 1) suite_row(md, "**all**", all);
  md += "\n";
}

void notes_section(std::string& md, const SummaryModel& s, const ReportOptions& o) {
  if (s.notes.empty()) return;
  md += "### Notes\n\n";
  for (const auto& note : s.notes) {
    md += "- ";
    if (!note.names.empty()) md += names_md(note.names, o.summary_max_names) + ": " + escape_markdown(note.text);
    else md += escape_markdown(sentence(note.text));
    if (!note.advice.empty()) md += ". " + escape_markdown(sentence(note.advice));
    md += ".";
    if (!note.glossary_term.empty() && !o.glossary_link.empty())
      md += fmt::format(" ([{}]({}))", escape_markdown(note.glossary_term), o.glossary_link);
    md += "\n";
  }
  md += "\n";
}

// The run's own notes (costs, gates chosen, what the analysis did), folded: the summary's notes above say what
// matters in plain words, these keep the rest at hand.
void run_notes_folded(std::string& md, const ComparisonReport& r, const ReportOptions& o) {
  if (r.notes.empty()) return;
  md += fmt::format("<details><summary>Run notes ({})</summary>\n\n", r.notes.size());
  for (std::size_t i = 0; i < r.notes.size() && i < kRunNotes; ++i)
    md += "- " + escape_markdown(cut(r.notes[i], kMessageBytes)) + "\n";
  if (r.notes.size() > kRunNotes)
    md += fmt::format("- {} more {}.\n", r.notes.size() - kRunNotes, where_the_rest_is(o, false));
  md += "\n</details>\n\n";
}

// "[Full report](...) · [Dashboard](...)", empty when there is no link.
std::string links_line(const ReportOptions& o) {
  std::string out;
  if (!o.full_report_link.empty()) out += fmt::format("[Full report]({})", o.full_report_link);
  if (!o.dashboard_link.empty()) out += fmt::format("{}[Dashboard]({})", out.empty() ? "" : " · ", o.dashboard_link);
  if (!o.glossary_link.empty()) out += fmt::format("{}[Words used]({})", out.empty() ? "" : " · ", o.glossary_link);
  return out;
}

// The summary cut at a line end below `max` characters, saying so, when the lists' own limits were not enough.
std::string bounded(std::string md, const ReportOptions& o) {
  if (md.size() <= o.summary_max_chars) return md;
  const std::string tail = fmt::format("\n**This summary was cut at {} characters**: the rest is {}.\n",
                                       o.summary_max_chars, where_the_rest_is(o, false));
  const std::size_t room = o.summary_max_chars > tail.size() ? o.summary_max_chars - tail.size() : 0;
  const std::size_t end = md.rfind('\n', room);
  md.resize(end == std::string::npos ? 0 : end + 1);
  return md + tail;
}

}  // namespace

std::string cut(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // not inside a UTF-8 sequence
  return text.substr(0, end) + "...";
}

std::string metric_label(const BenchmarkComparison& b, const MetricComparison& m) {
  const double share = phase_share(b, m);
  if (!std::isfinite(share)) return m.name;
  return fmt::format("{} ({} of the time)", m.name, share_text(share));
}

std::string what_changed(const BenchmarkComparison& b, std::string (*escape)(std::string_view)) {
  if (b.verdict == Verdict::failed)
    return fmt::format("failed{}: {}", b.failed_in.empty() ? "" : " in " + escape(b.failed_in),
                       escape(cut(b.message.value_or(b.reason), kMessageBytes)));
  const MetricComparison* m = b.driving_metric();
  if (m == nullptr) return escape(cut(b.reason, kMessageBytes));
  std::string medians = fmt::format("was {}, now {}", escape(format_metric_value(m->kind, m->name, m->baseline_median)),
                                    escape(format_metric_value(m->kind, m->name, m->current_median)));
  // Judged against the suite's common drift, the change can differ from the medians' own, even in direction: say
  // which is which, or "13.9% faster (was 0.225, now 0.224)" reads as a contradiction.
  if (m->common_shift != 0 && !reads_as_no_change(m->change - m->raw_change))
    medians += fmt::format(": {} as measured; the suite's common drift taken out",
                           change_in_words(m->kind, m->name, m->raw_change));
  std::string out =
      fmt::format("{} {} ({})", escape(metric_label(b, *m)), change_in_words(m->kind, m->name, m->change), medians);
  // A phase's change next to the whole's: a slower small phase of a faster benchmark reads as what it is.
  const MetricComparison* time = b.metric("time");
  if (m->kind == MetricKind::phase && time != nullptr && std::isfinite(time->change))
    out += "; the whole benchmark " + change_in_words(time->kind, time->name, time->change);
  return out;
}

std::string detectable_in_words(const BenchmarkComparison& b) {
  const double d = b.detectable_change();
  if (!std::isfinite(d)) return "";
  const MetricComparison* time = b.metric("time");
  const MetricComparison* m = time != nullptr && std::isfinite(time->detectable_change) ? time : b.driving_metric();
  return m == nullptr ? "" : change_in_words(m->kind, m->name, d);
}

std::string markdown_title(const ComparisonReport& r, const ReportOptions& o) {
  std::string title = "perfgate";
  if (!o.title.empty()) title = o.title.rfind("perfgate", 0) == 0 ? o.title : "perfgate " + o.title;
  std::string md = fmt::format("## {}: {}\n\n", escape_markdown(title), escape_markdown(summary_line(r)));
  // A run that judged nothing says, right under its verdict, what would judge it.
  if (!r.next_step.empty()) md += "**Next step:** " + escape_markdown(r.next_step) + "\n\n";
  return md;
}

void summary_sections(std::string& md, const ComparisonReport& r, const SummaryModel& s, const ReportOptions& o,
                      bool full) {
  regressions_section(md, r, s, o, full);
  not_judged_section(md, s, o, full);
  suites_section(md, s, o);
  notes_section(md, s, o);
  improvements_section(md, r, s, o, full);  // good news last: the notes on trusting the verdict come first
}

}  // namespace report_detail

std::string render_summary(const ComparisonReport& r, const ReportOptions& o) {
  using namespace report_detail;
  const SummaryModel s = summarise(r);
  std::string md = markdown_title(r, o);
  const std::string links = links_line(o);
  if (!links.empty()) md += links + "\n\n";
  summary_sections(md, r, s, o, false);
  run_notes_folded(md, r, o);
  if (!links.empty()) md += links + "\n";
  return bounded(std::move(md), o);
}

}  // namespace perfgate
