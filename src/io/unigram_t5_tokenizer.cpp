// transformers 5's T5Tokenizer, mirrored step by step from the code it runs:
// transformers' tokenization_utils_tokenizers.py (convert_to_native_format,
// TokenizersBackend.__init__), models/t5/tokenization_t5.py and
// convert_slow_tokenizer.py (SentencePieceExtractor, T5Converter), and the
// tokenizers crate's AddedVocabulary (find_matches), Precompiled,
// WhitespaceSplit, Metaspace, Unigram (encode_optimized, fuse_unk) and
// TemplateProcessing. Everything is read and checked in open(); encode()
// only reads.
#include "io/unigram_t5_tokenizer.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "io/model_dir.h"
#include "io/precompiled_charsmap.h"
#include "io/protobuf_wire.h"
#include "util/error.h"
#include "util/utf8.h"

namespace fs = std::filesystem;

namespace ditgen::io {

namespace {

const std::string kUnderline = "\xE2\x96\x81";  // "▁" (U+2581), Metaspace's replacement
constexpr double kUnkPenalty = 10.0;             // tokenizers' K_UNK_PENALTY
constexpr int64_t kUnkId = 2;                    // T5Tokenizer: Unigram(vocab, unk_id=2, byte_fallback=False)
constexpr int64_t kMaxExtraIds = 100000;

using nlohmann::json;

size_t utf8_len(unsigned char lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

uint32_t decode_at(const std::string& s, size_t i, size_t& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  len = utf8_len(c);
  if (len == 1) return c;
  uint32_t cp = c & (0x3F >> (len - 1));
  for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Rust's char::is_whitespace: Unicode White_Space.
bool white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A word character for single_word added tokens (the regex \w tokenizers
// tests with): letters and digits (glibc's C.UTF-8 classes) and '_'.
bool word_char(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc && iswalnum_l(static_cast<wint_t>(c), loc);
}

// Strict base64 (RFC 4648 alphabet, '=' padding), as Python's b64decode of
// what tokenizers writes. False for anything else.
bool base64_decode(const std::string& in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return false;
  out.clear();
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + static_cast<size_t>(k)];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return false;  // data after '='
        v[k] = value(c);
        if (v[k] < 0) return false;
      }
    }
    const uint32_t triple = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                            (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out.push_back(static_cast<char>((triple >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xFF));
  }
  return true;
}

struct AddedToken {
  std::string content;
  bool lstrip = false, rstrip = false, single_word = false, normalized = false, special = true;
  int64_t id = -1;  // set once the vocabulary is known
};

bool json_bool(const json& obj, const char* key, bool fallback, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw ModelError(where + "." + key + ": expected a boolean, got " + it->type_name());
  return it->get<bool>();
}

// An AddedToken as transformers / tokenizers serialise it: {"content": ...,
// "lstrip": ..., ...}; `special` defaults to `special_default`, normalized
// to !special (transformers' AddedToken).
AddedToken added_token_of(const json& v, bool special_default, const std::string& where) {
  if (!v.is_object()) throw ModelError(where + ": expected an object, got " + std::string(v.type_name()));
  const auto c = v.find("content");
  if (c == v.end() || !c->is_string())
    throw ModelError(where + ".content: expected a string" + (c == v.end() ? std::string(" (missing)") : ", got " + std::string(c->type_name())));
  AddedToken t;
  t.content = c->get<std::string>();
  if (t.content.empty()) throw ModelError(where + ".content: an empty token");
  t.special = json_bool(v, "special", special_default, where);
  t.lstrip = json_bool(v, "lstrip", false, where);
  t.rstrip = json_bool(v, "rstrip", false, where);
  t.single_word = json_bool(v, "single_word", false, where);
  t.normalized = json_bool(v, "normalized", !t.special, where);
  return t;
}

// A token field of tokenizer_config.json / special_tokens_map.json: a
// string or an AddedToken object; empty when absent.
std::string token_string(const json& cfg, const std::string& key, const std::string& path) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  throw ModelError(path + ": " + key + ": expected a string or an object with a string \"content\", got " +
                   std::string(it->type_name()));
}

// The token strings of additional_special_tokens / extra_special_tokens: a
// list, or (transformers 5's model-specific special tokens) an object of
// name: token; each a string or an AddedToken object.
std::vector<std::string> token_list(const json& cfg, const std::string& key, const std::string& path) {
  std::vector<std::string> out;
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return out;
  if (!it->is_array() && !it->is_object())
    throw ModelError(path + ": " + key + ": expected a list of tokens, got " + std::string(it->type_name()));
  size_t index = 0;
  for (auto e = it->begin(); e != it->end(); ++e, ++index) {
    if (e->is_string()) {
      out.push_back(e->get<std::string>());
      continue;
    }
    std::string where = path + ": " + key;
    if (it->is_array()) {
      where += '[';
      where += std::to_string(index);
      where += ']';
    } else {
      where += '.';
      where += e.key();
    }
    out.push_back(added_token_of(*e, true, where).content);
  }
  return out;
}

// One piece of a text on its way through the pipeline: raw text, or an
// added token already resolved to its id.
struct Split {
  std::string text;
  int64_t token = -1;
};

}  // namespace

struct UnigramT5Tokenizer::Impl {
  std::string folder, source;
  std::vector<std::string> pieces;
  std::vector<double> scores;
  std::unordered_map<std::string, int64_t> piece_id;  // the last id of a repeated piece, as tokenizers
  size_t max_piece_bytes = 0;
  double unk_score = 0;
  PrecompiledCharsmap charsmap;
  std::vector<AddedToken> added;
  std::vector<std::vector<size_t>> added_by_first_byte = std::vector<std::vector<size_t>>(256);
  bool any_normalized_added = false;
  int64_t next_id = 0;  // one past the largest id
  int64_t eos_id = 1, pad_id = 0;

