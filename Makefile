# longread developer entry points. `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
# The fast loop's own stamp: no llama.cpp compile (no embedded model, no llama.cpp server).
FAST_STAMP = $(VENV)/.installed-fast

DEMO_QUESTION = What is the special magic number mentioned in the document?

.PHONY: install install-verl demo demo-pdf test test-fast lint bench clean

# Build llama.cpp with both cores; the first install compiles it (about 10 minutes), pip caches it.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local,eval,train,serve,docs,dev,test-serve,test-server]'
	touch $(STAMP) $(FAST_STAMP)

$(FAST_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[eval,train,serve,docs,dev,test-serve]'
	touch $(FAST_STAMP)

install: $(STAMP)

# verl (the GPU trainer longread plugs into) for its CPU tests. Not an extra: verl 0.9.1 pins a
# torch and transformers we do not use, so it goes in without its dependencies, plus the few
# packages its agent loop, advantage step and config code import (see docs/verl.md).
VERL_STAMP = $(VENV)/.installed-verl
$(VERL_STAMP): $(FAST_STAMP)
	$(BIN)/pip install --quiet "ray==2.60.0" "hydra-core>=1.3,<1.4" "datasets==5.2.0" \
		codetiming cachetools "dill<0.4.2" "multiprocess<0.70.20" xxhash pandas pyzmq \
		msgspec prometheus_client aiohttp orjson cloudpickle
	$(BIN)/pip install --quiet --no-deps "verl==0.9.1" "tensordict==0.10.0" \
		"torchdata==0.11.0" "TransferQueue==0.1.11" "pyvers==0.1.0"
	touch $(VERL_STAMP)

install-verl: $(VERL_STAMP)

demo: install
	$(BIN)/longread ask examples/needle.txt --question "$(DEMO_QUESTION)"

# A question about a PDF (examples/report.pdf, printed by chromium; 3 pages): the answer comes
# with the page it was read from ("Sources: p. 2"). With the `notes` prompts: the shipped
# adapter, trained on needles worded as RULER's, misses this wording with its own `paper`
# prompts (it keeps "No previous memory"); README, "Citations", has the measurements.
demo-pdf: install
	$(BIN)/longread ask examples/report.pdf --prompt-set notes \
		--question "What is the vault code of the Lisbon office?"

lint: install
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

# Debian's chromium for the viewer's browser test (Playwright, from the test-serve extra, drives
# it: nothing is downloaded). CI runs `make test` as root on a fresh Debian machine.
CHROMIUM_STAMP = $(VENV)/.installed-chromium
$(CHROMIUM_STAMP):
	command -v chromium >/dev/null || { apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }
	mkdir -p $(VENV) && touch $(CHROMIUM_STAMP)

# Every run takes a new random test order (pytest-randomly); `make test SEED=N` replays run N's.
ifndef SEED
SEED := $(shell $(PYTHON) -c 'import random; print(random.randrange(1 << 31))')
endif

test: lint $(VERL_STAMP) $(CHROMIUM_STAMP)
	@echo "test order: make test SEED=$(SEED) replays it"
	$(BIN)/pytest -q --randomly-seed=$(SEED)

# Unit tests and fake-server tests only: no model, no llama.cpp server, so no llama.cpp compile.
test-fast: $(FAST_STAMP) $(VERL_STAMP)
	$(BIN)/pytest -q -m "not model and not server"

bench: install
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
