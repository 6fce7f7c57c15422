"""A tiny causal LM with a chat-template tokenizer, built locally (no downloads).

Used by tests, demos and the trainer's smoke runs: a 2-layer Llama with a byte-level BPE tokenizer
trained on the fly on the agent's own prompt templates and a little Triton code, so prompts encode
to a sensible number of tokens. Its weights are random; it is for exercising the pipeline.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

SPECIAL = {"bos": "<|bos|>", "eos": "<|im_end|>", "pad": "<|pad|>", "start": "<|im_start|>"}
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus() -> list[str]:
    templates = resources.files("drkernel.agent") / "templates"
    texts = [f.read_text() for f in templates.iterdir() if f.name.endswith(".txt")]
    return (
        texts * 4 + ["import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"] * 8
    )


def build_tokenizer(vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer with the chat template and special tokens set."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL["bos"],
        eos_token=SPECIAL["eos"],
        pad_token=SPECIAL["pad"],
        additional_special_tokens=[SPECIAL["start"]],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_tiny(
    seed: int = 0,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 8192,
    vocab_size: int = 512,
) -> tuple[Any, Any]:
    """(model, tokenizer): a randomly initialised Llama of ``layers`` x ``hidden`` in float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    gen = torch.random.fork_rng()
    with gen:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval(), tokenizer


def save_tiny(path: str | Path, seed: int = 0) -> Path:
    """Build the tiny model and save model and tokenizer to ``path`` (loadable by ``hf:PATH``)."""
    model, tokenizer = build_tiny(seed)
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
