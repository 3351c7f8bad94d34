// reject_unsupported: the parts of DESIGN.md that this milestone does not
// build yet. DESIGN.md requires them to fail loudly (exit 2, "not supported
// yet: ...") rather than be ignored. One check per feature, so the issue that
// builds a feature deletes exactly its lines.
#include "config/config.h"

#include "util/error.h"

namespace ditgen {

void reject_unsupported(const RunConfig& c, const std::string& path) {
  // PAB keeps one branch output per block; PipeFusion runs each block once
  // per patch, on patches of other sizes than the warm-up's whole image.
  if (c.parallel.pp > 1 && c.pab.enabled())
    not_supported("PAB together with PipeFusion (" + path + ": parallel.pp=" + std::to_string(c.parallel.pp) +
                  " and a pab section) — use one of them");
  // model.dtype depends on the device: config/device_choice.cpp checks it.
}

}  // namespace ditgen
