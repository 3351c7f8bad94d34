// Every relative link of the documentation resolves: README.md and
// docs/*.md are scanned for markdown links and images, `[text](target)`,
// `![alt](target)` and reference definitions `[name]: target`, outside
// fenced code blocks and inline code spans. A target that is a URL
// (http:, https:, mailto:, ...) or only an #anchor is skipped; a #fragment
// is cut off; the rest must name an existing file or directory, relative to
// the page (a leading / means the repository root). Each broken link is
// reported as file:line and target. A #fragment of a link to a markdown
// page (or a bare #anchor on its own page) must name one of that page's
// headings, as GitHub makes their anchors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "doc_files.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using ditgen::testing::documentation;
using ditgen::testing::read_text;

namespace {

struct Link {
  fs::path file;
  int line = 0;
  std::string target;
};

// The line with its inline code spans (`...`, ``...``) blanked out.
std::string without_code_spans(const std::string& line) {
  std::string out = line;
  size_t i = 0;
  while ((i = out.find('`', i)) != std::string::npos) {
    size_t ticks = 0;
    while (i + ticks < out.size() && out[i + ticks] == '`') ++ticks;
    const std::string fence(ticks, '`');
    const size_t end = out.find(fence, i + ticks);
    if (end == std::string::npos) break;  // an unclosed span: literal backticks
    std::fill(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(end + ticks), ' ');
    i = end + ticks;
  }
  return out;
}

// Every link and image target of one markdown file, with its line number.
std::vector<Link> links_in(const fs::path& file) {
  static const std::regex inline_link(R"(\]\(\s*(<[^>]*>|[^)\s]+)(\s+("[^"]*"|'[^']*'))?\s*\))");
  static const std::regex reference_def(R"(^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+))");
  std::vector<Link> links;
  std::ifstream in(file);
  std::string line, fence;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    // Fenced code blocks (``` or ~~~, possibly indented) hold no links.
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && start < 4 &&
        (line.compare(start, 3, "```") == 0 || line.compare(start, 3, "~~~") == 0)) {
      const std::string marker = line.substr(start, 3);
      if (fence.empty()) {
        fence = marker;
      } else if (fence == marker) {
        fence.clear();
      }
      continue;
    }
    if (!fence.empty()) continue;
    const std::string text = without_code_spans(line);
    auto add = [&](std::string target) {
      if (target.size() >= 2 && target.front() == '<' && target.back() == '>') target = target.substr(1, target.size() - 2);
      links.push_back({file, number, target});
    };
    for (auto it = std::sregex_iterator(text.begin(), text.end(), inline_link); it != std::sregex_iterator(); ++it)
      add((*it)[1].str());
    std::smatch def;
    if (std::regex_search(text, def, reference_def)) add(def[1].str());
  }
  return links;
}

// A URL (scheme:...) or a bare #anchor: not a file to check.
bool is_external(const std::string& target) {
  static const std::regex scheme(R"(^[A-Za-z][A-Za-z0-9+.-]*:)");
  return target.empty() || target.front() == '#' || std::regex_search(target, scheme);
}

// %XX escapes decoded (a space is written %20 in a link).
std::string percent_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The links of `files` whose relative targets do not exist; `checked`
// counts the relative links looked at.
std::vector<Link> broken_links(const fs::path& root, const std::vector<fs::path>& files, int& checked) {
  std::vector<Link> broken;
  checked = 0;
  for (const fs::path& file : files) {
    for (const Link& link : links_in(file)) {
      if (is_external(link.target)) continue;
      std::string path = link.target.substr(0, link.target.find_first_of("#?"));
      path = percent_decoded(path);
      const fs::path resolved = path.front() == '/' ? root / path.substr(1) : file.parent_path() / path;
      ++checked;
      if (!fs::exists(resolved)) broken.push_back(link);
    }
  }
  return broken;
}

std::string describe(const fs::path& root, const Link& link) {
  std::ostringstream s;
  s << fs::relative(link.file, root).string() << ":" << link.line << ": link target '" << link.target
    << "' does not exist";
  return s.str();
}

}  // namespace

TEST_CASE("every relative link and image in README.md and docs/*.md resolves") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<fs::path> files = documentation(root);
  REQUIRE(fs::exists(files.front()));
  CHECK_MESSAGE(files.size() > 1, "no docs/*.md found");
  int checked = 0;
  const std::vector<Link> broken = broken_links(root, files, checked);
  MESSAGE(files.size() << " files, " << checked << " relative links checked");
  CHECK(checked > 0);  // the scan found the links it is meant to check
  for (const Link& link : broken) FAIL_CHECK(describe(root, link));
}

TEST_CASE("the link check finds a broken link and passes the others") {
  const ditgen::testing::TempDir dir("ditgen_doc_links");
  dir.write("docs/there.md", "# there\n");
  dir.write("samples/pic.png", "png");
  dir.write("README.md",
            "Intro with [a page](docs/there.md) and [a section](docs/there.md#there), "
            "![a picture](samples/pic.png \"title\") and [the web](https://example.com/x.md).\n"
            "[an anchor](#intro), [mail](mailto:a@b.c), `[code](not/checked.md)`\n"
            "```\n[in a fence](not/checked/either.md)\n```\n"
            "A [missing page](docs/missing.md#part) and ![a missing picture](samples/none.png).\n"
            "[ref]: docs/also-missing.md\n");
  dir.write("docs/guide.md", "Back to [the README](../README.md), [root-relative](/samples/pic.png), "
                             "[a bad one](../nowhere/)\n");
  int checked = 0;
  const std::vector<Link> broken = broken_links(dir.path, documentation(dir.path), checked);
  CHECK(checked == 9);
  std::vector<std::string> found;
  for (const Link& link : broken) found.push_back(describe(dir.path, link));
  for (const std::string& f : found) MESSAGE(f);
  CHECK(found == std::vector<std::string>{
                     "README.md:6: link target 'docs/missing.md#part' does not exist",
                     "README.md:6: link target 'samples/none.png' does not exist",
                     "README.md:7: link target 'docs/also-missing.md' does not exist",
                     "docs/guide.md:1: link target '../nowhere/' does not exist",
                 });
}

namespace {

// The code point at s[i] (UTF-8), advancing i past it; a stray byte is itself.
char32_t next_code_point(const std::string& s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const size_t length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (length == 1 || i + length > s.size()) return byte(i++);
  char32_t c = b & (0xFF >> (length + 1));
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (byte(i + k) & 0x3F);
  i += length;
  return c;
}

// A heading's anchor as GitHub makes it: lower case, letters, digits, '-'
// and '_' kept, each space a '-', all else (punctuation, symbols such as
// '—' and '×', inline code's backticks) dropped. Non-ASCII letters of the
// Latin, Greek and Cyrillic blocks are kept as written (GitHub would also
// lower-case them; no heading here needs that).
std::string heading_slug(const std::string& heading) {
  std::string slug;
  size_t i = 0;
  while (i < heading.size()) {
    const size_t start = i;
    const char32_t c = next_code_point(heading, i);
    if (c < 0x80) {
      const char a = static_cast<char>(c);
      if (std::isalnum(static_cast<unsigned char>(a)) || a == '-' || a == '_')
        slug += static_cast<char>(std::tolower(static_cast<unsigned char>(a)));
      else if (a == ' ')
        slug += '-';
    } else if ((c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) || (c >= 0x370 && c <= 0x4FF)) {
      slug += heading.substr(start, i - start);
    }
  }
  return slug;
}

// The anchors of a markdown page's headings (`#`..`######`, outside fenced
// code blocks), a repeated one numbered -1, -2, ... as GitHub does.
std::set<std::string> heading_anchors(const fs::path& file) {
  static const std::regex heading(R"(^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$)");
  std::set<std::string> anchors;
  std::ifstream in(file);
  std::string line, fence;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && start < 4 &&
        (line.compare(start, 3, "```") == 0 || line.compare(start, 3, "~~~") == 0)) {
      const std::string marker = line.substr(start, 3);
      if (fence.empty()) fence = marker;
      else if (fence == marker) fence.clear();
      continue;
    }
    std::smatch m;
    if (!fence.empty() || !std::regex_match(line, m, heading)) continue;
    const std::string slug = heading_slug(m[1].str());
    std::string anchor = slug;
    for (int n = 1; anchors.count(anchor) > 0; ++n) anchor = slug + "-" + std::to_string(n);
    anchors.insert(anchor);
  }
  return anchors;
}

