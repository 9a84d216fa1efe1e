# Sanitizer and fuzzing builds (README "Fuzzing and sanitizers"; `make test-asan`, `make fuzz`).
#   NVFP4LM_SANITIZE=ON  every C/C++ target built with AddressSanitizer + UndefinedBehaviorSanitizer. Any report
#                        halts the process (-fno-sanitize-recover=all), so a test fails instead of printing and
#                        passing. gcc or clang.
#   NVFP4LM_FUZZ=ON      the same (implied), plus the fuzz_<target> executables of tests/fuzz (built by the target
#                        fuzz_targets, not by `all`), linked with libFuzzer against a second copy of the library
#                        compiled with its coverage instrumentation (tests/fuzz/CMakeLists.txt). clang only. One
#                        build serves both the fuzzers and the sanitized test suite (make fuzz, make test-asan).
# Only the CPU engine (NVFP4LM_CUDA=OFF): the emulated CUDA device switches Boost.Context fibers, which ASan does
# not follow, and nvcc does not take these flags.
if(NVFP4LM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR
      "NVFP4LM_FUZZ=ON needs clang with libFuzzer, found ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER}: install it "
      "with `scripts/setup-deps.sh fuzz` and configure with -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "
      "(or run `make fuzz`)")
  endif()
  set(NVFP4LM_SANITIZE ON)
endif()

if(NVFP4LM_SANITIZE)
  if(NVFP4LM_HAVE_CUDA OR NVFP4LM_CUDA_EMULATION)
    message(FATAL_ERROR "NVFP4LM_SANITIZE / NVFP4LM_FUZZ build the CPU engine only: configure with -DNVFP4LM_CUDA=OFF")
  endif()
  set(NVFP4LM_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # Line tables for symbolized stack traces, at a fraction of the cost of full debug info.
  # (clang: and no "loop not vectorized" warning for each `omp simd` loop that the instrumentation keeps scalar).
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    list(APPEND NVFP4LM_SANITIZE_FLAGS -gline-tables-only -Wno-pass-failed)
  else()
    list(APPEND NVFP4LM_SANITIZE_FLAGS -g1)
  endif()
  # Assertions on in the headers we use: nlohmann's JSON_ASSERT turns a const operator[] on a missing key (a silent
  # out-of-bounds read that ASan only sometimes sees) into an abort, libstdc++'s checks bounds of operator[] and
  # front()/back(). nvfp4lm's own code never uses assert() (NVFP4LM_ASSERT throws), so NDEBUG changes nothing else.
  list(APPEND NVFP4LM_SANITIZE_FLAGS -UNDEBUG -D_GLIBCXX_ASSERTIONS)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${NVFP4LM_SANITIZE_FLAGS}>")
  add_link_options(-fsanitize=address,undefined)
  # lld links the large sanitized executables faster than ld.bfd.
  find_program(NVFP4LM_LLD NAMES ld.lld)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND NVFP4LM_LLD)
    add_link_options(-fuse-ld=lld)
  endif()
  message(STATUS "nvfp4lm: sanitizers on (${NVFP4LM_SANITIZE_FLAGS})")
endif()
