// See progress.h.
#include "util/progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "util/strings.h"

namespace ditgen {
namespace {

constexpr int kBarWidth = 20;

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

}  // namespace

Progress::Progress(int total_steps, bool enabled, const std::string& label)
    : Progress(total_steps, enabled, label, isatty(STDERR_FILENO) ? Style::bar : Style::lines, std::cerr) {}

Progress::Progress(int total_steps, bool enabled, const std::string& label, Style style, std::ostream& out,
                   std::function<Clock::time_point()> now)
    : total_steps_(total_steps),
      enabled_(enabled),
      label_(label),
      style_(style),
      out_(out),
      now_(std::move(now)),
      start_(now_()),
      last_line_(start_) {}

Progress::~Progress() { finish(); }

std::string Progress::bar_line(int done, double seconds_per_step) const {
  const int filled = total_steps_ > 0 ? done * kBarWidth / total_steps_ : kBarWidth;
  std::string line = label_.empty() ? "" : label_ + " ";
  line += '[';
  line.append(filled, '#').append(kBarWidth - filled, '-');
  line += "] ";
  line += std::to_string(done) + "/" + std::to_string(total_steps_);
  line += "  " + fixed(seconds_per_step, 2) + " s/it";
  line += "  ETA " + format_duration(seconds_per_step * (total_steps_ - done));
  return line;
}

void Progress::step_done(int i) {
  if (!enabled_) return;
  const int done = i + 1;
  const Clock::time_point now = now_();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double seconds_per_step = elapsed / done;
  if (style_ == Style::bar) {
    // \r returns to the line start; \x1b[K clears what a longer previous
    // line left behind.
    out_ << '\r' << bar_line(done, seconds_per_step) << "\x1b[K" << std::flush;
    line_open_ = true;
  } else {
    // The first step's line at once, so a log shows the rate and the ETA
    // from the start (issue 43), then one every kLineInterval, and the last.
    const bool last = done >= total_steps_;
    if (lines_printed_ > 0 && !last && std::chrono::duration<double>(now - last_line_).count() < kLineInterval) return;
    last_line_ = now;
    ++lines_printed_;
    out_ << (label_.empty() ? "" : label_ + ": ") << "step " << done << "/" << total_steps_ << " "
         << fixed(seconds_per_step, 2) << " s/it";
    if (!last) out_ << ", ETA " << format_duration(seconds_per_step * (total_steps_ - done));
    out_ << "\n" << std::flush;
  }
}

void Progress::finish() {
  if (!line_open_) return;
  out_ << '\n' << std::flush;
  line_open_ = false;
}

}  // namespace ditgen
