# All set-up happens here: a fresh machine needs only Python 3.11.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup browser gl slurm sb3 demo test test-sb3 lint docs bench clean

# Bytecode: a module's .pyc is written when a process first imports it, in every recipe
# here, also where the machine sets PYTHONDONTWRITEBYTECODE (without .pyc files every
# process compiles jax & co. again: 2 s -> 5 s). Compiling every installed file instead
# (uv's --compile-bytecode: 23k files, ray's, torch's and mlflow's included) took 24 s
# of a fresh set-up and 11 s of the SB3 extra's, against 2 s each without it; importing
# every telapa module after the install (WARM_BYTECODE) writes the 1.8k that `telapa`
# itself imports in 7-10 s, so that later commands run warm whatever the machine sets.
unexport PYTHONDONTWRITEBYTECODE
WARM_BYTECODE := import importlib, pkgutil, telapa; [importlib.import_module(m.name) \
  for m in pkgutil.walk_packages(telapa.__path__, "telapa.") \
  if not m.name.endswith(("__main__", ".sb3"))]

# uv (pinned in requirements.lock) installs the locked packages in seconds, where pip took
# 1-2 minutes of every fresh `make test`; pip stays in the environment for the tests that
# build wheels. telapa.envs.sb3 needs the bench extra (below): not imported here.
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python \
	  -c requirements.lock -e ".[dev,ray,slurm,tracking,docs]"
	$(BIN)/python -c '$(WARM_BYTECODE)'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/telapa demo

# The report test opens index.html in headless Chromium (Debian: chromium, chromium-driver).
BROWSER_PKGS := chromium chromium-driver

# $(call apt_need,PACKAGES,WHAT): installs the Debian PACKAGES that are missing (as root),
# or fails naming them and WHAT needs them.
define apt_need
	@missing=$$(for pkg in $(1); do \
	  dpkg-query -W -f='$${Status}' $$pkg 2>/dev/null | grep -q 'ok installed' || echo $$pkg; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "error: $(2) need(s) the Debian packages" $$missing "(as root: apt-get install" $$missing")" >&2; exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; }; \
	fi
endef

browser:
	$(call apt_need,$(BROWSER_PKGS),the report's browser test)

# MuJoCo renders frames headless through EGL (telapa.envs.mujoco.render): the loader, Mesa's
# EGL and Mesa's drivers (software rendering where there is no GPU); the missing ones.
GL_PKGS := libegl1 libegl-mesa0 libgl1-mesa-dri

gl:
	$(call apt_need,$(GL_PKGS),headless MuJoCo rendering)

# `telapa sweep --backend slurm`'s tests start a one-node Slurm of their own (as root:
# tests/continual/slurm_cluster.py): Debian's Slurm daemons and clients, and munge.
SLURM_PKGS := slurm-wlm munge

slurm:
	$(call apt_need,$(SLURM_PKGS),the Slurm tests)

# Stable-Baselines3 and torch (the `bench` extra): the reference of the benchmarks and of
# the SB3 adapter's tests, installed on top of the set-up by `make test` and `make bench`
# (17 s from a local wheel). The lock pins torch's CPU build (torch==X+cpu), which PyPI does
# not serve: it comes from the wheel folders pip is configured with (PIP_FIND_LINKS, or
# find-links in pip's configuration) where one holds it, else from PyTorch's own index.
# Recursive (=): pip is asked only when the extra is installed, not at every make.
WHEEL_DIRS   = $(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
TORCH_WHEEL  = $(firstword $(foreach d,$(WHEEL_DIRS),$(wildcard $(d)/torch-*+cpu-*.whl)))
TORCH_SOURCE = $(if $(TORCH_WHEEL),--find-links $(dir $(TORCH_WHEEL)),--extra-index-url https://download.pytorch.org/whl/cpu)
SB3_STAMP   := $(VENV)/.installed-sb3

$(SB3_STAMP): $(STAMP)
	$(BIN)/uv pip install --quiet --python $(BIN)/python $(TORCH_SOURCE) \
	  -c requirements.lock -e ".[dev,ray,slurm,tracking,docs,bench]" \
	  || { echo "error: could not install the bench extra (SB3, $$(grep '^torch==' requirements.lock)) with $(TORCH_SOURCE): torch's CPU build is on PyTorch's index or in a local wheel folder (PIP_FIND_LINKS)" >&2; exit 1; }
	touch $(SB3_STAMP)

sb3: $(SB3_STAMP)

# TELAPA_REQUIRE: the SB3 tests run, never skip (tests/conftest.py).
test: $(STAMP) $(SB3_STAMP) browser gl slurm
	TELAPA_REQUIRE=stable_baselines3,torch $(BIN)/python -m pytest -n 2 --dist loadfile --durations=40

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples experiments

# The documentation site (guides + API reference) into site/; --strict: a broken link
# fails it. tests/test_docs.py builds it in make test.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

bench: $(SB3_STAMP)
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/ppo_throughput.py

# Only the tests that need SB3 and torch.
test-sb3: $(SB3_STAMP)
	$(BIN)/python -m pytest tests/envs/test_sb3_adapter.py tests/test_example_scripts.py

clean:
	rm -rf $(VENV) .pytest_cache site
