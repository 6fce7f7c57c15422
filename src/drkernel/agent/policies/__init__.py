"""Policies behind one interface (`Policy`); `make_policy(spec)` builds one from a CLI spec."""

from drkernel.agent.policies.base import Completion, Message, Policy, SamplingParams
from drkernel.agent.policies.scripted import ScriptedPolicy

__all__ = ["Completion", "Message", "Policy", "SamplingParams", "ScriptedPolicy"]
