// `ditgen convert` as a user runs it, against files made by the reference
// tools (tests/fixtures/wan_quant: city96's GGUF pipeline with ggml's own
// quantizers, gguf-py's dequantized values, diffusers' WanPipeline): the
// Wan folder converted to Q8_0 and F16 is city96's file byte for byte; its
// Q4_K / Q5_K / Q6_K / Q4_0 blocks are ggml's; a GGUF converted back to
// bf16 safetensors holds gguf-py's dequantized values rounded to bfloat16,
// in the original Wan names; the converted file runs as model.transformer
// with the committed file's latents (and diffusers'); a DiT folder (diffusers'
// names) quantizes its block matrices only and runs close to the folder;
// every bad input exits with its code and a line naming the field or file,
// leaving no output behind.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "fixture_runs.h"
#include "io/ggml_quants.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kWan = testing::fixture_dir("wan_quant");
const std::string kSingle = kWan + "/single_files/";

testing::Run convert(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " convert --threads 2 " + args);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string tensor_bytes(const io::GgufFile& f, const std::string& name) {
  return {reinterpret_cast<const char*>(f.data(name)), f.tensor(name).nbytes};
}

std::string type_name(math::GgmlType t) { return math::ggml_traits(t).name; }

// name -> (type, shape) of a GGUF file.
std::map<std::string, std::pair<std::string, Shape>> table(const io::GgufFile& f) {
  std::map<std::string, std::pair<std::string, Shape>> out;
  for (const io::GgufTensor& t : f.tensors()) out[t.name] = {type_name(t.type), t.shape};
  return out;
}

std::string metadata_string(const io::GgufFile& f, const std::string& key) {
  const io::GgufValue* v = f.find(key);
  if (!v) return "(none)";
  int64_t n = 0;
  return v->type == io::GgufValueType::kString ? v->s : v->integer(n) ? std::to_string(n) : "?";
}

// torch's float32 -> bfloat16 (round to nearest even; the values are finite).
float round_to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// Rows [0, rows) of a tensor of a file, in float32.
template <class File>
Tensor first_rows(const File& file, const std::string& name, int64_t rows) {
  return file.load_rows(name, 0, rows).to(DType::kF32).clone();
}

}  // namespace

TEST_CASE("convert: the Wan folder in q8_0 and f16 is city96's GGUF file byte for byte") {
  testing::TempDir tmp("convert_wan");
  for (const auto& [type, stem] : {std::pair{"q8_0", "Q8_0"}, std::pair{"f16", "F16"}}) {
    CAPTURE(type);
    const std::string out = tmp.file(std::string(type) + ".gguf");
    const testing::Run r = convert("--input " + kWan + " --type " + type + " --output " + out);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(r.output.find("convert: step 69/69") != std::string::npos);  // the progress line
    const std::string ref_path = kSingle + "wan2.1-t2v-tiny-" + stem + ".gguf";
    const auto got = io::GgufFile::open(out), ref = io::GgufFile::open(ref_path);
    // The tensor table (names as city96's: the original Wan names), its
    // order, and the three keys fix_5d_tensors.py keeps.
    CHECK(table(*got) == table(*ref));
    REQUIRE(got->tensors().size() == ref->tensors().size());
    for (size_t i = 0; i < ref->tensors().size(); ++i) CHECK(got->tensors()[i].name == ref->tensors()[i].name);
    for (const char* key : {"general.architecture", "general.quantization_version", "general.file_type"})
      CHECK(metadata_string(*got, key) == metadata_string(*ref, key));
    // ggml's quantizer and ours, block for block.
    int quantized = 0;
    for (const io::GgufTensor& t : ref->tensors()) {
      CAPTURE(t.name);
      CHECK(tensor_bytes(*got, t.name) == tensor_bytes(*ref, t.name));
      quantized += t.type == math::GgmlType::kQ8_0;
    }
    CHECK(quantized == (stem == std::string("Q8_0") ? 20 : 0));
    CHECK(file_bytes(out) == file_bytes(ref_path));  // and so the whole file
  }
}

