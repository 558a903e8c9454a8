# One entry point for humans and CI. `make help` lists the targets.
BUILD_DIR ?= build
PYTHON ?= python3
JOBS ?= $(shell nproc)
# ccache, where installed, makes rebuilds in other checkouts (git worktrees beside this one) cheap.
CCACHE := $(shell command -v ccache 2>/dev/null)
CMAKE_ARGS ?= $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR ?= $(abspath $(CURDIR)/..)
export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: help setup build test test-cpp test-lit test-python tutorial gpu clean

help:
	@echo "make setup      install system and Python dependencies (apt + pip; idempotent)"
	@echo "make build      configure and build the C++ core, tessera-opt and the Python module"
	@echo "make test       build, then run C++ unit tests, lit text tests and Python tests (CPU)"
	@echo "make tutorial   build, then run tutorials/01-vector-add.py (GPU if present, else interpreter)"
	@echo "make gpu        (GPU machine) build the binding, run GPU tests and benchmarks"

setup:
	./scripts/setup.sh

build:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)

test-cpp: build
	$(BUILD_DIR)/bin/tessera-cpp-tests --gtest_brief=1

test-lit: build
	$(PYTHON) -c "from lit.main import main; main()" -sv tests/lit --param tessera_opt=$(abspath $(BUILD_DIR))/bin/tessera-opt

test-python: build
	$(PYTHON) -m pytest -q tests/python

test: setup
	$(MAKE) test-cpp test-lit test-python

tutorial: setup build
	$(PYTHON) tutorials/01-vector-add.py

gpu:
	./scripts/gpu.sh

clean:
	rm -rf $(BUILD_DIR) python/tessera/_lib python/tessera/_tessera*.so
