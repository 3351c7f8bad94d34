// LoRA from the command line (docs/lora.md), end to end against diffusers:
// the tiny Wan with the peft adapter of tests/fixtures/lora/wan fused by
// diffusers (load_lora_weights + fuse_lora at 0.7) and run as a step- and
// CFG-distilled LoRA is (4 steps, guidance_scale 1), made by
// scripts/fixtures/make_lora_pipeline_fixtures.py: the config's `lora`
// section, and --lora FILE:SCALE, give its latents, which are far from the
// latents without the LoRA (and DiT with its peft adapter, merged by peft,
// diffusers having no DiT LoRA loader); under mpirun tp = 2 (each rank merging its rows
// or columns of each change) gives the single process's, sending per step
// the bytes `plan` computes for one forward without CFG's second half. A
// LoRA that matches nothing is exit 2 naming the count and the first keys,
// with nothing written; lora_strict false warns and runs without it; a
// second expert's target on a one-transformer model, lora_apply "runtime"
// and a LoRA on a GGUF block-quantized weight are exit 2 naming the field.
// Each output's metadata names the LoRA: file, SHA-256 (as sha256sum
// prints it), scale, target.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "fixture_runs.h"
#include "io/safetensors.h"
#include "layout_checks.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

std::string lora_dir() { return testing::fixture_dir("lora"); }
std::string run_config() { return lora_dir() + "/pipeline/wan_lora_run.json"; }
std::string noise() { return testing::reference_dir("wan_tiny") + "noise.safetensors"; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ditgen on `config` (under mpirun -np ranks when ranks > 1), its latents
// saved to dir/<name>.safetensors and its frames written into dir.
testing::Run run_lora(const testing::TempDir& dir, const std::string& name, const std::string& config,
                      const std::string& args, int ranks = 1, const std::string& env = "") {
  std::string launcher = env.empty() ? "" : env + " ";
  if (ranks > 1)
    launcher += std::string(DITGEN_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                " -x OMP_NUM_THREADS=1 " + (env.empty() ? "" : "-x " + env.substr(0, env.find('=')) + " ");
  return testing::run_command(launcher + DITGEN_EXE + " --device cpu --threads " + (ranks > 1 ? "1" : "2") +
                              " --config " + config + " --init-noise " + noise() + " --save-latents " +
                              dir.file(name + ".safetensors") + " --output " + dir.file(name + "/video.png") + " " +
                              args);
}

Tensor latents_of(const testing::TempDir& dir, const std::string& name) {
  return testing::saved_latents(dir.file(name + ".safetensors"));
}

// Output i's latents against the fixture's `tensor`_i (diffusers ran each
// prompt alone).
double error_to(const Tensor& got, const std::string& tensor) {
  const auto ref = io::SafetensorsFile::open(lora_dir() + "/pipeline/wan_lora_expected.safetensors");
  double worst = 0;
  for (int64_t i = 0; i < got.dim(0); ++i) {
    const Tensor want = ref->load(tensor + "_" + std::to_string(i));
    const Tensor mine = got.slice0(i, i + 1);
    REQUIRE(mine.numel() == want.numel());
    worst = std::max(worst, testing::rel_l2(mine.data(), want.data_as<float>(), want.numel()));
  }
  return worst;
}

// The run config with `edit` applied to its JSON, written into dir (its
// relative paths made absolute: they name places beside the fixture's).
std::string edited_config(const testing::TempDir& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json c = nlohmann::json::parse(read_text(run_config()));
  c["model"]["path"] = testing::fixture_dir("wan_tiny");
  for (auto& l : c["lora"]) l["path"] = lora_dir() + "/pipeline/" + l["path"].get<std::string>();
  edit(c);
  return dir.write("run.json", c.dump(2));
}

std::string sha256sum(const std::string& path) {
  const testing::Run r = testing::run_command("sha256sum " + path);
  REQUIRE(r.code == 0);
  return r.output.substr(0, 64);
}

}  // namespace

TEST_CASE("lora CLI: the lora section gives diffusers' fused-LoRA latents (Wan, 4 steps, guidance 1), and says so") {
  testing::TempDir dir("lora_cli");
  const testing::Run r = run_lora(dir, "lora", run_config(), "");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const Tensor got = latents_of(dir, "lora");
  const double err = error_to(got, "latents"), off = error_to(got, "latents_no_lora");
  MESSAGE("wan_tiny + LoRA 0.7: relative L2 to diffusers' fused run " << err << ", to the run without it " << off);
  CHECK(err < 1e-4);
  CHECK(off > 0.1);
  // One line for the LoRA: every key of the adapter applied (14 modules'
  // pairs and 8 LoRA biases: 36 keys), the two text-encoder keys skipped.
  CHECK_MESSAGE(r.output.find("ditgen: lora diffusers.safetensors (diffusers): ") != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find(", 2 skipped (2 text encoder), 0 unmatched") != std::string::npos, r.output);
  // The metadata of every frame names it: file, SHA-256, scale, target.
  const std::string png = read_text(dir.file("lora/video_0000_f000.png"));
  const std::string file = lora_dir() + "/wan/diffusers.safetensors";
  REQUIRE_MESSAGE(png.size() > 100, fs::path(dir.file("lora")));
  const std::string record = R"j("lora":[{"file":")j" + fs::path(file).lexically_normal().string() +
                             R"j(","scale":0.7,"sha256":")j" + sha256sum(file) + R"j(","target":"transformer"}])j";
  CHECK_MESSAGE(png.find(record) != std::string::npos, record);
  CHECK(png.find("Lora: diffusers.safetensors (0.7, transformer, sha256 " + sha256sum(file).substr(0, 12) + ")") !=
        std::string::npos);
  CHECK(png.find(R"j("lora":[{"path":)j") != std::string::npos);  // the config as given, in ditgen_config
}

