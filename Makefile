# One entry point for humans and CI. `make help` lists the targets.
#
# `make test` and `make tutorial` test what users get: scripts/setup.sh makes the virtual
# environment $(VENV), `pip install` builds this checkout into it (CMake build kept in
# $(PIP_BUILD_DIR), so a reinstall is incremental and the C++ test binaries come from the same
# build), and the tests import the installed package (no PYTHONPATH).
# In-tree development: `make build` builds into $(BUILD_DIR) and copies the core and binding into
# python/tessera; test-cpp, test-lit and test-python test that build (PYTHONPATH=python).
BUILD_DIR ?= build
PIP_BUILD_DIR ?= build-pip
VENV ?= .venv
PYTHON ?= python3
JOBS ?= $(shell nproc)
VPY := $(VENV)/bin/python
# ccache, where installed, makes rebuilds in other checkouts (git worktrees beside this one) cheap.
CCACHE := $(shell command -v ccache 2>/dev/null)
CMAKE_ARGS ?= $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
PIP_CMAKE_ARGS ?= $(if $(CCACHE),-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR ?= $(abspath $(CURDIR)/..)
IN_TREE := PYTHONPATH=$(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))
LIT := -c "from lit.main import main; main()" -sv tests/lit

.PHONY: help setup install build test test-cpp test-lit test-python tutorial gpu clean lint format \
	lint-tools

help:
	@echo "make setup      install system packages (apt), make the virtual environment $(VENV) (+ torch)"
	@echo "make install    pip install this checkout into $(VENV) (builds the C++ core with CMake)"
	@echo "make test       install, then C++ unit tests, lit tests and Python tests against it (CI)"
	@echo "make tutorial   install, then tutorials/01-vector-add.py (GPU if present, else interpreter)"
	@echo "make build      in-tree development build (python/tessera; run with PYTHONPATH=python)"
	@echo "make test-cpp|test-lit|test-python   the tests against the in-tree build"
	@echo "make lint       ruff, mypy (python/tessera) and a clang-format check of cpp/ (CI)"
	@echo "make format     ruff's safe fixes and clang-format -i on cpp/ (Python is not reformatted)"
	@echo "make gpu        (GPU machine) install the carried artifact, run GPU tests and benchmarks"

setup:
	VENV=$(VENV) ./scripts/setup.sh

install: setup
	$(VPY) -m pip install --no-build-isolation -C build-dir=$(PIP_BUILD_DIR) \
	    -C cmake.define.TESSERA_BUILD_TESTS=ON $(PIP_CMAKE_ARGS) .
	@cd / && env -u PYTHONPATH $(abspath $(VPY)) -c \
	    "import tessera; print('installed tessera', tessera.__version__, 'at', tessera.__file__)"

test: install
	$(PIP_BUILD_DIR)/bin/tessera-cpp-tests --gtest_brief=1
	env -u PYTHONPATH $(VPY) $(LIT) --param tessera_opt=$(abspath $(VENV))/bin/tessera-opt
	env -u PYTHONPATH $(VPY) -m pytest -q tests/python

tutorial: install
	env -u PYTHONPATH $(VPY) tutorials/01-vector-add.py

build:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)

test-cpp: build
	$(BUILD_DIR)/bin/tessera-cpp-tests --gtest_brief=1

test-lit: build
	$(PYTHON) $(LIT) --param tessera_opt=$(abspath $(BUILD_DIR))/bin/tessera-opt

test-python: build
	$(IN_TREE) $(PYTHON) -m pytest -q tests/python

gpu:
	./scripts/gpu.sh

# Lint tools (pinned in requirements-dev.txt; `make setup` installs them into $(VENV)): taken from
# $(VENV)/bin when there, else from PATH. `make lint` installs nothing; it names what is missing.
lint_tool = $(firstword $(wildcard $(VENV)/bin/$(1)) $(shell command -v $(1) 2>/dev/null) $(1))
RUFF ?= $(call lint_tool,ruff)
MYPY ?= $(call lint_tool,mypy)
CLANG_FORMAT ?= $(call lint_tool,clang-format)
# clang-format's output changes between releases: the check needs the pinned one.
CLANG_FORMAT_VERSION := $(shell sed -n 's/^clang-format==//p' requirements-dev.txt)
CPP_SOURCES = $(shell git ls-files 'cpp/*.cpp' 'cpp/*.h')

lint-tools:
	@missing=""; for t in $(RUFF) $(MYPY) $(CLANG_FORMAT); do \
	    command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	    echo "make lint: missing$$missing; install the pinned tools with" \
	         "'make setup' or '$(VENV)/bin/python -m pip install -r requirements-dev.txt'" >&2; \
	    exit 1; fi
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION)" || { \
	    echo "make lint: $(CLANG_FORMAT) is not clang-format $(CLANG_FORMAT_VERSION)" \
	         "(requirements-dev.txt); other releases format differently" >&2; exit 1; }

lint: lint-tools
	$(RUFF) check .
	$(MYPY)
	@echo "$(CLANG_FORMAT) --dry-run -Werror <the $(words $(CPP_SOURCES)) files of cpp/>"
	@$(CLANG_FORMAT) --dry-run -Werror $(CPP_SOURCES)

format: lint-tools
	$(RUFF) check --fix .
	@echo "$(CLANG_FORMAT) -i <the $(words $(CPP_SOURCES)) files of cpp/>"
	@$(CLANG_FORMAT) -i $(CPP_SOURCES)

clean:
	rm -rf $(BUILD_DIR) $(PIP_BUILD_DIR) python/tessera/_lib python/tessera/_tessera*.so
