// Atomic output files: temporary name + rename, with a signal-safe registry of
// the temporary paths in flight.
//
// The registry is a fixed array of slots, each a state word and a char buffer.
// A writer claims a free slot (CAS free -> filling), copies the path, and
// publishes it (-> active); a signal handler only reads active slots and calls
// unlink(), which is async-signal-safe. No allocation or lock is involved, so
// the handler may interrupt a writer at any point. If every slot is taken the
// write still happens, only without signal cleanup (64 concurrent outputs is
// far more than ditgen ever writes).
//
// Test hook: with DITGEN_TEST_PAUSE_IN_WRITE=<seconds> in the environment,
// each write stops after its data is flushed into the temporary file and
// before the close and rename, prints "ditgen: test: pausing in write of
// <temporary path>" to stderr and sleeps, so the CLI tests can signal the
// process inside that window and check the temporary file is removed.
#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "util/created_folders.h"
#include "util/error.h"
#include "util/interrupt_report.h"

namespace ditgen {
namespace {

constexpr int kSlotFree = 0, kSlotFilling = 1, kSlotActive = 2;
constexpr size_t kMaxTempFiles = 64;
constexpr size_t kMaxTempPath = 4096;

struct TempSlot {
  std::atomic<int> state{kSlotFree};
  char path[kMaxTempPath];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

TempSlot g_temp_slots[kMaxTempFiles];
std::atomic<unsigned long> g_temp_counter{0};

// Holds one registry slot for the lifetime of a temporary file.
class TempRegistration {
 public:
  explicit TempRegistration(const std::string& temp_path) {
    if (temp_path.size() >= kMaxTempPath) return;
    for (TempSlot& s : g_temp_slots) {
      int expected = kSlotFree;
      if (s.state.compare_exchange_strong(expected, kSlotFilling, std::memory_order_acquire)) {
        std::memcpy(s.path, temp_path.c_str(), temp_path.size() + 1);
        s.state.store(kSlotActive, std::memory_order_release);
        slot_ = &s;
        return;
      }
    }
  }
  ~TempRegistration() {
    if (slot_) slot_->state.store(kSlotFree, std::memory_order_release);
  }
  TempRegistration(const TempRegistration&) = delete;
  TempRegistration& operator=(const TempRegistration&) = delete;

 private:
  TempSlot* slot_ = nullptr;
};

// The DITGEN_TEST_PAUSE_IN_WRITE hook (see the top of this file); a no-op
// unless the variable holds a positive number of seconds. `f`: the stream
// still open on the temporary file, if any.
void pause_in_write_for_tests(std::FILE* f, const std::string& temp) {
  const char* v = std::getenv("DITGEN_TEST_PAUSE_IN_WRITE");
  const double seconds = v ? std::strtod(v, nullptr) : 0.0;
  if (!(seconds > 0.0)) return;
  if (f) std::fflush(f);  // the data is in the file, as a slow write would leave it
  std::fprintf(stderr, "ditgen: test: pausing in write of %s\n", temp.c_str());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// LandingScope's state: no scope, a scope before its first rename, a scope
// after it (signals held in g_held_signal).
constexpr int kNoLanding = 0, kLandingOpen = 1, kLandingCommitted = 2;
std::atomic<int> g_landing{kNoLanding};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads g_landing");
volatile std::sig_atomic_t g_held_signal = 0;

[[noreturn]] void cleanup_and_exit(int sig) {
  cleanup_temp_files_now();
  say_interrupted(sig, remove_empty_created_folders_now());
  _exit(sig == SIGINT ? kExitSigint : kExitSigterm);
}

// Called right before a rename: inside a LandingScope, signals are held
// from here on.
void commit_landing() {
  int open = kLandingOpen;
  g_landing.compare_exchange_strong(open, kLandingCommitted);
}

}  // namespace

void cleanup_temp_files_now() {
  for (TempSlot& s : g_temp_slots)
    if (s.state.load(std::memory_order_acquire) == kSlotActive) unlink(s.path);
}

LandingScope::LandingScope() { g_landing.store(kLandingOpen); }

LandingScope::~LandingScope() {
  g_landing.store(kNoLanding);
  if (g_held_signal != 0) cleanup_and_exit(g_held_signal);
}

void on_termination_signal(int sig) {
  if (g_landing.load() == kLandingCommitted) {
    g_held_signal = sig;
    return;
  }
  cleanup_and_exit(sig);
}

namespace {

// Creates the parent directories of `path`; returns a fresh temporary name
// beside it.
std::string prepare_temp_path(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::string error;
  if (!create_folders(parent.string(), error)) throw RuntimeFailure(path + ": cannot create the folder " + error);
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(g_temp_counter.fetch_add(1));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& writer) {
  const std::string temp = prepare_temp_path(path);
  TempRegistration registration(temp);  // before the file exists: a signal can never orphan it

  // "x": fail rather than clobber a file that happens to have the name.
  std::FILE* f = std::fopen(temp.c_str(), "wbx");
  if (!f) throw RuntimeFailure(path + ": cannot create temporary file " + temp + ": " + errno_text(errno));

  auto fail = [&](const std::string& what, int err) {
    unlink(temp.c_str());
    throw RuntimeFailure(path + ": " + what + ": " + errno_text(err));
  };
  try {
    writer(f);
    pause_in_write_for_tests(f, temp);
  } catch (...) {
    std::fclose(f);
    unlink(temp.c_str());
    throw;
  }
  const bool write_failed = std::fflush(f) != 0 || std::ferror(f);
  const int write_errno = errno;
  const bool close_failed = std::fclose(f) != 0;
  if (write_failed) fail("write failed", write_errno ? write_errno : EIO);
  if (close_failed) fail("close failed", errno);
  commit_landing();
  if (std::rename(temp.c_str(), path.c_str()) != 0) fail("cannot rename " + temp + " onto it", errno);
}

void write_file_atomic_named(const std::string& path, const std::function<void(const std::string&)>& writer) {
  const std::string temp = prepare_temp_path(path);
  TempRegistration registration(temp);
  // Created here, exclusively, as write_file_atomic does, so the name is ours
  // before the library opens (and truncates) it.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw RuntimeFailure(path + ": cannot create temporary file " + temp + ": " + errno_text(errno));
  ::close(fd);
  try {
    writer(temp);
    pause_in_write_for_tests(nullptr, temp);
  } catch (...) {
    unlink(temp.c_str());
    throw;
  }
  commit_landing();
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(temp.c_str());
    throw RuntimeFailure(path + ": cannot rename " + temp + " onto it: " + errno_text(err));
  }
}

void write_file_atomic(const std::string& path, const void* bytes, size_t size) {
  write_file_atomic(path, [&](std::FILE* f) {
    if (size) std::fwrite(bytes, 1, size, f);
  });
}

}  // namespace ditgen