TEST_CASE("lora CLI: DiT with peft's adapter merged by peft gives its latents, alone and under tp2") {
  // diffusers has no LoRA loader for DiT: the reference is peft's merge.
  testing::TempDir dir("lora_dit");
  const std::string config = lora_dir() + "/pipeline/dit_lora_run.json";
  const std::string dit_noise = testing::reference_dir("dit_odd") + "noise.safetensors";
  const auto ref = io::SafetensorsFile::open(lora_dir() + "/pipeline/dit_lora_expected.safetensors");
  const Tensor want = ref->load("latents").to(DType::kF32).clone(), plain = ref->load("latents_no_lora").to(DType::kF32).clone();
  for (const int ranks : {1, 2}) {
    CAPTURE(ranks);
    const std::string name = "dit" + std::to_string(ranks);
    std::string launcher = ranks > 1 ? std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " : "";
    const testing::Run r = testing::run_command(
        launcher + DITGEN_EXE + " --device cpu --threads 1 --quiet --config " + config + " --init-noise " + dit_noise +
        " --save-latents " + dir.file(name + ".safetensors") + " --output " + dir.file(name + "/img.png") +
        (ranks > 1 ? " --set parallel.tp=2" : ""));
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const Tensor got = latents_of(dir, name);
    const double err = testing::rel_l2(got, want);
    MESSAGE("dit_odd + peft LoRA 0.7 on " << ranks << " rank(s): relative L2 to peft's merged run " << err
                                          << ", to the run without it " << testing::rel_l2(got, plain));
    CHECK(err < 1e-4);
    CHECK(testing::rel_l2(got, plain) > 0.1);
  }
}

TEST_CASE("lora CLI: --lora FILE:SCALE appends to the list, as the config's section does") {
  testing::TempDir dir("lora_flag");
  const std::string file = lora_dir() + "/wan/diffusers.safetensors";
  testing::Run r = run_lora(dir, "flag", run_config(), "--quiet --set lora=null --lora " + file + ":0.7");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(error_to(latents_of(dir, "flag"), "latents") < 1e-4);
  // Two halves of the strength add up to it (several LoRAs add).
  r = run_lora(dir, "halves", run_config(), "--quiet --set lora=null --lora " + file + ":0.35 --lora " + file + ":0.35");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(testing::rel_l2(latents_of(dir, "halves"), latents_of(dir, "flag")) < 1e-5);
  // Without a scale: 1.
  r = run_lora(dir, "one", run_config(), "--quiet --set lora=null --lora " + file);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(testing::rel_l2(latents_of(dir, "one"), latents_of(dir, "flag")) > 1e-3);
}

TEST_CASE("lora CLI: tp2 under mpirun gives the single process's latents, one forward per step without CFG") {
  testing::TempDir dir("lora_tp");
  testing::Run r = run_lora(dir, "single", run_config(), "--quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::string comm = dir.file("comm.json");
  r = run_lora(dir, "tp2", run_config(), "--quiet --set parallel.tp=2", 2, "DITGEN_TEST_COMM_STATS=" + comm);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = testing::rel_l2(latents_of(dir, "tp2"), latents_of(dir, "single"));
  MESSAGE("tp2 vs one process with the LoRA merged: relative L2 " << err);
  CHECK(err < 1e-5);
  CHECK(error_to(latents_of(dir, "tp2"), "latents") < 1e-4);
  // guidance_scale 1: the all-reduces of one forward of 2 outputs a step,
  // not of the 4 rows CFG's two halves would send.
  const nlohmann::json sent = nlohmann::json::parse(std::ifstream(comm));
  REQUIRE(sent["forwards"].get<double>() == 4);
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("wan_tiny"));
  const auto& model = pipe->transformer();
  parallel::Workload work = model.workload(model.latent_shape(48, 80, 9, pipe->vae().factors(), ""));
  work.set_text_tokens(16);
  const parallel::Layout layout{1, 1, 2, parallel::SpMode::kUlysses};
  const double without_cfg = parallel::plan_layout(layout, work, 2, false, 4).comm_bytes_per_step_per_rank;
  const double with_cfg = parallel::plan_layout(layout, work, 2, true, 4).comm_bytes_per_step_per_rank;
  MESSAGE("bytes per step sent by rank 0: " << testing::sent_per_step(sent) << "; plan without CFG " << without_cfg
                                            << ", with " << with_cfg);
  CHECK(testing::sent_per_step(sent) == without_cfg);
  CHECK(without_cfg < with_cfg);
}

