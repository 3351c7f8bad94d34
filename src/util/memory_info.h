// What the machine can give a run: the memory available now (Linux
// /proc/meminfo's MemAvailable: free plus reclaimable page cache), for the
// plans made against a memory limit (--memory-limit's default).
#pragma once

namespace ditgen {

// Bytes available now; 0 when it cannot be read.
double available_memory_bytes();

}  // namespace ditgen
