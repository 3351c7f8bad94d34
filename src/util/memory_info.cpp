// See memory_info.h.
#include "util/memory_info.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace ditgen {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value after `key` on the line that starts with it, or < 0.
double field_value(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name;
    double value = 0;
    if (fields >> name >> value && name == key) return value;
  }
  return -1;
}

// The cgroup folders to look in for this process: its own (the path
// /proc/self/cgroup gives it in the hierarchy, under the hierarchy's
// mount) and the mount's root (a container's namespace shows its cgroup as
// the root). `memory_v1`: the v1 memory hierarchy ("4:memory:/path"), else
// the v2 one ("0::/path").
std::vector<std::string> cgroup_dirs(const std::string& mount, bool memory_v1) {
  std::vector<std::string> dirs;
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    bool has_memory = false;  // "memory" among the comma-separated controllers
    std::istringstream list(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(list, c, ',');) has_memory = has_memory || c == "memory";
    const bool match = memory_v1 ? has_memory : b == a + 1;
    const std::string path = line.substr(b + 1);
    if (match && path != "/" && path.find("..") == std::string::npos) dirs.push_back(mount + path);
  }
  dirs.push_back(mount);
  return dirs;
}

// The least room any of this process's cgroup limits leaves, or < 0.
double cgroup_room_now() {
  double room = -1;
  auto take = [&](double r) {
    if (r >= 0 && (room < 0 || r < room)) room = r;
  };
  for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup", false))
    take(memory_text::cgroup_room(read_text(dir + "/memory.max"), read_text(dir + "/memory.current"),
                                  read_text(dir + "/memory.stat")));
  for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup/memory", true))
    take(memory_text::cgroup_room(read_text(dir + "/memory.limit_in_bytes"), read_text(dir + "/memory.usage_in_bytes"),
                                  read_text(dir + "/memory.stat")));
  return room;
}

}  // namespace

namespace memory_text {

double meminfo_available(const std::string& meminfo) {
  const double kib = field_value(meminfo, "MemAvailable:");
  return kib < 0 ? -1 : kib * 1024.0;
}

double status_field(const std::string& status, const std::string& key) {
  const double kib = field_value(status, key);
  return kib < 0 ? -1 : kib * 1024.0;
}

double cgroup_room(const std::string& limit, const std::string& usage, const std::string& stat) {
  std::istringstream limit_in(limit), usage_in(usage);
  double limit_bytes = 0, usage_bytes = 0;
  if (!(limit_in >> limit_bytes) || !(usage_in >> usage_bytes)) return -1;  // "max", or unreadable
  if (limit_bytes >= 0x1p62) return -1;  // v1's "no limit" (2^63 rounded down to a page)
  double inactive = field_value(stat, "inactive_file");
  if (inactive < 0) inactive = field_value(stat, "total_inactive_file");
  const double used = usage_bytes - std::clamp(inactive, 0.0, usage_bytes);
  return std::max(0.0, limit_bytes - used);
}

}  // namespace memory_text

double available_memory_bytes() {
  double available = memory_text::meminfo_available(read_text("/proc/meminfo"));
  if (available < 0) {  // no MemAvailable (old kernels, other systems): the free pages
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    available = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
  }
  const double room = cgroup_room_now();
  return room >= 0 ? std::min(available, room) : available;
}

double resident_bytes() { return std::max(0.0, memory_text::status_field(read_text("/proc/self/status"), "VmRSS:")); }

double peak_resident_bytes() {
  const double hwm = memory_text::status_field(read_text("/proc/self/status"), "VmHWM:");
  if (hwm >= 0) return hwm;
  struct rusage usage {};
  return getrusage(RUSAGE_SELF, &usage) == 0 ? static_cast<double>(usage.ru_maxrss) * 1024.0 : 0.0;
}

}  // namespace ditgen
