"""SFT cold start (docs/METHOD.md section 6): train on exported multi-turn trajectories with the loss on
assistant turns only. `drkernel.sft.data` (masking) needs a tokenizer; `drkernel.sft.train` needs TRL
(``pip install 'drkernel[sft]'``), imported when a run starts."""

from drkernel.sft.config import SFTConfig
from drkernel.sft.data import (
    IGNORE,
    Example,
    assistant_spans,
    build_examples,
    load_conversations,
    tokenize_conversation,
)

__all__ = [
    "IGNORE",
    "Example",
    "SFTConfig",
    "assistant_spans",
    "build_examples",
    "load_conversations",
    "tokenize_conversation",
]
