// The MP4 writer (see mp4_writer.h for the format decisions). One output is
// one Mp4Encoder: format context, H.264 encoder, colour converter, reused
// YUV frame and packet, each owned by a unique_ptr with libav's free
// function, so every exit (including an exception half-way through the
// frames) closes the file before write_file_atomic_named removes it.
//
// libav's logging: it would print libx264's banner and the muxer's progress
// to stderr, which ditgen owns (--quiet means nothing is printed), so a log
// callback drops every message; the last error-level line of the calling
// thread is kept and appended to the exception's message, because the error
// code alone is often only "Generic error in an external library" where the
// log said e.g. "invalid width x height (20000x2)". The callback is process
// wide (libav has no other kind); ditgen has no other libav user.
#include "io/mp4_writer.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libavutil/rational.h>
#include <libswscale/swscale.h>
}

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "io/output_paths.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

thread_local std::string t_last_av_error;

void av_log_to_last_error(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_ERROR) return;
  char line[1024];
  int print_prefix = 1;  // "[libx264 @ 0x...] ": names the component at fault
  av_log_format_line2(avcl, level, fmt, args, line, sizeof line, &print_prefix);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) t_last_av_error = std::move(text);
}

void install_av_log_callback() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(av_log_to_last_error); });
}

std::string av_error_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

// libav's free functions take a pointer to the pointer (they null it).
struct FormatContextFree {
  void operator()(AVFormatContext* c) const {
    if (c->pb && !(c->oformat->flags & AVFMT_NOFILE)) avio_closep(&c->pb);
    avformat_free_context(c);
  }
};
struct CodecContextFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFree {
  void operator()(SwsContext* c) const { sws_freeContext(c); }
};

struct Mp4Settings {
  AVRational frame_rate;  // frames per second as a fraction
  int crf;
  std::string encoder;
};

const AVCodec* find_encoder(const std::string& name, const std::string& for_whom) {
  const AVCodec* codec = avcodec_find_encoder_by_name(name.c_str());
  if (!codec || codec->type != AVMEDIA_TYPE_VIDEO)
    throw RuntimeFailure(for_whom + ": the H.264 encoder '" + name + "' is not available in this libavcodec " +
                         "(FFmpeg " + av_version_info() + "); MP4 output needs an FFmpeg built with libx264 " +
                         "(Debian's libavcodec59 is; scripts/install_deps.sh)");
  return codec;
}

// x264's instruction sets, named as its `asm` option names them: all this
// CPU has up to AVX2, never AVX-512. x264's AVX-512 functions read memory
// whose content varies from run to run: the same frames gave other bytes
// after other heap use in one process (Debian's x264 164, issue 36), while
// its C code and every set up to AVX2 give the same bytes as each other
// (checked on tests/io/test_mp4_writer.cpp's real frames). So a video is
// also the same on every x86-64 machine. Null elsewhere: x264's default.
const char* x264_instruction_sets() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // LZCNT (CPUID 0x80000001, ECX bit 5): clang's __builtin_cpu_supports has no name for it.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool lzcnt = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 5));
  // x264's "AVX2" implies FMA3, BMI1, BMI2 and LZCNT; "AVX" implies SSE4.2.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
      __builtin_cpu_supports("bmi2") && lzcnt)
    return "AVX2";
  if (__builtin_cpu_supports("avx")) return "AVX";
  if (__builtin_cpu_supports("sse4.2")) return "SSE4.2";
  if (__builtin_cpu_supports("ssse3")) return "SSSE3";
  return "SSE2";
#else
  return nullptr;
#endif
}

