// Model directories and typed config access: every failure is a ModelError
// naming the file, and for a bad value the key.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "error_helpers.h"
#include "temp_dir.h"
#include "io/model_dir.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;
using nlohmann::json;

namespace {
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("ditgen_test_model_dir") {}
};
}  // namespace

namespace {

using testing::contains;
using testing::model_error_of;

}  // namespace

TEST_CASE("model_dir: opening a directory") {
  TempDir dir;
  const std::string root = dir.path.string();
  CHECK(contains(model_error_of([&] { ModelDir::open(dir.file("absent")); }), dir.file("absent") + ": "));
  CHECK(contains(model_error_of([&] { ModelDir::open(root); }), dir.file("model_index.json") + ": file not found"));

  dir.write("model_index.json", R"({"_class_name": "DiTPipeline", )");
  CHECK(contains(model_error_of([&] { ModelDir::open(root); }), dir.file("model_index.json") + ": invalid JSON"));
  dir.write("model_index.json", R"([1, 2])");
  CHECK(contains(model_error_of([&] { ModelDir::open(root); }),
                 dir.file("model_index.json") + ": expected a JSON object"));

  dir.write("model_index.json", R"({"_class_name": "DiTPipeline", "transformer": ["diffusers", "DiTTransformer2DModel"]})");
  dir.write("transformer/config.json", R"({"num_layers": 2, "sample_size": 4})");
  dir.write("scheduler/scheduler_config.json", R"({"num_train_timesteps": 1000})");
  dir.write("vae/config.json", R"({"latent_channels": )");
  fs::create_directories(dir.path / "empty_part");
  ModelDir model = ModelDir::open(root);
  CHECK(model.root() == root);
  CHECK(model.model_index()["_class_name"] == "DiTPipeline");
  CHECK(model.part_dir("transformer") == dir.file("transformer"));
  CHECK(model.part_config_path("transformer") == dir.file("transformer/config.json"));
  CHECK(model.part_config_path("scheduler") == dir.file("scheduler/scheduler_config.json"));
  CHECK(model.part_config("transformer")["num_layers"] == 2);
  CHECK(model.part_config("scheduler")["num_train_timesteps"] == 1000);
  CHECK(model.id2label().empty());

  CHECK(contains(model_error_of([&] { model.part_config("vae"); }), dir.file("vae/config.json") + ": invalid JSON"));
  CHECK(contains(model_error_of([&] { model.part_dir("text_encoder"); }), dir.file("text_encoder") + ": "));
  CHECK(contains(model_error_of([&] { model.part_config("empty_part"); }),
                 dir.file("empty_part/config.json") + ": file not found"));
  CHECK(contains(model_error_of([&] { read_json_file(root); }), "is a directory"));
}

TEST_CASE("model_dir: id2label, sorted by id, names with commas intact") {
  TempDir dir;
  dir.write("model_index.json",
            R"({"id2label": {"10": "umbrella", "0": "tench, Tinca tinca", "2": "great white shark"}})");
  ModelDir model = ModelDir::open(dir.path.string());
  const auto labels = model.id2label();
  REQUIRE(labels.size() == 3);
  CHECK(labels[0] == std::pair<int, std::string>{0, "tench, Tinca tinca"});
  CHECK(labels[1] == std::pair<int, std::string>{2, "great white shark"});
  CHECK(labels[2] == std::pair<int, std::string>{10, "umbrella"});

  const std::string index = dir.file("model_index.json");
  dir.write("model_index.json", R"({"id2label": {"0": "a", "x": "b"}})");
  CHECK(contains(model_error_of([&] { ModelDir::open(dir.path.string()).id2label(); }), index + ": id2label.x"));
  dir.write("model_index.json", R"({"id2label": {"0": 5}})");
  CHECK(model_error_of([&] { ModelDir::open(dir.path.string()).id2label(); }) ==
        index + ": id2label.0: expected a string, got number");
  dir.write("model_index.json", R"({"id2label": ["a"]})");
  CHECK(contains(model_error_of([&] { ModelDir::open(dir.path.string()).id2label(); }), index + ": id2label"));
  dir.write("model_index.json", R"({"id2label": {"1": "a", "01": "b"}})");
  CHECK(contains(model_error_of([&] { ModelDir::open(dir.path.string()).id2label(); }), "twice"));
}

TEST_CASE("model_dir: typed config access names file and key") {
  const std::string path = "m/transformer/config.json";
  const json cfg = json::parse(R"({"num_layers": 28, "heads": "16", "eps": 1e-6, "flag": true, "name": "dit",
                                   "opt": null, "width": 32.0, "ratio": 2.5, "big": 18446744073709551615,
                                   "neg": -3})");
  CHECK(get_int(cfg, "num_layers", path) == 28);
  CHECK(get_int(cfg, "width", path) == 32);
  CHECK(get_int(cfg, "neg", path) == -3);
  CHECK(model_error_of([&] { get_int(cfg, "heads", path); }) == path + ": heads: expected an integer, got string");
  CHECK(model_error_of([&] { get_int(cfg, "missing", path); }) == path + ": missing key 'missing'");
  CHECK(contains(model_error_of([&] { get_int(cfg, "ratio", path); }), path + ": ratio: expected an integer"));
  CHECK(contains(model_error_of([&] { get_int(cfg, "big", path); }), path + ": big: "));
  CHECK(get_int_or(cfg, "missing", 7, path) == 7);
  CHECK(get_int_or(cfg, "opt", 7, path) == 7);  // null means "not set"
  CHECK(get_int_or(cfg, "num_layers", 7, path) == 28);
  CHECK(model_error_of([&] { get_int_or(cfg, "flag", 7, path); }) == path + ": flag: expected an integer, got boolean");

  CHECK(get_number_or(cfg, "eps", 1e-5, path) == 1e-6);
  CHECK(get_number_or(cfg, "num_layers", 0.0, path) == 28.0);
  CHECK(get_number_or(cfg, "missing", 0.5, path) == 0.5);
  CHECK(model_error_of([&] { get_number_or(cfg, "name", 0, path); }) == path + ": name: expected a number, got string");

  CHECK(get_bool_or(cfg, "flag", false, path) == true);
  CHECK(get_bool_or(cfg, "missing", true, path) == true);
  CHECK(model_error_of([&] { get_bool_or(cfg, "num_layers", false, path); }) ==
        path + ": num_layers: expected a boolean, got number");

  CHECK(get_string_or(cfg, "name", "", path) == "dit");
  CHECK(get_string_or(cfg, "opt", "fallback", path) == "fallback");
  CHECK(model_error_of([&] { get_string_or(cfg, "eps", "", path); }) == path + ": eps: expected a string, got number");

  CHECK(contains(model_error_of([&] { get_int(json::array(), "x", path); }), path + ": expected a JSON object"));
}
