// reject_unsupported: the parts of DESIGN.md that this milestone does not
// build yet. DESIGN.md requires them to fail loudly (exit 2, "not supported
// yet: ...") rather than be ignored. One check per feature, so the issue that
// builds a feature deletes exactly its lines.
#include "config/config.h"

#include "util/error.h"

namespace ditgen {
namespace {

// "(run.json: parallel.sp=2)": where the setting is, and its value.
std::string at(const std::string& file, const std::string& setting) {
  return "(" + file + ": " + setting + ")";
}

}  // namespace

void reject_unsupported(const RunConfig& c, const std::string& path) {
  if (!c.generate.prompt_file.empty())
    not_supported("batch prompt files " + at(path, "generate.prompt_file") + " — list the prompts in generate.prompts");

  // model.dtype depends on the device: config/device_choice.cpp checks it.
}

}  // namespace ditgen
