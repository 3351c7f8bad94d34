// See parse_run_config.h. One function per section, in schema order; the
// cross-field rules come last so each field's own type error is reported
// first.
#include "config/parse_run_config.h"

#include <string>
#include <tuple>

#include "config/object_reader.h"
#include "config/prompt_file.h"

namespace ditgen::config {
namespace {

using nlohmann::json;

ModelConfig parse_model(const ObjectReader& model) {
  ModelConfig c;
  c.path = model.required_string("path", "the diffusers-layout model directory");
  c.source = model.string("source", c.source);
  c.dtype = model.enum_choice("dtype", c.dtype, kDTypeChoiceNames);
  c.vae_dtype = model.enum_choice("vae_dtype", c.vae_dtype, kVaeDTypeChoiceNames);
  c.transformer = model.string("transformer", c.transformer);
  c.transformer_2 = model.string("transformer_2", c.transformer_2);
  c.text_encoder = model.string("text_encoder", c.text_encoder);
  c.vae = model.string("vae", c.vae);
  c.quantize = model.enum_choice("quantize", c.quantize, kQuantizeNames);
  return c;
}

std::vector<ClassLabel> parse_class_labels(const json& value, const std::string& path,
                                           const ConfigContext& context) {
  std::vector<ClassLabel> labels;
  const json& list = read_array(value, path, context);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    if (item.is_string()) {
      if (item.get<std::string>().empty()) context.fail(item_path, "expected a class name, got \"\"");
      labels.emplace_back(item.get<std::string>());
    } else if (item.is_number_integer()) {
      labels.emplace_back(read_integer(item, item_path, 0, context));
    } else {
      context.fail(item_path, "expected a class id (non-negative integer) or class name (string), got " +
                                  describe_value(item));
    }
  }
  return labels;
}

std::vector<std::string> parse_prompts(const json& value, const std::string& path,
                                       const ConfigContext& context) {
  std::vector<std::string> prompts;
  const json& list = read_array(value, path, context);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    if (!list[i].is_string()) context.fail(item_path, "expected a prompt string, got " + describe_value(list[i]));
    const std::string& prompt = list[i].get_ref<const std::string&>();
    if (const std::string problem = empty_prompt_problem(prompt); !problem.empty()) context.fail(item_path, problem);
    prompts.push_back(prompt);
  }
  return prompts;
}

GenerateConfig parse_generate(const ObjectReader& generate) {
  const ConfigContext& context = generate.context();
  GenerateConfig c;
  if (const json* labels = generate.find("class_labels"))
    c.class_labels = parse_class_labels(*labels, generate.path_of("class_labels"), context);
  if (const json* prompts = generate.find("prompts"))
    c.prompts = parse_prompts(*prompts, generate.path_of("prompts"), context);
  c.negative_prompt = generate.string("negative_prompt", c.negative_prompt);
  c.negative_prompt_given = generate.find("negative_prompt") != nullptr;
  c.prompt_file = generate.string("prompt_file", c.prompt_file);
  c.image = generate.string("image", c.image);
  c.last_image = generate.string("last_image", c.last_image);
  c.max_sequence_length = generate.integer("max_sequence_length", c.max_sequence_length, 1);
  c.seed = generate.unsigned64("seed", c.seed);
  c.steps = generate.integer("steps", c.steps, 1);
  c.guidance_scale = generate.number("guidance_scale", c.guidance_scale, 0, /*min_exclusive=*/false);
  // That the model has a second expert is checked with the model.
  if (generate.find("guidance_scale_2"))
    c.guidance_scale_2 = generate.number("guidance_scale_2", 0, 0, /*min_exclusive=*/false);
  // "" keeps the model's own scheduler config, and lets --set undo a choice.
  c.scheduler = generate.enum_choice("scheduler", c.scheduler, sched::kSamplers);
  // A flow sampler's shift (flow_shift / shift in the scheduler config);
  // that the model's scheduler is a flow one is checked with the model.
  if (generate.find("shift")) c.shift = generate.number("shift", 0, 0, /*min_exclusive=*/true);
  c.batch_size = generate.integer("batch_size", c.batch_size, 1);
  // 0 stands for "the model's default" inside, and is no count to give:
  // leave the key out for the default.
  c.frames = generate.integer("frames", c.frames, 1);
  c.height = generate.integer("height", c.height, 1);
  c.width = generate.integer("width", c.width, 1);

  // A list given empty is named (with no prompt file taking its place).
  if (c.prompt_file.empty() && generate.find("prompts") && c.prompts.empty() && c.class_labels.empty())
    context.fail(generate.path_of("prompts"), "expected at least one prompt, got []");
  if (generate.find("class_labels") && c.class_labels.empty() && c.prompts.empty() && c.prompt_file.empty())
    context.fail(generate.path_of("class_labels"), "expected at least one class id or name, got []");
  if (!c.prompt_file.empty() && !c.prompts.empty())
    context.fail(generate.path_of("prompt_file"), "give generate.prompts or generate.prompt_file, not both");
  if (c.class_labels.empty() && c.prompts.empty() && c.prompt_file.empty())
    context.fail(generate.path_of("class_labels"),
                 "required: a non-empty list of class ids or names (or generate.prompts for a "
                 "text-conditional model)");
  if (!c.class_labels.empty() && !c.prompts.empty())
    context.fail(generate.path_of("prompts"),
                 "give generate.class_labels or generate.prompts, not both (one output per label or prompt)");
  return c;
}

