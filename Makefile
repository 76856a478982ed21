# weft: `make` builds into build/, `make test` runs the whole suite (also under ASan+UBSan and the
# executor tests under TSan), `make demo` runs the main job, `make bench` the benchmarks.
# `make test` and `make demo` install what they need first (scripts/setup.sh, as root).

BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all build setup test test-fast test-asan test-tsan demo bench conformance fuzz clean

all: build

setup:
	@sh scripts/setup.sh

build:
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) -- --no-print-directory 2>&1 | grep -vE '^\[|^-- |Consolidate compiler generated' || true
	@test -x $(BUILD)/weft

demo: setup build
	@$(BUILD)/weft demo --trace $(BUILD)/demo-trace.json

# The suite in three builds: release, ASan+UBSan, TSan (executor and session tests).
test: setup
	@sh scripts/run-tests.sh all

test-fast: setup
	@sh scripts/run-tests.sh release

test-asan: setup
	@sh scripts/run-tests.sh asan

test-tsan: setup
	@sh scripts/run-tests.sh tsan

bench: setup build
	@sh scripts/run-bench.sh $(BUILD)

# ONNX backend node tests (generators from onnx on PyPI, via build/venv): per device passed/failed/
# unsupported/excluded and coverage; failing and unsupported tests in build/conformance-failures.txt.
conformance: setup
	@sh scripts/conformance.sh

# libFuzzer, clang + ASan/UBSan, on the ONNX loader, the .npy and safetensors readers and the graph
# builder's attributes: FUZZ_SECONDS (default 600) each; FUZZ_TARGETS="npy attrs" picks some.
fuzz: setup
	@sh scripts/fuzz.sh long

clean:
	rm -rf build build-asan build-tsan build-fuzz
