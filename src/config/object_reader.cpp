// See object_reader.h.
#include "config/object_reader.h"

#include <limits>

#include "config/did_you_mean.h"

namespace ditgen::config {
namespace {

using nlohmann::json;

std::string integer_expectation(int min) {
  if (min == 1) return "a positive integer";
  if (min == 0) return "a non-negative integer";
  return "an integer >= " + std::to_string(min);
}

const json& empty_object() {
  static const json empty = json::object();
  return empty;
}

}  // namespace

ObjectReader::ObjectReader(const json& object, std::string path, const ConfigContext& context)
    : object_(object), path_(std::move(path)), context_(context) {
  if (!object_.is_object()) context_.fail(path_, "expected an object, got " + describe_value(object_));
}

const json* ObjectReader::find(const std::string& key) const {
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

ObjectReader ObjectReader::section(const std::string& key) const {
  const json* value = find(key);
  return ObjectReader(value ? *value : empty_object(), path_of(key), context_);
}

int ObjectReader::integer(const std::string& key, int fallback, int min) const {
  const json* value = find(key);
  return value ? read_integer(*value, path_of(key), min, context_) : fallback;
}

std::uint64_t ObjectReader::unsigned64(const std::string& key, std::uint64_t fallback) const {
  const json* value = find(key);
  if (!value) return fallback;
  // nlohmann keeps non-negative integers as number_unsigned (up to 2^64-1);
  // a larger literal becomes a float and fails here.
  if (!value->is_number_unsigned())
    context_.fail(path_of(key), "expected a non-negative integer, got " + describe_value(*value));
  return value->get<std::uint64_t>();
}

double ObjectReader::number(const std::string& key, double fallback, double min,
                            bool min_exclusive) const {
  const json* value = find(key);
  if (!value) return fallback;
  const double x = read_number(*value, path_of(key), context_);
  if (min_exclusive ? !(x > min) : !(x >= min)) {
    std::string expectation = min == 0 ? (min_exclusive ? "a positive number" : "a non-negative number")
                                       : std::string("a number ") + (min_exclusive ? "> " : ">= ") +
                                             json(min).dump();
    context_.fail(path_of(key), "expected " + expectation + ", got " + describe_value(*value));
  }
  return x;
}

bool ObjectReader::boolean(const std::string& key, bool fallback) const {
  const json* value = find(key);
  if (!value) return fallback;
  if (!value->is_boolean())
    context_.fail(path_of(key), "expected true or false, got " + describe_value(*value));
  return value->get<bool>();
}

std::string ObjectReader::string(const std::string& key, const std::string& fallback) const {
  const json* value = find(key);
  if (!value) return fallback;
  if (!value->is_string()) context_.fail(path_of(key), "expected a string, got " + describe_value(*value));
  return value->get<std::string>();
}

std::string ObjectReader::required_string(const std::string& key, const std::string& what_it_is) const {
  const json* value = find(key);
  if (!value) context_.fail(path_of(key), "required (" + what_it_is + ")");
  const std::string text = string(key, "");
  if (text.empty()) context_.fail(path_of(key), "expected a non-empty string (" + what_it_is + ")");
  return text;
}

std::string ObjectReader::choice(const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& allowed) const {
  const json* value = find(key);
  if (!value) return fallback;
  const bool is_string = value->is_string();
  const std::string text = is_string ? value->get<std::string>() : "";
  for (const auto& option : allowed)
    if (is_string && text == option) return text;
  std::string list;
  for (const auto& option : allowed) list += (list.empty() ? "\"" : ", \"") + option + "\"";
  std::string message = "expected one of " + list + ", got " + describe_value(*value);
  if (is_string) {
    const std::string suggestion = closest_match(text, allowed);
    if (!suggestion.empty()) message += " (did you mean \"" + suggestion + "\"?)";
  }
  context_.fail(path_of(key), message);
}

int read_integer(const json& value, const std::string& path, int min, const ConfigContext& context) {
  // 50.0 is refused: a count written as a float is more likely a mistaken
  // field than a count.
  if (!value.is_number_integer())
    context.fail(path, "expected " + integer_expectation(min) + ", got " + describe_value(value));
  // nlohmann keeps non-negative literals as unsigned and negative ones as
  // signed; compare each in its own type so nothing wraps.
  const bool is_unsigned = value.is_number_unsigned();
  const bool too_large = is_unsigned ? value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<int>::max())
                                     : value.get<std::int64_t>() > std::numeric_limits<int>::max();
  const bool too_small = is_unsigned ? min > 0 && value.get<std::uint64_t>() < std::uint64_t(min)
                                     : value.get<std::int64_t>() < min;
  if (too_small) context.fail(path, "expected " + integer_expectation(min) + ", got " + describe_value(value));
  if (too_large)
    context.fail(path, "expected " + integer_expectation(min) + " up to " +
                           std::to_string(std::numeric_limits<int>::max()) + ", got " + describe_value(value));
  return value.get<int>();
}

double read_number(const json& value, const std::string& path, const ConfigContext& context) {
  if (!value.is_number()) context.fail(path, "expected a number, got " + describe_value(value));
  return value.get<double>();
}

const json& read_array(const json& value, const std::string& path, const ConfigContext& context) {
  if (!value.is_array()) context.fail(path, "expected a list (JSON array), got " + describe_value(value));
  return value;
}

}  // namespace ditgen::config
