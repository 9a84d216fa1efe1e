// The include direction of docs/DESIGN.md section 2, enforced: every `#include "layer/..."` in src/ must name a
// layer the including file's layer may use (the table in the ```layers block of DESIGN.md, read at test time,
// so the page and the check cannot disagree), and a backend folder (`cpu/`, `cuda/` below a layer) is private to
// the folder that holds it: ops/cpu/ is included from ops/ only, quant/cuda/ from quant/ only. core/cuda/ is the
// exception: the CUDA runtime as every layer's CUDA code uses it. emu/, the emulated CUDA device, is a floor of its
// own that no other layer includes: core/cuda/ calls it only through the functions it declares itself (the CUDA
// runtime's, core/cuda/emulation.h), and the build links it only in the emulated mode.
// The checker itself is tested first on a planted tree, so a check that cannot fail does not pass.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace nvfp4lm::test::test_layering {
namespace {

using LayerRules = std::map<std::string, std::set<std::string>>;  // layer -> layers it may include

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The ```layers block: one line per layer, "layer  may-include..." ("*" = every layer).
LayerRules parse_layer_rules(const std::string& design) {
  LayerRules rules;
  const size_t start = design.find("```layers\n");
  if (start == std::string::npos) return rules;
  const size_t end = design.find("```", start + 10);
  std::istringstream block(design.substr(start + 10, end - start - 10));
  std::string line;
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  while (std::getline(block, line)) {
    std::istringstream words(line);
    std::string layer, word;
    if (!(words >> layer)) continue;
    std::vector<std::string> allowed;
    while (words >> word) allowed.push_back(word);
    rows.emplace_back(layer, allowed);
  }
  for (const auto& [layer, allowed] : rows) {
    std::set<std::string>& set = rules[layer];
    set.insert(layer);
    for (const std::string& word : allowed) {
      if (word != "*") {
        set.insert(word);
        continue;
      }
      for (const auto& [other, unused] : rows) set.insert(other);
    }
  }
  return rules;
}

struct Violation {
  std::string file, include, why;
};

// The folder a backend subfolder is private to: "ops/cpu/gemm.h" -> "ops/", "quant/cuda/nvfp4_cuda.h" -> "quant/";
// "" for a public header (core/cuda/ included).
std::string private_owner(const std::string& include) {
  for (size_t at = 0, slash; (slash = include.find('/', at)) != std::string::npos; at = slash + 1) {
    const std::string folder = include.substr(at, slash - at);
    const std::string owner = include.substr(0, at);
    if ((folder == "cpu" || folder == "cuda") && owner != "core/") return owner;
  }
  return {};
}

