// plan_layout's figures against numbers worked out by hand for a tiny DiT's
// workload, and the per-step communication of the three sp/tp schemes
// against the formulas. No MPI needed. (DiT's own weight counts:
// tests/models/test_dit_spec.cpp.)
#include <doctest/doctest.h>

#include <string>

#include "parallel/plan.h"
#include "util/strings.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::parallel;

namespace {

// The workload of a tiny DiT, by hand: L = 1, H = 2, head_dim 4 (D = 8),
// N = 4 tokens (latent 4x4, patch 2, so P2 = 4), F = 32, C = 4, O = 8, 10
// classes. Its weights (tests/models/test_dit_spec.cpp checks that DiT's
// registry entry gives exactly these): tp-split per block: QKV 3*64+3*8 =
// 216, out 64, MLP in 8*32+32 = 288, MLP out 32*8 = 256, adaLN 6*64+6*8 =
// 432: 1256. Whole per block: biases 8+8 = 16, timestep embedder
// 256*8+8+64+8 = 2128, class table 11*8 = 88: 2232. Once: patch 8*4*4+8 =
// 136, pos_embed 4*8 = 32, final adaLN 2*64+16 = 144, final projection
// 4*8*8+32 = 288: 600.
Workload tiny() {
  Workload m;
  m.heads = 2;
  m.head_dim = 4;
  m.layers = 1;
  m.tokens = 4;
  m.attention = {AttentionOp::spatial(m.tokens, m.heads)};
  m.mlp_hidden = 32;
  m.gathered_per_layer = 6 * 8;  // adaLN modulation (B, 6D)
  m.output_per_token = 4 * 8;    // P2 * O
  m.input_elements = 4 * 16;     // C * h * w
  m.output_elements = 8 * 16;    // O * h * w
  m.eps_elements = 4 * 16;
  m.split_per_layer = 1256;
  m.whole_per_layer = 2232;
  m.whole_once = 600;
  return m;
}

// DiT-XL/2 at 256 or 512 (patch 2, C = 4, O = 8); weights are not needed here.
Workload dit_xl(int64_t image) {
  Workload m;
  m.heads = 16;
  m.head_dim = 72;
  m.layers = 28;
  const int64_t latent = image / 8;
  m.tokens = (image / 16) * (image / 16);  // patch 2
  m.attention = {AttentionOp::spatial(m.tokens, m.heads)};
  m.mlp_hidden = 4608;
  m.gathered_per_layer = 6 * m.hidden();
  m.output_per_token = 4 * 8;
  m.input_elements = 4 * latent * latent;
  m.output_elements = 8 * latent * latent;
  m.eps_elements = 4 * latent * latent;
  return m;
}

// A tiny video model, by hand: L = 1, H = 2, head_dim 4 (D = 8), T = 3
// frames of N = 4 tokens, MLP F = 32, R = 32 output elements per token, a
// cross-attention; no gathered conditioning, latents not counted.
Workload tiny_video() {
  Workload m;
  m.heads = 2;
  m.head_dim = 4;
  m.layers = 1;
  m.tokens = 4;
  m.frames = 3;
  m.attention = {AttentionOp::spatial(m.tokens, m.heads), AttentionOp::cross(0, m.heads),
                 AttentionOp::temporal(m.frames, m.heads)};
  m.feed_forwards = 2;
  m.mlp_hidden = 32;
  m.output_per_token = 32;
  return m;
}

}  // namespace

