# The two commands: `make run` (the main job) and `make test` (the whole suite).
# Both work on a fresh clone: they create the virtualenv and install first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SOURCES := src codemojex/src tests bench examples

.PHONY: run test check lint fmt bench clean tls-deps browser-deps cluster docs docs-build

# Two distributions: echomq (the library, with every extra) and codemojex (the game, on echomq).
$(STAMP): pyproject.toml codemojex/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]' -e ./codemojex
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/codemojex up

# stunnel4 is the real TLS terminator the rediss:// test puts in front of the embedded server.
tls-deps:
	@command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1 || \
	  { echo "installing stunnel4 (TLS terminator for the rediss:// test)"; \
	    (apt-get update -qq && apt-get install -y -qq stunnel4 >/dev/null) || \
	    { echo "stunnel4 is needed by the TLS test: install it (apt-get install stunnel4)"; exit 1; }; }

# Debian's chromium: the browser tests drive it through Playwright (no browser download). Without
# fonts-noto-color-emoji every emoji renders as a box in headless chromium. Quick when both are
# there: one command lookup and one file test, no apt.
EMOJI_FONT := /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf
browser-deps:
	@missing=""; \
	  command -v chromium >/dev/null 2>&1 || missing=" chromium"; \
	  [ -f $(EMOJI_FONT) ] || missing="$$missing fonts-noto-color-emoji"; \
	  [ -z "$$missing" ] || { echo "installing$$missing (headless browser and emoji font for the browser tests)"; \
	    (apt-get update -qq && apt-get install -y -qq $$missing >/dev/null) || \
	    { echo "the browser tests need:$$missing (apt-get install$$missing)"; exit 1; }; }

check: $(STAMP)
	$(BIN)/ruff format --check $(SOURCES)
	$(BIN)/ruff check $(SOURCES)
	$(BIN)/mypy

test: check tls-deps browser-deps
	$(BIN)/pytest -n 2 --dist loadfile

fmt: $(STAMP)
	$(BIN)/ruff format $(SOURCES)
	$(BIN)/ruff check --fix $(SOURCES)

# A local Valkey Cluster (3 primaries + 1 replica each) on loopback: prints the seed URL, Ctrl-C stops it.
cluster: $(STAMP)
	$(BIN)/python -m echomq.server.cluster

# The documentation site (MkDocs Material + mkdocstrings), served on loopback with live reload.
# `make test` builds it with --strict (tests/unit/test_docs_site.py): warnings are errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# The site built once, strict, into an ignored folder (site/), as the test does.
docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(BIN)/python bench/wire.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
