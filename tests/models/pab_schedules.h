// The PAB schedule the model tests run a repeated step under: each given
// kind configured for layers 0 and 1, range 2 over every timestep, so a
// second step at the same timestep reuses every branch the first computed.
#pragma once
#include <initializer_list>

#include "pab/broadcast.h"

namespace ditgen::testing {

inline pab::Schedule reuse_every_branch(std::initializer_list<pab::Kind> kinds) {
  pab::Schedule s;
  for (pab::Kind k : kinds) {
    s[k].configured = true;
    s[k].range = 2;
    s[k].lo = 0;
    s[k].hi = 1000;
    s[k].blocks = {0, 1};
  }
  return s;
}

}  // namespace ditgen::testing
