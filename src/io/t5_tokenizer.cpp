// T5Tokenizer: libsentencepiece for the pieces, and transformers' Python layer
// around it (PreTrainedTokenizer.tokenize, T5Tokenizer.tokenize/_tokenize,
// prepare_for_model's truncation, EOS and padding) mirrored step by step; the
// comments name the transformers code each step follows (4.x,
// tokenization_utils.py and models/t5/tokenization_t5.py). Everything is
// read and validated in open(); encode() only reads.
#include "io/t5_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "io/model_dir.h"
#include "io/protobuf_wire.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace ditgen::io {

namespace {

using protobuf::Field;
using protobuf::split_fields;
using protobuf::write_varint;

const std::string kUnderline = "\xE2\x96\x81";  // "▁" (U+2581), SentencePiece's word boundary

// An added token as transformers' AddedToken describes it.
struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// Decodes the code point at s[i] (s valid UTF-8); sets its length.
uint32_t decode_utf8(const std::string& s, size_t i, size_t& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) { len = 1; return c; }
  len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  uint32_t cp = c & (0x3F >> (len - 1));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Python's str.isspace(), which str.strip()/lstrip()/rstrip() without
// arguments use: transformers strips added tokens' neighbours with them.
bool python_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string lstrip(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (!python_isspace(decode_utf8(s, i, len))) break;
    i += len;
  }
  return s.substr(i);
}

std::string rstrip(const std::string& s) {
  size_t end = 0;  // end of the last non-space code point
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (!python_isspace(decode_utf8(s, i, len))) end = i + len;
    i += len;
  }
  return s.substr(0, end);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// --- protobuf wire format, just enough to clear add_dummy_prefix ----------
// transformers' legacy=False loads the model with
// normalizer_spec.add_dummy_prefix = False (get_spm_processor); the Debian
// package ships no sentencepiece_model.pb.h, so the serialized ModelProto is
// edited here: field 3 (normalizer_spec) gets its field 3 (add_dummy_prefix)
// replaced by `false`. Every other byte is kept.

// The model with normalizer_spec.add_dummy_prefix = false; empty if the
// bytes are not a protobuf message.
std::string without_dummy_prefix(const std::string& model) {
  std::vector<Field> top;
  if (!split_fields(model, top)) return {};
  std::string normalizer;
  std::string out;
  for (const Field& f : top) {
    if (f.number == 3 && f.payload_end > 0) {
      // Repeated occurrences of a message field merge: keep them all, in order.
      normalizer += model.substr(f.payload_begin, f.payload_end - f.payload_begin);
    } else {
      out += model.substr(f.begin, f.end - f.begin);
    }
  }
  std::vector<Field> sub;
  if (!split_fields(normalizer, sub)) return {};
  std::string spec;
  for (const Field& f : sub)
    if (f.number != 3) spec += normalizer.substr(f.begin, f.end - f.begin);
  spec += std::string("\x18\x00", 2);  // field 3, varint: add_dummy_prefix = false
  out.push_back('\x1A');               // field 3, length-delimited: normalizer_spec
  write_varint(out, spec.size());
  out += spec;
  return out;
}

// A token field of tokenizer_config.json: a string, or an AddedToken object
// ({"content": ..., "__type": "AddedToken"}).
std::string token_string(const nlohmann::json& cfg, const std::string& key, const std::string& fallback,
                         const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw ModelError(path + ": " + key + ": expected a string or an object with \"content\"");
}

}  // namespace

struct T5Tokenizer::Impl {
  std::string spiece_path;
  sentencepiece::SentencePieceProcessor sp;
  bool legacy = true;
  bool add_prefix_space = true;
  std::string unk_token = "<unk>", eos_token = "</s>", pad_token = "<pad>";
  int64_t eos_id = 1, pad_id = 0;
  int64_t extra_ids = 100;
  int64_t unk_token_length = 0;
  std::vector<AddedToken> added;              // split out of the text before sentencepiece
  std::map<std::string, int64_t> added_ids;   // content -> id
  std::set<std::string> all_special_tokens;   // T5Tokenizer.all_special_tokens

  std::vector<std::string> sp_pieces(const std::string& text) const {
    std::vector<std::string> pieces;
    const auto status = sp.Encode(text, &pieces);
    if (!status.ok()) throw ModelError(spiece_path + ": sentencepiece: " + status.ToString());
    return pieces;
  }

  // T5Tokenizer._tokenize: one chunk of text without added tokens.
  std::vector<std::string> tokenize_chunk(const std::string& text) const {
    if (legacy || !(starts_with(text, kUnderline) || starts_with(text, " "))) return sp_pieces(text);
    // The model has no dummy prefix: encode "<unk>" + text and drop the
    // pieces of "<unk>", so a leading "▁" is kept as sentencepiece would.
    auto pieces = sp_pieces(unk_token + text);
    if (static_cast<int64_t>(pieces.size()) >= unk_token_length)
      pieces.erase(pieces.begin(), pieces.begin() + unk_token_length);
    return pieces;
  }

  // The added token starting at text[i] (the longest), or null. The added
  // tokens T5 has (<...> with no '<' or '>' inside) never overlap, so the
  // first match scanning left to right is transformers' Trie.split's.
  const AddedToken* match_at(const std::string& text, size_t i) const {
    const AddedToken* best = nullptr;
    for (const auto& t : added)
      if (!t.content.empty() && text.compare(i, t.content.size(), t.content) == 0 &&
          (!best || t.content.size() > best->content.size()))
        best = &t;
    return best;
  }

  // PreTrainedTokenizer.tokenize: split on added tokens, apply their strip
  // rules to the neighbours, encode the rest. Returns (token, is_added).
  std::vector<std::pair<std::string, bool>> base_tokenize(const std::string& text) const {
    struct Part {
      std::string text;
      const AddedToken* token;
    };
    std::vector<Part> parts;
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      if (const AddedToken* t = match_at(text, i)) {
        if (i > start) parts.push_back({text.substr(start, i - start), nullptr});
        parts.push_back({t->content, t});
        i += t->content.size();
        start = i;
      } else {
        ++i;
      }
    }
    if (start < text.size() || parts.empty()) parts.push_back({text.substr(start), nullptr});
    for (size_t i = 0; i < parts.size(); ++i) {
      const AddedToken* t = parts[i].token;
      if (!t) continue;
      Part* left = i > 0 ? &parts[i - 1] : nullptr;
      Part* right = i + 1 < parts.size() ? &parts[i + 1] : nullptr;
      // rstrip: the token eats the whitespace on its right (and lstrip on its left).
      if (t->rstrip && right && !right->text.empty()) right->text = lstrip(right->text);
      if (t->lstrip && left && !left->text.empty()) left->text = rstrip(left->text);
      if (t->single_word && left && !left->text.empty() && left->text.back() != ' ') {
        left->text += parts[i].text;
        parts[i].text.clear();
      } else if (t->single_word && right && !right->text.empty() && right->text.front() != ' ') {
        right->text = parts[i].text + right->text;
        parts[i].text.clear();
      }
    }
    std::vector<std::pair<std::string, bool>> tokens;
    for (const Part& p : parts) {
      if (p.text.empty()) continue;
      // transformers tests the string, not how it was split off.
      if (added_ids.count(p.text)) {
        tokens.emplace_back(p.text, true);
      } else {
        for (auto& piece : tokenize_chunk(p.text)) tokens.emplace_back(std::move(piece), false);
      }
    }
    return tokens;
  }

  // T5Tokenizer.tokenize + convert_tokens_to_ids.
  std::vector<int64_t> tokenize(std::string text) const {
    std::vector<std::pair<std::string, bool>> tokens;
    if (legacy || text.empty()) {
      tokens = base_tokenize(text);
    } else {
      // text.replace("▁", " "), then the prefix "▁" (add_prefix_space).
      std::string replaced;
      for (size_t i = 0; i < text.size();) {
        if (starts_with(text.substr(i, kUnderline.size()), kUnderline)) {
          replaced += ' ';
          i += kUnderline.size();
        } else {
          replaced += text[i++];
        }
      }
      if (add_prefix_space) replaced = kUnderline + replaced;
      tokens = base_tokenize(replaced);
      if (tokens.size() > 1 && tokens[0].first == kUnderline && all_special_tokens.count(tokens[1].first))
        tokens.erase(tokens.begin());
    }
    std::vector<int64_t> ids;
    ids.reserve(tokens.size());
    for (const auto& [token, is_added] : tokens) {
      // _convert_token_to_id_with_added_voc: the added tokens first.
      const auto it = added_ids.find(token);
      ids.push_back(it != added_ids.end() ? it->second : static_cast<int64_t>(sp.PieceToId(token)));
    }
    return ids;
  }
};