TEST_CASE("tiny video, dsp, ulysses and ring over 2 ranks, by hand") {
  // b = 2 (one video, CFG). Frames 3 over 2: f = 2; tokens 4 over 2: p = 2.
  const PlanRow d = plan_layout(Layout{2, 1, 1, parallel::SpMode::kDsp}, tiny_video(), 1, true, 4);
  CHECK(d.frames_per_rank == 2);
  CHECK(d.tokens_per_rank == 4);  // every token of its frames
  // rows = b*f*N = 16. Switch in: b*f*(N-p)*D = 2*2*2*8 = 64; back:
  // b*(T-f)*p*Dt = 2*1*2*8 = 32: 96 elements.
  CHECK(d.comm_sp == 96 * 4);
  CHECK(d.branch_temporal == 96 * 4);
  CHECK(d.branch_spatial == 0);  // frames are whole: no communication
  CHECK(d.branch_cross == 0);
  CHECK(d.branch_mlp == 0);
  // Output gather: (sp-1)*rows*R = 16*32.
  CHECK(d.comm_gather == 512 * 4);
  // Throughout 2*16*8 + b*D 16 = 272; temporal stage: switched input
  // 2*3*2*8 = 96, q, k, v, output 4*96 = 384, switched back 128, out
  // projection 128: 736 (attention 384+128+128 = 640, MLP 512+128 = 640).
  CHECK(d.activation_bytes_per_rank == (272 + 736) * 4);

  // ulysses: S = b*T = 6 frames of p = 2 tokens; 3*6*2*8/2 + 6*2*8/2 = 192.
  const PlanRow u = plan_layout(Layout{2, 1, 1, parallel::SpMode::kUlysses}, tiny_video(), 1, true, 4);
  CHECK(u.frames_per_rank == 3);
  CHECK(u.tokens_per_rank == 2);
  CHECK(u.comm_sp == 192 * 4);  // twice dsp's
  CHECK(u.branch_spatial == 192 * 4);
  CHECK(u.branch_temporal == 0);  // every frame of its tokens is here
  CHECK(u.comm_gather == 12 * 32 * 4);
  // ring: 2*S*(N-p1)*Dt = 2*6*2*8 = 192.
  const PlanRow r = plan_layout(Layout{2, 1, 1, parallel::SpMode::kRing}, tiny_video(), 1, true, 4);
  CHECK(r.comm_sp == 192 * 4);
  CHECK(r.branch_temporal == 0);
}

TEST_CASE("tiny video, dsp x tp2: per-branch bytes add up to the totals") {
  // Dt = 4; rows 16; each all-reduce 2*(1/2)*16*8 = 128 elements. Switch:
  // 64 + b*(T-f)*p*Dt = 2*1*2*4 = 16: 80.
  const PlanRow t = plan_layout(Layout{2, 1, 2, parallel::SpMode::kDsp}, tiny_video(), 1, true, 4);
  CHECK(t.branch_spatial == 128 * 4);
  CHECK(t.branch_cross == 128 * 4);
  CHECK(t.branch_mlp == 128 * 4);
  CHECK(t.branch_temporal == (80 + 128) * 4);
  CHECK(t.comm_tp == 5 * 128 * 4);
  CHECK(t.comm_sp == 80 * 4);
  // A layer computes spatial, cross, two MLPs and temporal.
  CHECK(t.comm_sp + t.comm_tp == t.branch_spatial + t.branch_cross + 2 * t.branch_mlp + t.branch_temporal);
  const std::string table = format_plan_table({t});
  CHECK(table.find("b x f x p") != std::string::npos);
  CHECK(table.find("sp2 x tp2 dsp  2 x 2 x 4") != std::string::npos);
}

TEST_CASE("weights per rank: what tp splits is divided by tp") {
  CHECK(weight_elements_per_rank(tiny(), 1) == 1256 + 2232 + 600);
  CHECK(weight_elements_per_rank(tiny(), 2) == 1256 / 2 + 2232 + 600);
  const PlanRow r = plan_layout(Layout{1, 2, 1}, tiny(), 1, true, 4);
  CHECK(r.weight_bytes_per_rank == 4088 * 4);  // cp replicates weights
}

