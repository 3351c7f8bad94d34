#include "cli/plan_command.h"

#include <cstdio>

#include "cli/layout_setup.h"
#include "config/config.h"
#include "parallel/mpi_runtime.h"
#include "parallel/plan.h"

namespace ditgen::cli {

void run_plan(const CliOptions& opts) {
  const RunConfig cfg = load_config(opts.config_path, opts.set_overrides);
  const parallel::ModelDims dims = model_dims(cfg.model.path);
  const bool cfg_guidance = cfg.generate.guidance_scale > 1.0;
  const int64_t images = std::min<int64_t>(cfg.generate.batch_size, cfg.generate.num_outputs());
  std::vector<parallel::PlanRow> rows;
  std::string title;
  if (opts.world_size > 0) {
    rows = parallel::plan_valid_layouts(opts.world_size, dims, images, cfg.generate.guidance_scale);
    title = "valid layouts for " + std::to_string(opts.world_size) + " ranks, " + cfg.model.path;
  } else {
    const parallel::Layout layout{cfg.parallel.sp, cfg.parallel.cp, cfg.parallel.tp, cfg.parallel.sp_mode};
    parallel::validate_layout(layout, layout.world_size(), dims, cfg.generate.guidance_scale, opts.config_path);
    rows.push_back(parallel::plan_layout(layout, dims, images, cfg_guidance));
    title = "layout of " + opts.config_path + ", " + cfg.model.path;
  }
  if (parallel::MpiRuntime::world().rank() != 0) return;  // one table, not one per rank
  std::printf("%s", parallel::format_plan_table(rows, title + " (batch of " + std::to_string(images) + " image" +
                                                      (images == 1 ? "" : "s") + (cfg_guidance ? ", CFG" : "") +
                                                      ", float32)")
                        .c_str());
}

}  // namespace ditgen::cli
