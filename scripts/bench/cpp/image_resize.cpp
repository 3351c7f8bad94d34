// bench_image_resize: times the image-to-video input preprocessing on one
// image file: Pillow-exact LANCZOS resize (io/pillow_resample.h) to
// --width x --height, and, with --clip-config, the CLIP image preprocessing
// (io/clip_image_processor.h) from that preprocessor_config.json. A
// benchmark, not a test; scripts/bench/bench_image_resize.sh runs Pillow's
// and transformers' own on the same file beside it.
//
//   bench_image_resize --image FILE [--width 832 --height 480] [--clip-config JSON]
//                      [--repeat 51] [--threads N]
//
// Output: one `key value` line per figure, milliseconds over the repeats
// after one warm-up: resize_ms (median), resize_min_ms (fastest; timeit's
// "best of" is comparable), clip_ms, clip_min_ms.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/clip_image_processor.h"
#include "io/image_reader.h"
#include "io/pillow_resample.h"

using namespace ditgen;

namespace {

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: bench_image_resize --image FILE [--width 832 --height 480] [--clip-config JSON]\n"
               "                          [--repeat 51] [--threads N]\n");
  std::exit(code);
}

std::string value_of(int argc, char** argv, int& i) {
  if (i + 1 >= argc) usage(2);
  return argv[++i];
}

struct Timing {
  double median_ms, min_ms;
};

template <class F>
Timing time_ms(int repeat, F&& f) {
  f();  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string image_path, clip_config;
  int64_t width = 832, height = 480;
  int repeat = 51;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--image") image_path = value_of(argc, argv, i);
    else if (a == "--width") width = std::stoll(value_of(argc, argv, i));
    else if (a == "--height") height = std::stoll(value_of(argc, argv, i));
    else if (a == "--clip-config") clip_config = value_of(argc, argv, i);
    else if (a == "--repeat") repeat = std::stoi(value_of(argc, argv, i));
    else if (a == "--threads") omp_set_num_threads(std::stoi(value_of(argc, argv, i)));
    else if (a == "--help") usage(0);
    else usage(2);
  }
  if (image_path.empty()) usage(2);
  const io::InputImage in = io::read_input_image(image_path);
  std::printf("image %lld x %lld, threads %d\n", static_cast<long long>(in.image.rgb.width),
              static_cast<long long>(in.image.rgb.height), omp_get_max_threads());
  volatile uint8_t sink = 0;
  const Timing resize = time_ms(repeat, [&] {
    sink = io::pillow_resize(in.image.rgb, width, height, io::ResampleFilter::kLanczos).pixels[0];
  });
  std::printf("resize_ms %.3f\nresize_min_ms %.3f\n", resize.median_ms, resize.min_ms);
  if (!clip_config.empty()) {
    const io::ClipImageProcessorConfig config = io::read_clip_image_processor_config(clip_config);
    const Timing clip = time_ms(repeat, [&] {
      sink = static_cast<uint8_t>(io::clip_image_input(in.image, config).data()[0] > 0);
    });
    std::printf("clip_ms %.3f\nclip_min_ms %.3f\n", clip.median_ms, clip.min_ms);
  }
  (void)sink;
  return 0;
}
