"""Tiny causal LMs built locally from a config, with a locally trained tokenizer: no download.

The demo, the tests and the benchmarks train these. A tokenizer is a byte-level BPE trained
with the ``tokenizers`` library on text you pass (or a generated default corpus), with digits
split one per token (so arithmetic stays learnable), special tokens for the chat roles and
a chat template that renders system/user/assistant/tool messages and tool calls. The model
is a few-layer Llama or GPT-2 built from a :class:`TinyConfig`. Both save with
``save_pretrained``, so ``load_policy("hf:<dir>")`` and ``from_pretrained`` work on them.

What it is not: a language model that knows anything before you train it.

>>> model, tokenizer = build_tiny(TinyConfig(hidden_size=16, num_layers=1, num_heads=2,
...     intermediate_size=32, vocab_size=300))
>>> ids = tokenizer.apply_chat_template([{"role": "user", "content": "1+2?"}],
...     add_generation_prompt=True, tokenize=False)
>>> ids
'<|user|>1+2?<|end|><|assistant|>'
>>> tokenizer.decode(tokenizer.encode("12 + 34 = 46"))
'12 + 34 = 46'
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from llmgym import error

PAD, END = "<|pad|>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")
SPECIAL_TOKENS = (PAD, END, *ROLE_TOKENS)

# Roles are single special tokens; a message is "<|role|>content<|end|>"; an assistant's tool
# calls follow its content as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. The
# template is prefix-preserving: rendering a conversation and then one more message only
# appends text, which token-exact multi-turn rollouts rely on.
CHAT_TEMPLATE = (
    "{%- if tools -%}<|system|>Tools you may call, one "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call> each:'
    "{%- for tool in tools -%}{{ '\\n' }}{{ tool | tojson }}{%- endfor -%}<|end|>{%- endif -%}"
    "{%- for message in messages -%}"
    "<|{{ message['role'] }}|>"
    "{%- if message['content'] is string -%}{{ message['content'] }}{%- endif -%}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    '<tool_call>{"name": {{ call["function"]["name"] | tojson }}, "arguments": '
    '{%- if call["function"]["arguments"] is string %} {{ call["function"]["arguments"] }}'
    '{%- else %} {{ call["function"]["arguments"] | tojson }}{%- endif -%}}</tool_call>'
    "{%- endfor -%}"
    "<|end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)

RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|end\|>\s*", "content": "text"},
    },
}
"""How transformers' ``tokenizer.parse_response`` (and so TRL's tool loop) reads a completion."""


@dataclass
class TinyConfig:
    """The shape of a tiny model and its tokenizer."""

    arch: str = "llama"
    """``"llama"`` (RoPE, RMSNorm, SwiGLU) or ``"gpt2"``."""
    hidden_size: int = 64
    """Width of the residual stream."""
    num_layers: int = 2
    """Number of transformer blocks."""
    num_heads: int = 4
    """Attention heads; must divide ``hidden_size``."""
    intermediate_size: int = 256
    """Width of the MLP."""
    max_positions: int = 512
    """Longest sequence the model accepts (prompt plus completion, every turn)."""
    vocab_size: int = 512
    """Target BPE vocabulary size (special tokens and the 256 bytes included)."""
    seed: int = 0
    """Seed of the weight initialisation."""

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "gpt2"):
            raise error.Error(f"TinyConfig.arch must be 'llama' or 'gpt2', actual: {self.arch!r}")
        for name in ("hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if int(getattr(self, name)) < 1:
                raise error.Error(f"TinyConfig.{name} must be >= 1")
        if self.hidden_size % self.num_heads:
            raise error.Error(
                f"TinyConfig.num_heads ({self.num_heads}) must divide hidden_size ({self.hidden_size}); "
                "pick e.g. num_heads=4 with hidden_size=64"
            )
        if self.vocab_size < 256 + len(SPECIAL_TOKENS):
            raise error.Error(
                f"TinyConfig.vocab_size must be >= {256 + len(SPECIAL_TOKENS)} (bytes plus special tokens)"
            )
        if self.max_positions < 16:
            raise error.Error("TinyConfig.max_positions must be >= 16")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TinyConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise error.Error(
                f"Unknown TinyConfig field(s) {unknown}; expected some of {sorted(names)}"
            )
        return cls(**data)


PRESETS: dict[str, TinyConfig] = {
    "nano": TinyConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
    "tiny": TinyConfig(),
    "small": TinyConfig(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512),
}
"""Named shapes for ``model: tiny:<preset>`` in trainer configs."""


def default_corpus(n: int = 4000, seed: int = 0) -> list[str]:
    """Generated text to train a tokenizer on: arithmetic, answer formats, chat-like prose.

    >>> default_corpus(3)[0][:20]
    'What is 49 + 97? Put'
    """
    rng = random.Random(seed)
    words = [
        "the",
        "a",
        "of",
        "to",
        "and",
        "is",
        "in",
        "it",
        "you",
        "that",
        "what",
        "answer",
        "final",
        "put",
        "your",
        "box",
        "number",
        "sum",
        "difference",
        "product",
        "value",
        "compute",
        "result",
        "tool",
        "call",
        "function",
        "code",
        "test",
        "return",
        "python",
        "print",
        "def",
        "if",
        "else",
        "for",
        "while",
        "list",
        "string",
        "file",
        "error",
        "true",
        "false",
        "question",
    ]
    ops = ("+", "-", "*")
    lines = []
    for i in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = ops[i % 3]
        kind = i % 4
        if kind == 0:
            lines.append(f"What is {a} {op} {b}? Put your final answer in \\boxed{{}}.")
        elif kind == 1:
            value = a + b if op == "+" else a - b if op == "-" else a * b
            lines.append(f"{a} {op} {b} = \\boxed{{{value}}}")
        elif kind == 2:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + ".")
        else:
            lines.append(
                json.dumps({"name": rng.choice(words), "arguments": {rng.choice(words): a}})
            )
    return lines


def build_tokenizer(corpus: Iterable[str] | None = None, *, vocab_size: int = 512) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``corpus``, with the chat template.

    Any Unicode string encodes (bytes are the base alphabet); digits are split one per token.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus if corpus is not None else default_corpus()), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=END,
        additional_special_tokens=list(ROLE_TOKENS),
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def build_model(tokenizer: Any, config: TinyConfig | None = None) -> Any:
    """A freshly initialised causal LM of ``config``'s shape for ``tokenizer``'s vocabulary."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    config = config or TinyConfig()
    common = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.eos_token_id,
        "tie_word_embeddings": True,
    }
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(config.seed)
    try:
        if config.arch == "llama":
            hf_config: Any = LlamaConfig(
                hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                num_hidden_layers=config.num_layers,
                num_attention_heads=config.num_heads,
                num_key_value_heads=config.num_heads,
                max_position_embeddings=config.max_positions,
                rms_norm_eps=1e-5,
                **common,
            )
            model: Any = LlamaForCausalLM(hf_config)
        else:
            hf_config = GPT2Config(
                n_embd=config.hidden_size,
                n_layer=config.num_layers,
                n_head=config.num_heads,
                n_inner=config.intermediate_size,
                n_positions=config.max_positions,
                resid_pdrop=0.0,  # dropout makes RL's logprob ratios noisy; tiny models do not need it
                embd_pdrop=0.0,
                attn_pdrop=0.0,
                **common,
            )
            model = GPT2LMHeadModel(hf_config)
    finally:
        torch.random.set_rng_state(torch_state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build_tiny(
    config: TinyConfig | str | None = None,
    *,
    corpus: Iterable[str] | None = None,
    output_dir: str | Path | None = None,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a preset name or config; saved to ``output_dir`` when given."""
    if isinstance(config, str):
        if config not in PRESETS:
            raise error.Error(f"No tiny preset {config!r}; available: {sorted(PRESETS)}")
        config = PRESETS[config]
    config = config or TinyConfig()
    tokenizer = build_tokenizer(corpus, vocab_size=config.vocab_size)
    model = build_model(tokenizer, config)
    if output_dir is not None:
        save(model, tokenizer, output_dir, config)
    return model, tokenizer


def save(
    model: Any, tokenizer: Any, output_dir: str | Path, config: TinyConfig | None = None
) -> Path:
    """``save_pretrained`` both into ``output_dir`` (plus the tiny config, for provenance)."""
    path = Path(output_dir)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if config is not None:
        (path / "tiny_config.json").write_text(json.dumps(asdict(config), indent=2))
    return path


def load(path: str | Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` saved by :func:`save` (or any causal LM directory)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise error.Error(
            f"No model at {path} (no config.json); build one with build_tiny(output_dir=...)"
        )
    tokenizer = AutoTokenizer.from_pretrained(path)
    if (
        getattr(tokenizer, "response_template", None) is None
        and tokenizer.chat_template == CHAT_TEMPLATE
    ):
        tokenizer.response_template = RESPONSE_TEMPLATE
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    return model, tokenizer


def _looks_local(spec: str) -> bool:
    """Whether a model spec names a local path rather than a hub id (``org/name``): it
    starts with ``.``, ``/`` or ``~``, has more than one ``/``, or its first part is a folder
    that exists here (``runs/...``)."""
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or "\\" in spec:
        return True
    head = spec.split("/", 1)[0]
    return "/" in spec and Path(head).is_dir()


def load_model_and_tokenizer(spec: str, *, corpus: Sequence[str] | None = None) -> tuple[Any, Any]:
    """A model spec as trainer configs write it: ``tiny`` / ``tiny:<preset>`` (fresh weights) or a path / hub id."""
    if spec == "tiny" or spec.startswith("tiny:"):
        return build_tiny(spec.partition(":")[2] or "tiny", corpus=corpus)
    if Path(spec).is_dir():
        return load(spec)
    if _looks_local(spec):
        hint = (
            " It is written by the demo: run `make demo` (or `llmgym demo`) first, or set "
            "`model: tiny` to start from a fresh tiny model."
            if "runs/demo" in spec.replace("\\", "/")
            else " Use a directory saved with save_pretrained, 'tiny' / 'tiny:<preset>', or a "
            "Hugging Face hub id (org/name)."
        )
        raise error.Error(f"No model directory {spec!r}.{hint}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForCausalLM.from_pretrained(spec, dtype="float32")
    except OSError as e:
        raise error.Error(
            f"Cannot load model {spec!r}: {e}. Use a local directory saved with save_pretrained, "
            "'tiny' / 'tiny:<preset>' for a fresh tiny model, or a Hugging Face hub id."
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer
