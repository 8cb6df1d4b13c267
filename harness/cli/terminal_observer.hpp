#pragma once
// The CLI's RunObserver (observer.hpp): "[perfgate] ..." lines on stderr; the progress of the running
// process rewritten in place on a terminal, else printed at most every 10 s.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "perfgate/observer.hpp"

namespace perfgate::cli {

class TerminalObserver final : public RunObserver {
 public:
  explicit TerminalObserver(std::FILE* out);

  void on_phase(const std::string& line) override { print_line(line); }
  void on_process_start(const std::string& line) override { print_line(line); }
  void on_progress(const std::string& line) override;
  void on_process_done() override { clear_progress(); }
  void on_warning(const std::string& line) override { print_line(line); }
  void on_note(const std::string& line) override { print_line(line); }

 private:
  void print_line(const std::string& line);
  void clear_progress();

  std::FILE* out_;
  bool tty_;
  bool progress_shown_ = false;  // a progress line is on the terminal, without its newline
  std::chrono::steady_clock::time_point last_progress_ = std::chrono::steady_clock::now();
};

// The observer of a command: the terminal's, or none with --quiet.
std::shared_ptr<RunObserver> terminal_observer(bool quiet);

}  // namespace perfgate::cli