  int64_t id_of_content(const std::string& content) {
    const auto it = piece_id.find(content);
    if (it != piece_id.end()) return it->second;
    for (const AddedToken& t : added)
      if (t.content == content) return t.id;
    return -1;
  }

  // AddedVocabulary::add_tokens: a token already known keeps its first
  // form; a new one gets its vocabulary id, or the next id past the model's.
  void add(AddedToken t) {
    for (const AddedToken& a : added)
      if (a.content == t.content) return;
    const auto it = piece_id.find(t.content);
    t.id = it != piece_id.end() ? it->second : next_id++;
    added.push_back(std::move(t));
  }

  void index_added() {
    for (size_t i = 0; i < added.size(); ++i) {
      added_by_first_byte[static_cast<unsigned char>(added[i].content[0])].push_back(i);
      any_normalized_added = any_normalized_added || added[i].normalized;
    }
  }

  // AddedVocabulary::find_matches over the tokens with normalized ==
  // `normalized`: leftmost-longest matches, with their single_word, lstrip
  // and rstrip rules.
  std::vector<Split> split_added(const std::string& s, bool normalized) const {
    struct Piece {
      size_t begin, end;
      int64_t token;
    };
    std::vector<Piece> splits;
    size_t start_offset = 0;
    size_t pos = 0;
    const size_t n = s.size();
    while (pos < n) {
      // The leftmost position where a token matches, and its longest token.
      const AddedToken* best = nullptr;
      size_t at = pos;
      for (; at < n && !best; ++at) {
        for (size_t k : added_by_first_byte[static_cast<unsigned char>(s[at])]) {
          const AddedToken& t = added[k];
          if (t.normalized != normalized) continue;
          if (s.compare(at, t.content.size(), t.content) == 0 && (!best || t.content.size() > best->content.size()))
            best = &t;
        }
        if (best) break;
      }
      if (!best) break;
      size_t start = at, stop = at + best->content.size();
      pos = stop;  // the matcher resumes after the match itself
      if (best->single_word) {
        bool start_space = true, stop_space = true;
        if (start > 0) {
          size_t i = start - 1;
          while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
          size_t len = 0;
          start_space = !word_char(decode_at(s, i, len));
        }
        if (stop < n) {
          size_t len = 0;
          stop_space = !word_char(decode_at(s, stop, len));
        }
        if (!start_space || !stop_space) continue;
      }
      if (best->lstrip) {
        size_t new_start = start;
        while (new_start > 0) {
          size_t i = new_start - 1;
          while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
          size_t len = 0;
          if (!white_space(decode_at(s, i, len))) break;
          new_start = i;
        }
        start = std::max(new_start, start_offset);
      }
      if (best->rstrip) {
        while (stop < n) {
          size_t len = 0;
          if (!white_space(decode_at(s, stop, len))) break;
          stop += len;
        }
      }
      if (start_offset < start) splits.push_back({start_offset, start, -1});
      splits.push_back({start, stop, best->id});
      start_offset = stop;
    }
    if (start_offset < n) splits.push_back({start_offset, n, -1});
    std::vector<Split> out;
    if (s.empty()) out.push_back({});
    for (const Piece& p : splits)
      out.push_back({p.begin < p.end ? s.substr(p.begin, p.end - p.begin) : std::string(), p.token});
    return out;
  }

