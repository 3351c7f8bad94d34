// Progress (src/util/progress.h): the plain-lines and bar styles and --quiet,
// written to a string stream. Times vary, so only the structure is checked.
#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>

#include "config_test_support.h"
#include "util/progress.h"

namespace ditgen::test {

// A clock the test moves: one second per step.
struct FakeClock {
  Progress::Clock::time_point t{};
  std::function<Progress::Clock::time_point()> fn() {
    return [this] { return t; };
  }
  void advance(double seconds) {
    t += std::chrono::duration_cast<Progress::Clock::duration>(std::chrono::duration<double>(seconds));
  }
};

TEST_CASE("lines style: the first step's line with its ETA, then at most one every 5 seconds, and the last step's") {
  std::ostringstream out;
  FakeClock clock;
  {
    Progress progress(12, true, "", Progress::Style::lines, out, clock.fn());
    for (int i = 0; i < 12; ++i) {
      clock.advance(1.0);
      progress.step_done(i);
    }
    progress.finish();
  }
  const std::string text = out.str();
  // Off a terminal the ETA is there from the first step (issue 43).
  CHECK(text ==
        "step 1/12 1.00 s/it, ETA 11.0 s\nstep 6/12 1.00 s/it, ETA 6.0 s\nstep 11/12 1.00 s/it, ETA 1.0 s\n"
        "step 12/12 1.00 s/it\n");
  CHECK_FALSE(contains(text, "\r"));
}

TEST_CASE("lines style: slow steps each get their line, a fast run only its first and last") {
  std::ostringstream slow, fast;
  FakeClock clock;
  {
    Progress progress(3, true, "", Progress::Style::lines, slow, clock.fn());
    for (int i = 0; i < 3; ++i) {
      clock.advance(6.0);
      progress.step_done(i);
    }
  }
  const std::string slow_text = slow.str();
  CHECK(std::count(slow_text.begin(), slow_text.end(), '\n') == 3);
  {
    Progress progress(50, true, "", Progress::Style::lines, fast, clock.fn());
    for (int i = 0; i < 50; ++i) {
      clock.advance(0.01);
      progress.step_done(i);
    }
  }
  CHECK(fast.str() == "step 1/50 0.01 s/it, ETA 0.5 s\nstep 50/50 0.01 s/it\n");
}

TEST_CASE("lines style carries the label") {
  std::ostringstream out;
  Progress progress(2, true, "batch 1/2", Progress::Style::lines, out);
  progress.step_done(0);
  progress.step_done(1);
  CHECK(contains(out.str(), "batch 1/2: step 2/2"));
}

TEST_CASE("bar style: one line redrawn, ended by finish") {
  std::ostringstream out;
  Progress progress(4, true, "", Progress::Style::bar, out);
  progress.step_done(0);
  progress.step_done(1);
  CHECK(contains(out.str(), "\r[#####---------------] 1/4"));
  CHECK(contains(out.str(), "\r[##########----------] 2/4"));
  CHECK(contains(out.str(), "ETA "));
  CHECK_FALSE(contains(out.str(), "\n"));
  progress.step_done(2);
  progress.step_done(3);
  CHECK(contains(out.str(), "[####################] 4/4"));
  progress.finish();
  progress.finish();  // idempotent
  const std::string text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

TEST_CASE("the destructor ends an open bar line") {
  std::ostringstream out;
  { Progress(2, true, "", Progress::Style::bar, out).step_done(0); }
  CHECK(out.str().back() == '\n');
}

TEST_CASE("disabled progress writes nothing") {
  std::ostringstream out;
  {
    Progress progress(3, false, "x", Progress::Style::bar, out);
    progress.step_done(0);
    progress.finish();
  }
  CHECK(out.str().empty());
}

}  // namespace ditgen::test
