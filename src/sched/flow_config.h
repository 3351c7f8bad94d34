// What the two flow-matching samplers (unipc, euler) share when they read a
// scheduler config: whether it is a FlowMatch* class's config, the shift the
// run uses (the model's, under either class's key, or generate.shift), and
// the refusal of the sigma-schedule options neither implements.
//
// Why the shift key depends on the class: a Wan model ships
// UniPCMultistepScheduler with flow_shift, FlowMatchEulerDiscreteScheduler
// calls the same number shift, and diffusers' from_config would silently drop
// one for the other's default 1.0. The shift is the model's (its resolution
// and training), not the sampler's, so it carries over, as one passes it to
// from_config (scripts/fixtures/make_flow_sched_fixtures.py does the same).
#pragma once
#include <optional>
#include <string>

#include "sched/scheduler_config.h"

namespace ditgen::sched {

// _class_name is FlowMatch... (FlowMatchEulerDiscreteScheduler and kin).
bool is_flow_match_config(const SchedulerConfig& config);

// The model's shift key in this config: "shift" in a FlowMatch* config,
// "flow_shift" in any other (UniPC's, DPM-Solver's).
std::string flow_shift_key(const SchedulerConfig& config);

// The shift a flow sampler runs with: `shift_override` (generate.shift) when
// given, else the config's value under flow_shift_key (default 1.0).
// ConfigError unless positive and finite: the shift divides the schedule.
double resolve_flow_shift(const SchedulerConfig& config, std::optional<double> shift_override);

// "not supported yet" for options that change the sigma schedule:
// use_karras_sigmas, use_exponential_sigmas, use_beta_sigmas,
// use_dynamic_shifting (needs the pipeline's mu) and shift_terminal. `who`
// names the sampler in the message.
void refuse_flow_sigma_options(const SchedulerConfig& config, const std::string& who);

}  // namespace ditgen::sched
