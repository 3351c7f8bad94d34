// The run's manifest, <stem>_manifest.jsonl beside the outputs (docs/design.md
// §2): one JSON line per output as it lands, {"index", "files", "prompt" or
// "label", "seed", "steps", "seconds"} (plus "negative_prompt" and the
// prompt file's "line" when there are any), so a script can follow a batch
// and a resumed batch knows what is done.
//
// It always says what is on disk: a fresh run replaces an older manifest
// with its own first line (the older one stays until then, true of the
// older files until they are overwritten); a resumed run (skip_existing)
// keeps the lines whose files all still exist, one per output, and adds a
// line (seconds null) for an output found on disk without one. A line is
// appended with one write() to an O_APPEND descriptor, inside the output's
// LandingScope (util/atomic_file.h), so a signal never separates an output
// from its line.
#pragma once
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace ditgen::cli {

class Manifest {
 public:
  // `resume`: keep (and tidy) an existing manifest at `path`; else the
  // first append starts a new one. Written by the output rank only.
  Manifest(std::string path, bool resume);

  const std::string& path() const { return path_; }
  // Whether a kept line covers output `index`.
  bool has(int index) const { return indices_.count(index) != 0; }
  // Appends one line (a JSON object with an integer "index");
  // RuntimeFailure naming the file when it cannot.
  void append(const nlohmann::json& line);

 private:
  std::string path_;
  bool started_ = false;  // the file holds this run's lines (or the kept ones)
  std::set<int> indices_;
};

}  // namespace ditgen::cli
