// What the machine can give a run, and what this process holds.
//
// available_memory_bytes: the least of the kernel's MemAvailable (free
// plus reclaimable page cache, /proc/meminfo) and the room left under this
// process's cgroup memory limit, v2 (memory.max - memory.current) or v1
// (memory.limit_in_bytes - memory.usage_in_bytes), the cgroup's inactive
// page cache (memory.stat inactive_file) counted as room as the kernel
// reclaims it before failing. A container sees its own limit this way,
// where /proc/meminfo shows the host's.
//
// resident_bytes / peak_resident_bytes: /proc/self/status VmRSS and VmHWM
// (getrusage's ru_maxrss where /proc is absent): what `plan` counts as the
// process itself, and the peak a run reports.
//
// The text parsers are exposed for tests (files given as their contents).
#pragma once
#include <string>

namespace ditgen {

// Bytes available now; 0 when nothing can be read.
double available_memory_bytes();

// This process's resident set now and its peak so far (bytes; 0 when
// unknown).
double resident_bytes();
double peak_resident_bytes();

namespace memory_text {

// MemAvailable of a /proc/meminfo text in bytes; < 0 when absent.
double meminfo_available(const std::string& meminfo);
// A "Key:   123 kB" field of /proc/self/status in bytes; < 0 when absent.
double status_field(const std::string& status, const std::string& key);
// The room under a cgroup limit: limit - (usage - inactive page cache),
// from the contents of memory.max / memory.limit_in_bytes, memory.current /
// memory.usage_in_bytes and memory.stat (inactive_file, or v1's
// total_inactive_file); < 0 when there is no limit ("max", empty, or v1's
// page-rounded 2^63).
double cgroup_room(const std::string& limit, const std::string& usage, const std::string& stat);

}  // namespace memory_text

}  // namespace ditgen
