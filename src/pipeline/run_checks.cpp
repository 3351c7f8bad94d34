// See run_checks.h.
#include "pipeline/run_checks.h"

#include "util/error.h"

namespace ditgen::pipeline {

void check_run(const Request& req, const Pipeline& pipe, const parallel::Layout& layout, const std::string& where) {
  const bool pab = req.pab.enabled() || req.pab_analysis;
  const std::string what = req.pab.enabled() ? "PAB (the pab section)" : "--pab-analyze";
  if (pab && layout.pp > 1)
    not_supported(what + " together with PipeFusion (" + where + ": parallel.pp=" + std::to_string(layout.pp) +
                  ") — use one of them");
  if (pab && pipe.two_experts())
    not_supported(what + " with a two-expert model (" + pipe.model_dir().root() +
                  "/model_index.json: boundary_ratio) — each expert's branches differ");
}

}  // namespace ditgen::pipeline
