// FileMap: open, fstat, mmap the whole file, register it for SIGBUS reports.
#include "io/file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.h"
#include "util/mapped_files.h"

namespace ditgen::io {

FileMap::FileMap(const std::string& path, uint64_t min_size, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ModelError(path + ": cannot open: " + errno_text(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    throw ModelError(path + ": not a regular file" + (err ? ": " + errno_text(err) : std::string()));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < min_size) {
    ::close(fd);
    throw ModelError(path + ": file is " + std::to_string(size) + " bytes, too short for " + what);
  }
  void* map = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED)
    throw ModelError(path + ": cannot map " + std::to_string(size) + " bytes: " + errno_text(map_errno));
  data_ = static_cast<const uint8_t*>(map);
  size_ = size;
  if (map) mapping_slot_ = register_mapping(map, size, path);
}

FileMap::~FileMap() {
  unregister_mapping(mapping_slot_);
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void FileMap::release_bytes(const uint8_t* begin, size_t bytes) const {
  if (bytes == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page * page;
  const uintptr_t last = reinterpret_cast<uintptr_t>(begin + bytes);
  madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace ditgen::io
