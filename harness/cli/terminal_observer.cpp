#include "terminal_observer.hpp"

#include <unistd.h>

namespace perfgate::cli {

TerminalObserver::TerminalObserver(std::FILE* out) : out_(out), tty_(::isatty(::fileno(out)) != 0) {}

void TerminalObserver::print_line(const std::string& line) {
  clear_progress();
  std::fprintf(out_, "[perfgate] %s\n", line.c_str());
  std::fflush(out_);
}

void TerminalObserver::on_progress(const std::string& line) {
  if (tty_) {
    std::fprintf(out_, "\r\033[K[perfgate] %s", line.c_str());
    std::fflush(out_);
    progress_shown_ = true;
    return;
  }
  // A log file gets a line at most every 10 s: one per repetition would drown the rest.
  const auto now = std::chrono::steady_clock::now();
  if (now - last_progress_ < std::chrono::seconds(10)) return;
  last_progress_ = now;
  std::fprintf(out_, "[perfgate] %s\n", line.c_str());
  std::fflush(out_);
}

void TerminalObserver::clear_progress() {
  if (!tty_ || !progress_shown_) return;
  std::fprintf(out_, "\r\033[K");
  progress_shown_ = false;
}

std::shared_ptr<RunObserver> terminal_observer(bool quiet) {
  if (quiet) return nullptr;
  return std::make_shared<TerminalObserver>(stderr);
}

}  // namespace perfgate::cli
