"""The organism's GPU path must load on the GPU host, which has torch, triton, transformers, peft and
numpy but no fastapi, pydantic, uvicorn, openai, ray, typer or rich."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ABSENT = ("fastapi", "pydantic", "uvicorn", "openai", "ray", "typer", "rich")

CODE = """
import sys
ABSENT = {absent!r}

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the GPU host)", name=name)
        return None

sys.meta_path.insert(0, Absent())
import drkernel.organism.__main__ as entry
import drkernel.organism.run, drkernel.organism.report, drkernel.organism.env
import drkernel.rl.trainer, drkernel.gym
import drkernel.agent.policies.hf_local
entry.parser().parse_args(["suite", "--arms", "full", "--scale", "dry"])
print("loaded", ",".join(m for m in sys.modules if m.split(".")[0] in ABSENT))
"""


def test_organism_entry_point_loads_without_the_web_and_cli_stack():
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", CODE.format(absent=ABSENT)], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "loaded", out.stdout
