#include "cli/batch_work.h"

#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "io/model_dir.h"
#include "parallel/mpi_runtime.h"
#include "util/content_hash.h"
#include "util/error.h"

namespace ditgen::cli {

std::vector<config::PromptEntry> read_batch_prompts(const RunConfig& cfg, const std::string& where,
                                                    const pipeline::Pipeline& pipe) {
  const std::string& file = cfg.generate.prompt_file;
  if (file.empty()) return {};
  if (pipe.transformer().conditioning() != models::Conditioning::kText)
    throw ConfigError(where + ": generate.prompt_file: a " + std::string(pipe.transformer().family()) +
                      " model is class-conditional: it takes generate.class_labels, not prompts (prompt files are "
                      "for text-conditional models)");
  std::vector<config::PromptEntry> entries = config::read_prompt_file(file);
  // A JSONL line's empty prompt makes an output of nothing asked for
  // (`ditgen encode` reads the same files and may encode ""; a text file's
  // blank line is skipped).
  for (const config::PromptEntry& e : entries)
    if (const std::string problem = config::empty_prompt_problem(e.prompt); !problem.empty())
      throw ConfigError(file + ":" + std::to_string(e.line) + ": prompt: " + problem);
  return entries;
}

RunConfig with_prompt_file_prompts(const RunConfig& cfg, const std::vector<config::PromptEntry>& entries) {
  RunConfig out = cfg;
  if (entries.empty()) return out;
  out.generate.prompts.clear();
  for (const config::PromptEntry& e : entries) out.generate.prompts.push_back(e.prompt);
  out.generate.prompt_file.clear();
  return out;
}

void apply_prompt_entries(pipeline::Request& req, const std::vector<config::PromptEntry>& entries,
                          const RunConfig& cfg) {
  if (entries.empty()) return;
  const std::string& file = cfg.generate.prompt_file;
  const bool video = req.latent_shape.size() == 4;
  const int frames = video ? static_cast<int>(req.latent_shape[1]) : 1;
  bool any_negative = false;
  std::map<std::string, int> name_line;
  for (size_t i = 0; i < entries.size(); ++i) {
    const config::PromptEntry& e = entries[i];
    const std::string where = file + ":" + std::to_string(e.line);
    if (e.frames && !video)
      throw ConfigError(where + ": frames: this is an image model (frames are for video models)");
    if (e.frames && *e.frames != frames)
      not_supported("a prompt file line's own frames (" + where + ": frames " + std::to_string(*e.frames) +
                    ", the run makes " + std::to_string(frames) + ") — run lines of each frame count as a "
                    "batch of their own, with generate.frames");
    if (!e.name.empty()) {
      const auto [it, fresh] = name_line.emplace(e.name, e.line);
      if (!fresh)
        throw ConfigError(where + ": name: \"" + e.name + "\" is line " + std::to_string(it->second) +
                          "'s name too (each output needs its own file)");
    }
    any_negative = any_negative || e.negative_prompt.has_value();
    req.seeds.push_back(e.seed ? *e.seed : req.seed + static_cast<uint64_t>(i));
  }
  if (any_negative)
    for (const config::PromptEntry& e : entries) req.negative_prompts.push_back(e.negative_prompt.value_or(req.negative_prompt));
}

std::vector<std::string> output_names(const std::vector<config::PromptEntry>& entries) {
  std::vector<std::string> names;
  bool any = false;
  for (const config::PromptEntry& e : entries) {
    names.push_back(e.name);
    any = any || !e.name.empty();
  }
  return any ? names : std::vector<std::string>{};
}

namespace {

// What every rank must agree on: the effective settings and, per output,
// what it shows and its seed. Not where each machine keeps the files: on
// several machines a rank may read the model (or the prompt file) at a
// path of its own (docs/parallel.md, "Across machines"); the model is told
// by its model_index.json, the prompt file by the prompts it gave.
// An output's input images by their contents (a rank may keep them
// elsewhere).
nlohmann::json image_hashes(const pipeline::Request& req, int64_t i) {
  nlohmann::json hashes = nlohmann::json::array();
  if (req.images.empty()) return hashes;
  const pipeline::OutputImages& o = req.images[static_cast<size_t>(i)];
  for (const auto& image : {o.image, o.last_image}) hashes.push_back(image ? image->sha256 : "");
  return hashes;
}

std::string work_hash(const RunConfig& cfg, const pipeline::Request& req) {
  RunConfig settings = cfg;
  settings.output.skip_existing = false;
  settings.model.path.clear();
  settings.generate.prompt_file.clear();
  settings.generate.image.clear();
  settings.generate.last_image.clear();
  ContentHash h;
  h.update(to_json(settings).dump());
  // (Read when the pipeline opened the model: there.)
  h.update(io::read_file_bytes((std::filesystem::path(cfg.model.path) / "model_index.json").string()));
  for (int64_t i = 0; i < req.outputs(); ++i) {
    const nlohmann::json one = {{"label", req.labels.empty() ? -1 : req.labels[static_cast<size_t>(i)]},
                                {"prompt", req.prompts.empty() ? "" : req.prompts[static_cast<size_t>(i)]},
                                {"negative", req.negative_of(i)},
                                {"seed", req.seed_of(i)},
                                {"images", image_hashes(req, i)}};
    h.update(one.dump() + "\n");
  }
  return h.hex();
}

}  // namespace

BatchWork plan_batch_work(const RunConfig& cfg, const pipeline::Request& req,
                          const std::vector<std::unique_ptr<io::OutputWriter>>& writers, bool output_rank) {
  BatchWork work;
  work.hash = work_hash(cfg, req);
  parallel::Communicator& world = parallel::MpiRuntime::world();
  // Test hook: DITGEN_TEST_WORK_DIFFERS_ON_RANK=r makes rank r hash other
  // work, as if it had read another prompt file (tests/cli: the agreement).
  if (const char* r = std::getenv("DITGEN_TEST_WORK_DIFFERS_ON_RANK"); r && std::atoi(r) == world.rank())
    work.hash = hash_text(work.hash);
  const int64_t outputs = req.outputs();
  if (output_rank) {
    std::error_code ec;
    std::map<std::string, int64_t> owner;  // file -> the output that writes it
    for (int64_t i = 0; i < outputs; ++i) {
      std::vector<std::string> files;
      for (const auto& w : writers)
        for (std::string& f : w->paths_of(static_cast<int>(i))) files.push_back(std::move(f));
      for (const std::string& f : files)  // a JSONL name equal to another output's numbered stem
        if (const auto [it, fresh] = owner.emplace(f, i); !fresh)
          throw ConfigError(f + ": outputs " + std::to_string(it->second) + " and " + std::to_string(i) +
                            " would both write this file (a prompt file's \"name\" equal to another output's file "
                            "stem?)");
      bool done = cfg.output.skip_existing && !files.empty();
      for (const std::string& f : files) done = done && std::filesystem::is_regular_file(f, ec);
      if (!done) work.pending.push_back(i);
      work.files.push_back(std::move(files));
    }
  }
  if (world.size() == 1) return work;
  // Rank 0's hash and its list of outputs to make, to every rank.
  std::string hash0 = work.hash;
  hash0.resize(32);
  world.broadcast_bytes(hash0.data(), hash0.size(), 0);
  int64_t count = static_cast<int64_t>(work.pending.size());
  world.broadcast_bytes(&count, sizeof count, 0);
  work.pending.resize(static_cast<size_t>(count));
  if (count > 0) world.broadcast_bytes(work.pending.data(), static_cast<size_t>(count) * sizeof(int64_t), 0);
  // Every rank learns how many differ, so rank 0 (which reports config
  // errors for the job) fails too, with the message.
  float differing = hash0 != work.hash ? 1.0f : 0.0f;
  world.all_reduce_sum(&differing, 1);
  if (differing > 0.0f)
    throw ConfigError(std::to_string(static_cast<int>(differing)) + " of " + std::to_string(world.size()) +
                      " ranks read different work than rank 0 (this rank's work hash " + work.hash + ", rank 0's " +
                      hash0 + "): every rank must read the same config" +
                      (cfg.generate.prompt_file.empty() ? "" : " and prompt file " + cfg.generate.prompt_file));
  return work;
}

}  // namespace ditgen::cli