TEST_CASE("convert: q4_k, q5_k, q6_k and q4_0 blocks are ggml's where the published mixes use the same type") {
  testing::TempDir tmp("convert_kquants");
  const auto source = io::SafetensorsFile::open(testing::fixture_dir("wan_quant") + "/reference/gguf_dequant.safetensors");
  for (const auto& [type, stem, same] : {std::tuple{"q4_k", "Q4_K_M", 14}, std::tuple{"q5_k", "Q5_K_S", 20},
                                         std::tuple{"q6_k", "Q6_K", 20}, std::tuple{"q4_0", "Q4_0", 18}}) {
    CAPTURE(type);
    const std::string out = tmp.file(std::string(type) + ".gguf");
    const testing::Run r = convert("--quiet --input " + kWan + " --type " + type + " --output " + out);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const auto got = io::GgufFile::open(out), ref = io::GgufFile::open(kSingle + "wan2.1-t2v-tiny-" + stem + ".gguf");
    io::GgmlType want{};
    REQUIRE(io::parse_ggml_type(type, want));
    int equal = 0;
    for (const io::GgufTensor& t : ref->tensors()) {
      CAPTURE(t.name);
      const io::GgufTensor& mine = got->tensor(t.name);  // the same names
      CHECK(mine.shape == t.shape);                      // 5-D patch embedding included (not Q4_0's reshaped one)
      if (math::ggml_traits(t.type).block_size == 1) {   // kept unquantized: F32 here
        CHECK(mine.type == math::GgmlType::kF32);
        continue;
      }
      CHECK(mine.type == want);  // one type for every quantized tensor (no mix)
      if (t.type == want) {
        CHECK(tensor_bytes(*got, t.name) == tensor_bytes(*ref, t.name));
        ++equal;
      }
    }
    CHECK(equal == same);
    // Where the mix used another type (Q4_K_M's v and ffn.2 in Q6_K, Q4_0's
    // ffn.2 in Q4_1), ours are the plain type's: their rows 0..7 dequantized
    // lie as close to the source as the same type's elsewhere.
    for (const char* name : {"blocks.0.self_attn.v.weight", "blocks.1.ffn.2.weight"}) {
      CAPTURE(name);
      const auto store = io::WeightStore::open_file(out);
      const Tensor rows = first_rows(store, name, 8);
      const Tensor src = source->load(std::string("source/") + name).to(DType::kF32).clone();
      CHECK(testing::rel_l2(rows, src) < (std::string(type) == "q6_k" ? 0.03 : 0.12));
    }
  }
}

TEST_CASE("convert: a GGUF file back to bf16 safetensors holds gguf-py's dequantized values rounded to bfloat16") {
  testing::TempDir tmp("convert_back");
  const std::string out = tmp.file("wan_bf16.safetensors");
  const std::string in = kSingle + "wan2.1-t2v-tiny-Q4_K_M.gguf";
  const testing::Run r = convert("--input " + in + " --type bf16 --output " + out);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto got = io::SafetensorsFile::open(out);
  const auto gguf = io::GgufFile::open(in);
  // Every tensor, in the original names and shapes, in BF16.
  REQUIRE(got->names().size() == gguf->tensors().size());
  for (const io::GgufTensor& t : gguf->tensors()) {
    CAPTURE(t.name);
    REQUIRE(got->contains(t.name));
    CHECK(got->info(t.name).shape == t.shape);
    CHECK(got->info(t.name).type == io::StoredType::kBF16);
  }
  // The quantized matrices: gguf-py's dequantization (Q4_K and Q6_K rows)
  // rounded to bfloat16, exactly.
  const auto deq = io::SafetensorsFile::open(kWan + "/reference/gguf_dequant.safetensors");
  int checked = 0;
  for (const std::string& key : deq->names()) {
    if (key.rfind("Q4_K_M/", 0) != 0) continue;
    const std::string name = key.substr(7);
    CAPTURE(name);
    const Tensor ref = deq->load(key).to(DType::kF32).clone();
    const Tensor rows = first_rows(*got, name, ref.dim(0));
    REQUIRE(rows.numel() == ref.numel());
    int64_t differ = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) differ += rows[i] != round_to_bf16(ref[i]);
    CHECK(differ == 0);
    ++checked;
  }
  CHECK(checked == 5);
  // The tensors the GGUF kept in F16 / F32 hold bfloat16-exact values: the
  // fixture's bf16 original-names file has them bit for bit.
  const auto bf16 = io::SafetensorsFile::open(kSingle + "wan2.1_t2v_tiny_bf16.safetensors");
  for (const io::GgufTensor& t : gguf->tensors()) {
    if (math::ggml_traits(t.type).block_size != 1) continue;
    CAPTURE(t.name);
    const Tensor a = got->load(t.name), b = bf16->load(t.name);
    REQUIRE(a.nbytes() == b.nbytes());
    CHECK(std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
  }
}

