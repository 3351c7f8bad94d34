// See interrupt_report.h. State is a few atomics and a fixed buffer set
// before the run, so the handler reads without locks or allocation.
#include "util/interrupt_report.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "util/created_folders.h"
#include "util/run_stage.h"

namespace ditgen {
namespace {

constexpr size_t kMaxPath = 4096;
char g_manifest[kMaxPath];
std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_to_make{0}, g_landed{0};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the signal handler reads the counts");

void say(const char* text) {
  if (!text) return;
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void say_number(int64_t n) {
  char digits[24];
  char* p = digits + sizeof digits;
  *--p = '\0';
  if (n < 0) n = 0;
  do {
    *--p = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  say(p);
}

}  // namespace

void arm_interrupt_report(const std::string& manifest, int64_t to_make) {
  const size_t n = std::min(manifest.size(), kMaxPath - 1);
  std::memcpy(g_manifest, manifest.data(), n);
  g_manifest[n] = '\0';
  g_to_make.store(to_make);
  g_landed.store(0);
  g_armed.store(true);
}

void note_output_landed() { g_landed.fetch_add(1); }

void say_interrupted(int sig, int removed_folders) {
  if (!g_armed.load()) return;
  // stderr may be a pipe nobody reads any more (`ditgen ... 2>&1 | head`):
  // the write must fail with EPIPE, not end the process by SIGPIPE before
  // it exits with 130 / 143. The caller _exits right after.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  say("\nditgen: interrupted by ");
  say(sig == SIGINT ? "SIGINT" : "SIGTERM");
  const char* stage = current_stage();
  if (stage[0]) {
    say(" during ");
    say(stage);
  }
  const int64_t landed = g_landed.load(), to_make = g_to_make.load();
  if (landed > 0) {
    say(": ");
    say_number(landed);
    say(" of ");
    say_number(to_make);
    say(landed == 1 ? " output is finished and kept" : " outputs are finished and kept");
    if (g_manifest[0]) {
      say(", listed in ");
      say(g_manifest);
    }
    say("; run again with --resume to make the rest");
  } else {
    say(": no output was finished");
  }
  say("; the unfinished output's temporary files are removed");
  if (removed_folders > 0) {
    say(", and so is the empty folder ");
    say(first_removed_folder());
    say(" that the run created");
  }
  say("\n");
}

}  // namespace ditgen
