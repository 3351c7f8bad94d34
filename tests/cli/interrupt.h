// Signalling a ditgen run inside one of its file writes, for the tests of
// what an interrupted run leaves behind: the run gets
// DITGEN_TEST_PAUSE_IN_WRITE (every atomic write pauses before its rename
// and prints "ditgen: test: pausing in write of <temporary path>"), its
// stderr is read marker by marker, and when a marker's temporary path is
// the one wanted the signal is sent while that write is paused.
#pragma once
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace ditgen::testing {

// What a run interrupted inside a write left behind.
struct Interrupted {
  int exit_code = -1;         // -1: not a normal exit
  std::string temp;           // the temporary file of the write signalled ("" if none seen)
  bool temp_existed = false;  // the temporary file was there when the signal was sent
  int writes_seen = 0;        // pause markers read, the signalled one included
  std::string stderr_text;
};

// Runs `exe args` with writes pausing `pause_seconds`; sends `sig` at the
// first write whose temporary path `wanted` accepts. Without one within 120
// s (or if ditgen exits first) the run is killed and `temp` stays empty.
inline Interrupted interrupt_in_write(const std::string& exe, const std::vector<std::string>& args, int sig,
                                      const std::function<bool(const std::string&)>& wanted,
                                      double pause_seconds = 60) {
  int err_pipe[2];
  REQUIRE(pipe(err_pipe) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(err_pipe[0]);
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[1]);
    setenv("DITGEN_TEST_PAUSE_IN_WRITE", std::to_string(pause_seconds).c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  Interrupted out;
  const std::string marker = "ditgen: test: pausing in write of ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  size_t scanned = 0;  // markers before this offset are handled
  char buf[4096];
  bool found = false;
  while (!found && std::chrono::steady_clock::now() < deadline) {
    for (size_t at = out.stderr_text.find(marker, scanned); at != std::string::npos;
         at = out.stderr_text.find(marker, scanned)) {
      const size_t end = out.stderr_text.find('\n', at);
      if (end == std::string::npos) break;  // the line is not complete yet
      scanned = end + 1;
      ++out.writes_seen;
      const std::string temp = out.stderr_text.substr(at + marker.size(), end - at - marker.size());
      if (wanted(temp)) {
        out.temp = temp;
        found = true;
        break;
      }
    }
    if (found) break;
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;  // ditgen exited without reaching the write
    out.stderr_text.append(buf, static_cast<size_t>(n));
  }
  if (found) {
    out.temp_existed = std::filesystem::exists(out.temp);
    kill(pid, sig);
  } else {
    kill(pid, SIGKILL);
  }
  // What ditgen says as it exits (the interrupt report) is read to the end.
  const auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < drain_deadline) {
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;  // end of file: ditgen has exited
    out.stderr_text.append(buf, static_cast<size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  return out;
}

}  // namespace ditgen::testing
