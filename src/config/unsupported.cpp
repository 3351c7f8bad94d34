// reject_unsupported: the parts of DESIGN.md that this milestone does not
// build yet. DESIGN.md requires them to fail loudly (exit 2, "not supported
// yet: ...") rather than be ignored. One check per feature, so the issue that
// builds a feature deletes exactly its lines.
#include "config/config.h"

#include "util/error.h"

namespace ditgen {

void reject_unsupported(const RunConfig&, const std::string&) {
  // Nothing of the config schema is left unbuilt. model.dtype depends on the
  // device: config/device_choice.cpp checks it.
}

}  // namespace ditgen
