// transformers' CLIP image preprocessing (PIL backend), step for step (see
// the header), and its config file.
#include "io/clip_image_processor.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

using nlohmann::json;

// Python's floor division by 2 (negative when the crop is larger).
int64_t floor_half(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

// obj[key] as a positive integer; `name` is how messages call it ("size.height").
int64_t positive_int(const json& obj, const std::string& key, const std::string& path, const std::string& name) {
  if (!obj.contains(key) || !obj.at(key).is_number_integer() || obj.at(key).get<int64_t>() < 1)
    throw ModelError(path + ": " + name + ": expected a positive integer, got " +
                     (obj.contains(key) ? obj.at(key).dump() : std::string("nothing")));
  return obj.at(key).get<int64_t>();
}

std::array<float, 3> three_floats(const json& cfg, const std::string& key, std::array<float, 3> fallback,
                                  const std::string& path) {
  if (!cfg.contains(key) || cfg.at(key).is_null()) return fallback;
  const json& v = cfg.at(key);
  if (v.is_number()) return {v.get<float>(), v.get<float>(), v.get<float>()};  // one value for every channel
  if (!v.is_array() || v.size() != 3)
    throw ModelError(path + ": " + key + ": expected a number or a list of 3 numbers, got " + v.dump());
  std::array<float, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!v[i].is_number()) throw ModelError(path + ": " + key + ": expected numbers, got " + v.dump());
    out[i] = static_cast<float>(v[i].get<double>());  // numpy: np.array(mean, dtype=float32)
  }
  return out;
}

}  // namespace

ClipImageProcessorConfig read_clip_image_processor_config(const std::string& path) {
  const json cfg = read_json_file(path);
  if (!cfg.is_object()) throw ModelError(path + ": expected a JSON object");
  ClipImageProcessorConfig c;
  const std::string type = get_string_or(cfg, "image_processor_type", "CLIPImageProcessor", path);
  if (type.rfind("CLIPImageProcessor", 0) != 0)
    throw ModelError(path + ": image_processor_type: expected CLIPImageProcessor, got " + type);
  c.do_convert_rgb = get_bool_or(cfg, "do_convert_rgb", c.do_convert_rgb, path);
  c.do_resize = get_bool_or(cfg, "do_resize", c.do_resize, path);
  if (cfg.contains("size") && !cfg.at("size").is_null()) {
    const json& size = cfg.at("size");
    if (size.is_number_integer()) {  // an int means the shortest edge (default_to_square False)
      c.shortest_edge = positive_int(cfg, "size", path, "size");
    } else if (size.is_object()) {
      for (const char* key : {"longest_edge", "max_height", "max_width"})
        if (size.contains(key) && !size.at(key).is_null())
          throw ModelError(path + ": size." + key + ": not supported (only shortest_edge, or height and width)");
      if (size.contains("shortest_edge") && !size.at("shortest_edge").is_null()) {
        c.shortest_edge = positive_int(size, "shortest_edge", path, "size.shortest_edge");
      } else {
        c.shortest_edge = 0;
        c.resize_height = positive_int(size, "height", path, "size.height");
        c.resize_width = positive_int(size, "width", path, "size.width");
      }
    } else {
      throw ModelError(path + ": size: expected an integer or an object, got " + size.dump());
    }
  }
  const int64_t resample = get_int_or(cfg, "resample", 3, path);
  const auto filter = resample_filter_from_pil_code(resample);
  if (!filter)
    throw ModelError(path + ": resample: filter " + std::to_string(resample) +
                     " is not supported (1 LANCZOS, 2 BILINEAR, 3 BICUBIC)");
  c.resample = *filter;
  c.do_center_crop = get_bool_or(cfg, "do_center_crop", c.do_center_crop, path);
  if (cfg.contains("crop_size") && !cfg.at("crop_size").is_null()) {
    const json& crop = cfg.at("crop_size");
    if (crop.is_number_integer()) {
      c.crop_height = c.crop_width = positive_int(cfg, "crop_size", path, "crop_size");
    } else if (crop.is_object()) {
      c.crop_height = positive_int(crop, "height", path, "crop_size.height");
      c.crop_width = positive_int(crop, "width", path, "crop_size.width");
    } else {
      throw ModelError(path + ": crop_size: expected an integer or an object, got " + crop.dump());
    }
  }
  c.do_rescale = get_bool_or(cfg, "do_rescale", c.do_rescale, path);
  c.rescale_factor = get_number_or(cfg, "rescale_factor", c.rescale_factor, path);
  c.do_normalize = get_bool_or(cfg, "do_normalize", c.do_normalize, path);
  c.image_mean = three_floats(cfg, "image_mean", c.image_mean, path);
  c.image_std = three_floats(cfg, "image_std", c.image_std, path);
  return c;
}

Tensor clip_image_input(const DecodedImage& image, const ClipImageProcessorConfig& config) {
  RgbImage rgb = image.rgb;
  if (config.do_convert_rgb && image.transparency) {
    const auto& t = *image.transparency;
    for (size_t i = 0; i < rgb.pixels.size(); i += 3)
      if (rgb.pixels[i] == t[0] && rgb.pixels[i + 1] == t[1] && rgb.pixels[i + 2] == t[2])
        rgb.pixels[i] = rgb.pixels[i + 1] = rgb.pixels[i + 2] = 255;
  }
  if (config.do_resize) {
    int64_t h = config.resize_height, w = config.resize_width;
    if (config.shortest_edge > 0) {
      const bool portrait = rgb.width <= rgb.height;
      const int64_t shorter = portrait ? rgb.width : rgb.height, longer = portrait ? rgb.height : rgb.width;
      const auto new_long = static_cast<int64_t>(static_cast<double>(config.shortest_edge * longer) /
                                                 static_cast<double>(shorter));
      h = portrait ? new_long : config.shortest_edge;
      w = portrait ? config.shortest_edge : new_long;
    }
    rgb = pillow_resize(rgb, w, h, config.resample);
  }
  int64_t top = 0, left = 0, out_h = rgb.height, out_w = rgb.width;
  if (config.do_center_crop) {
    top = floor_half(rgb.height - config.crop_height);
    left = floor_half(rgb.width - config.crop_width);
    out_h = config.crop_height;
    out_w = config.crop_width;
  }
  Tensor out = Tensor::empty({3, out_h, out_w});
  float* dst = out.data();
  const int64_t plane = out_h * out_w;
  for (int64_t y = 0; y < out_h; ++y)
    for (int64_t x = 0; x < out_w; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t sy = top + y, sx = left + x;
        const bool inside = sy >= 0 && sy < rgb.height && sx >= 0 && sx < rgb.width;
        const uint8_t v = inside ? rgb.row(sy)[3 * sx + c] : 0;  // the crop's zero padding
        float value = config.do_rescale ? static_cast<float>(static_cast<double>(v) * config.rescale_factor)
                                        : static_cast<float>(v);
        if (config.do_normalize) value = (value - config.image_mean[size_t(c)]) / config.image_std[size_t(c)];
        dst[c * plane + y * out_w + x] = value;
      }
  return out;
}

}  // namespace ditgen::io
