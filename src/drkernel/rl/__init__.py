"""Pure RL algorithm functions over tensors (paper Sec. 4-6).

Modules, each importable on its own:

- ``returns``: reward-to-go over turn-level rows.
- ``advantages``: TRLOO and the baselines it is compared with (GRPO, trajectory RLOO,
  turn-independent).
- ``masks``: the one ``masked_mean`` and the void-turn mask.
- ``losses``: the PPO policy loss (asymmetric + dual clip) and its aggregation modes.
- ``mismatch``: rollout-vs-trainer importance weights and mismatch rejection sampling.
- ``rejection``: profiling-based rejection sampling and dynamic sampling.
- ``rewards``: the logging summary of per-turn rewards (the reward itself: `drkernel.reward`).

Mask convention in all of them: True = the entry counts.
"""

__all__: list[str] = []
