#include "util/signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mapped_files.h"
#include "util/run_stage.h"

namespace ditgen {

namespace {

void say(const char* text) {
  if (!text) return;
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void report_bus_error(int, siginfo_t* info, void*) {
  cleanup_temp_files_now();
  const char* file = info ? mapped_file_at(info->si_addr) : nullptr;
  say("ditgen: error: ");
  if (file) {
    say(file);
    say(": the file was truncated or changed while ditgen was reading it (SIGBUS on its mapping)");
  } else {
    say("bus error (SIGBUS) outside any model file ditgen mapped");
  }
  const char* stage = current_stage();
  if (stage[0]) {
    say(" during ");
    say(stage);
  }
  say("\n");
  _exit(kExitBadModel);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_termination_signal;
  // A held signal (util/atomic_file.h: LandingScope) returns from the
  // handler: the writes it interrupted go on.
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  // Block the other signal while handling one, so the handler runs once.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  struct sigaction bus;
  std::memset(&bus, 0, sizeof bus);
  bus.sa_sigaction = report_bus_error;
  bus.sa_flags = SA_SIGINFO;
  sigemptyset(&bus.sa_mask);
  sigaction(SIGBUS, &bus, nullptr);

  signal(SIGXFSZ, SIG_IGN);
}

}  // namespace ditgen
