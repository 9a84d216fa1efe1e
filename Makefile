# Entry points. `make demo` and `make test` work on a fresh Debian 12 machine: they install the Debian
# packages nvfp4lm needs (scripts/setup-deps.sh), configure, build, then run.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
# ON with a GPU, EMULATE with the CUDA toolkit but no GPU (every CUDA test runs on the CPU against the emulated
# device, docs/cuda-emulation.md), OFF without CUDA: scripts/cuda-mode.sh. Override with CUDA=ON|OFF|EMULATE.
CUDA ?= $(shell scripts/cuda-mode.sh)

.PHONY: all deps configure build test test-all demo clean deps-fuzz configure-asan build-asan test-asan fuzz \
  deps-arm64 configure-arm64 build-arm64 test-arm64 test-arm64-all demo-arm64

all: build

deps:
	@scripts/setup-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DNVFP4LM_CUDA=$(CUDA) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The default suite (everything except the "slow" label); in the emulated build that includes every CUDA test,
# twice (a second thread schedule, label "second-schedule").
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) -LE slow $(CTEST_ARGS)

# Everything, slow checks included.
test-all: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) $(CTEST_ARGS)

demo: build
	$(BUILD)/nvfp4lm demo

clean:
	rm -rf $(BUILD)

# ---- sanitizers and fuzzing (README "Fuzzing and sanitizers"): clang, the CPU engine, ASan + UBSan -----------------
# One build serves both (-DNVFP4LM_FUZZ=ON, cmake/sanitize.cmake): the library, CLI and tests compiled with ASan +
# UBSan, and the fuzz_<target> executables, linked with libFuzzer against a copy of the library that also carries
# libFuzzer's coverage instrumentation (built only by `make fuzz`).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= $(ASAN_BUILD)
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
SANITIZER_CMAKE_ARGS = -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DNVFP4LM_CUDA=OFF -DNVFP4LM_BENCH=OFF -DNVFP4LM_FUZZ=ON
# A stack with every report; leaks in third-party runtimes only are suppressed (tests/fuzz/lsan.supp).
SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=1:check_initialization_order=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0

deps-fuzz:
	@scripts/setup-deps.sh fuzz

configure-asan: deps-fuzz
	cmake -S . -B $(ASAN_BUILD) $(SANITIZER_CMAKE_ARGS) $(CMAKE_ARGS)

build-asan: configure-asan
	cmake --build $(ASAN_BUILD) -j$(JOBS)

# The default suite (fuzz corpus replays included) under ASan + UBSan.
test-asan: build-asan
	$(SANITIZER_ENV) ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) -LE slow $(CTEST_ARGS)

# Every fuzz target (or FUZZ_TARGETS="dat hf_config") for FUZZ_SECONDS each, starting from its committed corpus;
# fails naming the target and the reproducer when one finds a crash, leak, timeout or out-of-memory.
fuzz: deps-fuzz
	cmake -S . -B $(FUZZ_BUILD) $(SANITIZER_CMAKE_ARGS) $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_targets
	$(SANITIZER_ENV) tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---- ARM64 (README "On a DGX Spark / ARM64") ---------------------------------------------------------------------
# The CPU engine cross-built for AArch64 Linux (cmake/toolchain-aarch64-linux-gnu.cmake: Debian's cross compiler and
# arm64 libraries through multiarch) and tested on this machine under qemu-user, every test and every nvfp4lm a test
# starts. qemu computes floating point in software, ~250x slower than natively: `make test-arm64` runs the default
# suite except the tests labelled `qemu-long` (seconds of float work here, hours under qemu; tests/CMakeLists.txt
# lists them and says how they were measured), `make test-arm64-all` runs them too (about a day on 2 cores; the demo
# is DemoLearns.*). QEMU_CPU=neoverse-n1 or cortex-a72 runs it on a CPU without I8MM / BF16 or without dotprod too.
# On an ARM64 machine itself `make demo` and `make test` are the commands (nothing here is needed).
# ARM64_LAYERS="ops model tokenizer" builds and runs those test folders only (what CI runs).
ARM64_BUILD ?= build-arm64
ARM64_LAYERS ?=
ARM64_CMAKE_ARGS = -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DNVFP4LM_CUDA=OFF -DNVFP4LM_MPI=OFF -DNVFP4LM_BENCH=OFF "-DNVFP4LM_TEST_LAYERS=$(ARM64_LAYERS)"
QEMU_AARCH64 = qemu-aarch64-static -L /

deps-arm64:
	@scripts/setup-deps.sh arm64

configure-arm64: deps-arm64
	cmake -S . -B $(ARM64_BUILD) $(ARM64_CMAKE_ARGS) $(CMAKE_ARGS)

build-arm64: configure-arm64
	cmake --build $(ARM64_BUILD) -j$(JOBS)

test-arm64: build-arm64
	$(QEMU_AARCH64) $(ARM64_BUILD)/nvfp4lm diagnose
	ctest --test-dir $(ARM64_BUILD) --output-on-failure --no-tests=error -j$(JOBS) -LE 'slow|qemu-long' $(CTEST_ARGS)

test-arm64-all: build-arm64
	$(QEMU_AARCH64) $(ARM64_BUILD)/nvfp4lm diagnose
	ctest --test-dir $(ARM64_BUILD) --output-on-failure --no-tests=error -j$(JOBS) -LE slow $(CTEST_ARGS)

demo-arm64: build-arm64
	$(QEMU_AARCH64) $(ARM64_BUILD)/nvfp4lm demo
