# drkernel: `make demo` and `make test` work on a fresh clone, CPU-only machine included.
# They create .venv, install a CPU build of torch when no torch is importable
# (override with TORCH_SPEC, e.g. TORCH_SPEC="torch==2.6.0" or a CUDA index spec), then the package.
#
# Versions: the package's requirements are ranges (pyproject.toml); the versions the developers
# tested are pinned in constraints.txt, which every install here passes to pip (`-c`). torch, triton
# and nvidia-* are left out of it, and the torch already in the venv is pinned to itself, so a
# user's own CUDA build stays. `make lock` refreshes constraints.txt from the newest releases;
# `make test VENV=.venv-newest CONSTRAINTS=` tests against the newest releases instead of the lock.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,service,ray,agent,bench,train,sft
CONSTRAINTS ?= constraints.txt
VERL_VENV ?= .venv-verl
LOCK_VENV ?= .venv-lock
PYTEST_ARGS ?=

# Locked installs pin to CONSTRAINTS; an unlocked one (CONSTRAINTS=) upgrades to the newest releases.
STAMP := $(VENV)/.installed$(if $(CONSTRAINTS),-locked,-newest)
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS),--upgrade --upgrade-strategy eager)
# torch, triton and nvidia-* never come from constraints.txt: whatever the venv holds stays.
UNLOCKED := ^(torch|triton|nvidia-|drkernel|pip==)

.PHONY: setup demo test test-slow test-all test-readme test-verl lock gpu-check clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@echo "==> setup 1/4: virtualenv $(VENV)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> setup 2/4: torch (kept when the venv already has one; else $(TORCH_SPEC), about 1 minute)"
	@$(PY) -c "import torch; print('    keeping torch', torch.__version__)" 2>/dev/null \
		|| $(PY) -m pip install --progress-bar off "$(TORCH_SPEC)"
	@$(PY) -c "import importlib.metadata as m; [print(f'{n}=={m.version(n)}') for n in ('torch', 'triton') \
		if any(d.metadata['Name'] == n for d in m.distributions())]" > $(VENV)/keep-torch.txt
	@echo "==> setup 3/4: drkernel[$(EXTRAS)], versions from $(or $(CONSTRAINTS),the newest releases) (2-4 minutes)"
	$(PY) -m pip install --progress-bar off -c $(VENV)/keep-torch.txt $(PIN) -e ".[$(EXTRAS)]" \
		| grep --line-buffered -E "^(Collecting|Successfully installed)" | sed -u 's/^/    /' ; test $${PIPESTATUS[0]} -eq 0
	@echo "==> setup 4/4: check"
	@$(PY) -c "import drkernel, torch, triton; print('    drkernel', drkernel.__version__, '| torch', torch.__version__, '| triton', triton.__version__)"
	@rm -f $(VENV)/.installed-locked $(VENV)/.installed-newest
	@touch $@
	@echo "==> setup done: . $(VENV)/bin/activate, then see the README's Quick start"

setup: $(STAMP)

demo: setup
	$(VENV)/bin/drkernel demo --out demo_results

test: setup
	$(PY) -m pytest -q -m "not slow and not gpu" $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest -q -m "slow and not gpu" $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest -q -m "not gpu" $(PYTEST_ARGS)

# Every line of the README's Quick start, in order (several minutes on 2 cores; CI runs it).
test-readme: setup
	$(PY) -m pytest -q -m "slow" tests/test_readme.py $(PYTEST_ARGS)

# verl pins an older transformers than the rest of the project (and than constraints.txt), so its
# tests get their own venv, resolved fresh.
test-verl:
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -c "import torch" 2>/dev/null || $(VERL_VENV)/bin/python -m pip install -q "$(TORCH_SPEC)"
	$(VERL_VENV)/bin/python -m pip install -q -e ".[dev,service,verl]"
	DRKERNEL_REQUIRE_VERL=1 $(VERL_VENV)/bin/python -m pytest -q -m "not gpu" tests/rl/integrations

# Refresh constraints.txt: resolve EXTRAS to the newest releases in a scratch venv and pin them.
# Then run `make test` (it reinstalls from the new pins) and commit constraints.txt.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q "$(TORCH_SPEC)"
	$(LOCK_VENV)/bin/python -m pip install -q -e ".[$(EXTRAS)]"
	{ echo "# Versions the developers tested (pip constraints; torch, triton and nvidia-* left out)."; \
	  echo "# Refresh with \`make lock\` ($$($(LOCK_VENV)/bin/python --version), $$(date -u +%Y-%m-%d))."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable | grep -viE "$(UNLOCKED)"; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)
	@echo "wrote $(CONSTRAINTS): $$(grep -vc '^#' $(CONSTRAINTS)) pins"

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) $(VERL_VENV) $(LOCK_VENV) demo_results .pytest_cache
