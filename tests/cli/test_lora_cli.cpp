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
// second expert's target on a one-transformer model is exit 2 naming the
// field. lora_apply "runtime" (the LoRA beside the weights, added in the
// linear layers) gives the merged latents, alone and under tp 2, also on
// DiT; beside int8 weights (model.quantize) diffusers' latents within
// int8's own error; on a Q8_0 GGUF transformer (run time by default) the
// latents of the same LoRA merged into the file's float32 dequantization,
// and lora_apply "merge" there is exit 2 naming the tensor.
// Each output's metadata names the LoRA: file, SHA-256 (as sha256sum
// prints it), scale, target.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <cmath>
#include <random>
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

TEST_CASE("lora CLI: DiT with peft's adapter merged by peft gives its latents, merged or at run time, alone, under tp2 and pp2") {
  // diffusers has no LoRA loader for DiT: the reference is peft's merge.
  testing::TempDir dir("lora_dit");
  const std::string config = lora_dir() + "/pipeline/dit_lora_run.json";
  const std::string dit_noise = testing::reference_dir("dit_odd") + "noise.safetensors";
  const auto ref = io::SafetensorsFile::open(lora_dir() + "/pipeline/dit_lora_expected.safetensors");
  const Tensor want = ref->load("latents").to(DType::kF32).clone(), plain = ref->load("latents_no_lora").to(DType::kF32).clone();
  for (const std::string apply : {"merge", "runtime"})
    for (const int ranks : {1, 2}) {
      CAPTURE(ranks);
      CAPTURE(apply);
      const std::string name = "dit" + std::to_string(ranks) + apply;
      std::string launcher = ranks > 1 ? std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " : "";
      const testing::Run r = testing::run_command(
          launcher + DITGEN_EXE + " --device cpu --threads 1 --quiet --config " + config + " --init-noise " + dit_noise +
          " --save-latents " + dir.file(name + ".safetensors") + " --output " + dir.file(name + "/img.png") +
          " --set lora_apply=" + apply + (ranks > 1 ? " --set parallel.tp=2" : ""));
      REQUIRE_MESSAGE(r.code == 0, r.output);
      const Tensor got = latents_of(dir, name);
      const double err = testing::rel_l2(got, want);
      MESSAGE("dit_odd + peft LoRA 0.7 (" << apply << ") on " << ranks << " rank(s): relative L2 to peft's merged run "
                                          << err << ", to the run without it " << testing::rel_l2(got, plain));
      CHECK(err < 1e-4);
      CHECK(testing::rel_l2(got, plain) > 0.1);
    }
  // PipeFusion (pp 2): each stage loads and applies only its own blocks' LoRA.
  for (const std::string apply : {"merge", "runtime"}) {
    const testing::Run r = testing::run_command(
        std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " + DITGEN_EXE +
        " --device cpu --threads 1 --quiet --config " + config + " --init-noise " + dit_noise + " --save-latents " +
        dir.file("pp_" + apply + ".safetensors") + " --output " + dir.file("pp_" + apply + "/img.png") +
        " --set parallel.pp=2 --set lora_apply=" + apply);
    REQUIRE_MESSAGE(r.code == 0, r.output);
  }
  const double pp = testing::rel_l2(latents_of(dir, "pp_runtime"), latents_of(dir, "pp_merge"));
  MESSAGE("pp2, LoRA at run time against merged: relative L2 " << pp);
  CHECK(pp < 1e-5);
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

TEST_CASE("lora CLI: a second expert's target on one transformer, a bad --lora: exit 2") {
  testing::TempDir dir("lora_bad");
  const std::string second = edited_config(dir, [](nlohmann::json& c) { c["lora"][0]["target"] = "transformer_2"; });
  testing::Run r = run_lora(dir, "second", second, "");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("lora[0].target: \"transformer_2\": this model has one transformer") !=
                    std::string::npos,
                r.output);
  r = run_lora(dir, "typo", run_config(), "--set lora=null --lora " + lora_dir() + "/wan/missing.safetensors:0.5");
  CHECK(r.code != 0);
  CHECK_MESSAGE(r.output.find("missing.safetensors") != std::string::npos, r.output);
  CHECK_FALSE(fs::exists(dir.file("typo")));
}

