# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
PYTHON ?= python3.11
VENV := .venv
ORACLE := .venv-oracle
JAVA_ORACLE := .java-oracle
BIN := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test check lint venv oracle java-oracle chromium bench ui clean

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

# pypaimon 2.1.0 pins pyarrow < 20, so the oracle lives in its own virtualenv. If it cannot be
# built the interop tests skip, loudly; everything else still runs.
$(ORACLE)/.installed:
	@test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	@if $(ORACLE)/bin/pip install --quiet --disable-pip-version-check 'pypaimon==2.1.0'; then \
		touch $@; \
	else \
		echo "WARNING: could not install pypaimon==2.1.0 into $(ORACLE); interop tests will be SKIPPED" >&2; \
	fi

# Paimon's Rust reader (pypaimon-rust 0.4.0, no dependencies of its own) is a third reader of our tables.
$(ORACLE)/.rust-installed: $(ORACLE)/.installed
	@if $(ORACLE)/bin/pip install --quiet --disable-pip-version-check 'pypaimon-rust==0.4.0'; then \
		touch $@; \
	else \
		echo "WARNING: could not install pypaimon-rust==0.4.0 into $(ORACLE); its reader tests will be SKIPPED" >&2; \
	fi

# Apache Paimon's Java core (0.9.0, from the PyPI sdist pypaimon==0.2.0) with Hadoop's client jars
# (and netty-common, which Arrow's Java vectors use; from the sdist pyspark==3.5.3) is the second oracle; the tests compile its driver with the JDK.
# Without a JDK or the jars the Java interop tests skip, loudly.
$(JAVA_ORACLE)/.installed: tests/interop/java/install.sh
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

# Everything. The storage tests need S3: SeaweedFS and moto are started on 127.0.0.1 and stopped
# by PID. Three pytest workers on two cores: many tests wait on processes, JVMs and daemons.
TEST_WORKERS ?= 3
test: venv oracle java-oracle chromium lint
	tests/s3/with_servers.sh $(BIN)/python $(BIN)/pytest -n $(TEST_WORKERS) --durations=25

# The inner loop: lint, types, unit and core integration tests (no S3 server, oracle, fault
# trials, live Dagster or long test; see the markers in tests/conftest.py).
check: venv lint
	$(BIN)/pytest -q -n 2 -m "not (s3 or interop or torture or live or slow)" tests/unit tests/integration

bench: venv oracle
	$(BIN)/python benchmarks/append_bench.py

ui: venv demo
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

clean:
	rm -rf warehouse .dagster_home .bench .pytest_cache .mypy_cache .ruff_cache
