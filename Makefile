# Entry points. `make demo` and `make test` work on a fresh Debian 12 machine: they install the Debian
# packages nvfp4lm needs (scripts/setup-deps.sh), configure, build, then run.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=
# ON with a GPU, EMULATE with the CUDA toolkit but no GPU (every CUDA test runs on the CPU against the emulated
# device, docs/cuda-emulation.md), OFF without CUDA: scripts/cuda-mode.sh. Override with CUDA=ON|OFF|EMULATE.
CUDA ?= $(shell scripts/cuda-mode.sh)

.PHONY: all deps configure build test test-all demo clean

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
