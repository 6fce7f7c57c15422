"""Build a policy from a command-line spec.

scripted:builtin                  replay each built-in problem's broken -> lazy -> gold solutions
scripted:builtin:gold             ... only the labels given (comma-separated), in that order
scripted:builtin_cuda[:labels]    the same with the CUDA solutions (no code for problems without one)
scripted:path/to/script.jsonl     lines {"problem": ..., "responses": [...]} (see ScriptedPolicy)
openai:URL[,model=M][,concurrency=N][,retries=N][,timeout=S][,token_ids=true][,api_key_env=VAR]
                                  any OpenAI-compatible chat endpoint (vLLM, SGLang, hosted APIs)
hf:PATH[,device=cpu][,batch_size=N][,dtype=bfloat16]
                                  a local Hugging Face model folder
tiny[:SEED]                       a tiny locally built model (smoke tests, demos)
vllm:MODEL[,tp=N][,gpu_memory_utilization=F][,max_model_len=N]
                                  vLLM's offline engine (needs the vllm extra)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drkernel.agent.policies.base import Policy
from drkernel.errors import ConfigError
from drkernel.problems.problem import Problem

KINDS = ("scripted", "openai", "hf", "tiny", "vllm")


def _options(parts: Sequence[str], spec: str) -> dict[str, str]:
    opts = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"policy {spec!r}: option {part!r} is not key=value")
        opts[key.strip()] = value.strip()
    return opts


def _bool(v: str) -> bool:
    return v.lower() in ("1", "true", "yes", "on")


def _take(opts: dict[str, str], known: dict[str, type], spec: str) -> dict[str, Any]:
    unknown = set(opts) - set(known)
    if unknown:
        raise ConfigError(f"policy {spec!r}: unknown options {sorted(unknown)} (known: {sorted(known)})")
    return {k: (_bool(v) if known[k] is bool else known[k](v)) for k, v in opts.items()}


def make_policy(spec: str, problems: Sequence[Problem] = ()) -> Policy:
    """A policy from ``spec`` (see the module docstring); ``problems`` feed scripted policies."""
    kind, _, rest = spec.partition(":")
    if kind not in KINDS:
        raise ConfigError(f"policy {spec!r}: unknown kind {kind!r} (one of {KINDS})")
    if kind == "scripted":
        from drkernel.agent.policies.scripted import ScriptedPolicy, builtin_script

        head, _, labels = rest.partition(":")
        if head in ("builtin", "builtin_cuda"):
            from drkernel.problems.builtin_cuda import cuda_solutions

            order = labels.split(",") if labels else ["broken", "lazy", "gold"]
            language = "cuda" if head == "builtin_cuda" else "triton"
            none = ["No CUDA solution is scripted for this problem."] if language == "cuda" else []
            return ScriptedPolicy.for_problems([(p, [builtin_script(p, order, language)]) for p in problems
                                                if language == "triton" or cuda_solutions(p)], default=none)
        if not rest:
            raise ConfigError("policy 'scripted' needs ':builtin' or ':path/to/script.jsonl'")
        return ScriptedPolicy.from_jsonl(rest, problems)
    if kind == "tiny":
        from drkernel.agent.policies.hf_local import HFLocalPolicy
        from drkernel.agent.tiny import build_tiny

        model, tokenizer = build_tiny(seed=int(rest or 0))
        return HFLocalPolicy(model, tokenizer, name="tiny")
    head, *parts = rest.split(",")
    if not head:
        raise ConfigError(
            f"policy {spec!r}: missing the {'URL' if kind == 'openai' else 'model'} after '{kind}:'"
        )
    opts = _options(parts, spec)
    if kind == "openai":
        from drkernel.agent.policies.openai_compat import OpenAICompatPolicy

        kw = _take(
            opts,
            {
                "model": str,
                "concurrency": int,
                "retries": int,
                "timeout": float,
                "token_ids": bool,
                "api_key_env": str,
            },
            spec,
        )
        return OpenAICompatPolicy(base_url=head, **kw)
    if kind == "hf":
        from drkernel.agent.policies.hf_local import HFLocalPolicy

        kw = _take(opts, {"device": str, "batch_size": int, "dtype": str}, spec)
        return HFLocalPolicy.from_pretrained(head, **kw)
    from drkernel.agent.policies.vllm_engine import VLLMPolicy

    kw = _take(
        opts, {"tp": int, "gpu_memory_utilization": float, "max_model_len": int, "batch_size": int}, spec
    )
    return VLLMPolicy(head, **kw)
