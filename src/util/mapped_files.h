// Which file a mapped address belongs to, for the SIGBUS handler: a model
// file mmapped read-only (io/safetensors) that is truncated or replaced
// while ditgen runs makes the next read of a vanished page raise SIGBUS.
// The handler (util/atomic_file.cpp) looks the faulting address up here and
// reports that file instead of dying with a crash dump. Registration and
// removal happen in normal code; the lookup is async-signal-safe (a fixed
// table of atomically published slots, no allocation, no lock).
#pragma once
#include <cstddef>
#include <string>

namespace ditgen {

// Records [begin, begin + size) as a mapping of `path`; returns a slot id
// for unregister_mapping, or -1 when the table is full (the file is then
// simply not named in a SIGBUS report).
int register_mapping(const void* begin, size_t size, const std::string& path);
void unregister_mapping(int slot);

// The path of the registered mapping holding `addr`, or null. Async-signal-safe.
const char* mapped_file_at(const void* addr);

}  // namespace ditgen