T5Tokenizer::T5Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
T5Tokenizer::T5Tokenizer(T5Tokenizer&&) noexcept = default;
T5Tokenizer& T5Tokenizer::operator=(T5Tokenizer&&) noexcept = default;
T5Tokenizer::~T5Tokenizer() = default;

T5Tokenizer T5Tokenizer::open(const std::string& dir, std::optional<bool> legacy) {
  fs::path folder = dir;
  if (fs::is_directory(folder / "tokenizer")) folder /= "tokenizer";
  auto impl = std::make_unique<Impl>();
  impl->spiece_path = (folder / "spiece.model").string();
  const std::string& path = impl->spiece_path;
  if (!fs::exists(path)) {
    if (fs::exists(folder / "tokenizer.json"))
      throw ModelError(path + ": not found: this tokenizer folder has only tokenizer.json, which the "
                              "sentencepiece-based T5 tokenizer does not read (io/text_tokenizer.h opens such a "
                              "folder with transformers 5's rules instead)");
    throw ModelError(path + ": not found (a T5 tokenizer folder needs spiece.model)");
  }

  // tokenizer_config.json: what T5Tokenizer.__init__ takes from it.
  nlohmann::json cfg = nlohmann::json::object();
  const std::string cfg_path = (folder / "tokenizer_config.json").string();
  if (fs::exists(cfg_path)) cfg = read_json_file(cfg_path);
  require(cfg.is_object(), cfg_path, "expected a JSON object");
  nlohmann::json special_map = nlohmann::json::object();
  const std::string map_path = (folder / "special_tokens_map.json").string();
  if (fs::exists(map_path)) special_map = read_json_file(map_path);
  require(special_map.is_object(), map_path, "expected a JSON object");

  if (legacy) {
    impl->legacy = *legacy;
  } else if (cfg.contains("legacy") && !cfg["legacy"].is_null()) {
    // transformers: legacy=None (absent) means the legacy behaviour.
    impl->legacy = get_bool_or(cfg, "legacy", true, cfg_path);
  }
  impl->add_prefix_space = get_bool_or(cfg, "add_prefix_space", true, cfg_path);
  impl->extra_ids = get_int_or(cfg, "extra_ids", 100, cfg_path);
  require(impl->extra_ids >= 0, cfg_path, "extra_ids: must not be negative");
  // special_tokens_map.json, then tokenizer_config.json: from_pretrained
  // lets the config's values win.
  for (auto* token : {&impl->unk_token, &impl->eos_token, &impl->pad_token}) {
    const std::string key = token == &impl->unk_token ? "unk_token" : token == &impl->eos_token ? "eos_token" : "pad_token";
    *token = token_string(special_map, key, *token, map_path);
    *token = token_string(cfg, key, *token, cfg_path);
  }

  // The SentencePiece model, read whole and checked before use.
  std::string model = read_file_bytes(path);
  if (model.empty()) throw ModelError(path + ": empty file (not a SentencePiece model)");
  if (!impl->legacy) {
    // transformers' legacy=False: the same model with add_dummy_prefix off.
    model = without_dummy_prefix(model);
    if (model.empty()) throw ModelError(path + ": not a SentencePiece model (malformed protobuf)");
  }
  const auto status = impl->sp.LoadFromSerializedProto(model);
  if (!status.ok()) throw ModelError(path + ": not a SentencePiece model: " + status.ToString());
  const int64_t pieces = impl->sp.GetPieceSize();
  require(pieces > 0, path, "the SentencePiece model has no pieces");

  // The added tokens: tokenizer_config.json's added_tokens_decoder (written
  // by transformers >= 4.34), else T5Tokenizer.__init__'s defaults: <extra_id_k>
  // at pieces + extra_ids - 1 - k, stripping whitespace on both sides, and
  // the special tokens at their sentencepiece ids.
  std::vector<std::string> additional;
  const nlohmann::json* extra_src = cfg.contains("additional_special_tokens") ? &cfg
                                    : special_map.contains("additional_special_tokens") ? &special_map : nullptr;
  if (extra_src && !(*extra_src)["additional_special_tokens"].is_null()) {
    const auto& list = (*extra_src)["additional_special_tokens"];
    const std::string& p = extra_src == &cfg ? cfg_path : map_path;
    require(list.is_array(), p, "additional_special_tokens: expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      require(list[i].is_string() || (list[i].is_object() && list[i].contains("content")), p,
              "additional_special_tokens[" + std::to_string(i) + "]: expected a string or an object with \"content\"");
      additional.push_back(list[i].is_string() ? list[i].get<std::string>() : list[i]["content"].get<std::string>());
    }
  } else {
    for (int64_t k = 0; k < impl->extra_ids; ++k) additional.push_back("<extra_id_" + std::to_string(k) + ">");
  }
  if (cfg.contains("added_tokens_decoder")) {
    const auto& dec = cfg["added_tokens_decoder"];
    require(dec.is_object(), cfg_path, "added_tokens_decoder: expected an object");
    for (const auto& [key, value] : dec.items()) {
      const std::string where = "added_tokens_decoder." + key;
      AddedToken t;
      try {
        size_t used = 0;
        t.id = std::stoll(key, &used);
        require(used == key.size(), cfg_path, where + ": the key must be an integer id");
      } catch (const std::logic_error&) {
        throw ModelError(cfg_path + ": " + where + ": the key must be an integer id");
      }
      require(value.is_object() && value.contains("content") && value["content"].is_string(), cfg_path,
              where + ": expected an object with a string \"content\"");
      t.content = value["content"].get<std::string>();
      t.lstrip = get_bool_or(value, "lstrip", false, cfg_path + " (" + where + ")");
      t.rstrip = get_bool_or(value, "rstrip", false, cfg_path + " (" + where + ")");
      t.single_word = get_bool_or(value, "single_word", false, cfg_path + " (" + where + ")");
      require(t.id >= 0 && t.id < pieces + impl->extra_ids, cfg_path,
              where + ": id outside the vocabulary (" + std::to_string(pieces) + " pieces + " +
                  std::to_string(impl->extra_ids) + " extra ids)");
      impl->added.push_back(t);
    }
  } else {
    for (const auto& content : additional) {
      const std::string prefix = "<extra_id_";
      size_t used = 0;
      int64_t k = -1;
      if (starts_with(content, prefix) && content.size() > prefix.size() + 1 && content.back() == '>') {
        try {
          k = std::stoll(content.substr(prefix.size(), content.size() - prefix.size() - 1), &used);
        } catch (const std::logic_error&) {
          k = -1;
        }
      }
      if (k < 0 || k >= impl->extra_ids)
        throw ModelError(cfg_path + ": additional_special_tokens: \"" + content +
                         "\" is not one of the extra_ids <extra_id_k>; such tokens need added_tokens_decoder");
      impl->added.push_back({content, pieces + impl->extra_ids - 1 - k, true, true, false});
    }
  }
  // The special tokens are added tokens too (never split by sentencepiece).
  for (const auto* token : {&impl->pad_token, &impl->eos_token, &impl->unk_token}) {
    const bool known = std::any_of(impl->added.begin(), impl->added.end(),
                                   [&](const AddedToken& t) { return t.content == *token; });
    if (known) continue;
    const int64_t id = impl->sp.PieceToId(*token);
    require(*token == impl->unk_token || id != impl->sp.unk_id(), path,
            "the special token \"" + *token + "\" is not a piece of the model");
    impl->added.push_back({*token, id, false, false, false});
  }
  for (const auto& t : impl->added) impl->added_ids[t.content] = t.id;
  impl->eos_id = impl->added_ids.at(impl->eos_token);
  impl->pad_id = impl->added_ids.at(impl->pad_token);
  impl->all_special_tokens = {impl->unk_token, impl->eos_token, impl->pad_token};
  impl->all_special_tokens.insert(additional.begin(), additional.end());
  impl->unk_token_length = static_cast<int64_t>(impl->sp_pieces(impl->unk_token).size());
  return T5Tokenizer(std::move(impl));
}

std::vector<int64_t> T5Tokenizer::tokenize(const std::string& text) const { return tokenize_checked(*impl_, text); }

// prepare_for_model: truncate to leave room for the one special token, then
// build_inputs_with_special_tokens's _add_eos_if_not_present (no second </s>
// when the ids already end with one).
T5Tokens T5Tokenizer::encode(const std::vector<std::string>& prompts, int64_t max_length) const {
  return encode_with(*impl_, prompts, max_length, EosRule::kIfAbsent);
}

const std::string& T5Tokenizer::spiece_path() const { return impl_->spiece_path; }
bool T5Tokenizer::legacy() const { return impl_->legacy; }
int64_t T5Tokenizer::vocab_size() const { return impl_->sp.GetPieceSize() + impl_->extra_ids; }
int64_t T5Tokenizer::eos_id() const { return impl_->eos_id; }
int64_t T5Tokenizer::pad_id() const { return impl_->pad_id; }

}  // namespace ditgen::io
