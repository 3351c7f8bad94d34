// Test-only MP4 reader: opens a file with libavformat, decodes its video
// stream with libavcodec and converts every frame back to 8-bit RGB with
// libswscale, reading it as BT.709 limited range (what io/mp4_writer.h
// promises), independently of the writer's code. Also returns what a player
// or ffprobe would see: container metadata, stream rate and time base,
// codec, pixel format, colour tags, and the raw luma plane (to check the
// matrix and range directly). Shared by the io and cli tests (both link
// ditgen_libav).
#pragma once
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ditgen::testing {

struct DecodedVideo {
  std::string codec;                       // "h264"
  std::string pix_fmt;                     // "yuv420p"
  int width = 0, height = 0;               // the coded (padded) size
  AVColorPrimaries primaries = AVCOL_PRI_UNSPECIFIED;
  AVColorTransferCharacteristic trc = AVCOL_TRC_UNSPECIFIED;
  AVColorSpace space = AVCOL_SPC_UNSPECIFIED;
  AVColorRange range = AVCOL_RANGE_UNSPECIFIED;
  AVRational avg_frame_rate{0, 1}, time_base{0, 1};
  double duration_s = 0;                   // the stream's duration
  std::vector<int64_t> pts;                // per decoded frame, in time_base units
  std::map<std::string, std::string> metadata;  // container tags
  std::vector<std::vector<uint8_t>> rgb;   // per frame, width x height x 3
  std::vector<std::vector<uint8_t>> luma;  // per frame, width x height (Y plane as stored)
};

inline DecodedVideo decode_mp4(const std::string& path) {
  auto fail = [&](const std::string& what) { throw std::runtime_error("decode_mp4 " + path + ": " + what); };
  DecodedVideo v;
  AVFormatContext* in = nullptr;
  if (avformat_open_input(&in, path.c_str(), nullptr, nullptr) < 0) fail("cannot open");
  struct CloseInput {
    AVFormatContext** p;
    ~CloseInput() { avformat_close_input(p); }
  } close_input{&in};
  if (avformat_find_stream_info(in, nullptr) < 0) fail("no stream info");
  const AVDictionaryEntry* tag = nullptr;
  while ((tag = av_dict_get(in->metadata, "", tag, AV_DICT_IGNORE_SUFFIX))) v.metadata[tag->key] = tag->value;

  const int index = av_find_best_stream(in, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (index < 0) fail("no video stream");
  const AVStream* st = in->streams[index];
  const AVCodecParameters* par = st->codecpar;
  v.codec = avcodec_get_name(par->codec_id);
  v.pix_fmt = par->format >= 0 ? av_get_pix_fmt_name(static_cast<AVPixelFormat>(par->format)) : "none";
  v.width = par->width;
  v.height = par->height;
  v.primaries = par->color_primaries;
  v.trc = par->color_trc;
  v.space = par->color_space;
  v.range = par->color_range;
  v.avg_frame_rate = st->avg_frame_rate;
  v.time_base = st->time_base;
  v.duration_s = st->duration * av_q2d(st->time_base);

  const AVCodec* decoder = avcodec_find_decoder(par->codec_id);
  if (!decoder) fail("no decoder");
  AVCodecContext* dec = avcodec_alloc_context3(decoder);
  struct FreeDecoder {
    AVCodecContext** p;
    ~FreeDecoder() { avcodec_free_context(p); }
  } free_decoder{&dec};
  avcodec_parameters_to_context(dec, par);
  if (avcodec_open2(dec, decoder, nullptr) < 0) fail("cannot open the decoder");

  AVPacket* pkt = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  SwsContext* sws = nullptr;
  auto take_frames = [&] {
    while (avcodec_receive_frame(dec, frame) == 0) {
      const int w = frame->width, h = frame->height;
      if (!sws) {
        // Bicubic chroma upsampling at full horizontal resolution, BT.709
        // limited range in, full-range RGB out.
        sws = sws_getContext(w, h, static_cast<AVPixelFormat>(frame->format), w, h, AV_PIX_FMT_RGB24,
                             SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr, nullptr);
        if (!sws) fail("no swscale context");
        const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
        sws_setColorspaceDetails(sws, bt709, 0, bt709, 1, 0, 1 << 16, 1 << 16);
      }
      std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
      // sws_scale reads four plane pointers and strides whatever the format.
      uint8_t* dst[4] = {rgb.data(), nullptr, nullptr, nullptr};
      const int dst_stride[4] = {w * 3, 0, 0, 0};
      sws_scale(sws, frame->data, frame->linesize, 0, h, dst, dst_stride);
      std::vector<uint8_t> y(static_cast<size_t>(w) * h);
      for (int r = 0; r < h; ++r)
        for (int c = 0; c < w; ++c) y[static_cast<size_t>(r) * w + c] = frame->data[0][r * frame->linesize[0] + c];
      v.rgb.push_back(std::move(rgb));
      v.luma.push_back(std::move(y));
      v.pts.push_back(frame->best_effort_timestamp);
      av_frame_unref(frame);
    }
  };
  while (av_read_frame(in, pkt) >= 0) {
    if (pkt->stream_index == index && avcodec_send_packet(dec, pkt) < 0) fail("decode error");
    av_packet_unref(pkt);
    take_frames();
  }
  avcodec_send_packet(dec, nullptr);
  take_frames();
  sws_freeContext(sws);
  av_frame_free(&frame);
  av_packet_free(&pkt);
  return v;
}

// PSNR in dB of two 8-bit images (same size and layout); +inf if equal.
inline double psnr8(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.empty()) throw std::invalid_argument("psnr8: sizes differ");
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    se += d * d;
  }
  const double mse = se / double(a.size());
  return mse == 0 ? INFINITY : 10.0 * std::log10(255.0 * 255.0 / mse);
}

// The top-left w x h of an RGB image `stride_w` pixels wide.
inline std::vector<uint8_t> crop_rgb(const std::vector<uint8_t>& rgb, int stride_w, int w, int h) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    out.insert(out.end(), rgb.begin() + (static_cast<size_t>(y) * stride_w) * 3,
               rgb.begin() + (static_cast<size_t>(y) * stride_w + w) * 3);
  return out;
}

}  // namespace ditgen::testing