TEST_CASE("convert: ComfyUI's scaled fp8 file to q8_0: city96's table, each weight times its scale quantized") {
  testing::TempDir tmp("convert_fp8");
  const std::string out = tmp.file("from_fp8.gguf");
  const testing::Run r =
      convert("--quiet --input " + kSingle + "wan2.1_t2v_tiny_fp8_scaled.safetensors --type q8_0 --output " + out);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto got = io::GgufFile::open(out), ref = io::GgufFile::open(kSingle + "wan2.1-t2v-tiny-Q8_0.gguf");
  CHECK(table(*got) == table(*ref));  // no scales, no marker, the prefix gone
  CHECK(metadata_string(*got, "general.architecture") == "wan");
  const auto fp8 = io::SafetensorsFile::open(kWan + "/reference/fp8_dequant.safetensors");
  const auto store = io::WeightStore::open_file(out);
  for (const char* name : {"blocks.0.self_attn.q.weight", "blocks.1.ffn.2.weight"}) {
    CAPTURE(name);
    const Tensor scaled = fp8->load(std::string("scaled/") + name).to(DType::kF32).clone();  // ComfyUI's values
    const Tensor rows = first_rows(store, name, 8);
    CHECK(testing::rel_l2(rows, scaled) < 0.01);  // Q8_0 of the scaled weight (0.005 in city96's file)
    CHECK(testing::rel_l2(rows, scaled) > 0);
  }
}

TEST_CASE("convert: the converted GGUF runs as model.transformer with the committed file's latents and diffusers'") {
  testing::TempDir tmp("convert_run");
  const std::string converted = tmp.file("wan_q8_0.gguf");
  REQUIRE(convert("--quiet --input " + kWan + " --type q8_0 --output " + converted).code == 0);
  // WanPipeline's run of reference/pipeline.safetensors, its noise.
  const auto pipe = io::SafetensorsFile::open(kWan + "/reference/pipeline.safetensors");
  const std::string noise = tmp.file("noise.safetensors");
  io::write_safetensors(noise, {{"noise", pipe->load("noise").to(DType::kF32).clone()}});
  const std::string config = tmp.write("run.json", R"({
    "model": {"path": ")" + kWan + R"(", "dtype": "float32"},
    "generate": {"prompts": ["a red cat moving left"], "negative_prompt": "low quality,   blurry &amp;amp; static",
                 "frames": 9, "height": 32, "width": 32, "steps": 2, "guidance_scale": 5.0, "scheduler": "unipc",
                 "max_sequence_length": 16},
    "output": {"format": "png"}})");
  auto run = [&](const std::string& transformer, const std::string& name) {
    const std::string latents = tmp.file(name + ".safetensors");
    const testing::Run r = testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 --quiet --config " +
                                                config + " --set model.transformer=" + transformer + " --output " +
                                                tmp.file(name + "/v.png") + " --init-noise " + noise +
                                                " --save-latents " + latents);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    return testing::saved_latents(latents);
  };
  const Tensor mine = run(converted, "converted"), committed = run(kSingle + "wan2.1-t2v-tiny-Q8_0.gguf", "committed");
  REQUIRE(mine.shape() == committed.shape());
  CHECK(std::memcmp(mine.raw(), committed.raw(), mine.nbytes()) == 0);
  // diffusers' from the same file's weights dequantized exactly (float32).
  const Tensor ref = pipe->load("latents_gguf_Q8_0_exact").to(DType::kF32).clone();
  CHECK(testing::rel_l2(mine, ref) < 1e-4);
}

