// See step_cost.h.
#include "parallel/step_cost.h"

namespace ditgen::parallel {

StepCost step_cost(const PlanRow& row, const Workload& work) {
  const Layout& layout = row.layout;
  const double b = static_cast<double>(row.batch_per_rank);
  const double rows = row.rows_per_rank;
  const double d = static_cast<double>(work.hidden()), dt = d / layout.tp;
  const double sequences = b * static_cast<double>(work.sequences_per_sample());  // each with its own text keys
  double per_layer = 0;
  for (const AttentionOp& op : work.attention_ops()) {
    const double keys = static_cast<double>(op.tokens > 0 ? op.tokens : work.sequence_tokens());
    if (op.kind == AttentionKind::kCross) {
      per_layer += 2 * rows * d * 2 * dt + 2 * sequences * keys * d * 2 * dt;
    } else {
      per_layer += 2 * rows * d * 4 * dt;
    }
    per_layer += 4 * rows * keys * dt;
    // An added context (Wan I2V's image tokens): its k and v projections and the second attention.
    const double added = static_cast<double>(op.added_tokens);
    per_layer += 2 * sequences * added * d * 2 * dt + 4 * rows * added * dt;
  }
  per_layer += static_cast<double>(work.feed_forwards) * 2 * rows * 2 * d * static_cast<double>(work.mlp_hidden) /
               layout.tp;
  const double layers = static_cast<double>(layout.stage_split().size(work.layers, layout.pp, 0));
  StepCost c;
  c.flops = layers * per_layer;
  c.bytes = row.weight_bytes_per_rank + 2 * layers * row.activation_bytes_per_rank + row.comm_bytes_per_step_per_rank;
  return c;
}

}  // namespace ditgen::parallel