TEST_CASE("lora CLI: a LoRA that matches nothing is exit 2 naming the count and keys, lora_strict false a warning") {
  testing::TempDir dir("lora_strict");
  // DiT's adapter on Wan: none of its modules is Wan's.
  const std::string dit = lora_dir() + "/dit/diffusers.safetensors";
  const std::string strict = edited_config(dir, [&](nlohmann::json& c) { c["lora"] = {{{"path", dit}}}; });
  testing::Run r = run_lora(dir, "strict", strict, "");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find(dit + ": ") != std::string::npos, r.output);
  CHECK(r.output.find(" LoRA keys match no tensor of the model: transformer.") != std::string::npos);
  CHECK(r.output.find("(lora_strict: false applies the rest)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("strict.safetensors")));
  CHECK_FALSE(fs::exists(dir.file("strict")));
  // lora_strict false: a warning, and the run goes on without the changes
  // (none applies): diffusers' latents without a LoRA.
  const std::string lenient = edited_config(dir, [&](nlohmann::json& c) {
    c["lora"] = {{{"path", dit}}};
    c["lora_strict"] = false;
  });
  r = run_lora(dir, "lenient", lenient, "");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK_MESSAGE(r.output.find("ditgen: warning: " + dit + ": ") != std::string::npos, r.output);
  CHECK(r.output.find(": 0 keys applied to 0 tensors, ") != std::string::npos);
  CHECK(error_to(latents_of(dir, "lenient"), "latents_no_lora") < 1e-4);
}

TEST_CASE("lora CLI: a second expert's target on one transformer, lora_apply runtime, a bad --lora: exit 2") {
  testing::TempDir dir("lora_bad");
  const std::string second = edited_config(dir, [](nlohmann::json& c) { c["lora"][0]["target"] = "transformer_2"; });
  testing::Run r = run_lora(dir, "second", second, "");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("lora[0].target: \"transformer_2\": this model has one transformer") !=
                    std::string::npos,
                r.output);
  r = run_lora(dir, "runtime", run_config(), "--set lora_apply=runtime");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("lora_apply: \"runtime\" is not supported yet") != std::string::npos, r.output);
  r = run_lora(dir, "typo", run_config(), "--set lora=null --lora " + lora_dir() + "/wan/missing.safetensors:0.5");
  CHECK(r.code != 0);
  CHECK_MESSAGE(r.output.find("missing.safetensors") != std::string::npos, r.output);
  CHECK_FALSE(fs::exists(dir.file("typo")));
}

TEST_CASE("lora CLI: a LoRA on a GGUF block-quantized weight is exit 2 naming the tensor and lora_apply") {
  testing::TempDir dir("lora_gguf");
  const std::string gguf = testing::fixture_dir("wan_quant") + "/single_files/wan2.1-t2v-tiny-Q8_0.gguf";
  // A rank-2 LoRA of blocks.0.attn1.to_q in the shape the Q8_0 file holds it.
  const Shape shape = io::WeightStore::open_file(gguf).info("blocks.0.self_attn.q.weight").shape;
  Tensor a = Tensor::empty({2, shape[1]}), b = Tensor::empty({shape[0], 2});
  for (int64_t i = 0; i < a.numel(); ++i) a.data()[i] = 0.01f;
  for (int64_t i = 0; i < b.numel(); ++i) b.data()[i] = 0.01f;
  const std::string lora = dir.file("q.safetensors");
  io::write_safetensors(lora, {{"transformer.blocks.0.attn1.to_q.lora_A.weight", a},
                               {"transformer.blocks.0.attn1.to_q.lora_B.weight", b}});
  const testing::Run r = testing::run_command(
      std::string(DITGEN_EXE) + " --device cpu --config " + testing::reference_dir("wan_quant") + "run_gguf.json" +
      " --output " + dir.file("out/v.png") + " --lora " + lora);
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("tensor 'blocks.0.attn1.to_q.weight' is Q8_0 (GGUF blocks)") != std::string::npos,
                r.output);
  CHECK(r.output.find("lora_apply") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("out")));
}