TEST_CASE("convert: a DiT folder (diffusers' names) quantizes its block matrices only and runs close to the folder") {
  testing::TempDir tmp("convert_dit");
  const std::string dit = testing::fixture_dir("dit_small_bf16");
  const std::string q8 = tmp.file("dit_q8_0.gguf"), q4k = tmp.file("dit_q4_k.gguf");
  REQUIRE(convert("--quiet --input " + dit + " --type q8_0 --output " + q8).code == 0);
  REQUIRE(convert("--quiet --input " + dit + " --type q4_k --output " + q4k).code == 0);
  const io::WeightStore folder = io::WeightStore::open_dir(dit + "/transformer");
  const auto a = io::GgufFile::open(q8), b = io::GgufFile::open(q4k);
  CHECK(metadata_string(*a, "general.architecture") == "dit");
  REQUIRE(a->tensors().size() == folder.names().size());
  int blocks = 0;
  for (const std::string& name : folder.names()) {
    CAPTURE(name);
    const Shape& shape = folder.info(name).shape;
    // Inside a transformer block, 2-D, a weight, not a norm's modulation linear.
    const bool matrix = name.rfind("transformer_blocks.", 0) == 0 && shape.size() == 2 &&
                        name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
                        name.find("norm") == std::string::npos;
    blocks += matrix;
    CHECK(a->tensor(name).shape == shape);
    CHECK(type_name(a->tensor(name).type) == (matrix ? "Q8_0" : "F32"));
    // Q4_K needs rows of 256; the others fall back to F16.
    CHECK(type_name(b->tensor(name).type) == (!matrix ? "F32" : shape[1] % 256 == 0 ? "Q4_K" : "F16"));
  }
  CHECK(blocks == 18);  // 3 layers x (q, k, v, out, ff in, ff out)
  // Runs as model.transformer, close to the folder's float32 run.
  const std::string ref = testing::reference_dir("dit_small_bf16");
  auto run = [&](const std::string& extra, const std::string& name) {
    const std::string latents = tmp.file(name + ".safetensors");
    const testing::Run r = testing::run_command(
        std::string(DITGEN_EXE) + " --device cpu --threads 2 --quiet --config " + ref + "run_ddim.json --set model.path=" +
        dit + " --set model.dtype=float32 " + extra + " --output " + tmp.file(name + "/x.png") + " --init-noise " + ref +
        "noise.safetensors --save-latents " + latents);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    return testing::saved_latents(latents);
  };
  const double err = testing::rel_l2(run("--set model.transformer=" + q8, "q8"), run("", "folder"));
  MESSAGE("DiT latents from the Q8_0 GGUF: relative L2 to the folder's " << err);
  CHECK(err < 0.02);
  CHECK(err > 0);
}

TEST_CASE("convert: bad input exits with its code, names the field or file, and writes nothing") {
  testing::TempDir tmp("convert_bad");
  const std::string out = tmp.file("out.gguf");
  const std::string blocker = tmp.write("a_file", "x");
  fs::create_directories(tmp.file("folder.gguf"));
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  const Case cases[] = {
      {"--input " + kWan + " --type q9_0 --output " + out, 2, "--type q9_0: not a type convert writes (f32, f16"},
      {"--input " + tmp.file("missing") + " --type q8_0 --output " + out, 3, tmp.file("missing") + ": no such file or folder"},
      {"--input " + kWan + " --component transformer_2 --type q8_0 --output " + out, 3,
       kWan + ": the model has no transformer_2/ folder (its components: transformer, text_encoder, vae)"},
      {"--input " + kWan + " --component unet --type q8_0 --output " + out, 2,
       "--component unet: not a part convert knows (transformer, transformer_2, text_encoder, vae)"},
      {"--input " + kWan + " --type q8_0 --output " + tmp.file("out.bin"), 2,
       "--output " + tmp.file("out.bin") + ": expected a .gguf or .safetensors file name"},
      {"--input " + kWan + " --type q8_0 --output " + tmp.file("out.safetensors"), 2,
       "--type q8_0: a .safetensors file holds f32, f16 or bf16"},
      {"--input " + kWan + " --type q8_0 --output " + blocker + "/out.gguf", 2,
       "--output '" + blocker + "/out.gguf': cannot create the folder " + blocker},
      {"--input " + kWan + " --type q8_0 --output " + tmp.file("folder.gguf"), 2,
       "--output: '" + tmp.file("folder.gguf") + "' exists and is a folder, not a regular file"},
      {"--input " + kWan + " --type q8_0 --output " + out + " --qiuet", 2,
       "--qiuet: convert has no such option; did you mean --quiet?"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const testing::Run r = convert(c.args);
    CHECK(r.code == c.code);
    CHECK_MESSAGE(r.output.find(c.message) != std::string::npos, r.output);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);  // one line
  }
  // A NaN in a matrix bound for blocks: exit 3 naming the file, the tensor
  // and the element; no output, no temporary file.
  Tensor w = Tensor::empty({2, 32});
  for (int64_t i = 0; i < w.numel(); ++i) w[i] = 0.01f * static_cast<float>(i);
  w[37] = std::nanf("");
  const std::string bad = tmp.file("nan.safetensors");
  io::write_safetensors(bad, {{"transformer_blocks.0.attn1.to_q.weight", w}});
  const testing::Run r = convert("--input " + bad + " --type q8_0 --output " + out);
  CHECK(r.code == 3);
  CHECK_MESSAGE(r.output.find(bad + ": tensor 'transformer_blocks.0.attn1.to_q.weight': element 37 is nan") !=
                    std::string::npos,
                r.output);
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp.path)) left.insert(e.path().filename().string());
  CHECK(left == std::set<std::string>{"a_file", "folder.gguf", "nan.safetensors"});
}
