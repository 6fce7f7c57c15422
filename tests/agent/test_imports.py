"""The agent and bench packages must run on a GPU machine that has only torch, triton and
transformers: importing them (and the end-to-end benchmark's modules) pulls in no web or CLI stack."""

import subprocess
import sys

FORBIDDEN = (
    "fastapi",
    "pydantic",
    "typer",
    "rich",
    "openai",
    "httpx",
    "uvicorn",
    "matplotlib",
    "pyarrow",
    "transformers",
)


def test_agent_and_bench_import_no_optional_dependencies():
    code = (
        "import sys, drkernel.agent, drkernel.bench, drkernel.bench.io, drkernel.agent.policies.spec, "
        "drkernel.agent.tiny, drkernel.agent.policies.hf_local; "
        f"print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_surface():
    from drkernel import agent

    assert set(agent.__all__) >= {
        "run_episodes",
        "EpisodeConfig",
        "Episode",
        "Turn",
        "Policy",
        "SamplingParams",
        "Completion",
        "ScriptedPolicy",
        "TTSConfig",
        "extract_code",
        "turn_reward",
    }
    for name in agent.__all__:
        assert getattr(agent, name) is not None