// The RGB picture handed to libswscale. Its SIMD input converters read
// whole vectors: past a row's last pixel and past the buffer's end
// (valgrind on a tightly packed 34x22 frame: 16-byte reads 6 bytes past
// the allocation). Those bytes then differed with the heap's layout, which
// --quiet and where stdout went changed, and with them the encoded video
// (issue 36). So every byte swscale may read is ours and set: rows start
// at a 64-byte stride, each row's tail repeats its last pixel, and a spare
// row (a copy of the last) follows the picture.
class RgbSource {
 public:
  // A (W, H) picture padded to (W + W % 2, H + H % 2): 4:2:0 needs even
  // sizes, and the last column / row repeated keeps the edge's chroma clean.
  RgbSource(int width, int height)
      : width_(width), height_(height), even_w_(width + width % 2), even_h_(height + height % 2),
        stride_((even_w_ * 3 + kAlign - 1) / kAlign * kAlign),
        bytes_(static_cast<size_t>(stride_) * (even_h_ + 1)) {}

  int stride() const { return stride_; }
  const uint8_t* data() const { return bytes_.data(); }

  // `rgb`: width x height x 3 bytes, tightly packed.
  void fill(const std::vector<uint8_t>& rgb) {
    const size_t row_bytes = static_cast<size_t>(width_) * 3;
    for (int y = 0; y <= even_h_; ++y) {  // <=: the spare row
      const uint8_t* src = rgb.data() + static_cast<size_t>(std::min(y, height_ - 1)) * row_bytes;
      uint8_t* dst = bytes_.data() + static_cast<size_t>(y) * stride_;
      std::memcpy(dst, src, row_bytes);
      for (size_t x = row_bytes; x < static_cast<size_t>(stride_); x += 3) {
        const size_t n = std::min<size_t>(3, stride_ - x);
        std::memcpy(dst + x, src + row_bytes - 3, n);
      }
    }
  }

 private:
  static constexpr int kAlign = 64;  // wider than any SIMD read of swscale (AVX-512: 64 bytes)
  int width_, height_, even_w_, even_h_, stride_;
  std::vector<uint8_t> bytes_;  // (even_h + 1) rows of `stride` bytes
};

