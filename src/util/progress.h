// Progress of the denoising loop on stderr (docs/design.md §1): on a terminal one
// line redrawn in place, "[#####-----] 12/50  1.23 s/it  ETA 46.7 s"; when
// stderr is a file or pipe (CI logs) plain lines, "step 12/50 1.23 s/it,
// ETA 46.7 s", because carriage returns make logs unreadable: the first
// step's at once (the ETA from the start), then at most one every
// kLineInterval seconds, and the last step's (a line per step flooded logs
// of fast runs); nothing when disabled (--quiet, or any rank but 0).
//
// Time per step is the mean since construction, so construct it right before
// the loop. The rate includes the first step's warm-up, which is what the
// user waits for.
#pragma once
#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>

namespace ditgen {

class Progress {
 public:
  enum class Style { bar, lines };
  using Clock = std::chrono::steady_clock;
  static constexpr double kLineInterval = 5.0;  // seconds between plain lines

  // Writes to stderr, as a bar when stderr is a terminal, else as lines.
  Progress(int total_steps, bool enabled, const std::string& label);
  // Explicit style, stream and clock, for tests.
  Progress(int total_steps, bool enabled, const std::string& label, Style style, std::ostream& out,
           std::function<Clock::time_point()> now = Clock::now);
  ~Progress();  // calls finish(), so an error message starts on a fresh line

  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Step i (0-based) has just completed: reports "i+1/total".
  void step_done(int i);

  // Ends the bar's line. Idempotent.
  void finish();

 private:
  std::string bar_line(int done, double seconds_per_step) const;

  int total_steps_;
  bool enabled_;
  std::string label_;
  Style style_;
  std::ostream& out_;
  std::function<Clock::time_point()> now_;
  Clock::time_point start_;
  Clock::time_point last_line_;  // lines style: when the last line was printed (start_ before any)
  int lines_printed_ = 0;        // lines style
  bool line_open_ = false;  // a bar is drawn and its line not yet ended
};

}  // namespace ditgen
