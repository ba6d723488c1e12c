# The two commands that matter: `make demo` and `make test`.
# Everything bootstraps a local .venv with nothing but python3 and make.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help demo test lint typecheck arch unit docs docs-build bench bench-scale chaos conformance mutants real-vendors services clean format

help:
	@echo "make demo         run the demo: a simulated vendor API polled into ./watukuy-demo.db"
	@echo "make test         lint, strict type check, architecture contract, the docs site and the whole test suite"
	@echo "make docs         serve the documentation site on http://127.0.0.1:8000"
	@echo "make bench        benchmarks (figures, not pass/fail)"
	@echo "make chaos        long chaos sweep (SEEDS=200 STEPS=150), then the inbox crash loop (INBOX_RUNS=300)"
	@echo "make conformance  long conformance sweep on all four stores (EXAMPLES=10 STORES=all)"
	@echo "make mutants      every mutant of tests/guarantees/ledger.py must be killed (ONLY=name,...)"
	@echo "make real-vendors the long real-vendor run (DRF over PostgreSQL, json-server), figures"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "creating .venv"; $(PYTHON) -m venv $(VENV); }
	@echo "installing watukuy with every extra and the development tools into .venv (first run only)"
	$(BIN)/python -m pip install --quiet --upgrade 'pip>=25.1'
	$(BIN)/python -m pip install --quiet -e '.[all,postgres-binary]' --group dev
	touch $(STAMP)

# `watukuy demo` runs from a plain install: the demo gets the package and its runtime
# dependencies alone, in seconds, not the test tool chain. A .venv that already has the full
# set (make test) is used as it is. pip as the venv brings it is enough for `-e .`; only
# `--group` (the full set) needs a newer one. --no-compile: Python compiles the modules the
# demo imports as it imports them, instead of pip compiling every module of every package.
DEMO_STAMP := $(VENV)/.demo-installed
RUNTIME_DEPS = $(shell $(PYTHON) -c "import tomllib; print(len(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" 2>/dev/null || echo "its")

$(DEMO_STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "creating .venv"; $(PYTHON) -m venv $(VENV); }
	@echo "installing watukuy and its $(RUNTIME_DEPS) runtime dependencies into .venv (first run only)"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e .
	@touch $(DEMO_STAMP)

demo: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
	@echo "starting the demo: $(BIN)/watukuy demo (Ctrl-C stops it; run it again to resume)"
	@$(BIN)/watukuy demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --strict tests/typing
	$(BIN)/pyright

arch: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

# The documentation site (mkdocs.yml). --strict turns every warning into a failure: a broken
# link or anchor, a page left out of the nav, a docstring mkdocstrings cannot read.
DOCS_SITE := $(VENV)/site
export NO_MKDOCS_2_WARNING := 1
docs: $(STAMP)
	$(BIN)/mkdocs serve -a 127.0.0.1:8000

docs-build: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir $(DOCS_SITE)

test: lint typecheck arch docs-build
	scripts/ensure-browser
	$(BIN)/pytest -q

format: $(STAMP)
	$(BIN)/ruff format src tests bench scripts
	$(BIN)/ruff check --fix src tests bench scripts

bench: $(STAMP)
	$(BIN)/python -m bench

bench-scale: $(STAMP)
	$(BIN)/python -m bench.scale

SEEDS ?= 200
STEPS ?= 150
INBOX_RUNS ?= 300
chaos: $(STAMP)
	$(BIN)/python -m watukuy.testing.chaos --seeds $(SEEDS) --steps $(STEPS)
	$(BIN)/python tests/inbox/crash_loop.py --runs $(INBOX_RUNS) --databases sqlite,postgres

EXAMPLES ?= 10
STORES ?= all
ROUNDS ?= 30
conformance: $(STAMP)
	$(BIN)/python -m watukuy.testing.conformance --examples $(EXAMPLES) --stores $(STORES) --rounds $(ROUNDS) --quiet

mutants: $(STAMP)
	$(BIN)/python tests/guarantees/mutants.py $(if $(ONLY),--only $(ONLY))

# The real-vendor tier's long run: RV_RUNS runs of RV_WRITE s of writes each; ENGINE_PYTHON
# runs the engines with another checkout's interpreter (its .venv/bin/python); RV_RECIPES=toml
# runs only the pollers described in TOML (docs: only the docs' fetches).
RV_RUNS ?= 3
RV_WRITE ?= 120
real-vendors: $(STAMP)
	$(BIN)/python tests/real_vendors/run.py --runs $(RV_RUNS) --write $(RV_WRITE) \
		$(if $(ENGINE_PYTHON),--engine-python $(ENGINE_PYTHON)) $(if $(RV_JSON),--json $(RV_JSON)) \
		$(if $(RV_RECIPES),--recipes $(RV_RECIPES))

services:
	scripts/ensure-services

clean:
	rm -rf $(VENV) .venv-bench .pytest_cache .mypy_cache .ruff_cache .hypothesis site
