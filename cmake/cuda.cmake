# Decides how the CUDA part of nvfp4lm is built. NVFP4LM_CUDA:
#   AUTO     (default) CUDA when nvcc is found, else the CPU-only engine
#   ON       CUDA; a missing nvcc is an error
#   OFF      the CPU-only engine
#   EMULATE  the .cu sources compiled by the host compiler against the emulated CUDA device (src/emu,
#            docs/cuda-emulation.md): every CUDA test and `--device cuda` run on the CPU. Needs the CUDA toolkit's
#            headers (not a GPU, not nvcc); when nvcc is there too, the .cu files are also compiled by nvcc as a
#            check (target nvfp4lm_cuda_compile_check, NVFP4LM_CUDA_COMPILE_CHECK).
# Sets NVFP4LM_HAVE_CUDA (CUDA host code and tests are built) and NVFP4LM_CUDA_EMULATION.
set(NVFP4LM_HAVE_CUDA OFF)
set(NVFP4LM_CUDA_EMULATION OFF)
set(NVFP4LM_CUDA_VALUES AUTO ON OFF EMULATE)
if(NOT NVFP4LM_CUDA IN_LIST NVFP4LM_CUDA_VALUES)
  message(FATAL_ERROR "NVFP4LM_CUDA=${NVFP4LM_CUDA}: use AUTO, ON, OFF or EMULATE")
endif()

if(NVFP4LM_CUDA STREQUAL "OFF")
  message(STATUS "nvfp4lm: CUDA disabled (NVFP4LM_CUDA=OFF)")
  return()
endif()

include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)

macro(nvfp4lm_enable_cuda_language)
  set(CMAKE_CUDA_ARCHITECTURES "${NVFP4LM_CUDA_ARCHS}")
  enable_language(CUDA)
  # CMake 3.25 does not know nvcc's C++20 flag (nvcc 12+ supports it): tell it, so targets that require
  # C++20 (through CXX_STANDARD or compile features) get -std=c++20 on their .cu files too.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endmacro()

if(NVFP4LM_CUDA STREQUAL "EMULATE")
  if(NOT CMAKE_CUDA_COMPILER AND NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit REQUIRED)
  find_package(Boost 1.74 REQUIRED COMPONENTS context)
  set(NVFP4LM_HAVE_CUDA ON)
  set(NVFP4LM_CUDA_EMULATION ON)
  option(NVFP4LM_CUDA_COMPILE_CHECK "Also compile the .cu files with nvcc (not linked)" ON)
  # Two of a real build's five architectures: sm_90a (Hopper, whose ptxas report of registers and spills
  # bench/NOTES.md records) and sm_121a (the DGX Spark's GB10: the only place the block-scaled FP4 mma.sync is
  # compiled rather than trapped, so ptxas checks its inline assembly); the five take about 3x the time of one (CI's
  # budget, docs/DEVELOPERS.md).
  set(NVFP4LM_CUDA_CHECK_ARCHS "90a-real;121a-real" CACHE STRING
      "CUDA architectures of the emulated build's nvcc compile check")
  if(NVFP4LM_CUDA_COMPILE_CHECK AND CMAKE_CUDA_COMPILER)
    nvfp4lm_enable_cuda_language()
    message(STATUS "nvfp4lm: CUDA emulated on the CPU (headers of CUDA ${CUDAToolkit_VERSION}); nvcc compile "
                   "check for ${NVFP4LM_CUDA_CHECK_ARCHS}")
  else()
    set(NVFP4LM_CUDA_COMPILE_CHECK OFF)
    message(STATUS "nvfp4lm: CUDA emulated on the CPU (headers of CUDA ${CUDAToolkit_VERSION}); no nvcc check")
  endif()
  return()
endif()

if(CMAKE_CUDA_COMPILER)
  nvfp4lm_enable_cuda_language()
  find_package(CUDAToolkit REQUIRED)
  set(NVFP4LM_HAVE_CUDA ON)
  message(STATUS "nvfp4lm: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${NVFP4LM_CUDA_ARCHS}")
elseif(NVFP4LM_CUDA STREQUAL "ON")
  message(FATAL_ERROR "NVFP4LM_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA toolkit "
                      "or configure with -DNVFP4LM_CUDA=OFF")
else()
  message(STATUS "nvfp4lm: nvcc not found, building the CPU-only engine")
endif()
