// See input_images.h.
#include "pipeline/input_images.h"

#include <filesystem>
#include <map>

#include "util/error.h"

namespace ditgen::pipeline {
namespace {

// The model folder as the user named it, without a trailing '/'.
std::string model_name(const RunConfig& cfg) {
  std::string name = std::filesystem::path(cfg.model.path).lexically_normal().string();
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  return name;
}

}  // namespace

nlohmann::json image_metadata(const OutputImages& images) {
  nlohmann::json j = nlohmann::json::object();
  if (images.image) {
    j["image"] = images.image->path;
    j["image_sha256"] = images.image->sha256;
  }
  if (images.last_image) {
    j["last_image"] = images.last_image->path;
    j["last_image_sha256"] = images.last_image->sha256;
  }
  return j;
}

RunImages read_run_images(const RunConfig& cfg, const std::vector<config::PromptEntry>& entries, int64_t outputs,
                          const VideoKind& kind, const std::string& where) {
  RunImages run;
  const std::string& prompt_file = cfg.generate.prompt_file;
  struct Wanted {
    std::string image, last_image;
    int line = 0;
  };
  std::vector<Wanted> wanted(static_cast<size_t>(outputs));
  bool any = false;
  for (int64_t i = 0; i < outputs; ++i) {
    Wanted& o = wanted[static_cast<size_t>(i)];
    const config::PromptEntry* e = entries.empty() ? nullptr : &entries.at(static_cast<size_t>(i));
    const bool line_image = e && !e->image.empty(), line_last = e && !e->last_image.empty();
    o.image = line_image ? e->image : cfg.generate.image;
    o.last_image = line_last ? e->last_image : cfg.generate.last_image;
    if (line_image || line_last) o.line = e->line;
    // A line's own fields are named by the line; the run's by the config
    // (and with a prompt file, a missing image by the line that lacks it).
    const bool by_line = e && (line_image || line_last || cfg.generate.image.empty());
    check_image_fields(kind, !o.image.empty(), !o.last_image.empty(),
                       by_line ? prompt_file + ":" + std::to_string(e->line) : where,
                       by_line ? "image" : "generate.image", by_line ? "last_image" : "generate.last_image",
                       model_name(cfg));
    any = any || !o.image.empty();
  }
  if (!any) return run;
  std::map<std::string, std::shared_ptr<const io::InputImage>> files;  // each file read once
  const auto read = [&](const std::string& path, const Wanted& o, const char* field) {
    std::shared_ptr<const io::InputImage>& image = files[path];
    if (image) return image;
    try {
      image = std::make_shared<const io::InputImage>(io::read_input_image(path));
    } catch (const ConfigError& e) {
      throw ConfigError((o.line ? prompt_file + ":" + std::to_string(o.line) + ": " : where + ": generate.") + field +
                        ": " + e.what());
    }
    return image;
  };
  for (const Wanted& o : wanted) {
    OutputImages images;
    images.line = o.line;
    if (!o.image.empty()) images.image = read(o.image, o, "image");
    if (!o.last_image.empty()) images.last_image = read(o.last_image, o, "last_image");
    run.outputs.push_back(std::move(images));
  }
  return run;
}

std::optional<io::FrameSize> image_frame_size(const RunImages& images, std::optional<int64_t> height,
                                              std::optional<int64_t> width, int64_t default_area, int64_t multiple,
                                              const std::string& where) {
  if (!images.any() || (height && width)) return std::nullopt;
  std::optional<io::FrameSize> size;
  int64_t decided_by = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(images.outputs.size()); ++i) {
    const io::InputImage* image = images.outputs[static_cast<size_t>(i)].image.get();
    if (!image) continue;  // TI2V's text-only outputs take the others' size
    io::FrameSize s = io::i2v_default_frame_size(image->image.rgb.height, image->image.rgb.width, default_area,
                                                 multiple);
    if (height) s.height = *height;
    if (width) s.width = *width;
    if (size && (s.height != size->height || s.width != size->width))
      throw ConfigError(where + ": generate.height / generate.width: not given, and output " +
                        std::to_string(decided_by) + "'s image (" +
                        images.outputs[static_cast<size_t>(decided_by)].image->path + ") gives " +
                        std::to_string(size->width) + "x" + std::to_string(size->height) + " but output " +
                        std::to_string(i) + "'s (" + image->path + ") " + std::to_string(s.width) + "x" +
                        std::to_string(s.height) + "; a run makes one size: give height and width");
    if (!size) {
      size = s;
      decided_by = i;
    }
  }
  return size;
}

}  // namespace ditgen::pipeline
