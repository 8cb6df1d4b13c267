#pragma once
// What a running measurement tells the person waiting for it (docs/architecture.md, "Observer").
//
// libperfgate prints nothing: the runner and the sessions report progress and problems to a RunObserver,
// which the caller implements. The CLI's prints them as terminal lines and a progress line
// (harness/cli/terminal_observer.hpp); tests record them (RecordingObserver). No observer: silence.
#include <string>
#include <vector>

namespace perfgate {

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  RunObserver() = default;
  RunObserver(const RunObserver&) = delete;
  RunObserver& operator=(const RunObserver&) = delete;

  // A phase (measure, confirm, extra rounds, ...) starts or ends: its plan, or what it cost.
  virtual void on_phase(const std::string& line) = 0;
  // A bench process starts: which suite, side and round, and the ETA of the phase.
  virtual void on_process_start(const std::string& line) = 0;
  // Progress inside the running process (a benchmark's repetition finished); the next one replaces it.
  virtual void on_progress(const std::string& line) = 0;
  // The running process ended: its transient progress is over.
  virtual void on_process_done() = 0;
  // Something went wrong and the run goes on: a process failed, realtime scheduling was refused.
  virtual void on_warning(const std::string& line) = 0;
  // A decision worth knowing while it runs: adaptive looks, a budget that stopped them.
  virtual void on_note(const std::string& line) = 0;
};

// Keeps every event, in order, for tests: "phase: ...", "process: ...", "progress: ...", "done",
// "warning: ...", "note: ...".
class RecordingObserver final : public RunObserver {
 public:
  void on_phase(const std::string& line) override { events.push_back("phase: " + line); }
  void on_process_start(const std::string& line) override { events.push_back("process: " + line); }
  void on_progress(const std::string& line) override { events.push_back("progress: " + line); }
  void on_process_done() override { events.push_back("done"); }
  void on_warning(const std::string& line) override { events.push_back("warning: " + line); }
  void on_note(const std::string& line) override { events.push_back("note: " + line); }

  std::vector<std::string> events;
};

}  // namespace perfgate
