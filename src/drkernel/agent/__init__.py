"""The multi-turn kernel agent: prompts, policies, code extraction, feedback, episodes and
sequential test-time scaling.

Imports nothing beyond the standard library, torch and the gym's plain types at module level, so
the agent runs on a GPU machine without fastapi, pydantic, rich or openai; the OpenAI-compatible
policy, the local Hugging Face policy and the model server import their dependencies when built.
"""

from drkernel.agent.episode import Episode, EpisodeConfig, EpisodeRunner, Turn, run_episodes
from drkernel.agent.extract import Extraction, extract_code
from drkernel.agent.policies.base import Completion, Message, Policy, SamplingParams
from drkernel.agent.policies.scripted import ScriptedPolicy, builtin_script
from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tts import TTSConfig, select_window
from drkernel.reward import turn_reward

__all__ = [
    "Completion",
    "Episode",
    "EpisodeConfig",
    "EpisodeRunner",
    "Extraction",
    "Message",
    "Policy",
    "PromptTemplates",
    "SamplingParams",
    "ScriptedPolicy",
    "TTSConfig",
    "Turn",
    "builtin_script",
    "extract_code",
    "run_episodes",
    "select_window",
    "turn_reward",
]
