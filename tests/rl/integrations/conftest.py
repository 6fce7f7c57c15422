"""The verl integration tests run where verl is installed: ``make test-verl`` builds a separate venv
with ``.[dev,service,verl]`` (verl pins transformers < 5.11) and sets ``DRKERNEL_REQUIRE_VERL=1``, so
a missing verl is an error there. The main venv (``make test``) has no verl and does not collect them.
Importing verl registers drkernel's extensions through verl's own plugin variable, as in training."""

import importlib.util
import os

os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "drkernel.rl.integrations.verl.plugin")

if importlib.util.find_spec("verl") is None:
    if os.environ.get("DRKERNEL_REQUIRE_VERL") == "1":
        raise RuntimeError(
            "DRKERNEL_REQUIRE_VERL=1 but verl is not installed: pip install -e '.[dev,service,verl]'"
        )
    collect_ignore_glob = ["test_verl_*.py"]
