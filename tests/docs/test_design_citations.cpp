// The design as built is docs/design.md, and the code cites it by section:
// `docs/design.md §4`. Its sections keep the numbering of the project's
// original design contract (§1 Command line ... §8 Step caches), a file the
// repository does not have, so a citation of that file is one a reader
// cannot follow. Checked here:
//   - docs/design.md has the sections 1..8, in order, as `## N. Title`;
//   - every `design.md §N` citation (also `§N-M`, `§N, §M`, `§N/§M`) in the
//     sources, scripts, tests and pages names a section that exists;
//   - no file under src/, kernels/ or tests/ names the contract's file, and
//     no page cites a section of it. Each offence is reported as file:line.
// The contract's file name is spelt in pieces below, so this file does not
// cite it itself.
#include <doctest/doctest.h>

#include <algorithm>
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

// The contract's file name, which the repository does not have.
const std::string& contract_name() {
  static const std::string name = std::string("DESIGN") + ".md";
  return name;
}

struct Finding {
  std::string where;  // file:line
  std::string what;
};

std::string describe(const Finding& f) { return f.where + ": " + f.what; }

// The section numbers of a design page: its `## N. Title` headings, in order.
std::vector<int> design_sections(const std::string& page) {
  static const std::regex heading(R"(^## ([0-9]+)\. \S)");
  std::vector<int> sections;
  std::istringstream in(page);
  std::string line;
  bool fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    std::smatch m;
    if (!fenced && std::regex_search(line, m, heading)) sections.push_back(std::stoi(m[1].str()));
  }
  return sections;
}

// The section numbers one line cites after "design.md": `§4`, `§1-2`,
// `§1, §3`, `§5/§7` (a range gives both ends). The contract's upper-case
// name is not matched: the search is case-sensitive.
std::vector<int> cited_sections(const std::string& line) {
  // (§ is two bytes in UTF-8: "(?:§)?" makes both optional.)
  static const std::regex citation(
      R"((^|[^A-Za-z0-9_])design\.md\s*(§\s?[0-9]+(\s*(?:[-,/]|and)\s*(?:§)?\s?[0-9]+)*))");
  static const std::regex number("[0-9]+");
  std::vector<int> numbers;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), citation); it != std::sregex_iterator(); ++it) {
    const std::string list = (*it)[2].str();
    for (auto n = std::sregex_iterator(list.begin(), list.end(), number); n != std::sregex_iterator(); ++n)
      numbers.push_back(std::stoi((*n)[0].str()));
  }
  return numbers;
}

// The text files of the repository at `root` that may cite the design:
// sources, scripts, tests, fuzz targets, CMake files and the pages.
bool is_text_source(const fs::path& path) {
  static const std::set<std::string> extensions = {".h",  ".hpp", ".cpp", ".cc",  ".cu",   ".cuh",
                                                   ".py", ".sh",  ".md",  ".txt", ".json", ".jsonl",
                                                   ".cmake", ".in"};
  return extensions.count(path.extension().string()) > 0 || path.filename() == "CMakeLists.txt";
}

