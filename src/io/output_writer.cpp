// The PNG, PNG-frames and contact-sheet writers. A frame is converted to
// 8-bit RGB once per writer that needs it (the conversion is cheap next to
// PNG encoding).
#include "io/output_writer.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include "io/output_paths.h"

namespace ditgen::io {

RgbImage output_frame_rgb(const Tensor& frames, int64_t f) {
  const Tensor chw = frames.slice0(f, f + 1).reshape({frames.dim(1), frames.dim(2), frames.dim(3)});
  return {static_cast<int>(chw.dim(2)), static_cast<int>(chw.dim(1)), float_image_to_rgb8(chw)};
}

Tensor frames_from_rgb(const std::vector<RgbImage>& frames) {
  if (frames.empty()) return {};
  const int64_t h = frames.front().height, w = frames.front().width;
  Tensor out = Tensor::empty({static_cast<int64_t>(frames.size()), 3, h, w});
  float* dst = out.data();
  for (const RgbImage& frame : frames) {
    if (frame.height != h || frame.width != w) return {};
    for (int c = 0; c < 3; ++c)
      for (int64_t p = 0; p < h * w; ++p)
        *dst++ = static_cast<float>(frame.pixels[static_cast<size_t>(p * 3 + c)]) / 255.0f;
  }
  return out;
}

// A PNG file as one RgbImage of height x width, or false.
bool read_rgb_png(const std::string& path, int height, int width, RgbImage& image) {
  int read_width = 0, read_height = 0;
  if (!read_png_rgb(path, width, height, image.pixels, read_width, read_height)) return false;
  image.width = read_width, image.height = read_height;
  return true;
}

void check_output_item(const OutputItem& item, const OutputPlan& plan, const char* who) {
  if (item.frames.ndim() != 4 || item.frames.dim(1) != 3 || item.frames.dim(0) < 1)
    throw std::invalid_argument(std::string(who) + ": output " + std::to_string(item.index) + " has frames " +
                                shape_str(item.frames.shape()) + ", expected (F, 3, H, W)");
  if (item.index < 0 || item.index >= plan.outputs)
    throw std::invalid_argument(std::string(who) + ": output index " + std::to_string(item.index) + " of " +
                                std::to_string(plan.outputs));
}

std::vector<std::string> PerOutputWriter::planned_paths() const {
  std::vector<std::string> p;
  for (int i = 0; i < plan_.outputs; ++i)
    for (std::string& path : paths_of(i)) p.push_back(std::move(path));
  return p;
}

namespace {

class PngWriter final : public PerOutputWriter {
 public:
  using PerOutputWriter::PerOutputWriter;
  std::vector<std::string> paths_of(int index) const override {
    return {output_path_for(plan_.pattern, index, plan_.outputs, plan_.name_of(index))};
  }
  std::vector<std::string> write(const OutputItem& item) override {
    check_output_item(item, plan_, "png writer");
    if (item.frames.dim(0) != 1)
      throw std::invalid_argument("png writer: output " + std::to_string(item.index) + " has " +
                                  std::to_string(item.frames.dim(0)) + " frames (a video: PNG frames or mp4)");
    const std::string path = paths_of(item.index).front();
    write_png(path, output_frame_rgb(item.frames, 0), item.text);
    return {path};
  }
  Tensor read_back(int index, int height, int width) const override {
    RgbImage image;
    if (!read_rgb_png(paths_of(index).front(), height, width, image)) return {};
    return frames_from_rgb({image});
  }
};

class PngFramesWriter final : public PerOutputWriter {
 public:
  using PerOutputWriter::PerOutputWriter;
  std::vector<std::string> paths_of(int index) const override {
    std::vector<std::string> p;
    for (int f = 0; f < plan_.frames; ++f)
      p.push_back(frame_path_for(plan_.pattern, index, plan_.outputs, f, plan_.name_of(index)));
    return p;
  }
  std::vector<std::string> write(const OutputItem& item) override {
    check_output_item(item, plan_, "png frames writer");
    std::vector<std::string> written;
    for (int64_t f = 0; f < item.frames.dim(0); ++f) {
      written.push_back(
          frame_path_for(plan_.pattern, item.index, plan_.outputs, static_cast<int>(f), plan_.name_of(item.index)));
      write_png(written.back(), output_frame_rgb(item.frames, f), item.text);
    }
    return written;
  }
  Tensor read_back(int index, int height, int width) const override {
    std::vector<RgbImage> frames;
    for (const std::string& path : paths_of(index))
      if (!read_rgb_png(path, height, width, frames.emplace_back())) return {};
    return frames_from_rgb(frames);
  }
};

class ContactSheetWriter final : public OutputWriter {
 public:
  ContactSheetWriter(OutputPlan plan, PngText text, int max_strip)
      : plan_(std::move(plan)), text_(std::move(text)), max_strip_(max_strip) {}
  std::vector<std::string> planned_paths() const override { return {grid_path_for(plan_.pattern)}; }
  std::vector<std::string> write(const OutputItem& item) override {
    check_output_item(item, plan_, "contact sheet writer");
    const int frames = static_cast<int>(item.frames.dim(0));
    std::vector<Tile>& tiles = tiles_[item.index];
    tiles.clear();
    if (frames == 1) {
      tiles.push_back({output_frame_rgb(item.frames, 0), item.caption});
    } else {
      strip_ = std::min(frames, max_strip_);
      const auto picked = filmstrip_frames(frames, strip_);
      for (size_t k = 0; k < picked.size(); ++k)
        tiles.push_back({output_frame_rgb(item.frames, picked[k]), k == 0 ? item.caption : ""});
    }
    return {};
  }
  void add_existing(const OutputItem& item) override { write(item); }
  std::vector<std::string> finish() override {
    // In output order, whatever order they came in (a resumed run's
    // earlier outputs come after the ones it made).
    std::vector<Tile> all;
    for (const auto& entry : tiles_) all.insert(all.end(), entry.second.begin(), entry.second.end());
    if (all.empty()) return {};
    ContactSheetOptions sheet;
    // Images: a grid; videos: one filmstrip row per output.
    sheet.columns = strip_ > 0 ? strip_ : grid_columns(static_cast<int>(all.size()));
    sheet.caption_spans_empty = strip_ > 0;  // the prompt under its whole row, not cut to one frame
    const std::string path = grid_path_for(plan_.pattern);
    write_png(path, make_contact_sheet(all, sheet), text_);
    return {path};
  }