TEST_CASE("tiny model, single process, by hand") {
  // b = 1 image * 2 (CFG) = 2, p = 4.
  const PlanRow r = plan_layout(Layout{}, tiny(), 1, true, 4);
  CHECK(r.batch_per_rank == 2);
  CHECK(r.tokens_per_rank == 4);
  // Throughout: residual + normed 2*2*4*8 = 128, cond 16, modulation 96,
  // latents 2*(4+8)*16 = 384: 624. Attention: qkv 192 + out 64 + proj 64 =
  // 320; MLP: 2*4*32 + 64 = 320. Peak 944.
  CHECK(r.activation_bytes_per_rank == 944 * 4);
  CHECK(r.comm_bytes_per_step_per_rank == 0);
}

TEST_CASE("tiny model, sp2 ulysses and ring, by hand") {
  // b = 2, p = 2, Dt = 8.
  const PlanRow u = plan_layout(Layout{2, 1, 1, parallel::SpMode::kUlysses}, tiny(), 1, true, 4);
  CHECK(u.tokens_per_rank == 2);
  // Throughout: 2*2*2*8 = 64, 16, 96, 384: 560. Attention: 3*32 + 32 + 32 =
  // 160, + head-shard forms 4*2*4*8/2 = 128: 288. MLP: 128 + 32 = 160.
  CHECK(u.activation_bytes_per_rank == (560 + 288) * 4);
  // q, k, v: 3 * 32 * 1/2 = 48; output back: 2*(4-2)*8/2 = 16.
  CHECK(u.comm_sp == 64 * 4);
  // Output all-gather: 1 * 2*2*4*8 = 128.
  CHECK(u.comm_gather == 128 * 4);
  CHECK(u.comm_tp == 0);
  CHECK(u.comm_cp == 0);
  CHECK(u.comm_bytes_per_step_per_rank == 192 * 4);

  const PlanRow g = plan_layout(Layout{2, 1, 1, parallel::SpMode::kRing}, tiny(), 1, true, 4);
  // Attention: 160 + K/V in flight 2*32 = 64 + lse 2*2*2 = 8: 232.
  CHECK(g.activation_bytes_per_rank == (560 + 232) * 4);
  // K and V, once each: 2 * 2*(4-2)*8 = 64.
  CHECK(g.comm_sp == 64 * 4);
  CHECK(g.comm_gather == 128 * 4);
}

TEST_CASE("tiny model, uneven ring shards, by hand") {
  // sp 3 over 4 tokens: shards 2, 1, 1; rank 0 sends K, V of every shard but
  // rank 1's: 2 * b*(4-1)*8 = 96. Gather: 2 peers * 2*2*4*8 = 256.
  const PlanRow r = plan_layout(Layout{3, 1, 1, parallel::SpMode::kRing}, tiny(), 1, true, 4);
  CHECK(r.tokens_per_rank == 2);
  CHECK(r.comm_sp == 96 * 4);
  CHECK(r.comm_gather == 256 * 4);
}

TEST_CASE("tiny model, tp2 and cp2, by hand") {
  // tp2: b = 2, p = 4, Dt = 4.
  const PlanRow t = plan_layout(Layout{1, 1, 2}, tiny(), 1, true, 4);
  CHECK(t.weight_bytes_per_rank == (628 + 2232 + 600) * 4);
  // Throughout: 128 + 16 + 96 + local chunk 48 + 384 = 672. Attention:
  // 3*32 + 32 + 64 = 192; MLP: 2*4*16 + 64 = 192.
  CHECK(t.activation_bytes_per_rank == (672 + 192) * 4);
  // 2 all-reduces of 2*4*8 = 64, each sending 2*(1/2)*64 = 64.
  CHECK(t.comm_tp == 128 * 4);
  // adaLN all-gather: 2*48 * 1/2.
  CHECK(t.comm_gather == 48 * 4);
  CHECK(t.comm_bytes_per_step_per_rank == 176 * 4);

  // cp2: b = 1. Throughout 64 + 8 + 48 + 192 = 312; attention 96+32+32 =
  // 160 = MLP 128+32. Eps exchange: 1*4*16 = 64.
  const PlanRow c = plan_layout(Layout{1, 2, 1}, tiny(), 1, true, 4);
  CHECK(c.batch_per_rank == 1);
  CHECK(c.activation_bytes_per_rank == (312 + 160) * 4);
  CHECK(c.comm_cp == 64 * 4);
  CHECK(c.comm_bytes_per_step_per_rank == 64 * 4);

  CHECK_THROWS_AS(plan_layout(Layout{1, 2, 1}, tiny(), 1, false, 4), ConfigError);
}

