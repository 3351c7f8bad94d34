#include "util/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ditgen::profile {

namespace {
bool g_enabled = [] {
  const char* e = std::getenv("DITGEN_PROFILE");
  return e && *e && *e != '0';
}();
void (*g_sync)() = nullptr;
std::mutex g_mutex;
std::map<std::string, std::pair<double, long>> g_totals;
}  // namespace

bool enabled() { return g_enabled; }
void enable(bool on) { g_enabled = on; }
void set_sync(void (*sync_fn)()) { g_sync = sync_fn; }
void sync() {
  if (g_sync) g_sync();
}

void add(const char* name, double seconds) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& t = g_totals[name];
  t.first += seconds;
  t.second += 1;
}

void reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_totals.clear();
}

std::vector<std::pair<std::string, std::pair<double, long>>> totals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::pair<std::string, std::pair<double, long>>> v(g_totals.begin(), g_totals.end());
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  return v;
}

std::string report() {
  auto v = totals();
  double sum = 0;
  for (auto& e : v) sum += e.second.first;
  std::string out;
  char line[160];
  for (auto& e : v) {
    std::snprintf(line, sizeof line, "  %-22s %9.4f s %6.1f%% %7ld calls\n", e.first.c_str(), e.second.first,
                  sum > 0 ? 100.0 * e.second.first / sum : 0.0, e.second.second);
    out += line;
  }
  return out;
}

}  // namespace ditgen::profile
