// One repetition of a GPU timeline as a small self-contained SVG (timeline.hpp, render_svg).
#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "perfgate/timeline.hpp"

namespace perfgate::timeline {

namespace {

constexpr double kWidth = 960, kLabel = 110, kLane = 18, kTop = 26, kLegendRow = 16;
// Distinct on white and for the common colour-vision deficiencies (Okabe-Ito, then darker tones).
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                    "#D55E00", "#F0E442", "#000000", "#7F3C8D", "#11A579"};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::map<std::uint32_t, int> lanes_of(const Step& s) {
  std::map<std::uint32_t, int> lanes;
  for (const Activity* a : s.activities) lanes.emplace(a->stream, 0);
  int i = 0;
  for (auto& [stream, lane] : lanes) lane = i++;
  return lanes;
}

std::map<std::string, const char*> colours_of(const Step& s) {
  std::map<std::string, const char*> colours;
  std::size_t next = 0;
  for (const auto& r : s.activity_ranges)
    if (colours.emplace(r, kPalette[next % std::size(kPalette)]).second) ++next;
  return colours;
}

std::string range_label(const std::string& r) { return r.empty() ? "(no range)" : r; }

std::string activity_rect(const Step& s, std::size_t i, double x0, double scale, double y, const char* colour) {
  const Activity& a = *s.activities[i];
  const double x = x0 + static_cast<double>(a.start_ns - s.start_ns) * scale;
  const double w = std::max(0.5, a.duration() * scale);
  // Copies are outlined and lighter, so a copy under compute stays visible.
  const std::string style =
      a.is_copy() ? fmt::format("fill=\"{}\" fill-opacity=\"0.45\" stroke=\"#222\" stroke-width=\"0.6\"", colour)
                  : fmt::format("fill=\"{}\"", colour);
  return fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" {}><title>{} ({}): {:.1f} "
      "us</title></rect>\n",
      x, y + 2, w, kLane - 4, style, xml_escape(a.name), xml_escape(range_label(s.activity_ranges[i])),
      a.duration() / 1e3);
}

std::string gap_rects(const Step& s, double x0, double scale, double height) {
  std::string out;
  for (const Gap& g : s.gaps) {
    const double w = g.length_ns * scale;
    if (w < 0.5) continue;  // launch gaps of a microsecond would only grey the whole picture
    out += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" fill-opacity=\"0.35\">"
        "<title>idle {:.1f} us after {} ({})</title></rect>\n",
        x0 + g.start_ns * scale, kTop, w, height, g.cause == GapCause::sync ? "#d62728" : "#999999", g.length_ns / 1e3,
        xml_escape(g.after), g.cause == GapCause::sync ? "host sync" : "launch");
  }
  return out;
}

// The legend's items in rows that fit the width; `y` ends below the last row.
std::string legend(const std::map<std::string, const char*>& colours, double& y) {
  std::string out;
  double x = 10;
  const auto item = [&](const std::string& label, const std::string& swatch) {
    const double width = 24 + 6.5 * static_cast<double>(label.size());
    if (x > 10 && x + width > kWidth) {
      x = 10;
      y += kLegendRow;
    }
    out += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"10\" height=\"10\" {}/>", x, y, swatch);
    out += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n", x + 14, y + 9, xml_escape(label));
    x += width;
  };
  for (const auto& [range, colour] : colours) item(range_label(range), fmt::format("fill=\"{}\"", colour));
  item("copy (outlined)", "fill=\"#ccc\" stroke=\"#222\"");
  item("idle after a host sync", "fill=\"#d62728\" fill-opacity=\"0.35\"");
  item("idle, waiting for a launch", "fill=\"#999\" fill-opacity=\"0.35\"");
  y += kLegendRow;
  return out;
}

}  // namespace

std::string render_svg(const Step& s, const std::string& title) {
  const auto lanes = lanes_of(s);
  const auto colours = colours_of(s);
  const double plot = kWidth - kLabel - 10;
  const double scale = s.span_ns > 0 ? plot / s.span_ns : 0;
  const double lanes_height = kLane * static_cast<double>(lanes.size());
  std::string body;
  for (const auto& [stream, lane] : lanes)
    body += fmt::format("<text x=\"10\" y=\"{:.1f}\">stream {}</text>\n", kTop + kLane * lane + 13, stream);
  body += gap_rects(s, kLabel, scale, lanes_height);
  for (std::size_t i = 0; i < s.activities.size(); ++i)
    body += activity_rect(s, i, kLabel, scale, kTop + kLane * lanes.at(s.activities[i]->stream),
                          colours.at(s.activity_ranges[i]));
  const double axis = kTop + lanes_height + 12;
  body += fmt::format(
      "<text x=\"{:.0f}\" y=\"{:.0f}\">0</text><text x=\"{:.0f}\" y=\"{:.0f}\" "
      "text-anchor=\"end\">{:.3f} ms</text>\n",
      kLabel, axis, kWidth - 10, axis, s.span_ns / 1e6);
  double height = axis + 8;
  body += legend(colours, height);
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
             "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
             "<text x=\"10\" y=\"16\" font-size=\"13\">{} ({:.3f} ms, {} activities, {} idle gaps)</text>\n",
             kWidth, height + 4, xml_escape(title), s.span_ns / 1e6, s.activities.size(), s.gaps.size()) +
         body + "</svg>\n";
}

}  // namespace perfgate::timeline