TEST_CASE("per-step communication against the issue's formulas") {
  // "Ulysses 4/N*O(p*hs)*L, ring 2*O(p*hs)*L, tp 4*O(p*hs)*L" with p*hs =
  // b*N*D; ours counts only what leaves the rank, so each is the formula
  // times (n-1)/n (even shards).
  for (int64_t image : {256, 512}) {
    const Workload m = dit_xl(image);
    CAPTURE(image);
    const double b = 2, bytes = 4, n = 8;
    const double phs_l = b * m.tokens * m.hidden() * m.layers * bytes;
    const double keep = (n - 1) / n;
    CHECK(plan_layout(Layout{8, 1, 1, parallel::SpMode::kUlysses}, m, 1, true).comm_sp == doctest::Approx(4 / n * phs_l * keep));
    CHECK(plan_layout(Layout{8, 1, 1, parallel::SpMode::kRing}, m, 1, true).comm_sp == doctest::Approx(2 * phs_l * keep));
    CHECK(plan_layout(Layout{1, 1, 8}, m, 1, true).comm_tp == doctest::Approx(4 * phs_l * keep));
  }
  // DiT-XL/2-256 on 8 ranks, in bytes: b*N*D*L*4 = 66,060,288.
  const Workload m = dit_xl(256);
  CHECK(plan_layout(Layout{8, 1, 1, parallel::SpMode::kUlysses}, m, 1, true).comm_sp == 28901376);
  CHECK(plan_layout(Layout{8, 1, 1, parallel::SpMode::kRing}, m, 1, true).comm_sp == 115605504);
  CHECK(plan_layout(Layout{1, 1, 8}, m, 1, true).comm_tp == 231211008);
}

TEST_CASE("plan of every valid layout and its table") {
  const auto rows = plan_valid_layouts(8, dit_xl(256), 1, 4.0);
  REQUIRE(rows.size() == 12);
  for (const PlanRow& r : rows)
    CHECK(r.comm_bytes_per_step_per_rank == doctest::Approx(r.comm_sp + r.comm_tp + r.comm_cp + r.comm_gather));
  const std::string table = format_plan_table(rows, "DiT-XL-2-256, 8 ranks");
  CHECK(table.rfind("DiT-XL-2-256, 8 ranks\nlayout", 0) == 0);
  for (const PlanRow& r : rows) {
    std::string row_start = "\n";  // built by += : GCC 12 warns falsely on "\n" + string
    row_start += r.layout.short_str() + " ";
    CHECK(table.find(row_start) != std::string::npos);
  }

  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(28901376) == "27.56 MiB");
  CHECK(format_bytes(3.0 * 1024 * 1024 * 1024) == "3.00 GiB");
}

