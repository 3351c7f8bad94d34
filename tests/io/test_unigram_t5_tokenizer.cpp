// transformers 5's T5Tokenizer (io/unigram_t5_tokenizer.h) against
// transformers 5 itself, and the rule that picks a folder's tokenizer
// (io/text_tokenizer.h):
// - the Wan fixtures' 21 tokenizer cases (tests/fixtures/wan_tiny/reference/
//   tokenizer_cases.json: made by scripts/fixtures/make_wan_fixtures.py), id
//   for id and mask for mask, at max lengths 16 and 512, for the
//   tokenizer.json folder (wan_tiny) and the spiece.model-only folder
//   (wan22_tiny); the same spiece.model through libsentencepiece gives the
//   "sentencepiece" column (byte pieces), which is why the rule matters;
// - 340 prompts through the NFKC and byte-fallback models of
//   tests/fixtures/t5_tokenizer/ (tests/fixtures/wan_text/
//   fast_t5_tokenizer.json: scripts/fixtures/make_wan_text_fixtures.py),
//   from their spiece.model and from the tokenizer.json transformers 5
//   writes for them (built here from the spiece.model);
// - tokenizers' Precompiled normalizer on 1500 strings (precompiled.json);
// - the tokenizer.json fields transformers 5 replaces, and hostile files:
//   ModelErrors naming the file and field, never a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error_helpers.h"
#include "io/grapheme.h"
#include "io/model_dir.h"
#include "io/precompiled_charsmap.h"
#include "io/protobuf_wire.h"
#include "io/text_tokenizer.h"
#include "io/unigram_t5_tokenizer.h"
#include "temp_dir.h"
#include "util/error.h"
#include "util/utf8.h"

namespace fs = std::filesystem;
using namespace ditgen;
using namespace ditgen::io;
using nlohmann::json;
using testing::contains;
using testing::model_error_of;

namespace {

const std::string kRoot = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures";

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ids_text(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Whether `got` (one prompt of an encode) is `want` (the ids up to the
// mask) padded with 0 to L, with a mask of exactly those ids.
bool same_row(const T5Tokens& got, size_t i, const std::vector<int64_t>& want, int64_t L) {
  std::vector<int64_t> padded = want;
  padded.resize(static_cast<size_t>(L), 0);
  std::vector<int64_t> mask(static_cast<size_t>(L), 0);
  std::fill(mask.begin(), mask.begin() + static_cast<int64_t>(want.size()), 1);
  return got.ids[i] == padded && got.mask[i] == mask && got.num_tokens[i] == static_cast<int64_t>(want.size());
}

// The spiece.model's pieces, scores and precompiled map, read with the
// wire-format helper (as transformers' SentencePieceExtractor reads them).
struct SpieceContents {
  std::vector<std::pair<std::string, float>> pieces;
  std::string charsmap;
};

SpieceContents read_spiece(const std::string& path) {
  const std::string model = file_bytes(path);
  std::vector<protobuf::Field> top;
  REQUIRE(protobuf::split_fields(model, top));
  SpieceContents out;
  for (const auto& f : top) {
    const std::string payload = f.payload_end ? model.substr(f.payload_begin, f.payload_end - f.payload_begin) : "";
    std::vector<protobuf::Field> sub;
    if (f.number == 1) {
      REQUIRE(protobuf::split_fields(payload, sub));
      std::string piece;
      float score = 0;
      for (const auto& g : sub) {
        if (g.number == 1) piece = payload.substr(g.payload_begin, g.payload_end - g.payload_begin);
        if (g.number == 2) score = protobuf::fixed32_float(g.value);
      }
      out.pieces.emplace_back(piece, score);
    } else if (f.number == 3) {
      REQUIRE(protobuf::split_fields(payload, sub));
      for (const auto& g : sub)
        if (g.number == 2) out.charsmap = payload.substr(g.payload_begin, g.payload_end - g.payload_begin);
    }
  }
  return out;
}

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[v & 63] : '=';
  }
  return out;
}

// A copy of a tokenizer folder under `tmp`/`name`.
std::string copy_folder(const testing::TempDir& tmp, const std::string& from, const std::string& name) {
  const fs::path to = tmp.path / name;
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from)) fs::copy_file(e.path(), to / e.path().filename());
  return to.string();
}

json wan_cases() { return read_json_file(kRoot + "/wan_tiny/reference/tokenizer_cases.json"); }

}  // namespace

