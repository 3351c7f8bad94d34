// make_mp4_writer in a build without FFmpeg (cmake -DDITGEN_FFMPEG=OFF, for
// a machine that lacks FFmpeg's libraries): a config asking for MP4 output
// is refused when the writers are made, before any model is loaded or any
// step runs, with the way out in the message.
#include "io/mp4_writer.h"
#include "util/error.h"

namespace ditgen::io {

std::unique_ptr<OutputWriter> make_mp4_writer(const OutputPlan& /*plan*/, double /*fps*/, int /*crf*/,
                                              const std::string& /*encoder*/) {
  throw ConfigError(
      "output.format \"mp4\": this ditgen was built without FFmpeg (cmake -DDITGEN_FFMPEG=OFF); "
      "write PNG frames with output.format \"png\", or rebuild with FFmpeg's libraries (scripts/install_deps.sh)");
}

}  // namespace ditgen::io
