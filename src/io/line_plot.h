// A small line-plot rasteriser for diagnostics (--pab-analyze): axes, a
// light grid, numeric tick labels in the built-in 5x7 bitmap font, one
// coloured polyline per series and a legend of colour swatches, written as
// PNG. No font files, no plotting library.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ditgen::io {

struct PlotSeries {
  std::array<uint8_t, 3> rgb;
  std::vector<std::pair<double, double>> points;  // (x, y), x increasing
};

// Writes a width x height PNG (atomically) with every series on shared axes;
// y from 0 to the largest value. `text` goes into the PNG's tEXt chunks.
void write_line_plot(const std::string& path, const std::vector<PlotSeries>& series, int width, int height,
                     const std::vector<std::pair<std::string, std::string>>& text = {});

}  // namespace ditgen::io
