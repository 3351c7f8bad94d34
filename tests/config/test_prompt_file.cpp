// Prompt files: plain text and JSONL, with every bad line a ConfigError
// naming the file and line.
#include <doctest/doctest.h>

#include <fstream>

#include "config/prompt_file.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::config;

namespace {

std::string error_of(const std::string& text, bool jsonl) {
  try {
    parse_prompt_text(text, "p.txt", jsonl);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("prompt file: text lines, comments and blank lines") {
  const auto p = parse_prompt_text("# header\n a cat \r\n\n   \nthe sea\n#x\nlast", "p.txt", false);
  REQUIRE(p.size() == 3);
  CHECK(p[0].prompt == " a cat ");  // kept as written: the pipelines preprocess
  CHECK(p[0].line == 2);
  CHECK(p[1].prompt == "the sea");
  CHECK(p[2].prompt == "last");
  CHECK(p[2].line == 7);
}

TEST_CASE("prompt file: JSONL image and last_image, relative to the prompt file's folder") {
  const auto p = parse_prompt_text(
      "{\"prompt\": \"a cat\", \"image\": \"cat.png\"}\n"
      "{\"prompt\": \"x\", \"image\": \"/abs/a.jpg\", \"last_image\": \"b.jpg\"}\n{\"prompt\": \"y\"}\n",
      "p.jsonl", true);
  REQUIRE(p.size() == 3);
  CHECK(p[0].image == "cat.png");  // as written: read_prompt_file resolves
  CHECK(p[1].last_image == "b.jpg");
  CHECK(p[2].image.empty());
  CHECK(contains(error_of("{\"prompt\": \"a\", \"image\": 3}\n", true), "p.txt:1: image: expected a string"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"last_image\": \"\"}\n", true), "p.txt:1: last_image: expected a PNG"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"images\": \"x\"}\n", true), "image, last_image"));

  const testing::TempDir tmp("prompt_images");
  const std::filesystem::path dir = tmp.path;
  const auto read = read_prompt_file(tmp.write("sub/p.jsonl",
                                               "{\"prompt\": \"a\", \"image\": \"../in/a.png\", \"last_image\": "
                                               "\"b.png\"}\n{\"prompt\": \"b\", \"image\": \"/abs/c.png\"}\n"));
  REQUIRE(read.size() == 2);
  CHECK(read[0].image == (dir / "in" / "a.png").lexically_normal().string());
  CHECK(read[0].last_image == (dir / "sub" / "b.png").lexically_normal().string());
  CHECK(read[1].image == "/abs/c.png");
}

TEST_CASE("prompt file: JSONL objects") {
  const auto p = parse_prompt_text(
      "{\"prompt\": \"a cat\", \"seed\": 7, \"name\": \"cat\"}\n{\"prompt\": \"x\", \"negative_prompt\": \"blur\", "
      "\"frames\": 16}\n",
      "p.jsonl", true);
  REQUIRE(p.size() == 2);
  CHECK(p[0].seed == 7u);
  CHECK(p[0].name == "cat");
  CHECK(p[1].negative_prompt == std::string("blur"));
  CHECK(p[1].frames == 16);
}

TEST_CASE("prompt file: bad lines name the file and line") {
  CHECK(contains(error_of("ok\nbad \xff here\n", false), "p.txt:2: invalid UTF-8"));
  CHECK(contains(error_of("# only\n\n", false), "no prompts"));
  CHECK(contains(error_of(std::string(kMaxPromptBytes + 1, 'a'), false), "p.txt:1"));
  CHECK(contains(error_of("{\"prompt\": 3}", true), "p.txt:1: prompt: expected a string"));
  CHECK(contains(error_of("{\"text\": \"a\"}", true), "unknown key \"text\""));
  CHECK(contains(error_of("{\"seed\": 1}", true), "prompt: required"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"seed\": -1}", true), "seed"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"frames\": 0}", true), "frames"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"name\": \"../x\"}", true), "name"));
  CHECK(contains(error_of("{\"prompt\": \"a\"\n", true), "p.txt:1"));
  CHECK(contains(error_of("[1, 2]", true), "expected a JSON object"));
  CHECK(contains(error_of("{\"prompt\": \"a\", \"prompt\": \"b\"}", true), "p.txt:1"));  // duplicate key
  // A JSONL line may hold an empty prompt (`ditgen encode` encodes it);
  // generation refuses it (tests/cli/test_text_bad_input.cpp).
  CHECK(parse_prompt_text("{\"prompt\": \"\", \"negative_prompt\": \"\"}", "p.jsonl", true).size() == 1);
  CHECK(empty_prompt_problem(" \t").find("only whitespace") != std::string::npos);
  CHECK(empty_prompt_problem("").find("the prompt is empty") != std::string::npos);
  CHECK(empty_prompt_problem("a").empty());
}

TEST_CASE("prompt file: unreadable files") {
  testing::TempDir tmp("prompt_file");
  CHECK_THROWS_AS(read_prompt_file(tmp.file("missing.txt")), ConfigError);
  CHECK_THROWS_AS(read_prompt_file(tmp.path.string()), ConfigError);  // a directory
  std::ofstream(tmp.file("p.jsonl")) << "{\"prompt\": \"a\"}\n";
  CHECK(read_prompt_file(tmp.file("p.jsonl")).size() == 1);
}
