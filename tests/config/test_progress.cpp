// Progress (src/util/progress.h): the plain-lines and bar styles and --quiet,
// written to a string stream. Times vary, so only the structure is checked.
#include <algorithm>
#include <sstream>

#include "config_test_support.h"
#include "util/progress.h"

namespace ditgen::test {

TEST_CASE("lines style: one plain line per step") {
  std::ostringstream out;
  {
    Progress progress(3, true, "", Progress::Style::lines, out);
    for (int i = 0; i < 3; ++i) progress.step_done(i);
    progress.finish();
  }
  const std::string text = out.str();
  CHECK(contains(text, "step 1/3 "));
  CHECK(contains(text, "step 3/3 "));
  CHECK(contains(text, " s/it\n"));
  CHECK_FALSE(contains(text, "\r"));
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
}

TEST_CASE("lines style carries the label") {
  std::ostringstream out;
  Progress progress(2, true, "batch 1/2", Progress::Style::lines, out);
  progress.step_done(0);
  CHECK(contains(out.str(), "batch 1/2: step 1/2"));
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
