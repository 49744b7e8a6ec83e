# `make run`: simulate the shipped Figure 1 scenario; `make test`: lint + the default test suite.
# Both create .venv and install everything first (Mosquitto too, for the live-mode tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SCENARIO ?= topologies/figure1.yaml

.PHONY: venv run test test-slow test-ns3 lint system clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .  # `import streamglobe` and the `streamglobe` command from anywhere
	@echo "compiling the simulator's kernels once (numba; about 20 s, cached for every run)"
	$(PY) -c "from reports.runner import warm_up; print(f'compiled in {warm_up():.0f} s')"
	touch $@

# System packages: the Mosquitto broker (live mode), Java 17 (Spark) and Chromium (the report.html test),
# when missing.
system:
	@scripts/install-system.sh

run: venv
	$(PY) run.py run $(SCENARIO)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: venv system lint
	$(PY) -m pytest

# Long suites (Spark standalone cluster, broker restarts); CI runs them after `make test`.
test-slow: venv system
	$(PY) -m pytest -m slow; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# The link model against ns-3, copy by copy (tests/validation): installs the `ns3` package (about 500 MB
# unpacked) into .venv first.  Also part of `make test-slow` when the package is there.
test-ns3: venv
	$(PY) -m pip install --quiet ns3==3.44.post0
	$(PY) -m pytest -m slow tests/validation

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .hypothesis