std::vector<fs::path> files_under(const fs::path& root, const std::vector<std::string>& dirs) {
  std::vector<fs::path> files;
  for (const std::string& dir : dirs) {
    const fs::path base = root / dir;
    if (fs::is_regular_file(base)) {
      files.push_back(base);
      continue;
    }
    if (!fs::is_directory(base)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(base))
      if (entry.is_regular_file() && is_text_source(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// What `problems` finds on each line of `files` (one text per problem), as
// file:line findings.
template <class Problems>
std::vector<Finding> findings(const fs::path& root, const std::vector<fs::path>& files, Problems problems) {
  std::vector<Finding> found;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      for (const std::string& what : problems(line))
        found.push_back({fs::relative(file, root).string() + ":" + std::to_string(number), what});
    }
  }
  return found;
}

// Every citation in `files` of a section `design` does not have.
std::vector<Finding> unknown_section_citations(const fs::path& root, const std::vector<fs::path>& files,
                                               const std::vector<int>& design) {
  return findings(root, files, [&](const std::string& line) {
    std::vector<std::string> problems;
    for (int section : cited_sections(line))
      if (std::find(design.begin(), design.end(), section) == design.end())
        problems.push_back("cites design.md §" + std::to_string(section) + ", which docs/design.md does not have");
    return problems;
  });
}

// Every line of `files` that names the contract's file (only_sections: only
// where it cites a section, `<name> §N`).
std::vector<Finding> contract_citations(const fs::path& root, const std::vector<fs::path>& files, bool only_sections) {
  const std::string needle = contract_name() + (only_sections ? " §" : "");
  return findings(root, files, [&](const std::string& line) {
    if (line.find(needle) == std::string::npos) return std::vector<std::string>{};
    return std::vector<std::string>{"cites " + contract_name() +
                                    ", which the repository does not have (cite docs/design.md)"};
  });
}

// Where code and scripts may cite the design (the pages are added to it).
const std::vector<std::string> kCitingPlaces = {"src",  "kernels", "tests",         "scripts",
                                                "fuzz", "cmake",   "CMakeLists.txt"};

}  // namespace

TEST_CASE("docs/design.md has the design's sections 1 to 8, in order") {
  const fs::path root = DITGEN_SOURCE_DIR;
  REQUIRE(fs::exists(root / "docs/design.md"));
  CHECK(design_sections(read_text(root / "docs/design.md")) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("every design.md section citation names a section of docs/design.md") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<int> design = design_sections(read_text(root / "docs/design.md"));
  std::vector<fs::path> files = files_under(root, kCitingPlaces);
  const std::vector<fs::path> pages = documentation(root);
  files.insert(files.end(), pages.begin(), pages.end());
  int citations = 0;
  findings(root, files, [&](const std::string& line) {
    citations += static_cast<int>(cited_sections(line).size());
    return std::vector<std::string>{};
  });
  MESSAGE(files.size() << " files, " << citations << " section citations");
  CHECK(citations > 0);  // the scan finds the citations it is meant to check
  for (const Finding& f : unknown_section_citations(root, files, design)) FAIL_CHECK(describe(f));
}

// Fails until every citation of the contract in the code is rewritten to
// docs/design.md (the same section numbers).
TEST_CASE("no file under src/, kernels/ or tests/ cites the design contract the repository does not have") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<fs::path> files = files_under(root, {"src", "kernels", "tests"});
  CHECK(files.size() > 100);  // the scan reached the sources
  const std::vector<Finding> found = contract_citations(root, files, false);
  MESSAGE(found.size() << " citations of " << contract_name() << " in src/, kernels/, tests/");
  for (const Finding& f : found) FAIL_CHECK(describe(f));
}

TEST_CASE("no page cites a section of the design contract the repository does not have") {
  const fs::path root = DITGEN_SOURCE_DIR;
  for (const Finding& f : contract_citations(root, documentation(root), true)) FAIL_CHECK(describe(f));
}

TEST_CASE("the citation checks find what they are meant to find") {
  CHECK(design_sections("# Design\n## 1. One\n```\n## 9. in a fence\n```\n## 2. Two\n### 2.1 sub\n") ==
        std::vector<int>{1, 2});
  // Spelt in pieces, so this file cites nothing itself.
  const std::string page = std::string("design") + ".md";
  CHECK(cited_sections("// (docs/" + page + " §4): x") == std::vector<int>{4});
  CHECK(cited_sections("see [" + page + " §5](" + page + "#5-pab) and " + page + " §1, §3") ==
        std::vector<int>{5, 1, 3});
  CHECK(cited_sections(page + " §1-2 and " + page + " §5/§7.") == std::vector<int>{1, 2, 5, 7});
  CHECK(cited_sections(contract_name() + " §4").empty());  // the contract's name is the other check's
  CHECK(cited_sections("my" + page + " §4").empty());
  CHECK(cited_sections(page + " says §4").empty());

  const ditgen::testing::TempDir dir("ditgen_design_citations");
  dir.write("docs/design.md", "# Design\n## 1. One\n## 2. Two\n");
  dir.write("src/a.h", "// fine (docs/" + page + " §2)\n// gone (docs/" + page + " §9)\n");
  dir.write("src/b.cpp", "int x;  // " + contract_name() + " §1\n");
  dir.write("tests/c.json", "{\"note\": \"as " + contract_name() + " says\"}\n");
  dir.write("src/d.bin", contract_name());  // not a text source: not scanned
  dir.write("README.md", "See " + contract_name() + " §2 and the contract (" + contract_name() + ").\n");
  const fs::path root = dir.path;
  const std::vector<int> design = design_sections(read_text(root / "docs/design.md"));
  std::vector<std::string> found;
  for (const Finding& f : unknown_section_citations(root, files_under(root, kCitingPlaces), design))
    found.push_back(describe(f));
  for (const Finding& f : contract_citations(root, files_under(root, {"src", "kernels", "tests"}), false))
    found.push_back(describe(f));
  for (const Finding& f : contract_citations(root, documentation(root), true)) found.push_back(describe(f));
  for (const std::string& f : found) MESSAGE(f);
  const std::string cites = "cites " + contract_name() + ", which the repository does not have (cite docs/design.md)";
  CHECK(found == std::vector<std::string>{
                     "src/a.h:2: cites " + page + " §9, which docs/design.md does not have",
                     "src/b.cpp:1: " + cites,
                     "tests/c.json:1: " + cites,
                     "README.md:1: " + cites,
                 });
}