ParallelConfig parse_parallel(const ObjectReader& parallel) {
  ParallelConfig c;
  c.sp = parallel.integer("sp", c.sp, 1);
  c.cp = parallel.integer("cp", c.cp, 1);
  c.tp = parallel.integer("tp", c.tp, 1);
  c.sp_mode = parallel.enum_choice("sp_mode", c.sp_mode, ditgen::parallel::kSpModeNames);
  c.pp = parallel.integer("pp", c.pp, 1);
  c.patches = parallel.integer("patches", c.patches, 0);
  c.warmup_steps = parallel.integer("warmup_steps", c.warmup_steps, 1);
  if (const nlohmann::json* weights = parallel.find("sp_weights")) {
    const std::string path = parallel.path_of("sp_weights");
    const nlohmann::json& list = read_array(*weights, path, parallel.context());
    if (list.empty()) parallel.context().fail(path, "expected one weight per rank, got an empty list");
    for (size_t i = 0; i < list.size(); ++i)
      c.sp_weights.push_back(read_integer(list[i], path + "[" + std::to_string(i) + "]", 1, parallel.context()));
  }
  // A setting of what sp > 1 or pp > 1 enables means nothing without it:
  // a mistake to report, as an unknown key is (config/command_line_rules.h
  // drops those the command line retired).
  // (sp_mode also picks how PipeFusion shares a patch, so pp > 1 uses it.)
  if (c.sp == 1 && c.pp == 1 && parallel.find("sp_mode") && c.sp_mode != ditgen::parallel::SpMode::kAuto)
    parallel.context().fail(parallel.path_of("sp_mode"),
                            "applies to sequence parallelism and PipeFusion only (parallel.sp or parallel.pp > 1), "
                            "and both are 1; remove it or set parallel.sp");
  if (c.pp == 1)
    for (const char* key : {"patches", "warmup_steps"})
      if (parallel.find(key))
        parallel.context().fail(parallel.path_of(key),
                                "applies to PipeFusion only (parallel.pp > 1), and parallel.pp is 1; remove it or set "
                                "parallel.pp");
  if (c.cp > 2)
    parallel.context().fail(parallel.path_of("cp"),
                            "expected 1 or 2 (the two halves of classifier-free guidance), got " +
                                std::to_string(c.cp));
  return c;
}