TEST_CASE("unigram t5 tokenizer: the Wan tokenizer cases, both folder kinds, 16 and 512") {
  const json cases = wan_cases()["cases"];
  REQUIRE(cases.size() == 21);
  const UnigramT5Tokenizer json_kind = UnigramT5Tokenizer::open(kRoot + "/wan_tiny");
  const UnigramT5Tokenizer spiece_kind = UnigramT5Tokenizer::open(kRoot + "/wan22_tiny");
  CHECK(contains(json_kind.source(), "tokenizer.json"));
  CHECK(contains(spiece_kind.source(), "spiece.model"));
  CHECK(json_kind.vocab_size() == 548);
  CHECK(spiece_kind.vocab_size() == 548);
  CHECK_FALSE(json_kind.has_charsmap());  // the fixture's model uses identity normalisation
  int compared = 0;
  for (const auto& c : cases) {
    const std::string text = c["cleaned"];
    for (const char* L_text : {"16", "512"}) {
      const int64_t L = std::stoll(L_text);
      const json& per = c["tokens"][L_text];
      CAPTURE(c["name"].get<std::string>());
      CAPTURE(L);
      for (const auto& [kind, tok] : {std::pair<const char*, const UnigramT5Tokenizer*>{"tokenizer_json", &json_kind},
                                      {"spiece_only", &spiece_kind}}) {
        const auto want = per[kind]["ids"].get<std::vector<int64_t>>();
        const T5Tokens got = tok->encode({text}, L);
        INFO(kind << ": ditgen " << ids_text(got.ids[0]) << "\n transformers " << ids_text(want));
        CHECK(same_row(got, 0, want, L));
        ++compared;
      }
    }
  }
  CHECK(compared == 21 * 2 * 2);
}

TEST_CASE("unigram t5 tokenizer: libsentencepiece on the same spiece.model is the other column") {
  // What the rule avoids for Wan: the slow tokenizer spells unknown
  // characters' bytes where transformers 5 gives <unk>.
  const json cases = wan_cases()["cases"];
  const T5Tokenizer slow = T5Tokenizer::open(kRoot + "/wan22_tiny");
  int differ = 0, compared = 0;
  for (const auto& c : cases) {
    const json& per = c["tokens"]["16"];
    if (per["sentencepiece"].is_null()) continue;  // special tokens' text: not a libsentencepiece case
    const auto want = per["sentencepiece"]["ids"].get<std::vector<int64_t>>();
    CAPTURE(c["name"].get<std::string>());
    CHECK(same_row(slow.encode({c["cleaned"].get<std::string>()}, 16), 0, want, 16));
    ++compared;
    differ += per["transformers_equals_sentencepiece"] == false;
  }
  CHECK(compared == 20);
  CHECK(differ >= 3);  // oov, oov_runs, controls (at least)
}

