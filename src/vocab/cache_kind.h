// The step caches by name (cache.kind; docs/step-caches.md), one enum for
// the config that parses it and the pab layer that runs it: its names live
// in this one table.
#pragma once
#include "util/enum_names.h"

namespace ditgen {

enum class CacheKind {
  kFirstBlock,  // diffusers' FirstBlockCache: block 0's output residual decides
  kTeaCache,    // TeaCache: the rescaled change of the first block's modulated input, accumulated
};
inline constexpr EnumName<CacheKind> kCacheKindNames[] = {{CacheKind::kFirstBlock, "first_block"},
                                                          {CacheKind::kTeaCache, "teacache"}};
inline const char* name_of(CacheKind k) { return name_in(kCacheKindNames, k); }

}  // namespace ditgen