TEST_CASE("lora CLI: lora_apply runtime gives the merged latents (diffusers' fused run), alone, under tp2 and Ulysses sp2") {
  testing::TempDir dir("lora_runtime");
  testing::Run r = run_lora(dir, "merged", run_config(), "--quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  r = run_lora(dir, "runtime", run_config(), "--quiet --set lora_apply=runtime");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const Tensor runtime = latents_of(dir, "runtime");
  const double to_merged = testing::rel_l2(runtime, latents_of(dir, "merged"));
  const double to_diffusers = error_to(runtime, "latents");
  MESSAGE("wan_tiny + LoRA 0.7 at run time: relative L2 to the merged run " << to_merged << ", to diffusers' fused run "
                                                                           << to_diffusers);
  CHECK(to_merged < 1e-5);
  CHECK(to_diffusers < 1e-4);
  CHECK(error_to(runtime, "latents_no_lora") > 0.1);
  // tp 2: each rank B's rows of its column-parallel layers, A's columns
  // of its row-parallel ones.
  r = run_lora(dir, "runtime_tp2", run_config(), "--quiet --set lora_apply=runtime --set parallel.tp=2", 2);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double tp = testing::rel_l2(latents_of(dir, "runtime_tp2"), runtime);
  MESSAGE("tp2 vs one process, LoRA at run time: relative L2 " << tp);
  CHECK(tp < 1e-5);
  // Ulysses sp 2: whole weights on each rank, the tokens split; merged
  // and at run time alike.
  for (const std::string apply : {"merged", "runtime"}) {
    CAPTURE(apply);
    r = run_lora(dir, apply + "_sp2", run_config(),
                 "--quiet --set lora_apply=" + (apply == "merged" ? std::string("merge") : apply) +
                     " --set parallel.sp=2 --set parallel.sp_mode=ulysses",
                 2);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const double sp = testing::rel_l2(latents_of(dir, apply + "_sp2"), latents_of(dir, apply));
    MESSAGE("ulysses sp2 vs one process, LoRA " << apply << ": relative L2 " << sp);
    CHECK(sp < 1e-5);
  }
}

TEST_CASE("lora CLI: beside int8 weights (model.quantize), the LoRA moves the latents as diffusers' fused LoRA does") {
  // int8 rounds every block's products (about 1e-2 of the latents here):
  // the run with the LoRA is as far from diffusers' fused run as the run
  // without it is from diffusers' plain one, whether the LoRA is applied
  // beside the int8 weights or merged before they are quantized.
  testing::TempDir dir("lora_int8");
  testing::Run r = run_lora(dir, "plain", run_config(), "--quiet --set model.quantize=int8 --set lora=null");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double base = error_to(latents_of(dir, "plain"), "latents_no_lora");
  for (const std::string apply : {"runtime", "merge"}) {
    CAPTURE(apply);
    r = run_lora(dir, apply, run_config(), "--quiet --set model.quantize=int8 --set lora_apply=" + apply);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const Tensor got = latents_of(dir, apply);
    const double err = error_to(got, "latents"), off = error_to(got, "latents_no_lora");
    MESSAGE("int8 + LoRA 0.7 (" << apply << "): relative L2 to diffusers' fused float32 run " << err
                                << " (int8 without the LoRA to diffusers' plain run: " << base << "), to the run "
                                << "without the LoRA " << off);
    CHECK(err < std::max(3 * base, 1e-3));
    CHECK(err < 0.05);
    CHECK(off > 0.1);
  }
}

namespace {

// A random LoRA for the wan_quant transformer (diffusers names, shapes from
// its folder): rank-4 pairs on an attention projection, both feed-forward
// layers (the first is column-parallel with a GELU, the second
// row-parallel) and the output projection, each B A about half its
// weight's spread.
std::string quant_lora(const testing::TempDir& dir) {
  const io::WeightStore w = io::WeightStore::open_dir(testing::fixture_dir("wan_quant") + "/transformer");
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint32_t seed = 1;
  for (const std::string module : {"blocks.0.attn1.to_q", "blocks.0.ffn.net.0.proj", "blocks.1.ffn.net.2",
                                   "blocks.1.attn2.to_out.0", "proj_out"}) {
    const Tensor weight = w.load_f32(module + ".weight");
    double sq = 0;
    for (int64_t i = 0; i < weight.numel(); ++i) sq += double(weight.data()[i]) * weight.data()[i];
    const double spread = std::sqrt(sq / static_cast<double>(weight.numel()));
    const int64_t rank = 4;
    const float sd = static_cast<float>(std::sqrt(0.5 * spread / std::sqrt(double(rank))));
    Tensor a = Tensor::empty({rank, weight.dim(1)}), b = Tensor::empty({weight.dim(0), rank});
    std::mt19937 gen(seed++);
    std::normal_distribution<float> d(0.0f, sd);
    for (int64_t i = 0; i < a.numel(); ++i) a.data()[i] = d(gen);
    for (int64_t i = 0; i < b.numel(); ++i) b.data()[i] = d(gen);
    tensors.emplace_back("transformer." + module + ".lora_A.weight", a);
    tensors.emplace_back("transformer." + module + ".lora_B.weight", b);
  }
  const std::string path = dir.file("quant_lora.safetensors");
  io::write_safetensors(path, tensors);
  return path;
}

}  // namespace

TEST_CASE("lora CLI: a LoRA on a Q8_0 GGUF transformer applies at run time, as merged into its float32 dequantization") {
  testing::TempDir dir("lora_gguf");
  const std::string gguf = testing::fixture_dir("wan_quant") + "/single_files/wan2.1-t2v-tiny-Q8_0.gguf";
  const std::string f32 = dir.file("q8_0_as_f32.safetensors");
  testing::Run r = testing::run_command(std::string(DITGEN_EXE) + " convert --input " + gguf +
                                        " --component transformer --type f32 --output " + f32 + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::string lora = quant_lora(dir);
  const auto run = [&](const std::string& name, const std::string& args, int ranks = 1) {
    std::string launcher =
        ranks > 1 ? std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " : "";
    return testing::run_command(launcher + DITGEN_EXE + " --device cpu --threads " + (ranks > 1 ? "1" : "2") +
                                " --config " + testing::reference_dir("wan_quant") + "run_gguf.json --output " +
                                dir.file(name + "/v.png") + " --save-latents " + dir.file(name + ".safetensors") +
                                " " + args);
  };
  r = run("blocks", "--lora " + lora + ":0.8");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  r = run("dense", "--lora " + lora + ":0.8 --set model.transformer=" + f32);  // merged into float32 at load
  REQUIRE_MESSAGE(r.code == 0, r.output);
  r = run("plain", "");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const Tensor blocks = latents_of(dir, "blocks");
  const double err = testing::rel_l2(blocks, latents_of(dir, "dense"));
  const double off = testing::rel_l2(blocks, latents_of(dir, "plain"));
  MESSAGE("Q8_0 + LoRA at run time against the LoRA merged into its float32 dequantization: relative L2 " << err
                                                                                                        << ", to the run without it " << off);
  CHECK(err < 1e-5);
  CHECK(off > 0.05);
  // tp 2 on the blocks: each rank's rows / whole blocks of columns, and its share of each pair.
  r = run("blocks_tp2", "--lora " + lora + ":0.8 --set parallel.tp=2", 2);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double tp = testing::rel_l2(latents_of(dir, "blocks_tp2"), blocks);
  MESSAGE("Q8_0 + LoRA, tp2 vs one process: relative L2 " << tp);
  CHECK(tp < 1e-5);
  // Merging into the blocks would need a float copy of them: exit 2, naming the tensor.
  r = run("merge", "--lora " + lora + ":0.8 --set lora_apply=merge");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("tensor 'blocks.0.attn1.to_q.weight' is Q8_0 (GGUF blocks)") != std::string::npos,
                r.output);
  CHECK(r.output.find("lora_apply") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("merge")));
}

