// A model file mapped read-only (mmap, PROT_READ, MAP_PRIVATE) for the weight
// readers (io/safetensors.cpp, io/gguf.cpp): opened, checked to be a regular
// file of at least a minimum size, mapped whole and registered with
// util/mapped_files.h, so a file truncated or replaced under a running
// process is named in the SIGBUS report rather than crashing anonymously.
// The readers borrow tensors straight from the map; release_bytes drops
// pages a weight no longer needs from this process (they stay in the page
// cache, shared with other ranks reading the same file).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ditgen::io {

class FileMap {
 public:
  // Maps `path`; ModelError("<path>: ...") when it cannot be opened or
  // mapped, is not a regular file, or is shorter than `min_size` bytes
  // (`what` names the format in that message: "a GGUF header").
  FileMap(const std::string& path, uint64_t min_size, const char* what);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Drops the whole pages around [begin, begin + bytes) (madvise
  // MADV_DONTNEED): a neighbour sharing an edge page loses nothing, the map
  // being read-only, its pages fault back in from the file when read.
  void release_bytes(const uint8_t* begin, size_t bytes) const;

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int mapping_slot_ = -1;  // util/mapped_files.h: names this file in a SIGBUS report
};

}  // namespace ditgen::io
