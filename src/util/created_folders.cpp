// See created_folders.h. The registry is a fixed array of path buffers
// with a published count: a creator fills the next slot, then publishes it
// by raising the count; the signal handler reads only published slots.
// Folders are created by one thread at a time (the output rank's writer),
// so slots are claimed with a plain fetch_add.
#include "util/created_folders.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace ditgen {
namespace {

constexpr size_t kMaxFolders = 64;
constexpr size_t kMaxPath = 4096;

char g_folders[kMaxFolders][kMaxPath];
std::atomic<size_t> g_claimed{0}, g_published{0};
std::atomic<int> g_first_removed{-1};  // index of the shallowest folder removed
static_assert(std::atomic<size_t>::is_always_lock_free, "the signal handler reads the count");

void record(const std::string& folder) {
  if (folder.size() >= kMaxPath) return;
  const size_t slot = g_claimed.fetch_add(1);
  if (slot >= kMaxFolders) return;  // not recorded: left behind if empty, as before
  std::memcpy(g_folders[slot], folder.c_str(), folder.size() + 1);
  g_published.store(slot + 1, std::memory_order_release);
}

}  // namespace

bool create_folders(const std::string& folder, std::string& error) {
  namespace fs = std::filesystem;
  if (folder.empty() || folder == ".") return true;
  // The missing folders, parents first.
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::path(folder).lexically_normal(); !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    missing.insert(missing.begin(), p);
    if (p == p.parent_path()) break;
  }
  for (const fs::path& p : missing) {
    if (::mkdir(p.c_str(), 0777) == 0) {
      record(p.string());
    } else if (errno != EEXIST) {
      error = p.string() + ": " + errno_text(errno);
      return false;
    }
  }
  if (!fs::is_directory(folder, ec)) {
    error = folder + ": not a folder";
    return false;
  }
  return true;
}

int remove_empty_created_folders_now() {
  int removed = 0;
  const size_t n = g_published.load(std::memory_order_acquire);
  for (size_t i = n; i-- > 0;)
    if (::rmdir(g_folders[i]) == 0) {
      ++removed;
      g_first_removed.store(static_cast<int>(i));
    }
  return removed;
}

const char* first_removed_folder() {
  const int i = g_first_removed.load();
  return i < 0 ? "" : g_folders[i];
}

}  // namespace ditgen