std::optional<PabKindConfig> parse_pab_kind(const ObjectReader& pab, const std::string& kind) {
  if (!pab.find(kind)) return std::nullopt;
  const ObjectReader section = pab.section(kind);
  const ConfigContext& context = section.context();
  PabKindConfig c;

  // No hidden defaults: a configured kind states its schedule.
  if (!section.find("range")) context.fail(section.path_of("range"), "required (recompute every `range` steps)");
  c.range = section.integer("range", 0, 1);

  const std::string threshold_path = section.path_of("threshold");
  const json* threshold = section.find("threshold");
  if (!threshold) context.fail(threshold_path, "required ([low, high] timestep window)");
  const json& window = read_array(*threshold, threshold_path, context);
  if (window.size() != 2)
    context.fail(threshold_path, "expected [low, high] (two numbers), got " + describe_value(window));
  c.threshold = {read_number(window[0], threshold_path + "[0]", context),
                 read_number(window[1], threshold_path + "[1]", context)};
  if (!(c.threshold[0] < c.threshold[1]))
    context.fail(threshold_path, "expected low < high, got " + describe_value(window));

  if (kind == "mlp") {
    const std::string blocks_path = section.path_of("blocks");
    const json* blocks = section.find("blocks");
    if (!blocks) context.fail(blocks_path, "required (the block indices whose MLP output is broadcast)");
    const json& list = read_array(*blocks, blocks_path, context);
    if (list.empty()) context.fail(blocks_path, "expected at least one block index, got []");
    for (std::size_t i = 0; i < list.size(); ++i)
      c.blocks.push_back(read_integer(list[i], blocks_path + "[" + std::to_string(i) + "]", 0, context));
  }
  return c;
}

PabConfig parse_pab(const ObjectReader& pab) {
  PabConfig c;
  c.spatial = parse_pab_kind(pab, "spatial");
  c.temporal = parse_pab_kind(pab, "temporal");
  c.cross = parse_pab_kind(pab, "cross");
  c.mlp = parse_pab_kind(pab, "mlp");
  return c;
}

// docs/design.md §8: kind and threshold required (no hidden defaults, as PAB's
// kinds); coefficients for teacache only, exactly kTeaCacheCoefficients.
CacheConfig parse_cache(const ObjectReader& cache) {
  CacheConfig c;
  // {} (or absent) = off, as pab; unknown keys were rejected already.
  if (!cache.find("kind") && !cache.find("threshold") && !cache.find("coefficients")) return c;
  const ConfigContext& context = cache.context();
  if (!cache.find("kind"))
    context.fail(cache.path_of("kind"), "required (\"first_block\" or \"teacache\")");
  c.kind = cache.enum_choice("kind", CacheKind::kFirstBlock, kCacheKindNames);
  if (!cache.find("threshold"))
    context.fail(cache.path_of("threshold"), "required (skip while the change is below it, e.g. 0.05)");
  c.threshold = cache.number("threshold", 0, 0, /*min_exclusive=*/true);
  if (const json* coefficients = cache.find("coefficients")) {
    const std::string path = cache.path_of("coefficients");
    if (*c.kind != CacheKind::kTeaCache)
      context.fail(path, std::string("applies to kind \"teacache\" only, and cache.kind is \"") + name_of(*c.kind) +
                             "\"");
    const json& list = read_array(*coefficients, path, context);
    if (list.size() != kTeaCacheCoefficients)
      context.fail(path, "expected " + std::to_string(kTeaCacheCoefficients) +
                             " numbers (a degree-4 polynomial, highest power first), got " + describe_value(list));
    for (std::size_t i = 0; i < list.size(); ++i)
      c.coefficients.push_back(read_number(list[i], path + "[" + std::to_string(i) + "]", context));
  }
  return c;
}

OutputConfig parse_output(const ObjectReader& output) {
  OutputConfig c;
  c.path = output.required_string("path", "the output file, e.g. out/dit.png");
  c.format = output.enum_choice("format", c.format, kOutputFormatNames);
  // Settings of the MP4 encoder mean nothing for PNG files: given with png,
  // they are a mistake to report, as an unknown key is.
  if (c.format != OutputFormat::kMp4)
    for (const char* key : {"fps", "crf"})
      if (output.find(key))
        output.context().fail(output.path_of(key),
                              std::string("applies to mp4 output only, and output.format is \"") + name_of(c.format) +
                                  "\"; remove it (--set " + output.path_of(key) + "=null) or write mp4");
  c.fps = output.number("fps", c.fps, 0, /*min_exclusive=*/true);
  // The MP4 time base is 1/fps as a fraction with a denominator up to 1e5
  // (io/mp4_writer.h); 1000 is far above any video's rate, so anything
  // beyond is a typo rather than a wish.
  if (c.fps < 0.001 || c.fps > 1000)
    output.context().fail(output.path_of("fps"), "expected frames per second in [0.001, 1000], got " +
                                                     json(c.fps).dump());
  c.crf = output.integer("crf", c.crf, 0);
  if (c.crf > 51)
    output.context().fail(output.path_of("crf"),
                          "expected an integer in 0..51 (x264's constant rate factor), got " + std::to_string(c.crf));
  c.grid = output.boolean("grid", c.grid);
  c.skip_existing = output.boolean("skip_existing", c.skip_existing);
  return c;
}