  // Unigram::encode_optimized + tokenize (fuse_unk, byte_fallback off).
  void unigram(const std::string& s, std::vector<int64_t>& ids) const {
    const size_t n = s.size();
    struct Node {
      int64_t id = 0;
      double score = 0;
      size_t start = std::string::npos;  // None
    };
    std::vector<Node> best(n + 1);
    for (size_t pos = 0; pos < n;) {
      const double till = best[pos].score;
      const size_t mblen = utf8_len(static_cast<unsigned char>(s[pos]));
      bool single = false;
      const size_t longest = std::min(max_piece_bytes, n - pos);
      for (size_t len = 1; len <= longest; ++len) {
        const auto it = piece_id.find(s.substr(pos, len));
        if (it == piece_id.end()) continue;
        Node& t = best[pos + len];
        const double candidate = scores[static_cast<size_t>(it->second)] + till;
        if (t.start == std::string::npos || candidate > t.score) {
          t.score = candidate;
          t.start = pos;
          t.id = it->second;
        }
        if (len == mblen) single = true;
      }
      if (!single) {
        Node& t = best[std::min(pos + mblen, n)];
        const double candidate = unk_score + till;
        if (t.start == std::string::npos || candidate > t.score) {
          t.score = candidate;
          t.start = pos;
          t.id = kUnkId;
        }
      }
      pos += mblen;
    }
    std::vector<std::string> results;
    std::vector<std::string> unk;
    auto flush_unk = [&] {
      if (unk.empty()) return;
      std::string fused;
      for (auto it = unk.rbegin(); it != unk.rend(); ++it) fused += *it;
      results.push_back(std::move(fused));
      unk.clear();
    };
    for (size_t end = n; end > 0;) {
      const Node& node = best[end];
      const size_t start = node.start;
      if (node.id == kUnkId) {
        unk.push_back(s.substr(start, end - start));
      } else {
        flush_unk();
        results.push_back(s.substr(start, end - start));
      }
      end = start;
    }
    flush_unk();
    for (auto it = results.rbegin(); it != results.rend(); ++it) {
      const auto found = piece_id.find(*it);
      ids.push_back(found != piece_id.end() ? found->second : kUnkId);
    }
  }

  // WhitespaceSplit, then Metaspace("▁", prepend always, split), then the model.
  void pre_tokenize_and_model(const std::string& s, std::vector<int64_t>& ids) const {
    for (size_t i = 0; i < s.size();) {
      size_t len = 0;
      if (white_space(decode_at(s, i, len))) {
        i += len;
        continue;
      }
      size_t j = i;
      while (j < s.size() && !white_space(decode_at(s, j, len))) j += len;
      std::string word = s.substr(i, j - i);
      i = j;
      if (word.compare(0, kUnderline.size(), kUnderline) != 0) word = kUnderline + word;
      // MergedWithNext: a new piece starts at every "▁".
      size_t begin = 0;
      for (size_t k = kUnderline.size(); k <= word.size(); ++k) {
        if (k == word.size() || word.compare(k, kUnderline.size(), kUnderline) == 0) {
          unigram(word.substr(begin, k - begin), ids);
          begin = k;
        }
      }
    }
  }

