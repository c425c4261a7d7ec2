# Two set-up commands, both starting from nothing but Python 3.11+ and make:
#   make demo   creates .venv, installs the locked dependencies and runs the demo
#   make test   creates .venv, installs the locked dependencies and runs lint, types, the docs build and tests
#   make docs   builds the documentation site into site/ (mkdocs, warnings as errors)
#   make experiments lists the papers' experiments (NAME=... ARGS=... runs one)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean browser docs experiments

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dpcube demo

lint: $(STAMP)
	$(BIN)/ruff check src experiments tests benchmarks examples tools
	$(BIN)/ruff format --check src experiments tests benchmarks examples tools
	$(BIN)/lint-imports
	$(BIN)/python tools/import_layers.py

typecheck: $(STAMP)
	$(BIN)/mypy

# The browser tests drive Debian's Chromium through its ChromeDriver (a browser download at run
# time does not work on these machines); install both when missing (needs root or sudo).
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
browser:
	@if [ ! -x $(CHROMIUM) ] || [ ! -x $(CHROMEDRIVER) ]; then \
	  echo "installing Debian's chromium and chromium-driver for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "make: the browser tests need $(CHROMIUM) and $(CHROMEDRIVER): run 'apt-get install chromium chromium-driver' as root" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

pytest: $(STAMP) browser
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

# The user documentation site (mkdocs.yml): site/, warnings as errors (not --quiet: it hides the
# warnings from --strict, which then passes a broken link).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: lint typecheck docs pytest

# The papers' experiments (experiments/, not part of the installed package): with no NAME, the
# list; `make experiments NAME=privelet ARGS="--data-dir ../shared/data --out results/"` runs one.
experiments: $(STAMP)
	$(BIN)/python -m experiments $(NAME) $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
