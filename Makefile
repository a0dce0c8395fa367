# Two promises: `make demo` and `make test` work on a fresh clone. Both bootstrap .venv from
# requirements.lock the first time; after that nothing here touches the network.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test lint bench-ratelimit bench-faults bench-throughput bench-scaling bench-stability bench-modes bench-cache clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/jury demo

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench-ratelimit: $(STAMP)
	$(BIN)/python -m bench.ratelimit

bench-faults: $(STAMP)
	$(BIN)/python -m bench.faults

bench-throughput: $(STAMP)
	$(BIN)/python -m bench.throughput

bench-scaling: $(STAMP)
	$(BIN)/python -m bench.scaling

bench-stability: $(STAMP)
	$(BIN)/python -m bench.stability

bench-modes: $(STAMP)
	$(BIN)/python -m bench.modes

bench-cache: $(STAMP)
	$(BIN)/python -m bench.cache

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache jury.db jury.db-*
