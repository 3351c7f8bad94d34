// Output writers: one interface for every kind of file a run writes from
// its results (a PNG per image, PNG frames per video, the contact sheet,
// and the MP4 video of io/mp4_writer.h), so `run_generate` only
// wires them. Each writer receives every output in order as a frames tensor
// (F, 3, H, W) with F = 1 for images, writes its files atomically (temporary
// name, then rename) and says which files it wrote; finish() runs after the
// last output (the contact sheet needs them all). planned_paths() lists
// what it will write, so unwritable paths fail before any weight is read.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/contact_sheet.h"
#include "io/png.h"
#include "tensor/tensor.h"

namespace ditgen::io {

// One generated output as writers receive it.
struct OutputItem {
  int index = 0;                 // 0-based, of `outputs`
  Tensor frames;                 // (F, 3, H, W) host float32 in [0, 1]
  std::string caption;           // what it shows (class name, prompt): the contact sheet's label
  PngText text;                  // metadata: webui "parameters", "ditgen_config"
};

class OutputWriter {
 public:
  virtual ~OutputWriter() = default;
  virtual std::vector<std::string> planned_paths() const = 0;
  // The files of output `index` alone (what --resume looks for); none for
  // writers of the whole run (the contact sheet).
  virtual std::vector<std::string> paths_of(int /*index*/) const { return {}; }
  // Writes this output's files; returns their paths.
  virtual std::vector<std::string> write(const OutputItem& item) = 0;
  // After the last output; returns the paths written then.
  virtual std::vector<std::string> finish() { return {}; }

  // A resumed run (--resume) did not make every output: the ones an
  // earlier run made are read back from their files for what needs them
  // all (the contact sheet). read_back: output `index`'s frames as its
  // files hold them, (F, 3, height, width) float32 in [0, 1]; undefined
  // when the files are missing, unreadable or of another size, or the
  // writer writes no per-output files. add_existing: such an output, for
  // the writers of the whole run (the contact sheet takes it as it takes
  // write()'s; the others ignore it).
  virtual Tensor read_back(int /*index*/, int /*height*/, int /*width*/) const { return {}; }
  virtual void add_existing(const OutputItem& /*item*/) {}
};

// Where and how the outputs go: output.path's pattern, the run's output
// count and frames per output (1: images).
struct OutputPlan {
  std::string pattern;
  int outputs = 1;
  int frames = 1;
  std::vector<std::string> names;  // per output: a file stem replacing the numbered one ("" or empty: numbered)

  const std::string& name_of(int index) const {
    static const std::string none;
    return names.empty() ? none : names.at(static_cast<size_t>(index));
  }
};

// The base of the writers whose files each belong to one output (PNG,
// PNG frames, mp4): planned_paths() is every output's paths_of, in order.
class PerOutputWriter : public OutputWriter {
 public:
  explicit PerOutputWriter(OutputPlan plan) : plan_(std::move(plan)) {}
  std::vector<std::string> planned_paths() const override;

 protected:
  OutputPlan plan_;
};

// For writers in other files: std::invalid_argument unless `item` holds
// (F, 3, H, W) frames with F >= 1 and an index of the plan; `who` names the
// writer in the message.
void check_output_item(const OutputItem& item, const OutputPlan& plan, const char* who);
// Frame f of an output's (F, 3, H, W) frames as 8-bit RGB
// (float_image_to_rgb8: the one rounding rule of every output format).
RgbImage output_frame_rgb(const Tensor& frames, int64_t f);
// The inverse for read_back: 8-bit RGB frames as (F, 3, H, W) float32 in
// [0, 1] (x / 255, which output_frame_rgb maps back to the same bytes).
Tensor frames_from_rgb(const std::vector<RgbImage>& frames);

// One PNG per image (frames == 1) at output_path_for.
std::unique_ptr<OutputWriter> make_png_writer(const OutputPlan& plan);
// One PNG per frame of each video at frame_path_for.
std::unique_ptr<OutputWriter> make_png_frames_writer(const OutputPlan& plan);
// The contact sheet at grid_path_for: one captioned cell per image, or per
// video one filmstrip row of up to `max_strip` evenly spaced frames (the
// caption under its first frame). `text`: the sheet's PNG metadata.
std::unique_ptr<OutputWriter> make_contact_sheet_writer(const OutputPlan& plan, PngText text, int max_strip = 8);

// The frames of a filmstrip: `count` (<= frames) indices spread evenly over
// [0, frames), first and last included.
std::vector<int> filmstrip_frames(int frames, int count);

// Columns of a contact sheet of n images: up to 4 in one row; else a
// divisor of n near sqrt(n), so every row is full (30 outputs: 6 rows of 5);
// when n has none that is not too thin (a prime), 0 = ceil(sqrt(n)).
int grid_columns(int n);

}  // namespace ditgen::io