// One output being encoded into the file `temp` (reported as `path`).
class Mp4Encoder {
 public:
  Mp4Encoder(const std::string& path, const std::string& temp, const Mp4Settings& s, int width, int height,
             const OutputItem& item)
      : path_(path), height_(height) {
    t_last_av_error.clear();
    const AVCodec* codec = find_encoder(s.encoder, path);

    AVFormatContext* oc = nullptr;
    check(avformat_alloc_output_context2(&oc, nullptr, "mp4", temp.c_str()), "cannot set up the MP4 muxer");
    format_.reset(oc);
    stream_ = avformat_new_stream(oc, nullptr);
    if (!stream_) throw failure("cannot add the video stream", AVERROR(ENOMEM));

    codec_.reset(avcodec_alloc_context3(codec));
    if (!codec_) throw failure("cannot allocate the encoder", AVERROR(ENOMEM));
    AVCodecContext* c = codec_.get();
    c->width = width;
    c->height = height;
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->framerate = s.frame_rate;
    c->time_base = av_inv_q(s.frame_rate);  // one tick per frame: pts = frame index
    c->color_primaries = AVCOL_PRI_BT709;
    c->color_trc = AVCOL_TRC_BT709;
    c->colorspace = AVCOL_SPC_BT709;
    c->color_range = AVCOL_RANGE_MPEG;
    // One encoder thread: x264's output depends on its thread count, so a
    // fixed count keeps a seed's video independent of the machine's cores
    // (and x264 off the cores ditgen's own threads use); the videos are
    // small next to the denoising that made them.
    c->thread_count = 1;
    if (oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    check(av_opt_set(c->priv_data, "preset", "medium", 0), "cannot set the encoder preset");
    check(av_opt_set_int(c->priv_data, "crf", s.crf, 0), "cannot set crf " + std::to_string(s.crf));
    if (const char* sets = x264_instruction_sets())
      check(av_opt_set(c->priv_data, "x264-params", (std::string("asm=") + sets).c_str(), 0),
            "cannot choose the encoder's instruction sets");
    check(avcodec_open2(c, codec, nullptr),
          "cannot open the " + s.encoder + " encoder for " + std::to_string(width) + "x" + std::to_string(height));
    check(avcodec_parameters_from_context(stream_->codecpar, c), "cannot copy the encoder parameters");
    stream_->time_base = c->time_base;  // a hint: the muxer picks its own timescale
    stream_->avg_frame_rate = s.frame_rate;

    set_tag("title", item.caption);
    for (const auto& [key, value] : item.text) {
      if (key == "parameters") set_tag("comment", value);
      if (key == "ditgen_config") set_tag("description", value);
      if (key == "ditgen_run") set_tag("synopsis", value);
    }

    check(avio_open(&oc->pb, temp.c_str(), AVIO_FLAG_WRITE), "cannot open the file");
    AVDictionary* options = nullptr;
    av_dict_set(&options, "movflags", "+faststart", 0);
    const int header = avformat_write_header(oc, &options);
    av_dict_free(&options);
    check(header, "cannot write the MP4 header");

    // Full-range RGB in, limited-range BT.709 YUV out (the RGB side's table
    // is unused for RGB input; libswscale wants one anyway). Luma keeps its
    // size, so the filter only decides how chroma is halved: SWS_AREA is a
    // 2x2 box average, which measured as good as or better than bicubic and
    // bilinear after decoding (tests/io/test_mp4_writer.cpp's content, by
    // 0.5-1.5 dB), and ACCURATE_RND rounds rather than truncates.
    sws_.reset(sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, AV_PIX_FMT_YUV420P,
                              SWS_AREA | SWS_ACCURATE_RND, nullptr, nullptr, nullptr));
    if (!sws_) throw failure("cannot set up the RGB -> yuv420p conversion", AVERROR(EINVAL));
    const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
    if (sws_setColorspaceDetails(sws_.get(), bt709, /*srcRange=*/1, bt709, /*dstRange=*/0, 0, 1 << 16, 1 << 16) < 0)
      throw failure("libswscale refuses the BT.709 limited-range conversion", AVERROR(EINVAL));

    frame_.reset(av_frame_alloc());
    packet_.reset(av_packet_alloc());
    if (!frame_ || !packet_) throw failure("cannot allocate a frame", AVERROR(ENOMEM));
    frame_->format = c->pix_fmt;
    frame_->width = width;
    frame_->height = height;
    frame_->color_primaries = c->color_primaries;
    frame_->color_trc = c->color_trc;
    frame_->colorspace = c->colorspace;
    frame_->color_range = c->color_range;
    check(av_frame_get_buffer(frame_.get(), 0), "cannot allocate a frame");
  }

  // `source`: the even-sized picture, padded as RgbSource says.
  void add_frame(const RgbSource& source) {
    check(av_frame_make_writable(frame_.get()), "cannot reuse the frame buffer");
    // sws_scale reads four plane pointers and strides whatever the format.
    const uint8_t* src[4] = {source.data(), nullptr, nullptr, nullptr};
    const int src_stride[4] = {source.stride(), 0, 0, 0};
    sws_scale(sws_.get(), src, src_stride, 0, height_, frame_->data, frame_->linesize);
    frame_->pts = next_pts_++;
    check(avcodec_send_frame(codec_.get(), frame_.get()), "cannot encode frame " + std::to_string(frame_->pts));
    drain();
  }

  void finish() {
    check(avcodec_send_frame(codec_.get(), nullptr), "cannot flush the encoder");
    drain();
    check(av_write_trailer(format_.get()), "cannot finish the MP4 file");
    // avio_closep flushes: a full disk shows up here at the latest.
    if (format_->pb->error < 0) check(format_->pb->error, "cannot write the file");
    check(avio_closep(&format_->pb), "cannot close the file");
  }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const { throw failure(what, err); }
  RuntimeFailure failure(const std::string& what, int err) const {
    std::string message = path_ + ": " + what + ": " + av_error_text(err);
    if (!t_last_av_error.empty()) message += " (" + t_last_av_error + ")";
    return RuntimeFailure(message);
  }
  void check(int ret, const std::string& what) const {
    if (ret < 0) fail(what, ret);
  }
  void set_tag(const char* key, const std::string& value) {
    if (value.empty()) return;
    check(av_dict_set(&format_->metadata, key, value.c_str(), 0), std::string("cannot set the ") + key + " tag");
  }

