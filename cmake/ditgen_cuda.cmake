# The CUDA backend switch (docs/design.md §3): DITGEN_CUDA=AUTO|ON|OFF.
#   AUTO (default): on when a working nvcc is found (PATH, CUDACXX, or
#        /usr/local/cuda/bin/nvcc), else a CPU-only build as before.
#   ON:  the toolkit is required; configuring fails without it.
#   OFF: CPU-only.
# Sets DITGEN_WITH_CUDA and DITGEN_WITH_NCCL (TRUE/FALSE) for the root file,
# which builds the ditgen_cuda layer; with CUDA on, every target gets the
# compile definition DITGEN_WITH_CUDA=1 (and DITGEN_WITH_NCCL=1 with NCCL).
set(DITGEN_CUDA "AUTO" CACHE STRING "CUDA backend: AUTO (when nvcc is found) | ON | OFF")
set_property(CACHE DITGEN_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DITGEN_CUDA}" ditgen_cuda_mode)
if(NOT ditgen_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DITGEN_CUDA=${DITGEN_CUDA}: use AUTO, ON or OFF")
endif()

# The wanted GPU generations: Volta, Turing, Ampere (A100, consumer), Ada,
# Hopper; the newest also as PTX so later GPUs can JIT it. Honours the
# CUDAARCHS environment variable as CMake itself does. Archs the toolkit
# cannot target (CUDA 13 dropped sm_70) are left out with a STATUS line.
if(DEFINED ENV{CUDAARCHS})
  set(ditgen_default_archs "$ENV{CUDAARCHS}")
else()
  set(ditgen_default_archs "70;75;80;86;89;90")
endif()
set(DITGEN_CUDA_ARCHITECTURES "${ditgen_default_archs}" CACHE STRING
    "CUDA compute capabilities to build machine code for (the newest also as PTX)")

set(DITGEN_WITH_CUDA FALSE)
set(DITGEN_WITH_NCCL FALSE)
if(ditgen_cuda_mode STREQUAL "OFF")
  return()
endif()

include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(ditgen_nvcc_on_path nvcc NO_CACHE NO_DEFAULT_PATH PATHS ENV PATH)
  if(NOT ditgen_nvcc_on_path AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)  # the toolkit's default home, often not on PATH
  endif()
endif()
check_language(CUDA)  # tries nvcc on a test project; a broken toolkit counts as none
if(NOT CMAKE_CUDA_COMPILER)
  if(ditgen_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "DITGEN_CUDA=ON, but no working CUDA compiler was found: install the "
                        "CUDA toolkit, put nvcc on PATH or set CUDACXX (see CMakeFiles/CheckCUDA "
                        "for the failed test), or configure with -DDITGEN_CUDA=AUTO or OFF")
  endif()
  message(STATUS "DITGEN_CUDA=AUTO: no CUDA toolkit found, building CPU-only")
  return()
endif()

# CMAKE_CUDA_ARCHITECTURES from DITGEN_CUDA_ARCHITECTURES: the entries this
# nvcc can target (nvcc --list-gpu-arch prints compute_XX lines; an nvcc
# without the option is trusted), machine code (-real) for each and the
# newest also as PTX (a bare number). "native", "all" and "all-major" go to
# CMake as they are.
function(ditgen_resolve_cuda_architectures out)
  if(DITGEN_CUDA_ARCHITECTURES MATCHES "^(native|all|all-major)$")
    set(${out} ${DITGEN_CUDA_ARCHITECTURES} PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch
                  OUTPUT_VARIABLE listed RESULT_VARIABLE rc ERROR_QUIET)
  string(REGEX MATCHALL "compute_[0-9]+" listed "${listed}")
  string(REPLACE "compute_" "" listed "${listed}")
  set(kept "")
  set(dropped "")
  set(newest 0)
  foreach(arch IN LISTS DITGEN_CUDA_ARCHITECTURES)
    if(NOT arch MATCHES "^([0-9]+)[af]?$")  # 80, 90a, 100f (arch- or family-specific)
      message(FATAL_ERROR "DITGEN_CUDA_ARCHITECTURES: '${arch}' is not a compute capability such as 80 or 90a")
    endif()
    set(number ${CMAKE_MATCH_1})
    if(rc EQUAL 0 AND NOT number IN_LIST listed)
      list(APPEND dropped ${arch})
    else()
      list(APPEND kept ${arch})
      if(number GREATER newest)
        set(newest ${number})
        set(newest_arch ${arch})
      endif()
    endif()
  endforeach()
  if(dropped)
    message(STATUS "CUDA: ${CMAKE_CUDA_COMPILER} cannot target ${dropped}; left out of DITGEN_CUDA_ARCHITECTURES")
  endif()
  if(NOT kept)
    message(FATAL_ERROR "DITGEN_CUDA_ARCHITECTURES=${DITGEN_CUDA_ARCHITECTURES}: none of these can "
                        "be targeted by ${CMAKE_CUDA_COMPILER} (it lists: ${listed})")
  endif()
  set(archs "")
  foreach(arch IN LISTS kept)
    if(arch STREQUAL newest_arch)
      list(APPEND archs ${arch})
    else()
      list(APPEND archs ${arch}-real)
    endif()
  endforeach()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()
ditgen_resolve_cuda_architectures(CMAKE_CUDA_ARCHITECTURES)

# The shared cudart, as cuBLAS and NCCL use: one runtime in the process.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "CUDA backend on: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")

# C++20 in .cu files too, as in the host code (nvcc 12+ with GCC >= 10
# supports it). CMake falls back to CXX_STANDARD (20) for CUDA; before 3.26 it
# does not know nvcc's flag for that, so teach it.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# constexpr std:: functions (std::max, numeric_limits) in device code. No
# --use_fast_math: float32 results must match the CPU backend's.
add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
add_compile_definitions(DITGEN_WITH_CUDA=1)
set(DITGEN_WITH_CUDA TRUE)

# NCCL: in the toolkit's directories (CUDA 13 ships it there) or the system's.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  add_library(ditgen_nccl INTERFACE)
  target_include_directories(ditgen_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(ditgen_nccl INTERFACE ${NCCL_LIBRARY})
  add_compile_definitions(DITGEN_WITH_NCCL=1)
  set(DITGEN_WITH_NCCL TRUE)
  message(STATUS "NCCL: ${NCCL_LIBRARY}")
else()
  message(STATUS "NCCL not found (nccl.h, libnccl): building without the NCCL communicator")
endif()

# cuDNN's fused flash attention (kernels/cuda/attention_cudnn.cpp) through
# NVIDIA's header-only cudnn-frontend (scripts/install_cudnn_frontend.sh
# fetches the pinned headers into build-deps/, outside git).
# DITGEN_CUDNN_FRONTEND=AUTO (default): built when the headers and cudnn.h
# are found; ON: required; OFF: never. The frontend loads libcudnn.so.9 at
# run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): nothing links cuDNN, a
# machine without it runs the own flash kernel. Sets DITGEN_WITH_CUDNN_SDPA
# and, when on, the compile definition DITGEN_WITH_CUDNN_SDPA=1.
set(DITGEN_CUDNN_FRONTEND "AUTO" CACHE STRING "cuDNN attention via cudnn-frontend: AUTO | ON | OFF")
set_property(CACHE DITGEN_CUDNN_FRONTEND PROPERTY STRINGS AUTO ON OFF)
set(DITGEN_CUDNN_FRONTEND_DIR "${CMAKE_SOURCE_DIR}/build-deps/cudnn-frontend-1.32.0" CACHE PATH
    "Where scripts/install_cudnn_frontend.sh put the cudnn-frontend headers (DIR/include/cudnn_frontend.h)")
string(TOUPPER "${DITGEN_CUDNN_FRONTEND}" ditgen_cudnn_mode)
set(DITGEN_WITH_CUDNN_SDPA FALSE)
if(NOT ditgen_cudnn_mode STREQUAL "OFF")
  find_path(DITGEN_CUDNN_FRONTEND_INCLUDE cudnn_frontend.h
            HINTS ${DITGEN_CUDNN_FRONTEND_DIR}/include /opt/cudnn-frontend/include NO_DEFAULT_PATH)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(DITGEN_CUDNN_FRONTEND_INCLUDE AND CUDNN_INCLUDE_DIR)
    file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h ditgen_cudnn_major REGEX "define CUDNN_MAJOR [0-9]+")
    string(REGEX REPLACE ".* ([0-9]+)$" "\\1" ditgen_cudnn_major "${ditgen_cudnn_major}")
    if(ditgen_cudnn_major GREATER_EQUAL 9)
      set(DITGEN_WITH_CUDNN_SDPA TRUE)
      add_compile_definitions(DITGEN_WITH_CUDNN_SDPA=1)
      message(STATUS "cuDNN attention on: cudnn-frontend ${DITGEN_CUDNN_FRONTEND_INCLUDE}, cudnn.h ${CUDNN_INCLUDE_DIR}")
    endif()
  endif()
  if(NOT DITGEN_WITH_CUDNN_SDPA)
    set(ditgen_cudnn_why "needs the cudnn-frontend headers (scripts/install_cudnn_frontend.sh) and cuDNN 9's cudnn.h")
    if(ditgen_cudnn_mode STREQUAL "ON")
      message(FATAL_ERROR "DITGEN_CUDNN_FRONTEND=ON: cuDNN attention ${ditgen_cudnn_why}")
    endif()
    message(STATUS "cuDNN attention off: it ${ditgen_cudnn_why}; the own flash kernel runs instead")
  endif()
endif()