// Every violation in the source tree `root` (its src/ layout: root/<layer>/...).
std::vector<Violation> check_tree(const fs::path& root, const LayerRules& rules) {
  std::vector<Violation> violations;
  const std::regex include_line(R"(^\s*#\s*include\s+"([a-z0-9_]+)/([^"]+)\")");
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh" && ext != ".inc") continue;
    const std::string file = fs::relative(entry.path(), root).generic_string();
    const std::string layer = file.substr(0, file.find('/'));
    const auto rule = rules.find(layer);
    std::istringstream lines(read_text(entry.path()));
    std::string line;
    while (std::getline(lines, line)) {
      std::smatch match;
      if (!std::regex_search(line, match, include_line)) continue;
      const std::string target_layer = match[1];
      const std::string include = target_layer + "/" + match[2].str();
      if (rules.count(target_layer) == 0) continue;  // not a project header ("gtest/gtest.h")
      if (rule == rules.end()) {
        violations.push_back({file, include, "folder " + layer + "/ is not in the layers table of docs/DESIGN.md"});
        continue;
      }
      if (rule->second.count(target_layer) == 0) {
        violations.push_back({file, include, layer + "/ may not include " + target_layer + "/ (docs/DESIGN.md)"});
        continue;
      }
      const std::string owner = private_owner(include);
      if (!owner.empty() && file.rfind(owner, 0) != 0)
        violations.push_back({file, include, include + " is private to " + owner});
    }
  }
  return violations;
}

std::string describe(const std::vector<Violation>& violations) {
  std::string text;
  for (const Violation& v : violations) text += "  src/" + v.file + ": #include \"" + v.include + "\": " + v.why + "\n";
  return text;
}

LayerRules design_rules() { return parse_layer_rules(read_text(source_path("docs/DESIGN.md"))); }

TEST(Layering, DesignPageHasTheLayersTable) {
  const LayerRules rules = design_rules();
  for (const char* layer :
       {"core", "emu", "quant", "ops", "io", "tokenizer", "data", "model", "train", "infer", "tools", "cli"})
    EXPECT_TRUE(rules.count(layer)) << "docs/DESIGN.md's ```layers block has no row for " << layer;
  EXPECT_EQ(rules.at("core"), std::set<std::string>{"core"});
  EXPECT_EQ(rules.at("emu"), (std::set<std::string>{"emu", "core"})) << "the emulated device stands on core alone";
  for (const auto& [layer, allowed] : rules) {
    if (layer != "emu" && layer != "cli") {
      EXPECT_FALSE(allowed.count("emu")) << layer << "/ may not include emu/";
    }
  }
  EXPECT_FALSE(rules.at("train").count("infer")) << "train/ and infer/ are independent";
  EXPECT_FALSE(rules.at("data").count("train")) << "data/ stands below train/ (eval, demo and `data` read it too)";
}

TEST(Layering, CheckerFindsPlantedUpwardAndPrivateIncludes) {
  TempDir dir;
  const fs::path root = dir / "src";
  auto write = [&](const std::string& file, const std::string& text) {
    fs::create_directories((root / file).parent_path());
    std::ofstream(root / file) << text;
  };
  write("quant/nvfp4.cpp", "#include \"quant/nvfp4.h\"\n#include \"core/tensor.h\"\n");
  write("quant/upward.cpp", "#include \"train/optim/optimizer.h\"\n");                     // quant -> train: upward
  write("infer/internals.cpp", "#include \"ops/cpu/gemm.h\"\n");                           // ops/cpu is ops/'s own
  write("ops/gemm.cpp", "#include \"ops/cpu/gemm.h\"\n#include \"ops/cuda/gemm.h\"\n");    // its owner: fine
  write("model/graph.cpp", "#include \"core/cuda/graph.h\"\n");                            // core/cuda is public
  write("ops/emu_peek.cpp", "  #  include \"emu/settings.h\"\n");                          // emu: no layer's to use
  write("core/cuda/runtime.cpp", "#include \"emu/settings.h\"\n");                         // not even the runtime's
  write("emu/runtime_api.cpp", "#include \"core/error.h\"\n#include \"emu/stream.h\"\n");  // emu on core: fine
  write("emu/stream.cpp", "#include \"ops/gemm.h\"\n");  // the device stands below ops
  write("tools/x.cpp", "#include <vector>\n#include \"gtest/gtest.h\"\n#include \"infer/generator.h\"\n");
  write("newlayer/x.cpp", "#include \"core/tensor.h\"\n");
  write("data/up.cpp", "#include \"data/dataset.h\"\n#include \"train/trainer.h\"\n");  // data -> train: upward
  std::vector<Violation> found = check_tree(root, design_rules());
  std::set<std::string> files;
  for (const Violation& v : found) files.insert(v.file);
  EXPECT_EQ(files, (std::set<std::string>{"quant/upward.cpp", "infer/internals.cpp", "ops/emu_peek.cpp",
                                          "core/cuda/runtime.cpp", "emu/stream.cpp", "newlayer/x.cpp", "data/up.cpp"}))
      << describe(found);
}

TEST(Layering, EveryIncludeInSrcFollowsTheLayers) {
  const std::vector<Violation> found = check_tree(source_path("src"), design_rules());
  EXPECT_TRUE(found.empty()) << found.size() << " include(s) cross the layering of docs/DESIGN.md section 2:\n"
                             << describe(found)
                             << "Move the shared code down to a layer both may use, or change the design (and the "
                                "table) first.";
}

}  // namespace
}  // namespace nvfp4lm::test::test_layering
