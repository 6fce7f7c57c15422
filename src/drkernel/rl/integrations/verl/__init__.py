"""Dr. Kernel on verl: the ``trloo`` advantage estimator, the ``drkernel_ppo`` policy loss, MRS/PRS as a
driver hook, a reward function and the multi-turn agent loop ``drkernel_kernel_agent``.

verl is imported lazily: `drkernel.rl.integrations.verl.dataset` and the reward function work
without it; `register` needs it (``pip install 'drkernel[verl]'``). Name `plugin` in
``VERL_USE_EXTERNAL_MODULES=drkernel.rl.integrations.verl.plugin`` so that every verl process
(trainer, rollout and reward workers) registers everything on ``import verl``; see docs/VERL.md.
"""

from __future__ import annotations

from drkernel.errors import ConfigError

__all__ = ["register"]


def register(agent_loop: bool = True, driver_hook: bool = True) -> None:
    """Register the estimator and policy loss (and the agent loop and driver hook) with verl."""
    try:
        import verl  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            "the verl integration needs verl: pip install 'drkernel[verl]' (verl>=0.9.1; see docs/VERL.md)"
        ) from e
    from drkernel.rl.integrations.verl import algorithms

    algorithms.register()
    if driver_hook:
        algorithms.install_driver_hook()
    if agent_loop:
        from drkernel.rl.integrations.verl import agent_loop as _agent_loop  # noqa: F401  (registers on import)