// The lora list (docs/lora.md): each item an object of path, scale and
// target, its keys checked here (the schema's walk does not enter lists).
std::vector<LoraConfig> parse_lora(const ObjectReader& root) {
  std::vector<LoraConfig> list;
  const json* value = root.find("lora");
  if (!value) return list;
  const ConfigContext& context = root.context();
  const json& items = read_array(*value, "lora", context);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const ObjectReader item(items[i], "lora[" + std::to_string(i) + "]", context);
    for (const auto& entry : items[i].items())
      if (entry.key() != "path" && entry.key() != "scale" && entry.key() != "target")
        context.fail(item.path_of(entry.key()), "unknown key (a LoRA is {\"path\", \"scale\", \"target\"})");
    LoraConfig c;
    c.path = item.required_string("path", "the LoRA's .safetensors file");
    if (const json* scale = item.find("scale")) c.scale = read_number(*scale, item.path_of("scale"), context);
    c.target = item.enum_choice("target", c.target, kLoraTargetNames);
    list.push_back(std::move(c));
  }
  return list;
}

// The vae section: sizes are positive integers (absent = the VAE's
// default), a stride no more than its min when both are given.
VaeConfig parse_vae(const ObjectReader& vae) {
  VaeConfig c;
  c.tiling = vae.enum_choice("tiling", c.tiling, kVaeTilingNames);
  c.tile_sample_min_height = vae.integer("tile_sample_min_height", 0, 1);
  c.tile_sample_min_width = vae.integer("tile_sample_min_width", 0, 1);
  c.tile_sample_stride_height = vae.integer("tile_sample_stride_height", 0, 1);
  c.tile_sample_stride_width = vae.integer("tile_sample_stride_width", 0, 1);
  for (const auto& [stride, min, side] : {std::tuple{c.tile_sample_stride_height, c.tile_sample_min_height, "height"},
                                          std::tuple{c.tile_sample_stride_width, c.tile_sample_min_width, "width"}})
    if (stride > 0 && min > 0 && stride > min)
      vae.context().fail(vae.path_of(std::string("tile_sample_stride_") + side),
                         std::to_string(stride) + " is over tile_sample_min_" + side + " " + std::to_string(min) +
                             " (tiles would leave gaps; the overlap blended is min - stride)");
  return c;
}

}  // namespace

RunConfig parse_run_config(const json& document, const ConfigContext& context) {
  if (!document.is_object())
    context.fail("", "expected a JSON object at the top level, got " + describe_value(document));
  const ObjectReader root(document, "", context);
  RunConfig c;
  c.model = parse_model(root.section("model"));
  c.generate = parse_generate(root.section("generate"));
  c.parallel = parse_parallel(root.section("parallel"));
  c.pab = parse_pab(root.section("pab"));
  c.cache = parse_cache(root.section("cache"));
  c.output = parse_output(root.section("output"));
  c.lora = parse_lora(root);
  c.lora_strict = root.boolean("lora_strict", c.lora_strict);
  if (root.find("lora_apply")) c.lora_apply = root.enum_choice("lora_apply", LoraApply::kMerge, kLoraApplyNames);
  c.vae = parse_vae(root.section("vae"));

  // Rules across sections that the model or the layout decide (cp = 2
  // needs guidance: parallel::layout_problems; PAB with PipeFusion:
  // pipeline/run_checks.h) are checked once, where those are known.
  return c;
}

}  // namespace ditgen::config