TEST_CASE("unigram t5 tokenizer: 340 prompts through an NFKC map and a byte-fallback model") {
  const json fixture = read_json_file(kRoot + "/wan_text/fast_t5_tokenizer.json");
  const auto prompts = read_json_file(kRoot + "/t5_tokenizer/prompts.json").get<std::vector<std::string>>();
  REQUIRE(prompts.size() == 340);
  REQUIRE(fixture["cases"].size() == 4);
  testing::TempDir tmp("unigram_t5");
  for (const auto& c : fixture["cases"]) {
    const std::string name = c["tokenizer"];
    const int64_t L = c["max_length"];
    CAPTURE(name);
    CAPTURE(L);
    // From the spiece.model (converted as transformers 5 converts it), and
    // from a tokenizer.json holding that model as transformers 5 writes it
    // (its vocabulary, the extra ids, the Precompiled map in a Sequence).
    const std::string src = kRoot + "/t5_tokenizer/" + name;
    const std::string json_dir = copy_folder(tmp, src, name + std::to_string(L));
    fs::remove(fs::path(json_dir) / "spiece.model");
    const SpieceContents sp = read_spiece(src + "/spiece.model");
    json vocab = json::array();
    for (const auto& [piece, score] : sp.pieces) vocab.push_back({piece, static_cast<double>(score)});
    for (int k = 99; k >= 0; --k) vocab.push_back({"<extra_id_" + std::to_string(k) + ">", 0.0});
    json tj = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()},
               {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr},
               {"model", {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", vocab}, {"byte_fallback", false}}}};
    tj["normalizer"] = sp.charsmap.empty()
                           ? json(nullptr)
                           : json{{"type", "Sequence"},
                                  {"normalizers",
                                   {{{"type", "Precompiled"}, {"precompiled_charsmap", base64(sp.charsmap)}},
                                    {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}};
    std::ofstream(fs::path(json_dir) / "tokenizer.json") << tj.dump();
    const UnigramT5Tokenizer from_spiece = UnigramT5Tokenizer::open(src);
    const UnigramT5Tokenizer from_json = UnigramT5Tokenizer::open(json_dir);
    CHECK(from_spiece.has_charsmap() == (name == "nfkc"));
    CHECK(from_json.has_charsmap() == (name == "nfkc"));
    const T5Tokens a = from_spiece.encode(prompts, L), b = from_json.encode(prompts, L);
    int wrong_a = 0, wrong_b = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto want = c["ids"][i].get<std::vector<int64_t>>();
      if (!same_row(a, i, want, L) && ++wrong_a <= 5)
        MESSAGE("prompt " << i << " " << json(prompts[i]).dump() << "\n  ditgen       " << ids_text(a.ids[i])
                          << "\n  transformers " << ids_text(want));
      if (!same_row(b, i, want, L)) ++wrong_b;
    }
    CHECK(wrong_a == 0);
    CHECK(wrong_b == 0);
  }
}

TEST_CASE("unigram t5 tokenizer: the tokenizer.json fields transformers 5 replaces change nothing") {
  const json fixture = read_json_file(kRoot + "/wan_text/fast_t5_tokenizer.json");
  const json edits = fixture["info"]["ignored_tokenizer_json_fields"]["edits"];
  REQUIRE(fixture["info"]["ignored_tokenizer_json_fields"]["same_ids_for_the_21_tokenizer_cases"] == true);
  testing::TempDir tmp("unigram_ignored");
  const std::string dir = copy_folder(tmp, kRoot + "/wan_tiny/tokenizer", "tokenizer");
  json tj = read_json_file(dir + "/tokenizer.json");
  for (const auto& [key, value] : edits.items()) {
    if (key.rfind("model.", 0) == 0)
      tj["model"][key.substr(6)] = value;
    else
      tj[key] = value;
  }
  CHECK(tj["model"]["byte_fallback"] == true);
  std::ofstream(dir + "/tokenizer.json") << tj.dump();
  const UnigramT5Tokenizer tok = UnigramT5Tokenizer::open(dir);
  const json cases = wan_cases();  // named: a range-for over a temporary's member reads freed memory
  for (const auto& c : cases["cases"]) {
    CAPTURE(c["name"].get<std::string>());
    for (const char* L_text : {"16", "512"}) {
      const auto want = c["tokens"][L_text]["tokenizer_json"]["ids"].get<std::vector<int64_t>>();
      CHECK(same_row(tok.encode({c["cleaned"].get<std::string>()}, std::stoll(L_text)), 0, want, std::stoll(L_text)));
    }
  }
}

TEST_CASE("precompiled charsmap: 1500 strings as tokenizers' Precompiled normalizer") {
  const json fixture = read_json_file(kRoot + "/wan_text/precompiled.json");
  const SpieceContents sp = read_spiece(kRoot + "/t5_tokenizer/nfkc/spiece.model");
  REQUIRE(sp.charsmap.size() > 100000);
  const PrecompiledCharsmap map(sp.charsmap, "nfkc/spiece.model");
  REQUIRE(fixture["cases"].size() == 1500);
  int wrong = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"], want = c["normalized"];
    const std::string got = map.normalize(text);
    if (got != want && ++wrong <= 10)
      MESSAGE("text " << json(text).dump() << ": ditgen " << json(got).dump() << ", tokenizers " << json(want).dump());
  }
  CHECK(wrong == 0);
}

TEST_CASE("grapheme clusters: the rules the Precompiled walk depends on") {
  auto clusters = [](const std::u32string& s) {
    std::vector<size_t> ends;
    for (size_t i = 0; i < s.size(); i = grapheme_end(s, i)) ends.push_back(grapheme_end(s, i));
    return ends;
  };
  CHECK(clusters(U"ab") == std::vector<size_t>{1, 2});
  CHECK(clusters(U"\r\n") == std::vector<size_t>{2});                     // GB3
  CHECK(clusters(U"\n\r") == std::vector<size_t>{1, 2});                  // GB4/5
  CHECK(clusters(U"e\u0301\u0301x") == std::vector<size_t>{3, 4});        // GB9
  CHECK(clusters(U"a\u200db") == std::vector<size_t>{2, 3});              // ZWJ joins left only
  CHECK(clusters(U"\U0001F468\u200d\U0001F469") == std::vector<size_t>{3});  // GB11
  CHECK(clusters(U"\U0001F1EF\U0001F1F5\U0001F1EF") == std::vector<size_t>{2, 3});  // GB12/13
  CHECK(clusters(U"\u1100\u1161\u11a8") == std::vector<size_t>{3});      // GB6/7
  CHECK(clusters(U"\uac00\u11a8") == std::vector<size_t>{2});            // LV T
  CHECK(clusters(U"\u0600a") == std::vector<size_t>{2});                 // GB9b Prepend
  CHECK(clusters(U"a\u0903") == std::vector<size_t>{2});                 // GB9a SpacingMark
  CHECK(clusters(U"a\x01\u0301") == std::vector<size_t>{1, 2, 3});       // controls break
}

TEST_CASE("t5 tokenizer rule: the folder's files and the pipeline's tokenizer class decide") {
  CHECK(t5_tokenizer_kind(kRoot + "/wan_tiny", "T5TokenizerFast") == T5TokenizerKind::kUnigram);
  CHECK(t5_tokenizer_kind(kRoot + "/wan_tiny", "") == T5TokenizerKind::kUnigram);  // tokenizer.json wins
  CHECK(t5_tokenizer_kind(kRoot + "/wan22_tiny", "T5TokenizerFast") == T5TokenizerKind::kUnigram);
  CHECK(t5_tokenizer_kind(kRoot + "/wan22_tiny", "T5Tokenizer") == T5TokenizerKind::kSentencePiece);
  CHECK(t5_tokenizer_kind(kRoot + "/pixart_tiny", "T5Tokenizer") == T5TokenizerKind::kSentencePiece);
  CHECK(t5_tokenizer_kind(kRoot + "/latte_tiny", "T5Tokenizer") == T5TokenizerKind::kSentencePiece);
  CHECK(t5_tokenizer_kind(kRoot + "/t5_encoder/umt5", "") == T5TokenizerKind::kSentencePiece);
  const auto a = open_t5_tokenizer(kRoot + "/wan22_tiny", "T5TokenizerFast");
  const auto b = open_t5_tokenizer(kRoot + "/pixart_tiny", "T5Tokenizer");
  CHECK(a->kind() == T5TokenizerKind::kUnigram);
  CHECK(b->kind() == T5TokenizerKind::kSentencePiece);
  CHECK(contains(a->folder(), "wan22_tiny/tokenizer"));
  CHECK(contains(b->source(), "pixart_tiny/tokenizer/spiece.model"));
}

TEST_CASE("unigram t5 tokenizer: hostile tokenizer.json and spiece.model are ModelErrors naming file and field") {
  testing::TempDir tmp("unigram_bad");
  const std::string good = file_bytes(kRoot + "/wan_tiny/tokenizer/tokenizer.json");
  const json good_json = json::parse(good);
  struct Case {
    std::string name;
    std::string text;  // the tokenizer.json
    std::string says;
  };
  auto edited = [&](const std::function<void(json&)>& f) {
    json j = good_json;
    f(j);
    return j.dump();
  };
  const std::vector<Case> cases = {
      {"not json", "{\"model\": ", "invalid JSON"},
      {"array", "[]", "expected a JSON object"},
      {"no model", "{}", "model: expected an object (missing)"},
      {"bpe", edited([](json& j) { j["model"]["type"] = "BPE"; }), "model.type: \"BPE\""},
      {"type number", edited([](json& j) { j["model"]["type"] = 3; }), "model.type"},
      {"vocab object", edited([](json& j) { j["model"]["vocab"] = json::object(); }), "model.vocab: expected a list"},
      {"vocab entry", edited([](json& j) { j["model"]["vocab"][5] = "x"; }), "model.vocab[5]"},
      {"vocab score", edited([](json& j) { j["model"]["vocab"][7][1] = "high"; }), "model.vocab[7]"},
      {"tiny vocab", edited([](json& j) { j["model"]["vocab"] = json::array({{"<pad>", 0.0}}); }), "<unk> is id 2"},
      {"unk type", edited([](json& j) { j["model"]["unk_id"] = "2"; }), "model.unk_id"},
      {"byte_fallback type", edited([](json& j) { j["model"]["byte_fallback"] = 1; }), "model.byte_fallback"},
      {"normalizer type", edited([](json& j) { j["normalizer"] = "Precompiled"; }), "normalizer: expected an object"},
      {"bad base64", edited([](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "@@@@"}}; }),
       "precompiled_charsmap: not base64"},
      {"short map", edited([](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAA="}}; }),
       "too short"},
      {"trie past end", edited([](json& j) { j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "/////wAA"}}; }),
       "runs past"},
      {"sequence", edited([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", 3}}; }), "normalizers"},
      {"added not list", edited([](json& j) { j["added_tokens"] = 5; }), "added_tokens: expected a list"},
      {"added content", edited([](json& j) { j["added_tokens"][1]["content"] = 7; }), "added_tokens[1].content"},
      {"added flag", edited([](json& j) { j["added_tokens"][0]["lstrip"] = "yes"; }), "added_tokens[0].lstrip"},
      {"added id", edited([](json& j) { j["added_tokens"][2]["id"] = -1; }), "added_tokens[2].id"},
      {"pre_tokenizer", edited([](json& j) { j["pre_tokenizer"] = 1; }), "pre_tokenizer"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::string folder_name = "case";
    folder_name += std::to_string(&c - cases.data());
    const std::string dir = copy_folder(tmp, kRoot + "/wan_tiny/tokenizer", folder_name);
    std::ofstream(dir + "/tokenizer.json", std::ios::trunc) << c.text;
    const std::string msg = model_error_of([&] { UnigramT5Tokenizer::open(dir); });
    INFO(msg);
    CHECK(contains(msg, dir + "/tokenizer.json"));
    CHECK(contains(msg, c.says));
  }
  // tokenizer_config.json's fields.
  {
    const std::string dir = copy_folder(tmp, kRoot + "/wan_tiny/tokenizer", "cfg");
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"added_tokens_decoder": {"x": {}}})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "added_tokens_decoder.x"));
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"added_tokens_decoder": {"5": {"content": 1}}})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "added_tokens_decoder.5.content"));
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"eos_token": 3})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "eos_token"));
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"extra_ids": -4})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "extra_ids"));
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"extra_special_tokens": 5})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "extra_special_tokens: expected a list"));
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"extra_special_tokens": [{"content": []}]})";
    CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(dir); }), "extra_special_tokens[0].content"));
    // transformers 5's model-specific form (an object of name: token) is a list of tokens too.
    std::ofstream(dir + "/tokenizer_config.json", std::ios::trunc) << R"({"extra_special_tokens": {"sentinel": "<extra_id_0>"}})";
    CHECK(UnigramT5Tokenizer::open(dir).tokenize("a<extra_id_0>") == std::vector<int64_t>{260, 547});
  }
  // spiece.model: truncated, random bytes, empty, missing.
  const std::string sp = file_bytes(kRoot + "/wan22_tiny/tokenizer/spiece.model");
  for (const std::string& bytes : {sp.substr(0, sp.size() / 2), std::string("\x0a\xff\xff\xff\x0f", 5),
                                   std::string("not a model at all"), std::string()}) {
    const fs::path dir = tmp.path / ("sp" + std::to_string(bytes.size()));
    fs::create_directories(dir);
    std::ofstream((dir / "spiece.model").string(), std::ios::binary) << bytes;
    const std::string msg = model_error_of([&] { UnigramT5Tokenizer::open(dir.string()); });
    INFO(msg);
    CHECK(contains(msg, (dir / "spiece.model").string()));
  }
  const fs::path empty = tmp.path / "nothing";
  fs::create_directories(empty);
  CHECK(contains(model_error_of([&] { UnigramT5Tokenizer::open(empty.string()); }), "no tokenizer.json or spiece.model"));
}

TEST_CASE("unigram t5 tokenizer: encode's argument checks and invariants") {
  const UnigramT5Tokenizer tok = UnigramT5Tokenizer::open(kRoot + "/wan_tiny");
  CHECK_THROWS_AS(tok.encode({"a"}, 0), ConfigError);
  CHECK_THROWS_AS(tok.encode({"ok", "bad \xff"}, 8), ConfigError);
  const T5Tokens t = tok.encode({"", "a </s>", std::string(3000, 'x')}, 4);
  CHECK(t.ids[0] == std::vector<int64_t>{1, 0, 0, 0});            // "" is </s> alone
  CHECK(t.ids[1] == std::vector<int64_t>{260, 1, 1, 0});          // </s> in the text, then the template's
  CHECK(t.num_tokens[2] == 4);
  CHECK(t.ids[2].back() == 1);                                     // truncated, </s> kept
  CHECK(tok.eos_id() == 1);
  CHECK(tok.pad_id() == 0);
  CHECK(tok.unk_id() == 2);
}