TEST_CASE("tiny model, PipeFusion pp2 x tp2, by hand") {
  Workload m = tiny();
  m.layers = 3;  // stage 0 (rank 0) holds layers 0 and 1, stage 1 layer 2
  // pp2: b = 2, N = 4 rows every step (the warm-up runs the whole image).
  const PlanRow r = plan_layout(Layout{1, 1, 1, parallel::SpMode::kUlysses, 2}, m, 1, true, 4);
  CHECK(r.weight_bytes_per_rank == (2 * (1256 + 2232) + 600) * 4);
  // The single-process peak 944, + kept keys and values 2 layers * 2 * (2*4*8)
  // = 256, + the output every stage receives 2*4*32 = 256.
  CHECK(r.stale_kv_bytes == 256 * 4);
  CHECK(r.activation_bytes_per_rank == (944 + 512) * 4);
  // Each step rank 0 sends every patch's residual rows on: 2*4*8; the last
  // stage broadcasts the output 2*4*32 to the one other stage.
  CHECK(r.comm_pp == 64 * 4);
  CHECK(r.comm_bytes_per_step_per_rank == 64 * 4);
  CHECK(r.comm_pp_last == 256 * 4);
  CHECK(r.pipeline_bubble == doctest::Approx(1.0 / 3));  // M = pp = 2: 1 idle slot of 3

  // With tp2 the per-layer terms count rank 0's 2 layers: 2 all-reduces of
  // 64 floats sending 64 each, and the adaLN gather of 48, per layer.
  const PlanRow t = plan_layout(Layout{1, 1, 2, parallel::SpMode::kUlysses, 2, 6}, m, 1, true, 4);
  CHECK(t.weight_bytes_per_rank == (2 * (628 + 2232) + 600) * 4);
  CHECK(t.comm_tp == 2 * 128 * 4);
  CHECK(t.comm_gather == 2 * 48 * 4);
  CHECK(t.comm_bytes_per_step_per_rank == (2 * 176 + 64) * 4);
  CHECK(t.pipeline_bubble == doctest::Approx(1.0 / 7));  // 6 patches: 1 idle slot of 7
  const std::string table = format_plan_table({r, t});
  CHECK(table.find("pp hops") != std::string::npos);
  CHECK(table.find("pp2 x tp2 (6 patches)") != std::string::npos);
}

TEST_CASE("tiny model, ring sp2 with sp_weights 2:1, by hand") {
  // N = 4 tokens shared 2:1: 8/3 = 2 r 2, 4/3 = 1 r 1 -> rank 0 gets the
  // leftover: p = 3, p1 = 1. b = 2, Dt = 8.
  Layout l{2, 1, 1, parallel::SpMode::kRing};
  l.sp_weights = {2, 1};
  const PlanRow r = plan_layout(l, tiny(), 1, true, 4);
  CHECK(r.tokens_per_rank == 3);
  // Rank 0 passes on every K/V block but rank 1's: 2*2*(4-1)*8.
  CHECK(r.comm_sp == 96 * 4);
  // The output gather: rank 0's 3 tokens to the other rank, 2*3*32.
  CHECK(r.comm_gather == 192 * 4);
  // Even shares for comparison: p = p1 = 2: 2*2*2*8 = 64 and 2*2*32 = 128.
  const PlanRow even = plan_layout(Layout{2, 1, 1, parallel::SpMode::kRing}, tiny(), 1, true, 4);
  CHECK(even.comm_sp == 64 * 4);
  CHECK(even.comm_gather == 128 * 4);
}

TEST_CASE("PipeFusion pp2 with sp_weights 2:1 gives stage 0 two thirds of the layers") {
  Workload m = tiny();
  m.layers = 6;
  Layout l{1, 1, 1, parallel::SpMode::kUlysses, 2};
  l.sp_weights = {2, 1};
  CHECK(plan_layout(l, m, 1, true, 4).weight_bytes_per_rank == (4 * (1256 + 2232) + 600) * 4);
  l.sp_weights = {1, 2};
  CHECK(plan_layout(l, m, 1, true, 4).weight_bytes_per_rank == (2 * (1256 + 2232) + 600) * 4);
}


TEST_CASE("quantized layers: the split matrices at their bytes per element, the rest at the weights' size") {
  const Workload m = tiny();  // 1 layer, 1256 split + 2232 whole per layer, 600 once
  ElementSizes q8(4, 4);
  q8.layer_matrices = 34.0 / 32.0;  // Q8_0 blocks: 32 int8 values and a float16 scale
  for (const int tp : {1, 2}) {
    CAPTURE(tp);
    const Layout l{1, 1, tp, parallel::SpMode::kUlysses};
    CHECK(plan_layout(l, m, 1, true, q8).weight_bytes_per_rank ==
          doctest::Approx(1256.0 / tp * 34 / 32 + 2232 * 4 + 600 * 4));
  }
}
