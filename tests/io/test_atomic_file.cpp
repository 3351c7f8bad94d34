// Atomic output files (write_file_atomic, and write_file_atomic_named for
// libraries that open the file by name): success leaves exactly the output;
// any failure, and a SIGINT / SIGTERM in the middle of a write, leaves
// neither output nor temporary file. The signal cases run in a forked child
// so the handler's _exit does not end the test run.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "util/atomic_file.h"
#include "util/signals.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace ditgen;

namespace {
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_atomic") {}
};
}  // namespace

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file name under `dir`, recursively, relative to it.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(fs::relative(e.path(), dir).string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("atomic_file: success leaves only the output, creating parents") {
  TempDir dir;
  const std::string path = dir.file("a/b/out.bin");
  write_file_atomic(path, "hello", 5);
  CHECK(read_text(path) == "hello");
  CHECK(listing(dir.path) == std::vector<std::string>{"a", "a/b", "a/b/out.bin"});

  write_file_atomic(path, [](std::FILE* f) { std::fputs("replaced", f); });  // overwrite
  CHECK(read_text(path) == "replaced");
  write_file_atomic(dir.file("empty"), nullptr, 0);
  CHECK(fs::file_size(dir.file("empty")) == 0);
  CHECK(listing(dir.path) == std::vector<std::string>{"a", "a/b", "a/b/out.bin", "empty"});
}

TEST_CASE("atomic_file: failures leave no output and no temporary file") {
  TempDir dir;
  std::ofstream(dir.file("plain")) << "x";

  SUBCASE("the parent is a regular file") {
    const std::string path = dir.file("plain/out.bin");
    try {
      write_file_atomic(path, "data", 4);
      FAIL("expected a RuntimeFailure");
    } catch (const RuntimeFailure& e) {
      CHECK(std::string(e.what()).rfind(path + ": ", 0) == 0);
    }
  }
  SUBCASE("the target is a directory") {
    fs::create_directories(dir.path / "taken");
    const std::string path = dir.file("taken");
    try {
      write_file_atomic(path, "data", 4);
      FAIL("expected a RuntimeFailure");
    } catch (const RuntimeFailure& e) {
      CHECK(std::string(e.what()).find(path + ": cannot rename") == 0);
    }
    CHECK(fs::is_directory(path));
    fs::remove(path);
  }
  SUBCASE("the writer throws: its exception passes through, an old file stays") {
    std::ofstream(dir.file("old")) << "previous";
    CHECK_THROWS_WITH_AS(write_file_atomic(dir.file("old"),
                                           [](std::FILE* f) {
                                             std::fputs("partial", f);
                                             throw std::logic_error("writer broke");
                                           }),
                         "writer broke", std::logic_error);
    CHECK(read_text(dir.file("old")) == "previous");
    fs::remove(dir.file("old"));
  }
  SUBCASE("cleanup_temp_files_now removes a file in flight") {
    const std::string path = dir.file("out.bin");
    bool temp_seen = false, temp_gone = false;
    CHECK_THROWS_AS(write_file_atomic(path,
                                      [&](std::FILE* f) {
                                        std::fputs("partial", f);
                                        temp_seen = listing(dir.path).size() == 2;
                                        cleanup_temp_files_now();
                                        temp_gone = listing(dir.path).size() == 1;
                                      }),
                    RuntimeFailure);  // the rename finds its temporary gone
    CHECK(temp_seen);
    CHECK(temp_gone);
  }
  CHECK(listing(dir.path) == std::vector<std::string>{"plain"});
}

TEST_CASE("atomic_file: SIGINT and SIGTERM during a write remove the temporary file") {
  for (int sig : {SIGINT, SIGTERM}) {
    CAPTURE(sig);
    TempDir dir;
    const std::string path = dir.file("out.bin");
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(ready[0]);
      install_signal_handlers();
      write_file_atomic(path, [&](std::FILE* f) {
        std::fputs("partial", f);
        std::fflush(f);
        const char byte = 1;
        if (write(ready[1], &byte, 1) != 1) _exit(90);
        for (;;) pause();  // wait for the signal
      });
      _exit(91);  // not reached
    }
    close(ready[1]);
    char byte = 0;
    REQUIRE(read(ready[0], &byte, 1) == 1);
    close(ready[0]);
    CHECK(listing(dir.path).size() == 1);  // the temporary file exists now
    kill(child, sig);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == (sig == SIGINT ? 130 : 143));
    CHECK(listing(dir.path).empty());
  }
}

TEST_CASE("atomic_file: write_file_atomic_named hands the writer an existing temporary name beside the output") {
  TempDir dir;
  const std::string path = dir.file("a/out.bin");
  std::string temp_seen;
  write_file_atomic_named(path, [&](const std::string& temp) {
    temp_seen = temp;
    CHECK(fs::path(temp).parent_path() == fs::path(path).parent_path());
    CHECK(fs::is_regular_file(temp));
    CHECK(fs::file_size(temp) == 0);
    std::ofstream(temp, std::ios::binary | std::ios::trunc) << "by name";  // as a library would open it
  });
  CHECK(read_text(path) == "by name");
  CHECK_FALSE(fs::exists(temp_seen));
  CHECK(listing(dir.path) == std::vector<std::string>{"a", "a/out.bin"});
}

TEST_CASE("atomic_file: write_file_atomic_named failures leave no temporary file and an old output untouched") {
  TempDir dir;
  std::ofstream(dir.file("old")) << "previous";
  std::ofstream(dir.file("plain")) << "x";
  CHECK_THROWS_WITH_AS(write_file_atomic_named(dir.file("old"),
                                               [](const std::string& temp) {
                                                 std::ofstream(temp) << "partial";
                                                 throw std::logic_error("library failed");
                                               }),
                       "library failed", std::logic_error);
  CHECK(read_text(dir.file("old")) == "previous");
  try {
    write_file_atomic_named(dir.file("plain/out.bin"), [](const std::string&) { FAIL("the writer must not run"); });
    FAIL("expected a RuntimeFailure");
  } catch (const RuntimeFailure& e) {
    CHECK(std::string(e.what()).rfind(dir.file("plain/out.bin") + ": ", 0) == 0);
  }
  fs::create_directories(dir.path / "taken");
  CHECK_THROWS_AS(write_file_atomic_named(dir.file("taken"), [](const std::string&) {}), RuntimeFailure);
  CHECK(listing(dir.path) == std::vector<std::string>{"old", "plain", "taken"});
}
