# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV := .venv
ORACLE := .venv-oracle
JAVA_ORACLE := .java-oracle
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test check lint venv oracle java-oracle chromium bench ui clean

# uv (from PyPI, into the venv) resolves and installs the same versions as pip in a tenth of the
# time; where it cannot be had, pip does the work.
UV := $(BIN)/uv
PIP_INSTALL = $(UV) pip install --quiet --compile-bytecode --python $(1) $(2) || $(1:python=pip) install --quiet --disable-pip-version-check $(2)

# Every test and benchmark starts Python processes by the hundred (step processes, writers, Dagster
# runs): with bytecode caching off each would compile its imports again (4.6 s instead of 1.1 s for
# `import paimon_core`), so the venvs are installed compiled and the recipes cache the repo's own.
unexport PYTHONDONTWRITEBYTECODE

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(UV) || $(BIN)/pip install --quiet --disable-pip-version-check uv || true
	$(call PIP_INSTALL,$(BIN)/python,-e '.[dev]')
	@touch $@

# pypaimon 2.1.0 pins pyarrow < 20, so the oracle lives in its own virtualenv. If it cannot be
# built the interop tests skip, loudly; everything else still runs.
$(ORACLE)/.installed: $(VENV)/.installed
	@test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	@if $(call PIP_INSTALL,$(ORACLE)/bin/python,'pypaimon==2.1.0'); then \
		touch $@; \
	else \
		echo "WARNING: could not install pypaimon==2.1.0 into $(ORACLE); interop tests will be SKIPPED" >&2; \
	fi

# Paimon's Rust reader (pypaimon-rust 0.4.0, no dependencies of its own) is a third reader of our tables.
$(ORACLE)/.rust-installed: $(ORACLE)/.installed
	@if $(call PIP_INSTALL,$(ORACLE)/bin/python,'pypaimon-rust==0.4.0'); then \
		touch $@; \
	else \
		echo "WARNING: could not install pypaimon-rust==0.4.0 into $(ORACLE); its reader tests will be SKIPPED" >&2; \
	fi

# Apache Paimon's Java core (0.9.0, from the PyPI sdist pypaimon==0.2.0) with Hadoop's client jars
# (and netty-common, which Arrow's Java vectors use; from the sdist pyspark==3.5.3) is the second oracle; the tests compile its driver with the JDK.
# Without a JDK or the jars the Java interop tests skip, loudly.
$(JAVA_ORACLE)/.installed: tests/interop/java/install.sh $(VENV)/.installed
	@if tests/interop/java/install.sh $(BIN)/pip $(JAVA_ORACLE); then \
		touch $@; \
	else \
		echo "WARNING: could not build the Java oracle in $(JAVA_ORACLE); Java interop tests will be SKIPPED" >&2; \
	fi

# Debian's chromium drives the UI test (tests/ui) headless; without it (no apt-get, not root) that
# test skips, loudly.
chromium:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		{ apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }; } || \
		echo "WARNING: could not install chromium; the UI test will be SKIPPED" >&2

venv: $(VENV)/.installed
oracle: $(ORACLE)/.installed $(ORACLE)/.rust-installed
java-oracle: venv $(JAVA_ORACLE)/.installed

demo: venv
	$(BIN)/python -m pipelines.demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Everything. The storage tests need S3: SeaweedFS and moto are started on 127.0.0.1 and stopped
# by PID. Three pytest workers on two cores: many tests wait on processes, JVMs and daemons.
# The oracles, the browser and lint are independent of each other: built side by side.
TEST_WORKERS ?= 3
test: venv
	$(MAKE) --no-print-directory -j4 oracle java-oracle chromium lint
	tests/support/s3/with_servers.sh $(BIN)/python $(BIN)/pytest -n $(TEST_WORKERS) --durations=25 --cpu-top=25

# The inner loop: lint, types, unit and core integration tests (no S3 server, oracle, fault
# trials, live Dagster or long test; see the markers in tests/conftest.py).
check: venv lint
	$(BIN)/pytest -q -n 2 -m "not (s3 or interop or torture or live or slow)" tests/unit tests/integration

# One benchmark suite side by side with its peers (benchmarks/README.md; `python -m benchmarks --list`
# names the suites): make bench SUITE=pk BENCH_ARGS=--quick
SUITE ?= append
BENCH_ARGS ?=
bench: venv oracle java-oracle
	$(BIN)/python -m benchmarks $(SUITE) $(BENCH_ARGS)

ui: venv demo
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf warehouse .dagster_home .bench .pytest_cache .mypy_cache .ruff_cache
