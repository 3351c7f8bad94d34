// See lora_setup.h. Each file is read once, its targets given their expert,
// matched against each transformer's store and added to that one's merge.
#include "pipeline/lora_setup.h"

#include <array>
#include <optional>

#include "io/file_map.h"
#include "io/lora_coverage.h"
#include "io/lora_file.h"
#include "io/safetensors.h"
#include "models/lora_merge.h"
#include "pipeline/pipeline.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ditgen::pipeline {
namespace {

using io::LoraExpert;

// `file` with each target its keys give no expert placed on the expert(s)
// lora[i].target names (a copy per expert for "both"; the copies share
// their tensors).
io::LoraFile for_target(const io::LoraFile& file, LoraTargetChoice target) {
  io::LoraFile out = file;
  out.targets.clear();
  for (const io::LoraTarget& t : file.targets) {
    if (t.expert != LoraExpert::kAny) {
      out.targets.push_back(t);
      continue;
    }
    for (const LoraExpert e : {LoraExpert::kTransformer, LoraExpert::kTransformer2}) {
      const bool wanted = target == LoraTargetChoice::kBoth ||
                          (target == LoraTargetChoice::kTransformer) == (e == LoraExpert::kTransformer);
      if (!wanted) continue;
      io::LoraTarget copy = t;
      copy.expert = e;
      out.targets.push_back(std::move(copy));
    }
  }
  return out;
}

// Whether `t` is applied beside its weight at run time (else merged at
// load): a low-rank change under lora_apply "runtime", or by default on a
// GGUF block-quantized weight, whose merge would need a float copy of it
// (refused, as is any full-weight delta to such a weight).
bool at_runtime(const io::LoraTarget& t, const io::WeightStore& store, const LoraRules& rules) {
  const bool low_rank = t.kind == io::LoraKind::kLowRank;
  const bool blocks = store.block_quantized(t.tensor);
  if (blocks && (!low_rank || rules.apply == LoraApply::kMerge)) throw ConfigError(store.block_edit_refusal(t.tensor));
  return low_rank && (blocks || rules.apply == LoraApply::kRuntime);
}

std::string file_sha256(const std::string& path) {
  const io::FileMap map(path, 0, "a LoRA file");
  return sha256_hex(map.data(), map.size());
}

}  // namespace

LoraSetup setup_lora(const std::vector<LoraConfig>& loras, const LoraRules& rules, const ModelParts& parts,
                     const std::string& where) {
  LoraSetup out;
  if (loras.empty()) return out;
  const bool two = parts.spec_2 != nullptr;
  std::vector<io::WeightStore> stores = {parts.weights("transformer")};
  if (two) stores.push_back(parts.weights("transformer_2"));
  io::LoraReadOptions options;
  options.model_tensor_names = stores[0].names();
  const std::array<std::shared_ptr<models::LoraMerge>, 2> merges = {std::make_shared<models::LoraMerge>(),
                                                                    std::make_shared<models::LoraMerge>()};
  for (size_t i = 0; i < loras.size(); ++i) {
    const LoraConfig& c = loras[i];
    if (!two && c.target != LoraTargetChoice::kTransformer)
      throw ConfigError(where + ": lora[" + std::to_string(i) + "].target: \"" + name_of(c.target) +
                        "\": this model has one transformer (" + parts.dir.root() +
                        "/model_index.json: no boundary_ratio); leave target out");
    const auto file = std::make_shared<const io::LoraFile>(for_target(io::read_lora_file(c.path, options), c.target));
    io::LoraMatch all;  // over both experts: the report line and the coverage check
    for (size_t e = 0; e < stores.size(); ++e) {
      const io::WeightStore& store = stores[e];
      const io::LoraMatch m =
          io::match_lora(*file, e == 0 ? LoraExpert::kTransformer : LoraExpert::kTransformer2,
                         [&](const std::string& name) -> std::optional<Shape> {
                           if (!store.contains(name)) return std::nullopt;
                           return store.info(name).shape;
                         });
      all.applied.insert(all.applied.end(), m.applied.begin(), m.applied.end());
      // the file's unknown keys close each match's list: counted once
      const size_t own = m.unmatched.size() - (e == 0 ? 0 : file->unknown.size());
      all.unmatched.insert(all.unmatched.end(), m.unmatched.begin(), m.unmatched.begin() + static_cast<long>(own));
      if (!two)
        for (const io::LoraTarget* t : m.other_expert)
          for (const std::string& key : t->keys)
            all.unmatched.push_back({key, "for transformer_2, and this model has one transformer"});
      for (const io::LoraTarget* t : m.applied) merges[e]->add(file, *t, c.scale, at_runtime(*t, store, rules));
    }
    out.lines.push_back(io::lora_report_line(*file, all));
    const std::string warning = io::check_lora_coverage(*file, all, rules.strict);
    if (!warning.empty()) out.lines.push_back("warning: " + warning);
    out.records.push_back({c.path, file_sha256(c.path), c.scale, name_of(c.target)});
  }
  if (!merges[0]->empty()) out.transformer = merges[0];
  if (!merges[1]->empty()) out.transformer_2 = merges[1];
  return out;
}

void check_runtime_lora_taken(const io::WeightEdits* edits, const std::string& part) {
  if (!edits) return;
  const std::vector<std::string> untaken = edits->runtime_untaken();
  if (untaken.empty()) return;
  throw ConfigError(part + ": tensor '" + untaken.front() + "' (and " + std::to_string(untaken.size() - 1) +
                    " more) takes a LoRA at run time, and no linear layer reads it: applying a LoRA at run time "
                    "is not supported for it (lora_apply \"merge\" merges it into a float weight)");
}

}  // namespace ditgen::pipeline
