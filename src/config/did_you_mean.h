// Spelling suggestions for unknown keys and enumerated values: the closest
// candidate by optimal-string-alignment distance (Levenshtein plus adjacent
// transpositions, so "stpes" is one edit from "steps"), if it is close enough
// to be a plausible typo rather than a different word.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ditgen::config {

std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word` within a typo's reach, or "" when none is.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace ditgen::config
