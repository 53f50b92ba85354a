# Everything the service needs is installed by these targets: Python deps into .venv,
# Node 22, esbuild and npm into layers/runner/node_modules (all pinned by lock files).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNNER := layers/runner

.PHONY: setup run test lint clean

setup: $(VENV)/.installed $(RUNNER)/node_modules/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(RUNNER)/node_modules/.installed: $(RUNNER)/package.json $(RUNNER)/package-lock.json
	cd $(RUNNER) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The console's browser test drives Debian's Chromium (Playwright's own browser download is not
# used: it cannot be fetched here, and the distribution's build is the one users have).
CHROMIUM := /usr/bin/chromium

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	else echo "make test needs Debian's chromium for the console test: sudo apt-get install chromium" >&2; exit 1; fi

run: setup
	$(VENV)/bin/headwater serve

test: setup $(CHROMIUM)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(RUNNER)/node_modules .headwater
