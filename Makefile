# All set-up happens here: a fresh machine needs only Python 3.11.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup browser gl slurm demo test lint docs bench clean

# uv (pinned in requirements.lock) installs the locked packages in seconds, where pip took
# 1-2 minutes of every fresh `make test`; pip stays in the environment for the tests that
# build wheels. --compile-bytecode as pip does: without .pyc files (and with
# PYTHONDONTWRITEBYTECODE set) every Python process compiles jax & co. again, 2 s -> 5 s.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	  -c requirements.lock -e ".[dev,ray,slurm,tracking,docs]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/telapa demo

# The report test opens index.html in headless Chromium (Debian: chromium, chromium-driver).
CHROMEDRIVER := /usr/bin/chromedriver
BROWSER_PKGS := chromium chromium-driver

browser:
	@if [ ! -x $(CHROMEDRIVER) ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: $(CHROMEDRIVER) is missing; install the Debian packages $(BROWSER_PKGS) (as root: apt-get install $(BROWSER_PKGS))" >&2; exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(BROWSER_PKGS) \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(BROWSER_PKGS); }; \
	fi

# MuJoCo renders frames headless through EGL (telapa.envs.mujoco.render): the loader, Mesa's
# EGL and Mesa's drivers (software rendering where there is no GPU); the missing ones.
GL_PKGS := libegl1 libegl-mesa0 libgl1-mesa-dri

gl:
	@missing=$$(for pkg in $(GL_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || echo $$pkg; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: headless MuJoCo rendering needs the Debian packages" $$missing "(as root: apt-get install" $$missing")" >&2; exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }; \
	fi

# `telapa sweep --backend slurm`'s tests start a one-node Slurm of their own (as root:
# tests/continual/slurm_cluster.py): Debian's Slurm daemons and clients, and munge.
SLURM_PKGS := slurm-wlm munge

slurm:
	@missing=$$(for pkg in $(SLURM_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || echo $$pkg; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: the Slurm tests need the Debian packages" $$missing "(as root: apt-get install" $$missing")" >&2; exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }; \
	fi

test: $(STAMP) browser gl slurm
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=40

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# The documentation site (guides + API reference) into site/; --strict: a broken link
# fails it. tests/test_docs.py builds it in make test.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# Benchmarks install the reference implementations (SB3 + torch) on demand.
bench: $(STAMP)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python \
	  -c requirements.lock -e ".[dev,ray,bench]"
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/ppo_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache site