  // Moves every packet the encoder has ready into the file.
  void drain() {
    for (;;) {
      const int ret = avcodec_receive_packet(codec_.get(), packet_.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return;
      check(ret, "cannot encode");
      // libx264 leaves durations unset. FFmpeg 5.1's muxer still guesses
      // them from avg_frame_rate, but that guess is deprecated
      // (FF_API_COMPUTE_PKT_FIELDS2), and without it the last frame would
      // last 0 s (a one-frame video: no duration at all). Every frame lasts
      // one tick of the encoder's time base.
      if (packet_->duration <= 0) packet_->duration = 1;
      av_packet_rescale_ts(packet_.get(), codec_->time_base, stream_->time_base);
      packet_->stream_index = stream_->index;
      check(av_interleaved_write_frame(format_.get(), packet_.get()), "cannot write a video packet");
    }
  }

  std::string path_;
  int height_;
  int64_t next_pts_ = 0;
  // Declared before codec_ etc.: destroyed last, after the encoder, so the
  // file is closed once nothing can write into it any more.
  std::unique_ptr<AVFormatContext, FormatContextFree> format_;
  AVStream* stream_ = nullptr;  // owned by format_
  std::unique_ptr<AVCodecContext, CodecContextFree> codec_;
  std::unique_ptr<SwsContext, SwsFree> sws_;
  std::unique_ptr<AVFrame, FrameFree> frame_;
  std::unique_ptr<AVPacket, PacketFree> packet_;
};

// The frames of an MP4 this writer wrote, decoded back to 8-bit RGB as a
// player shows them (BT.709, limited range), cropped to width x height
// (the writer padded odd sizes by one); empty when the file cannot be read
// or is not that size, or holds more than `max_frames` frames (a file
// replaced by another video must not fill the memory). For a resumed run's
// contact sheet: H.264 is lossy, so these frames are near, not equal to,
// the ones the earlier run encoded.
std::vector<RgbImage> decode_mp4(const std::string& path, int width, int height, size_t max_frames) {
  struct InputClose {
    void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
  };
  AVFormatContext* opened = nullptr;
  if (avformat_open_input(&opened, path.c_str(), nullptr, nullptr) < 0) return {};
  const std::unique_ptr<AVFormatContext, InputClose> format(opened);
  if (avformat_find_stream_info(format.get(), nullptr) < 0) return {};
  const int stream = av_find_best_stream(format.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (stream < 0) return {};
  const AVCodecParameters* par = format->streams[stream]->codecpar;
  if (par->width != width + width % 2 || par->height != height + height % 2) return {};
  const AVCodec* decoder = avcodec_find_decoder(par->codec_id);
  if (!decoder) return {};
  std::unique_ptr<AVCodecContext, CodecContextFree> codec(avcodec_alloc_context3(decoder));
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketFree> packet(av_packet_alloc());
  if (!codec || !frame || !packet || avcodec_parameters_to_context(codec.get(), par) < 0 ||
      avcodec_open2(codec.get(), decoder, nullptr) < 0)
    return {};
  std::unique_ptr<SwsContext, SwsFree> sws;
  std::vector<RgbImage> frames;
  const int stride = (par->width * 3 + 63) / 64 * 64;
  std::vector<uint8_t> rgb(static_cast<size_t>(stride) * static_cast<size_t>(par->height));
  auto receive = [&]() -> bool {
    for (;;) {
      const int ret = avcodec_receive_frame(codec.get(), frame.get());
      if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return true;
      if (ret < 0 || frame->width != par->width || frame->height != par->height) return false;
      if (frames.size() >= max_frames) return false;
      if (!sws) {
        constexpr int kFlags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT;
        sws.reset(sws_getContext(frame->width, frame->height, static_cast<AVPixelFormat>(frame->format), frame->width,
                                 frame->height, AV_PIX_FMT_RGB24, kFlags, nullptr, nullptr, nullptr));
        if (!sws) return false;
        const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
        sws_setColorspaceDetails(sws.get(), bt709, 0, bt709, 1, 0, 1 << 16, 1 << 16);
      }
      uint8_t* planes[1] = {rgb.data()};
      const int strides[1] = {stride};
      sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, planes, strides);
      RgbImage& image = frames.emplace_back();
      image.width = width;
      image.height = height;
      image.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
      for (int y = 0; y < height; ++y)
        std::memcpy(image.pixels.data() + static_cast<size_t>(y) * static_cast<size_t>(width) * 3,
                    rgb.data() + static_cast<size_t>(y) * static_cast<size_t>(stride), static_cast<size_t>(width) * 3);
      av_frame_unref(frame.get());
    }
  };
  while (av_read_frame(format.get(), packet.get()) >= 0) {
    const bool ours = packet->stream_index == stream;
    const bool sent = !ours || avcodec_send_packet(codec.get(), packet.get()) >= 0;
    av_packet_unref(packet.get());
    if (!sent || !receive()) return {};
  }
  if (avcodec_send_packet(codec.get(), nullptr) < 0 || !receive()) return {};
  return frames;
}

class Mp4Writer final : public PerOutputWriter {
 public:
  Mp4Writer(OutputPlan plan, Mp4Settings settings) : PerOutputWriter(std::move(plan)), settings_(std::move(settings)) {}

