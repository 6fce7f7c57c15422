# drkernel: `make demo` and `make test` work on a fresh clone, CPU-only machine included.
# They create .venv, install a CPU build of torch when no torch is importable
# (override with TORCH_SPEC, e.g. TORCH_SPEC="torch==2.6.0" or a CUDA index spec), then the package.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,service,ray,agent,bench,train,sft
VERL_VENV ?= .venv-verl
PYTEST_ARGS ?=

.PHONY: setup demo test test-slow test-all test-verl gpu-check clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/drkernel demo --out demo_results

test: setup
	$(PY) -m pytest -q -m "not slow and not gpu" $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest -q -m "slow and not gpu" $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest -q -m "not gpu" $(PYTEST_ARGS)

# verl pins an older transformers than the rest of the project, so its tests get their own venv.
test-verl:
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -c "import torch" 2>/dev/null || $(VERL_VENV)/bin/python -m pip install -q "$(TORCH_SPEC)"
	$(VERL_VENV)/bin/python -m pip install -q -e ".[dev,service,verl]"
	DRKERNEL_REQUIRE_VERL=1 $(VERL_VENV)/bin/python -m pytest -q -m "not gpu" tests/rl/integrations

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) $(VERL_VENV) demo_results .pytest_cache
