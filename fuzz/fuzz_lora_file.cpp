/* fuzz_lora_file: the input is a whole LoRA .safetensors file (8-byte header
 * length, JSON header with any keys and __metadata__, data section), written
 * as adapter_model.safetensors into a scratch directory that also holds a
 * valid peft adapter_config.json (r, lora_alpha, rank and alpha patterns),
 * so `base_model.model.` keys reach that path too. Then
 * io::read_lora_file with a fixed list of model tensor names (kohya names
 * resolve against it, one pair of them ambiguous), and for what it reads:
 * every target's tensors read element by element, match_lora against a
 * model of those names (some shapes right, some wrong) for each expert, the
 * report line and the non-strict coverage text.
 *
 * Expected failures: ditgen::Error (ModelError naming the file and key: bad
 * header, offsets, dtype, shapes, missing halves, metadata that is no
 * LoraConfig, one tensor changed twice; ConfigError: DoRA, regular-expression
 * patterns). Anything else is a finding: a crash, an ASan or UBSan report, a
 * leak, any other exception. */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "io/lora_coverage.h"
#include "io/lora_file.h"
#include "util/error.h"

namespace {

volatile double g_sink;

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  std::vector<std::string> model_names = {
      "blocks.0.attn1.to_q.weight", "blocks.0.attn1.to_q.bias", "blocks.0.attn2.to_k.weight",
      "blocks.0.ffn.net.0.proj.weight", "blocks.0.scale_shift_table", "scale_shift_table",
      "transformer_blocks.0.attn1.to_out.0.weight", "proj_out_1.weight", "proj_out.1.weight", "proj_out.weight"};
  Fixture() {
    ditgen::fuzz::write_bytes(dir / "adapter_config.json",
                              R"({"r": 2, "lora_alpha": 3, "rank_pattern": {"ffn.net.0.proj": 1},
                                  "alpha_pattern": {"^blocks.0.attn1.to_q": 0.5}, "use_rslora": false})");
  }
  // A model holding every name, each [4, 4] (1-D [4] for a bias, [1, 6, 4] for a table).
  std::optional<ditgen::Shape> shape_of(const std::string& name) const {
    for (const std::string& n : model_names)
      if (n == name) {
        if (n.ends_with(".bias")) return ditgen::Shape{4};
        if (n.ends_with("scale_shift_table")) return ditgen::Shape{1, 6, 4};
        return ditgen::Shape{4, 4};
      }
    return std::nullopt;
  }
};

double sum(const ditgen::Tensor& t) {
  if (!t.defined()) return 0;
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data()[i];
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const std::string path = fixture.dir / "adapter_model.safetensors";
  ditgen::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  ditgen::fuzz::allow_reader_errors([&] {
    const ditgen::io::LoraFile file = ditgen::io::read_lora_file(path, {fixture.model_names});
    double s = 0;
    for (const ditgen::io::LoraTarget& t : file.targets) s += sum(t.a) + sum(t.b) + sum(t.delta) + t.scaling;
    g_sink = s;
    for (auto expert : {ditgen::io::LoraExpert::kAny, ditgen::io::LoraExpert::kTransformer2}) {
      const ditgen::io::LoraMatch match =
          ditgen::io::match_lora(file, expert, [&](const std::string& n) { return fixture.shape_of(n); });
      g_sink = static_cast<double>(ditgen::io::lora_report_line(file, match).size() +
                                   ditgen::io::check_lora_coverage(file, match, false).size());
    }
  });
  return 0;
}
