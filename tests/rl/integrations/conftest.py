"""The verl integration tests run where verl is installed: ``make test-verl`` builds a separate venv
with ``.[dev,service,verl]`` (verl pins transformers < 5.11) and sets ``DRKERNEL_REQUIRE_VERL=1``, so
a missing verl is an error there. The main venv (``make test``) has no verl and does not collect them.
Importing verl registers drkernel's extensions through verl's own plugin variable, as in training."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("VERL_USE_EXTERNAL_MODULES", "drkernel.rl.integrations.verl.plugin")

if importlib.util.find_spec("verl") is None:
    if os.environ.get("DRKERNEL_REQUIRE_VERL") == "1":
        raise RuntimeError(
            "DRKERNEL_REQUIRE_VERL=1 but verl is not installed: pip install -e '.[dev,service,verl]'"
        )
    collect_ignore_glob = ["test_verl_*.py"]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "service"))
from service_server import ServerProcess  # noqa: E402  (the service tests' real server process)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """A real KernelGym server whose worker answers by directives in the solution (deterministic)."""
    srv = ServerProcess(
        tmp_path_factory.mktemp("gym") / "jobs.sqlite",
        "--devices",
        "cpu:1",
        "--evaluator",
        "service_evaluators:DirectiveEvaluator",
    )
    srv.start()
    yield srv
    srv.stop()
