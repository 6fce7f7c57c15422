"""Without verl, the integration's verl-free parts import and `register` names the missing extra."""

import sys

import pytest

from drkernel.errors import ConfigError


def test_register_without_verl_raises_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "verl", None)  # import verl -> ImportError, as when it is absent
    from drkernel.rl.integrations.verl import register
    from drkernel.rl.integrations.verl.dataset import AGENT_NAME
    from drkernel.rl.integrations.verl.reward import compute_score

    assert AGENT_NAME == "drkernel_kernel_agent" and callable(compute_score)
    with pytest.raises(ConfigError, match=r"pip install 'drkernel\[verl\]'"):
        register()