TEST_CASE("lora CLI: Wan 2.2's two experts, each or both with a LoRA, give diffusers' fused latents, merged or at run time") {
  // scripts/fixtures/make_lora_wan22_fixtures.py: WanPipeline on wan22_tiny with
  // load_lora_weights(..., load_into_transformer_2=...) + fuse_lora at 0.7 (UniPC, 4 steps:
  // two on each expert, CFG 4 then 3).
  testing::TempDir dir("lora_wan22");
  const std::string cases = lora_dir() + "/wan22_pipeline/";
  const auto ref = io::SafetensorsFile::open(cases + "expected.safetensors");
  for (const std::string which : {"transformer", "transformer_2", "both", "pair"})
    for (const std::string apply : {"merge", "runtime"}) {
      CAPTURE(which);
      CAPTURE(apply);
      const std::string name = which + "_" + apply;
      const testing::Run r = testing::run_command(
          std::string(DITGEN_EXE) + " --device cpu --threads 2 --quiet --config " + cases + which + "_run.json" +
          " --init-noise " + testing::reference_dir("wan22_tiny") + "noise.safetensors --save-latents " +
          dir.file(name + ".safetensors") + " --output " + dir.file(name + "/v.png") + " --set lora_apply=" + apply);
      REQUIRE_MESSAGE(r.code == 0, r.output);
      const Tensor got = latents_of(dir, name);
      double err = 0, off = 1e9;
      for (int64_t i = 0; i < got.dim(0); ++i) {
        const Tensor mine = got.slice0(i, i + 1);
        const Tensor want = ref->load(which + "_" + std::to_string(i)), plain = ref->load("no_lora_" + std::to_string(i));
        REQUIRE(mine.numel() == want.numel());
        err = std::max(err, testing::rel_l2(mine.data(), want.data_as<float>(), want.numel()));
        off = std::min(off, testing::rel_l2(mine.data(), plain.data_as<float>(), plain.numel()));
      }
      MESSAGE("wan22_tiny, LoRA on " << which << " (" << apply << "): relative L2 to diffusers' fused run " << err
                                     << ", to the run without it " << off);
      CHECK(err < 1e-4);
      CHECK(off > 1e-2);
    }
}