// The links of `files` whose #fragment names no heading of the markdown
// page they point to; `checked` counts the fragments looked at. Links to
// other files, to URLs and to pages that do not exist (the link check's
// finding) are not looked at.
std::vector<Link> broken_anchors(const fs::path& root, const std::vector<fs::path>& files, int& checked) {
  static const std::regex scheme(R"(^[A-Za-z][A-Za-z0-9+.-]*:)");
  std::vector<Link> broken;
  checked = 0;
  for (const fs::path& file : files) {
    for (const Link& link : links_in(file)) {
      const size_t hash = link.target.find('#');
      if (hash == std::string::npos || std::regex_search(link.target, scheme)) continue;
      const std::string path = percent_decoded(link.target.substr(0, hash));
      const fs::path page = path.empty()         ? file
                            : path.front() == '/' ? root / path.substr(1)
                                                  : file.parent_path() / path;
      if (page.extension() != ".md" || !fs::is_regular_file(page)) continue;
      ++checked;
      if (heading_anchors(page).count(percent_decoded(link.target.substr(hash + 1))) == 0) broken.push_back(link);
    }
  }
  return broken;
}

std::string describe_anchor(const fs::path& root, const Link& link) {
  return fs::relative(link.file, root).string() + ":" + std::to_string(link.line) + ": link target '" + link.target +
         "' names no heading of that page";
}

}  // namespace

TEST_CASE("every #fragment of a link to a page names one of its headings") {
  const fs::path root = DITGEN_SOURCE_DIR;
  int checked = 0;
  const std::vector<Link> broken = broken_anchors(root, documentation(root), checked);
  MESSAGE(checked << " fragments checked");
  CHECK(checked > 0);
  for (const Link& link : broken) FAIL_CHECK(describe_anchor(root, link));
}

TEST_CASE("the anchor check finds a fragment that names no heading") {
  CHECK(heading_slug("5. PAB — Pyramid Attention Broadcast") == "5-pab--pyramid-attention-broadcast");
  CHECK(heading_slug("Plan for 81 × 480 × 832") == "plan-for-81--480--832");
  CHECK(heading_slug("Text encoder: `ditgen encode`") == "text-encoder-ditgen-encode");
  CHECK(heading_slug("PixArt-α / PixArt-σ") == "pixart-α--pixart-σ");
  const ditgen::testing::TempDir dir("ditgen_doc_anchors");
  dir.write("docs/page.md", "# Page\n## 4. Parallel layouts\n```\n## not a heading\n```\n## Notes\n## Notes ##\n");
  dir.write("README.md",
            "[ok](docs/page.md#4-parallel-layouts), [twice](docs/page.md#notes-1), [self](#readme),\n"
            "[gone](docs/page.md#5-pab), [fenced](docs/page.md#not-a-heading), [web](https://x.org/a.md#b)\n"
            "# README\n");
  int checked = 0;
  std::vector<std::string> found;
  for (const Link& link : broken_anchors(dir.path, documentation(dir.path), checked))
    found.push_back(describe_anchor(dir.path, link));
  for (const std::string& f : found) MESSAGE(f);
  CHECK(checked == 5);
  CHECK(found == std::vector<std::string>{
                     "README.md:2: link target 'docs/page.md#5-pab' names no heading of that page",
                     "README.md:2: link target 'docs/page.md#not-a-heading' names no heading of that page",
                 });
}

namespace {

// The ```sh blocks of the README's "## Quick start" section, in order.
std::vector<std::string> quick_start_commands(const std::string& readme) {
  const size_t start = readme.find("\n## Quick start");
  if (start == std::string::npos) return {};
  const size_t end = readme.find("\n## ", start + 1);
  const std::string section = readme.substr(start, end == std::string::npos ? std::string::npos : end - start);
  std::vector<std::string> commands;
  for (size_t at = section.find("```sh\n"); at != std::string::npos; at = section.find("```sh\n", at)) {
    const size_t body = at + 6, close = section.find("\n```", body);
    if (close == std::string::npos) break;
    commands.push_back(section.substr(body, close - body));
    at = close + 4;
  }
  return commands;
}

}  // namespace

// The README stays short, its Quick start holds exactly two commands, and
// CI runs the second (the test command) verbatim, so a missing install step
// fails CI.
TEST_CASE("the README is at most 250 lines, its Quick start two commands, and .ci/run runs the second verbatim") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<std::string> commands = quick_start_commands(read_text(root / "README.md"));
  REQUIRE(commands.size() == 2);
  CHECK(commands[0].find("./build/ditgen --config configs/default.json") != std::string::npos);
  CHECK(commands[1].find("ctest --test-dir build") != std::string::npos);
  CHECK(commands[1].find('\n') == std::string::npos);  // one line
  const std::string readme = read_text(root / "README.md");
  CHECK(std::count(readme.begin(), readme.end(), '\n') <= 250);  // short; the rest lives in docs/
  const std::string ci = read_text(root / ".ci/run");
  CHECK_MESSAGE(ci.find("\n" + commands[1] + "\n") != std::string::npos, ".ci/run lacks: " << commands[1]);
}
