"""verl dataset rows for kernel problems: one parquet row per problem, in verl's RLHFDataset format.

Columns: ``data_source``, ``prompt`` (the agent's first messages), ``ability``, ``reward_model``
(``{"style": "rule", "ground_truth": reference source}``), ``agent_name`` (our agent loop) and
``extra_info`` (the `Problem` dict, the evaluation config, an index).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from drkernel.agent.prompts import PromptTemplates
from drkernel.gym.config import EvalConfig
from drkernel.problems.problem import Problem

DATA_SOURCE = "drkernel"
AGENT_NAME = "drkernel_kernel_agent"


def verl_row(
    problem: Problem, index: int, eval_config: EvalConfig, templates: PromptTemplates
) -> dict[str, Any]:
    return {
        "data_source": DATA_SOURCE,
        "prompt": templates.first_messages(problem, eval_config.tolerance),
        "ability": "triton_kernel",
        "reward_model": {"style": "rule", "ground_truth": problem.code},
        "agent_name": AGENT_NAME,
        # verl hands extra_info to the agent loop and the reward function; the nested problem and
        # config travel as JSON strings so parquet keeps one schema across rows
        "extra_info": {
            "index": index,
            "problem_key": problem.key,
            "problem": json.dumps(problem.to_dict()),
            "eval_config": json.dumps(eval_config.to_dict()),
        },
    }


def write_verl_dataset(
    problems: Sequence[Problem],
    path: str | Path,
    eval_config: EvalConfig | None = None,
    templates: PromptTemplates | None = None,
) -> Path:
    """Write ``problems`` as a verl parquet dataset at ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cfg, tpl = eval_config or EvalConfig(), templates or PromptTemplates.default()
    rows = [verl_row(p, i, cfg, tpl) for i, p in enumerate(problems)]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
