# One place for the project's tooling. `make demo` and `make test` are the README's
# quick start: each sets up .venv (once) and runs its job.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format bench bench-quick bench-ref bench-clean docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/helix demo

# The real agent CLIs, pinned, for the plugin and agent-runner tests. Both live
# in .cache/npm: each install is recorded (exact version) in
# .cache/npm/package.json, so installing one never removes the other. A CLI is
# reinstalled when its installed version is not the pinned one. Without npm a
# note is printed and the tests that need the CLI skip.
NPM_PREFIX := .cache/npm
CLAUDE_CODE_VERSION := 2.1.329
CLAUDE_BIN := $(NPM_PREFIX)/node_modules/.bin/claude
CODEX_VERSION := 0.169.0
CODEX_BIN := $(NPM_PREFIX)/node_modules/.bin/codex

# $(call npm-cli,package,version,binary)
define npm-cli
	@if [ -x $(3) ] && grep -q '"version": "$(2)"' $(NPM_PREFIX)/node_modules/$(1)/package.json 2>/dev/null; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		echo "installing $(1)@$(2) into $(NPM_PREFIX)"; \
		npm install --prefix $(NPM_PREFIX) --no-audit --no-fund --save-exact $(1)@$(2) \
			|| echo "note: could not install $(1)@$(2) (no route to the npm registry?); the tests that drive it will skip"; \
	else \
		echo "note: npm not found, so $(1) is not installed; the tests that drive it will skip"; \
	fi
endef

.PHONY: claude-cli codex-cli
claude-cli:
	$(call npm-cli,@anthropic-ai/claude-code,$(CLAUDE_CODE_VERSION),$(CLAUDE_BIN))

codex-cli:
	$(call npm-cli,@openai/codex,$(CODEX_VERSION),$(CODEX_BIN))

# VERIFY runs under bubblewrap in projects whose agents are sandboxed, and Claude
# Code's own sandbox needs bubblewrap and socat. As root with apt-get (CI on a
# fresh Debian) the missing ones are installed; otherwise a note is printed and
# the sandbox tests skip with the reason.
SANDBOX_LOG := .cache/apt-sandbox.log

.PHONY: sandbox-tools
sandbox-tools:
	@pkgs=""; \
	command -v bwrap >/dev/null 2>&1 || pkgs="$$pkgs bubblewrap"; \
	command -v socat >/dev/null 2>&1 || pkgs="$$pkgs socat"; \
	if [ -z "$$pkgs" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing$$pkgs (apt-get)"; mkdir -p $(dir $(SANDBOX_LOG)); \
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$pkgs; } >$(SANDBOX_LOG) 2>&1; then \
			tail -n 5 $(SANDBOX_LOG); \
			echo "note: could not install$$pkgs; the sandbox tests will skip"; \
		fi; \
	else \
		echo "note:$$pkgs missing (installing needs root and apt-get); the sandbox tests will skip"; \
	fi

# The tests run every store test on PostgreSQL too, in a cluster of their own
# (tests/pgserver.py). As root with apt-get, a missing server is installed from
# Debian (without the cluster Debian would create and start); otherwise a note
# is printed and the PostgreSQL tests skip (under CI they fail instead).
PG_LOG := .cache/apt-postgres.log

.PHONY: postgres-tools
postgres-tools:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing postgresql (apt-get)"; mkdir -p $(dir $(PG_LOG)) /etc/postgresql-common; \
		[ -f /etc/postgresql-common/createcluster.conf ] || \
			echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf; \
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends postgresql; } >$(PG_LOG) 2>&1; then \
			tail -n 5 $(PG_LOG); \
			echo "note: could not install postgresql; the PostgreSQL tests will skip"; \
		fi; \
	else \
		echo "note: PostgreSQL server missing (installing needs root and apt-get); the PostgreSQL tests will skip"; \
	fi

# The dashboard's browser tests drive headless Chromium through Selenium (which
# the dev extra installs). As root with apt-get, missing chromium or chromedriver
# is installed from Debian; otherwise a note is printed and the browser tests skip
# (under CI they fail instead).
BROWSER_LOG := .cache/apt-browser.log

.PHONY: browser-tools
browser-tools:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium and chromium-driver (apt-get)"; mkdir -p $(dir $(BROWSER_LOG)); \
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends chromium chromium-driver; } >$(BROWSER_LOG) 2>&1; then \
			tail -n 5 $(BROWSER_LOG); \
			echo "note: could not install chromium; the browser tests will skip"; \
		fi; \
	else \
		echo "note: chromium or chromedriver missing (installing needs root and apt-get); the browser tests will skip"; \
	fi

# pytest exits 5 when it collected no tests: say so instead of failing obscurely.
test: install claude-cli codex-cli
	@$(BIN)/python -m pytest $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$code

# mypy reads its settings (and the files it checks: helix/) from pyproject.toml.
lint: install
	$(BIN)/ruff check helix tests benchmarks scripts
	$(BIN)/ruff format --check helix tests benchmarks scripts
	$(BIN)/mypy

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
	$(BIN)/python -m helix.cli.reference

clean:
	rm -rf $(VENV) build *.egg-info
