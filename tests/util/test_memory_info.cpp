// util/memory_info.h's readers on file contents written here: /proc/meminfo's
// MemAvailable, /proc/self/status fields, and the room under a cgroup v2 or
// v1 memory limit (inactive page cache counted as room, no limit recognised);
// and the live figures against each other.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "util/memory_info.h"

using namespace ditgen;

TEST_CASE("memory info: MemAvailable and status fields in bytes, absent ones negative") {
  const std::string meminfo = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\n"
                              "MemAvailable:    8388608 kB\nBuffers:          100 kB\n";
  CHECK(memory_text::meminfo_available(meminfo) == 8388608.0 * 1024);
  CHECK(memory_text::meminfo_available("MemTotal: 1 kB\nMemFree: 2 kB\n") < 0);
  const std::string status = "Name:\tditgen\nVmPeak:\t  400000 kB\nVmHWM:\t  262144 kB\nVmRSS:\t  131072 kB\n";
  CHECK(memory_text::status_field(status, "VmHWM:") == 262144.0 * 1024);
  CHECK(memory_text::status_field(status, "VmRSS:") == 131072.0 * 1024);
  CHECK(memory_text::status_field(status, "VmSwap:") < 0);
  CHECK(memory_text::status_field(status, "VmHW") < 0);  // whole keys only
}

TEST_CASE("memory info: the room under a cgroup limit") {
  const double gib = 1024.0 * 1024 * 1024;
  // v2: memory.max, memory.current, memory.stat's inactive_file (reclaimed before an OOM).
  CHECK(memory_text::cgroup_room("8589934592\n", "3221225472\n", "anon 2147483648\ninactive_file 1073741824\n") ==
        8 * gib - (3 * gib - 1 * gib));
  CHECK(memory_text::cgroup_room("max\n", "3221225472\n", "") < 0);  // no limit
  // v1: memory.limit_in_bytes (2^63 rounded to a page: no limit), total_inactive_file.
  CHECK(memory_text::cgroup_room("9223372036854771712\n", "10086391808\n", "") < 0);
  CHECK(memory_text::cgroup_room("4294967296\n", "1073741824\n", "cache 5\ntotal_inactive_file 536870912\n") ==
        4 * gib - 0.5 * gib);
  CHECK(memory_text::cgroup_room("1073741824\n", "2147483648\n", "") == 0);  // over: no room, not negative
  CHECK(memory_text::cgroup_room("", "", "") < 0);                          // no such files
}

TEST_CASE("memory info: the live figures") {
  const double rss = resident_bytes();
  CHECK(rss > 0);
  CHECK(peak_resident_bytes() >= rss * 0.99);
  std::vector<char> touched(64 << 20, 1);  // 64 MiB written: resident grows by about that, and the peak with it
  CHECK(touched[12345] == 1);
  CHECK(resident_bytes() >= rss + 60.0 * (1 << 20));
  CHECK(peak_resident_bytes() >= resident_bytes() * 0.99);
  CHECK(available_memory_bytes() > 0);
}