  std::vector<int64_t> tokenize(const std::string& text) const {
    std::vector<int64_t> ids;
    for (const Split& raw : split_added(text, false)) {
      if (raw.token >= 0) {
        ids.push_back(raw.token);
        continue;
      }
      const std::string normalized = charsmap.normalize(raw.text);
      if (!any_normalized_added) {
        pre_tokenize_and_model(normalized, ids);
        continue;
      }
      for (const Split& part : split_added(normalized, true)) {
        if (part.token >= 0)
          ids.push_back(part.token);
        else
          pre_tokenize_and_model(part.text, ids);
      }
    }
    return ids;
  }

  // --- loading ------------------------------------------------------------

  void set_vocab_done() {
    double min_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < pieces.size(); ++i) {
      piece_id[pieces[i]] = static_cast<int64_t>(i);
      max_piece_bytes = std::max(max_piece_bytes, pieces[i].size());
      min_score = std::min(min_score, scores[i]);
    }
    unk_score = min_score - kUnkPenalty;
    next_id = static_cast<int64_t>(pieces.size());
  }

  // tokenizer.json: the Unigram vocabulary and the Precompiled map; the
  // rest type-checked (transformers 5's T5Tokenizer replaces it).
  void read_tokenizer_json(const std::string& path, json& file_added) {
    const json doc = read_json_file(path);
    if (!doc.is_object()) throw ModelError(path + ": expected a JSON object, got " + std::string(doc.type_name()));
    const auto model = doc.find("model");
    if (model == doc.end() || !model->is_object())
      throw ModelError(path + ": model: expected an object" +
                       (model == doc.end() ? std::string(" (missing)") : ", got " + std::string(model->type_name())));
    const auto type = model->find("type");
    if (type == model->end() || !type->is_string())
      throw ModelError(path + ": model.type: expected a string (\"Unigram\")");
    if (type->get<std::string>() != "Unigram")
      throw ModelError(path + ": model.type: \"" + type->get<std::string>() +
                       "\": ditgen reads T5 tokenizers, whose model is \"Unigram\"");
    const auto unk = model->find("unk_id");
    if (unk != model->end() && !unk->is_null() && !unk->is_number_integer())
      throw ModelError(path + ": model.unk_id: expected an integer or null, got " + std::string(unk->type_name()));
    json_bool(*model, "byte_fallback", false, path + ": model");  // type-checked; transformers 5 uses false
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_array())
      throw ModelError(path + ": model.vocab: expected a list of [piece, score]" +
                       (vocab == model->end() ? std::string(" (missing)") : ", got " + std::string(vocab->type_name())));
    pieces.reserve(vocab->size());
    scores.reserve(vocab->size());
    for (size_t i = 0; i < vocab->size(); ++i) {
      const json& e = (*vocab)[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        throw ModelError(path + ": model.vocab[" + std::to_string(i) + "]: expected [piece (a string), score (a number)]");
      const double score = e[1].get<double>();
      if (!std::isfinite(score)) throw ModelError(path + ": model.vocab[" + std::to_string(i) + "]: a score that is not finite");
      pieces.push_back(e[0].get<std::string>());
      scores.push_back(score);
    }
    for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation", "padding"}) {
      const auto it = doc.find(key);
      if (it != doc.end() && !it->is_null() && !it->is_object())
        throw ModelError(path + ": " + key + ": expected an object or null, got " + std::string(it->type_name()));
    }
    // The Precompiled map: the normalizer itself or the first in a Sequence
    // (transformers 5 keeps it and drops every other normalizer).
    const auto norm = doc.find("normalizer");
    if (norm != doc.end() && norm->is_object()) {
      std::vector<const json*> list;
      const std::string where = path + ": normalizer";
      if (norm->contains("type") && (*norm)["type"] == "Sequence") {
        const auto seq = norm->find("normalizers");
        if (seq == norm->end() || !seq->is_array())
          throw ModelError(where + ".normalizers: expected a list (a Sequence normalizer)");
        for (const json& n : *seq) list.push_back(&n);
      } else {
        list.push_back(&*norm);
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const json& n = *list[i];
        if (!n.is_object()) throw ModelError(where + ": expected an object, got " + std::string(n.type_name()));
        if (!(n.contains("type") && n["type"] == "Precompiled" && n.contains("precompiled_charsmap"))) continue;
        const json& map = n["precompiled_charsmap"];
        if (!map.is_string())
          throw ModelError(where + ".precompiled_charsmap: expected a base64 string, got " + std::string(map.type_name()));
        std::string blob;
        if (!base64_decode(map.get<std::string>(), blob))
          throw ModelError(where + ".precompiled_charsmap: not base64");
        charsmap = PrecompiledCharsmap(blob, path + " (normalizer.precompiled_charsmap)");
        break;
      }
    }
    const auto at = doc.find("added_tokens");
    if (at != doc.end() && !at->is_null()) {
      if (!at->is_array()) throw ModelError(path + ": added_tokens: expected a list, got " + std::string(at->type_name()));
      for (size_t i = 0; i < at->size(); ++i) {
        const json& e = (*at)[i];
        const std::string where = path + ": added_tokens[" + std::to_string(i) + "]";
        added_token_of(e, false, where);  // type-checks the flags
        const auto id = e.find("id");
        if (id == e.end() || !id->is_number_integer() || id->get<int64_t>() < 0)
          throw ModelError(where + ".id: expected a non-negative integer");
      }
      file_added = *at;
    }
  }

  // spiece.model: SentencePieceExtractor (pieces and scores, control and
  // user-defined pieces as added tokens, the precompiled map), then
  // T5Converter.convert_from_spm's <extra_id_k>.
  void read_spiece(const std::string& path, int64_t extra_ids, std::vector<AddedToken>& spm_added) {
    const std::string model = read_file_bytes(path);
    if (model.empty()) throw ModelError(path + ": empty file (not a SentencePiece model)");
    std::vector<protobuf::Field> top;
    if (!protobuf::split_fields(model, top)) throw ModelError(path + ": not a SentencePiece model (malformed protobuf)");
    for (const protobuf::Field& f : top) {
      if (f.number == 1) {  // ModelProto.pieces
        if (f.wire_type != 2) throw ModelError(path + ": not a SentencePiece model (pieces of the wrong wire type)");
        const std::string msg = model.substr(f.payload_begin, f.payload_end - f.payload_begin);
        std::vector<protobuf::Field> sub;
        if (!protobuf::split_fields(msg, sub)) throw ModelError(path + ": piece " + std::to_string(pieces.size()) + ": malformed");
        std::string piece;
        float score = 0;
        uint64_t type = 1;  // NORMAL
        for (const protobuf::Field& g : sub) {
          if (g.number == 1 && g.wire_type == 2) piece = msg.substr(g.payload_begin, g.payload_end - g.payload_begin);
          else if (g.number == 2 && g.wire_type == 5) score = protobuf::fixed32_float(g.value);
          else if (g.number == 3 && g.wire_type == 0) type = g.value;
        }
        if (first_invalid_utf8(piece) != std::string::npos)
          throw ModelError(path + ": piece " + std::to_string(pieces.size()) + ": not UTF-8");
        if (!std::isfinite(score)) throw ModelError(path + ": piece " + std::to_string(pieces.size()) + ": a score that is not finite");
        if ((type == 3 || type == 4) && !piece.empty()) {  // CONTROL (special) and USER_DEFINED
          AddedToken t;
          t.content = piece;
          t.special = type == 3;
          t.normalized = false;
          spm_added.push_back(t);
        }
        pieces.push_back(piece);
        scores.push_back(score);
      } else if (f.number == 3 && f.wire_type == 2) {  // normalizer_spec
        const std::string spec = model.substr(f.payload_begin, f.payload_end - f.payload_begin);
        std::vector<protobuf::Field> sub;
        if (!protobuf::split_fields(spec, sub)) throw ModelError(path + ": normalizer_spec: malformed");
        for (const protobuf::Field& g : sub)
          if (g.number == 2 && g.wire_type == 2 && g.payload_end > g.payload_begin)
            charsmap = PrecompiledCharsmap(spec.substr(g.payload_begin, g.payload_end - g.payload_begin),
                                           path + " (normalizer_spec.precompiled_charsmap)");
      }
    }
    if (pieces.empty()) throw ModelError(path + ": the SentencePiece model has no pieces");
    for (int64_t k = extra_ids - 1; k >= 0; --k) {
      pieces.push_back("<extra_id_" + std::to_string(k) + ">");
      scores.push_back(0.0);
    }
  }
};

