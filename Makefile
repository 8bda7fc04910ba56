# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Each installs what it needs: a virtual environment with the Python dependencies, and the
# control-plane binaries (cache, official release, or a build from Go modules; see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test install binaries browser kind-deps

$(BIN)/draguard: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# setuptools reports every editable install with an informational UserWarning ("Editable
	# installation"); nothing to act on, so it is kept out of a new user's first screen.
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/draguard

binaries: install
	$(BIN)/draguard cluster build

demo: binaries
	$(BIN)/draguard demo

# The HTML report's browser tests drive Debian's headless Chromium; installed when missing and root,
# otherwise those tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the HTML report's browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium could not be installed: the browser tests will skip"; \
	  else echo "chromium is not installed and this is not root: the browser tests will skip"; fi; }

# The kind backend's tests run real nodes in containers: Debian's docker.io (a private dockerd when no
# docker or podman runs), debootstrap (the offline node image), busybox-static (the test pod's image)
# and iptables. Installed when missing and root, otherwise those tests skip and say why.
KIND_DEPS := docker.io:dockerd debootstrap:debootstrap busybox-static:busybox iptables:iptables

kind-deps:
	@missing=""; for pair in $(KIND_DEPS); do command -v $${pair#*:} >/dev/null 2>&1 || missing="$$missing $${pair%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing for the kind backend's tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "$$missing could not be installed: the kind tests will skip"; \
	  else echo "$$missing not installed and this is not root: the kind tests will skip"; fi; fi

test: binaries browser kind-deps
	$(BIN)/python -m draguard.harness.grpcapi.regen --check
	$(BIN)/lint-imports
	./.ci/typecheck
	# Three workers, each test file on one of them, longest first (tests/conftest.py): most of a
	# cluster test's time is waiting on the scenario's own clock, so three keep two cores busy. The
	# scenario library's file runs on one worker, so its CI report covers every scenario; cluster
	# tests start their own control planes.
	$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=30