 private:
  OutputPlan plan_;
  PngText text_;
  int max_strip_;
  int strip_ = 0;  // frames per filmstrip row; 0 while the outputs are images
  std::map<int, std::vector<Tile>> tiles_;  // per output index
};

}  // namespace

std::unique_ptr<OutputWriter> make_png_writer(const OutputPlan& plan) { return std::make_unique<PngWriter>(plan); }

std::unique_ptr<OutputWriter> make_png_frames_writer(const OutputPlan& plan) {
  return std::make_unique<PngFramesWriter>(plan);
}

std::unique_ptr<OutputWriter> make_contact_sheet_writer(const OutputPlan& plan, PngText text, int max_strip) {
  if (max_strip < 1) throw std::invalid_argument("contact sheet writer: max_strip must be >= 1");
  return std::make_unique<ContactSheetWriter>(plan, std::move(text), max_strip);
}

std::vector<int> filmstrip_frames(int frames, int count) {
  if (frames < 1 || count < 1 || count > frames)
    throw std::invalid_argument("filmstrip_frames: " + std::to_string(count) + " of " + std::to_string(frames));
  std::vector<int> idx;
  if (count == 1) return {0};
  for (int k = 0; k < count; ++k)
    idx.push_back(static_cast<int>(std::lround(static_cast<double>(k) * (frames - 1) / (count - 1))));
  return idx;
}

int grid_columns(int n) {
  if (n <= 4) return n;
  const double root = std::sqrt(static_cast<double>(n));
  int best = 0;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0 && (best == 0 || std::abs(d - root) < std::abs(best - root))) best = d;
  return best >= root / 2 && best <= 2 * root ? best : 0;
}

}  // namespace ditgen::io
