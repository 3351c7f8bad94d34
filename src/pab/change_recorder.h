// --pab-analyze: records, per generation, step and block, how much each
// attention (and MLP) output changed from the previous step,
// ||o_s - o_{s-1}|| / ||o_{s-1}||, so users can pick PAB ranges and windows
// for their own model (outputs that barely change are safe to broadcast).
#pragma once
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pab/broadcast.h"
#include "tensor/tensor.h"

namespace ditgen::pab {

class ChangeRecorder {
 public:
  struct Row {
    int generation, step;
    double t;
    int block;
    int part;  // BroadcastCache's part: 0, or 1 for Latte's temporal block
    Kind kind;
    double rel_change;
  };

  // Call once per denoising step; step 0 starts a new generation.
  void begin_step(int step, double t);
  // A freshly computed output of (block, kind, part) at the current step.
  void record(int block, Kind kind, const Tensor& output, int part = 0);

  const std::vector<Row>& rows() const { return rows_; }
  // "generation,step,timestep,block,part,kind,rel_change" then one line per row.
  std::string csv() const;
  // Mean relative change over blocks, per kind and step of the first
  // generation: (kind, [(step, value)]) for the kinds that were recorded.
  std::vector<std::pair<Kind, std::vector<std::pair<int, double>>>> mean_by_kind() const;

 private:
  int generation_ = -1, step_ = 0;
  double t_ = 0;
  std::map<std::tuple<int, int, int>, Tensor> previous_;  // (block, kind, part) -> last output
  std::vector<Row> rows_;
};

}  // namespace ditgen::pab