  std::vector<std::string> paths_of(int index) const override {
    return {video_path_for(plan_.pattern, index, plan_.outputs, plan_.name_of(index))};
  }

  std::vector<std::string> write(const OutputItem& item) override {
    check_output_item(item, plan_, "mp4 writer");
    const std::string path = paths_of(item.index).front();
    const int width = static_cast<int>(item.frames.dim(3)), height = static_cast<int>(item.frames.dim(2));
    const int even_w = width + width % 2, even_h = height + height % 2;
    write_file_atomic_named(path, [&](const std::string& temp) {
      Mp4Encoder encoder(path, temp, settings_, even_w, even_h, item);
      // One frame converted at a time: a long video never holds all its
      // frames as bytes as well as floats.
      RgbSource source(width, height);
      for (int64_t f = 0; f < item.frames.dim(0); ++f) {
        source.fill(output_frame_rgb(item.frames, f).pixels);
        encoder.add_frame(source);
      }
      encoder.finish();
    });
    return {path};
  }

  Tensor read_back(int index, int height, int width) const override {
    return frames_from_rgb(decode_mp4(paths_of(index).front(), width, height, static_cast<size_t>(plan_.frames)));
  }

 private:
  Mp4Settings settings_;
};

}  // namespace

std::unique_ptr<OutputWriter> make_mp4_writer(const OutputPlan& plan, double fps, int crf,
                                              const std::string& encoder) {
  if (!(crf >= 0 && crf <= 51))
    throw std::invalid_argument("mp4 writer: crf must be in 0..51, got " + std::to_string(crf));
  // The same range as the config's output.fps check.
  if (!(fps >= 0.001 && fps <= 1000))
    throw std::invalid_argument("mp4 writer: fps must be in [0.001, 1000], got " + std::to_string(fps));
  // Denominators up to 1e5: exact for any rate people use (23.976 =
  // 2997/125, 29.97 = 2997/100) and for every fps of the range above.
  const AVRational rate = av_d2q(fps, 100000);
  install_av_log_callback();
  // Now rather than at the first output: a missing encoder must not cost a
  // whole generation run first.
  find_encoder(encoder, video_path_for(plan.pattern, 0, plan.outputs));
  return std::make_unique<Mp4Writer>(plan, Mp4Settings{rate, crf, encoder});
}

}  // namespace ditgen::io
