// What the documentation must say for a new user (issue 43), checked
// against the sources it describes: the README's opening names every model
// family of the registry (src/models/registry.cpp), and docs/models.md's
// family table, the one list of them that the README, architecture.md and
// design.md link to, every class of it; docs/real-models.md has
// each family, each shipped real-model config's Hub source and its GPU
// status; the pages name no place only this project's machines have (a
// virtual environment in root's home, /tmp scratch folders) nor issue
// numbers without a tracker; parallel.md shows when mpirun needs
// --oversubscribe and how to run over several machines.
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

namespace fs = std::filesystem;
using ditgen::testing::documentation;
using ditgen::testing::read_text;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The rows of the registry table: {Part::kTransformer, "DiTTransformer2DModel", "dit", ...}.
struct RegistryRow {
  std::string part, class_name, family;  // part: Transformer, Vae, TextEncoder
};
std::vector<RegistryRow> registry_rows(const fs::path& root) {
  const std::string registry = read_text(root / "src/models/registry.cpp");
  static const std::regex row(R"re(\{\s*Part::k(\w+),\s*"(\w+)",\s*"(\w+)")re");
  std::vector<RegistryRow> rows;
  for (auto it = std::sregex_iterator(registry.begin(), registry.end(), row); it != std::sregex_iterator(); ++it)
    rows.push_back({(*it)[1].str(), (*it)[2].str(), (*it)[3].str()});
  return rows;
}

// The family name of each transformer row.
std::vector<std::string> registry_families(const fs::path& root) {
  std::set<std::string> families;
  for (const RegistryRow& r : registry_rows(root))
    if (r.part == "Transformer") families.insert(r.family);
  return {families.begin(), families.end()};
}

// The text of a page's section: from its `## title` line to the next `## `.
std::string section_of(const std::string& page, const std::string& title) {
  const size_t start = page.find("\n## " + title + "\n");
  if (start == std::string::npos) return "";
  const size_t end = page.find("\n## ", start + 1);
  return page.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The README's text up to its first section heading.
std::string readme_opening(const fs::path& root) {
  const std::string readme = read_text(root / "README.md");
  return readme.substr(0, readme.find("\n## "));
}

}  // namespace

TEST_CASE("the README's opening names every model family of the registry") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<std::string> families = registry_families(root);
  REQUIRE(families.size() >= 5);  // dit, pixart, latte, wan, cogvideox: the table was read
  const std::string opening = lower(readme_opening(root));
  for (const std::string& family : families) {
    CAPTURE(family);
    CHECK(opening.find("**" + family + "**") != std::string::npos);  // bold, as the opening lists them
  }
}

TEST_CASE("docs/models.md's family table names every class of the registry, and the pages link to it") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::vector<RegistryRow> rows = registry_rows(root);
  REQUIRE(rows.size() >= 13);  // 5 transformers, 3 VAEs, 5 text encoders: the table was read
  const std::string families = section_of(read_text(root / "docs/models.md"), "Families");
  REQUIRE(!families.empty());
  for (const RegistryRow& r : rows) {
    CAPTURE(r.class_name);
    CHECK(families.find("`" + r.class_name + "`") != std::string::npos);
  }
  // The pages that would otherwise restate the list link to it.
  CHECK(read_text(root / "README.md").find("(docs/models.md#families)") != std::string::npos);
  for (const std::string page : {"docs/architecture.md", "docs/design.md"}) {
    CAPTURE(page);
    CHECK(read_text(root / page).find("(models.md#families)") != std::string::npos);
  }
}

TEST_CASE("docs/real-models.md: every family, every shipped real-model config's source, the GPU status") {
  const fs::path root = DITGEN_SOURCE_DIR;
  REQUIRE(fs::exists(root / "docs/real-models.md"));
  const std::string page = read_text(root / "docs/real-models.md");
  const std::string page_lower = lower(page);
  for (const std::string& family : registry_families(root)) {
    CAPTURE(family);
    CHECK(page_lower.find(family) != std::string::npos);
  }
  static const std::regex source_field(R"re("source"\s*:\s*"([^"]+)")re");
  int sources = 0;
  for (const auto& entry : fs::directory_iterator(root / "configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string config = read_text(entry.path());
    std::smatch m;
    if (!std::regex_search(config, m, source_field)) continue;
    ++sources;
    CAPTURE(entry.path().string());
    CHECK(page.find(m[1].str()) != std::string::npos);  // where it comes from
    CHECK(page.find("configs/" + entry.path().filename().string()) != std::string::npos);
  }
  CHECK(sources >= 6);
  CHECK(page.find("huggingface-cli download") != std::string::npos);
  CHECK(page.find("never run Wan or CogVideoX") != std::string::npos);
  CHECK(read_text(root / "README.md").find("(docs/real-models.md)") != std::string::npos);
}

TEST_CASE("the documentation names no place only this project's machines have, nor bare issue numbers") {
  const fs::path root = DITGEN_SOURCE_DIR;
  // root's home (/root/venv-ditgen), /tmp scratch folders, issue N
  // (the tracker is not the user's).
  static const std::regex machine_place(R"re((^|[\s`(="'])(/root/|/tmp/|~/venv))re");
  static const std::regex issue_number(R"(\b[Ii]ssues? [0-9]+\b)");
  for (const fs::path& file : documentation(root)) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      const std::string where = fs::relative(file, root).string() + ":" + std::to_string(number) + ": " + line;
      CHECK_MESSAGE(!std::regex_search(line, machine_place), where);
      CHECK_MESSAGE(!std::regex_search(line, issue_number), where);
    }
  }
}

TEST_CASE("parallel.md shows when mpirun needs --oversubscribe, and a run over several machines") {
  const fs::path root = DITGEN_SOURCE_DIR;
  const std::string page = read_text(root / "docs/parallel.md");
  CHECK(page.find("--oversubscribe") != std::string::npos);
  CHECK(page.find("not\nenough slots") != std::string::npos);
  CHECK(page.find("## Across machines") != std::string::npos);
  CHECK(page.find("--hostfile") != std::string::npos);
  // A command that starts more than 2 ranks (more than this project's 2
  // cores) says --oversubscribe, or runs over a hostfile's machines.
  static const std::regex np(R"(mpirun\b[^\n]*-np ([0-9]+))");
  for (const std::string& name : {std::string("README.md"), std::string("docs/parallel.md")}) {
    const std::string text = read_text(root / name);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), np); it != std::sregex_iterator(); ++it) {
      const std::string command = (*it)[0].str();
      CAPTURE(command);
      if (std::stoi((*it)[1].str()) > 2)
        CHECK((command.find("--oversubscribe") != std::string::npos || command.find("--hostfile") != std::string::npos));
    }
  }
}