UnigramT5Tokenizer::UnigramT5Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UnigramT5Tokenizer::UnigramT5Tokenizer(UnigramT5Tokenizer&&) noexcept = default;
UnigramT5Tokenizer& UnigramT5Tokenizer::operator=(UnigramT5Tokenizer&&) noexcept = default;
UnigramT5Tokenizer::~UnigramT5Tokenizer() = default;

UnigramT5Tokenizer UnigramT5Tokenizer::open(const std::string& dir) {
  fs::path folder = dir;
  std::error_code ec;
  if (fs::is_directory(folder / "tokenizer", ec)) folder /= "tokenizer";
  if (!fs::is_directory(folder, ec)) throw ModelError(folder.string() + ": not a directory (expected a tokenizer folder)");
  auto impl = std::make_unique<Impl>();
  impl->folder = folder.string();
  const std::string json_path = (folder / "tokenizer.json").string();
  const std::string spiece_path = (folder / "spiece.model").string();

  // tokenizer_config.json and special_tokens_map.json: what T5Tokenizer's
  // __init__ takes from them.
  json cfg = json::object();
  const std::string cfg_path = (folder / "tokenizer_config.json").string();
  if (fs::exists(cfg_path, ec)) cfg = read_json_file(cfg_path);
  if (!cfg.is_object()) throw ModelError(cfg_path + ": expected a JSON object, got " + std::string(cfg.type_name()));
  json special_map = json::object();
  const std::string map_path = (folder / "special_tokens_map.json").string();
  if (fs::exists(map_path, ec)) special_map = read_json_file(map_path);
  if (!special_map.is_object())
    throw ModelError(map_path + ": expected a JSON object, got " + std::string(special_map.type_name()));
  const int64_t extra_ids = get_int_or(cfg, "extra_ids", 100, cfg_path);
  if (extra_ids < 0 || extra_ids > kMaxExtraIds)
    throw ModelError(cfg_path + ": extra_ids: " + std::to_string(extra_ids) + " (expected 0 to " +
                     std::to_string(kMaxExtraIds) + ")");

  json file_added = json::array();
  std::vector<AddedToken> spm_added;
  if (fs::exists(json_path, ec)) {
    impl->source = json_path;
    impl->read_tokenizer_json(json_path, file_added);
  } else if (fs::exists(spiece_path, ec)) {
    impl->source = spiece_path;
    impl->read_spiece(spiece_path, extra_ids, spm_added);
  } else {
    throw ModelError(folder.string() + ": no tokenizer.json or spiece.model (a T5 tokenizer folder needs one)");
  }
  if (static_cast<int64_t>(impl->pieces.size()) <= kUnkId)
    throw ModelError(impl->source + ": " + std::to_string(impl->pieces.size()) +
                     " pieces: T5's <unk> is id 2, outside the vocabulary");
  impl->set_vocab_done();

  // The named special tokens: the config's, else special_tokens_map.json's, else T5's.
  auto named = [&](const std::string& key, const std::string& fallback) {
    std::string v = token_string(cfg, key, cfg_path);
    if (v.empty()) v = token_string(special_map, key, map_path);
    return v.empty() ? fallback : v;
  };
  const std::string eos = named("eos_token", "</s>"), unk = named("unk_token", "<unk>"), pad = named("pad_token", "<pad>");

  // The added tokens (transformers 5's from_pretrained + TokenizersBackend.__init__).
  std::map<int64_t, AddedToken> decoder;  // by the serialised index, as transformers sorts them
  const auto atd = cfg.find("added_tokens_decoder");
  if (atd != cfg.end() && !atd->is_null()) {
    if (!atd->is_object())
      throw ModelError(cfg_path + ": added_tokens_decoder: expected an object, got " + std::string(atd->type_name()));
    for (const auto& [key, value] : atd->items()) {
      const std::string where = cfg_path + ": added_tokens_decoder." + key;
      int64_t index = -1;
      try {
        size_t used = 0;
        index = std::stoll(key, &used);
        if (used != key.size()) index = -1;
      } catch (const std::logic_error&) {
        index = -1;
      }
      if (index < 0) throw ModelError(where + ": the key must be a non-negative integer id");
      decoder[index] = added_token_of(value, false, where);  // AddedToken(**entry): special defaults to False
    }
  } else {
    std::vector<std::string> specials = {eos, unk, pad};
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"})
      for (const std::string& t : token_list(cfg, key, cfg_path)) specials.push_back(t);
    const std::string legacy_path = (folder / "added_tokens.json").string();
    if (fs::exists(legacy_path, ec)) {
      const json legacy = read_json_file(legacy_path);
      if (!legacy.is_object())
        throw ModelError(legacy_path + ": expected an object of \"token\": id, got " + std::string(legacy.type_name()));
      for (const auto& [content, id] : legacy.items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0)
          throw ModelError(legacy_path + ": " + content + ": expected a non-negative integer id");
        if (content.empty()) throw ModelError(legacy_path + ": an empty token");
        AddedToken t;
        t.content = content;
        t.special = std::find(specials.begin(), specials.end(), content) != specials.end();
        t.normalized = !t.special;
        decoder[id.get<int64_t>()] = t;
      }
    }
    for (size_t i = 0; i < file_added.size(); ++i)
      decoder[file_added[i]["id"].get<int64_t>()] =
          added_token_of(file_added[i], false, json_path + ": added_tokens[" + std::to_string(i) + "]");
  }
  for (auto& [index, token] : decoder) impl->add(token);
  // The special tokens not added yet: pad / eos / unk, then the extra ones.
  std::vector<std::string> extra;
  if (impl->source == spiece_path) {
    for (const AddedToken& t : spm_added) extra.push_back(t.content);
  } else {
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"})
      for (const std::string& t : token_list(cfg, key, cfg_path)) extra.push_back(t);
  }
  if (std::none_of(extra.begin(), extra.end(), [](const std::string& t) { return t.find("<extra_id_") != std::string::npos; }))
    for (int64_t k = 0; k < extra_ids; ++k) extra.push_back("<extra_id_" + std::to_string(k) + ">");
  for (const std::string* t : {&eos, &unk, &pad}) {
    AddedToken a;
    a.content = *t;
    impl->add(a);
  }
  for (size_t i = 0; i < spm_added.size(); ++i) impl->add(spm_added[i]);  // their special / normalized flags
  for (const std::string& t : extra) {
    if (t.empty()) continue;
    AddedToken a;
    a.content = t;
    impl->add(a);
  }
  impl->index_added();
  impl->eos_id = impl->id_of_content(eos);
  impl->pad_id = impl->id_of_content(pad);
  return UnigramT5Tokenizer(std::move(impl));
}

std::vector<int64_t> UnigramT5Tokenizer::tokenize(const std::string& text) const {
  return tokenize_checked(*impl_, text);
}

// Truncation leaves room for the template's one special token, then
// TemplateProcessing "$A </s>" appends it (whatever the ids end with).
T5Tokens UnigramT5Tokenizer::encode(const std::vector<std::string>& prompts, int64_t max_length) const {
  return encode_with(*impl_, prompts, max_length, EosRule::kAlways);
}

const std::string& UnigramT5Tokenizer::folder() const { return impl_->folder; }
const std::string& UnigramT5Tokenizer::source() const { return impl_->source; }
int64_t UnigramT5Tokenizer::vocab_size() const { return impl_->next_id; }
int64_t UnigramT5Tokenizer::eos_id() const { return impl_->eos_id; }
int64_t UnigramT5Tokenizer::pad_id() const { return impl_->pad_id; }
int64_t UnigramT5Tokenizer::unk_id() const { return kUnkId; }
bool UnigramT5Tokenizer::has_charsmap() const { return !impl_->charsmap.empty(); }

}  // namespace ditgen::io
