#include "util/run_stage.h"

#include <atomic>

namespace ditgen {

namespace {
std::atomic<const char*> g_stage{""};
}  // namespace

const char* current_stage() { return g_stage.load(std::memory_order_relaxed); }

StageScope::StageScope(const char* name) : previous_(g_stage.exchange(name, std::memory_order_relaxed)) {}

StageScope::~StageScope() { g_stage.store(previous_, std::memory_order_relaxed); }

std::string during_stage() {
  const char* stage = current_stage();
  return stage[0] ? std::string(" during ") + stage : std::string();
}

}  // namespace ditgen
