# Read by ctest after the discovered tests (tests/CMakeLists.txt appends it
# to TEST_INCLUDE_FILES last): the long end-to-end tests get the label
# "slow" (`ctest -LE slow` leaves them out of a quick run; CI runs them) and
# PROCESSORS 2, so `ctest -j2` runs each alone: two 2-thread OpenMP
# processes on 2 cores made the 180-caption quality test take 505 s against
# 90 s alone (issue 33). A high COST starts them first.
set(ditgen_slow_tests
    "pipeline:default video model: clips show the requested colour, shape and motion"
    "pipeline:default model: generated images show the requested colour and shape (>= 90%)")
foreach(name IN LISTS ditgen_slow_tests)
  set_tests_properties("${name}" PROPERTIES LABELS "pipeline;slow" PROCESSORS 2 COST 1000)
endforeach()
