"""Reward models: a local transformers sequence classifier scoring responses in [0, 1].

What it is: :class:`RewardModel`, an outcome reward model (ORM: one score for the whole
response) or a process reward model (PRM: a score for each prefix of the response's steps,
aggregated), batched (many prompts and responses per forward pass, on the GPU when there is one),
with its raw output normalized into [0, 1] by a calibrated sigmoid. How its score mixes with a
verifiable reward (and why a wrong answer cannot be rescued by it) is :mod:`llmgym.rewards.mixing`.

What it is not: a trainer (train one with TRL's ``RewardTrainer``), nor a verifier: a reward
model's opinion is hackable (length, repetition, flattery), so it is always an extra term next
to a verifiable reward, never the reward. torch and transformers are imported only when a model
is loaded or run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from llmgym import error

MAX_RM_CHARS = 60_000
"""A reward model reads at most this many characters of a response (the tokenizer truncates too)."""

_STEP_SPLIT = re.compile(r"\n\s*\n|\n(?=\s*(?:step\s*\d+|\d+[.)]\s))", re.IGNORECASE)


def split_steps(response: str, *, max_steps: int = 32) -> list[str]:
    """A response cut into steps: blank-line paragraphs, else lines; the tail beyond
    ``max_steps`` joins the last step.

    >>> split_steps("Step 1: 2 + 2 = 4\\nStep 2: 4 * 3 = 12\\n\\nSo the answer is 12.")
    ['Step 1: 2 + 2 = 4', 'Step 2: 4 * 3 = 12', 'So the answer is 12.']
    """
    text = response[:MAX_RM_CHARS].strip()
    parts = [p.strip() for p in _STEP_SPLIT.split(text) if p.strip()]
    if len(parts) <= 1:
        parts = [p.strip() for p in text.splitlines() if p.strip()]
    if len(parts) > max_steps:
        parts = parts[: max_steps - 1] + ["\n".join(parts[max_steps - 1 :])]
    return parts or [""]


AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "min": min,
    "mean": lambda xs: sum(xs) / len(xs),
    "last": lambda xs: xs[-1],
    "prod": math.prod,
}
"""How a PRM's step scores become one score (``min``: a solution is as good as its worst step)."""


def sigmoid(x: float) -> float:
    """The logistic function, safe for any finite or infinite input.

    >>> sigmoid(0.0), sigmoid(-1e9), sigmoid(1e9)
    (0.5, 0.0, 1.0)
    """
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def best_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class RewardModel:
    """A transformers sequence classifier used as a reward in [0, 1].

    ``kind="orm"`` scores each ``(prompt, response)``; ``kind="prm"`` scores the prompt with each
    prefix of the response's steps (:func:`split_steps`) and aggregates them with ``aggregate``
    (``"min"``, ``"mean"``, ``"last"``, ``"prod"``). The raw score is the logit of a one-label
    head, else the log-odds of ``label`` (default: the last label, "good") against the others;
    it is normalized as ``sigmoid((raw - center) / scale)``: ``center`` and ``scale`` default to
    0 and 1 (the plain probability) and :meth:`calibrate` sets them from reference responses so
    that a typical response scores 0.5 and the spread uses the whole range. The pair is encoded
    with the tokenizer's chat template when it has one, else as a text pair; ``max_length``
    truncates. :meth:`score_batch` runs ``batch_size`` pairs per forward pass, longest first.

    >>> rm = RewardModel.from_pretrained("path/to/orm")  # doctest: +SKIP
    >>> rm.score_batch(["What is 2 + 2?"] * 2, ["2 + 2 = 4.", "5"])  # doctest: +SKIP
    [0.93, 0.04]
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        kind: str = "orm",
        aggregate: str = "min",
        label: int = -1,
        max_length: int = 1024,
        batch_size: int = 16,
        center: float = 0.0,
        scale: float = 1.0,
    ):
        if kind not in ("orm", "prm"):
            raise ValueError(f"Expects kind 'orm' or 'prm', actual: {kind!r}")
        if aggregate not in AGGREGATES:
            raise ValueError(f"Expects aggregate in {sorted(AGGREGATES)}, actual: {aggregate!r}")
        if tokenizer is None:
            raise ValueError(
                "A reward model needs its tokenizer: pass tokenizer=, or a path to "
                "RewardModel.from_pretrained"
            )
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"Expects batch_size to be an int >= 1, actual: {batch_size!r}")
        if not (math.isfinite(center) and math.isfinite(scale) and scale > 0):
            raise ValueError(
                f"Expects a finite center and scale > 0, actual: {center!r}, {scale!r}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.kind = kind
        self.aggregate = aggregate
        self.label = label
        self.max_length = max_length
        self.batch_size = batch_size
        self.center = float(center)
        self.scale = float(scale)
        model.eval()

    @classmethod
    def from_pretrained(
        cls, path: str, *, device: str | None = "auto", **kwargs: Any
    ) -> RewardModel:
        """Load a sequence classifier and its tokenizer from a local path (or a hub id);
        ``device="auto"`` puts it on the GPU when there is one."""
        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer
        except ImportError:
            raise error.DependencyNotInstalled(
                "Reward models need transformers and torch; pip install 'llmgym[agents]'"
            ) from None
        model = AutoModelForSequenceClassification.from_pretrained(path)
        if device == "auto":
            device = best_device()
        if device is not None:
            model = model.to(device)
        return cls(model, AutoTokenizer.from_pretrained(path), **kwargs)

    # --- scores ------------------------------------------------------------------------------

    def score(self, prompt: str, response: str) -> float:
        """The reward for one response, in [0, 1]."""
        return self.score_batch([prompt], [response])[0]

    def score_batch(self, prompts: Sequence[str], responses: Sequence[str]) -> list[float]:
        """The rewards of many responses (one prompt each), in [0, 1], in order."""
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts for {len(responses)} responses")
        if self.kind == "orm":
            return self._normalized(list(prompts), [r[:MAX_RM_CHARS] for r in responses])
        pairs = [
            (p, prefix) for p, r in zip(prompts, responses, strict=True) for prefix in _prefixes(r)
        ]
        flat = self._normalized([p for p, _ in pairs], [x for _, x in pairs])
        out, at = [], 0
        for r in responses:
            n = len(_prefixes(r))
            out.append(AGGREGATES[self.aggregate](flat[at : at + n]))
            at += n
        return out

    def step_scores(self, prompt: str, response: str) -> list[float]:
        """The normalized score of each step prefix of the response."""
        return self._normalized([prompt] * len(_prefixes(response)), _prefixes(response))

    def raw_scores(self, prompts: Sequence[str], responses: Sequence[str]) -> list[float]:
        """The head's raw output for each pair (a logit or log-odds), before normalization."""
        order = sorted(range(len(responses)), key=lambda i: -len(prompts[i]) - len(responses[i]))
        out = [0.0] * len(responses)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            values = self._forward([prompts[i] for i in chunk], [responses[i] for i in chunk])
            for i, v in zip(chunk, values, strict=True):
                out[i] = v
        return out

    def calibrate(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardModel:
        """Set ``center`` and ``scale`` to the mean and standard deviation of the raw scores of
        reference responses (a held-out set of the policy's own outputs), so that a typical
        response scores 0.5 and one a deviation better about 0.73."""
        raw = self.raw_scores(prompts, responses)
        if len(raw) < 2:
            raise ValueError("calibrate() needs at least two reference responses")
        mean = sum(raw) / len(raw)
        spread = math.sqrt(sum((x - mean) ** 2 for x in raw) / (len(raw) - 1))
        self.center, self.scale = mean, max(spread, 1e-3)
        return self

    # --- internals -----------------------------------------------------------------------------

    def _normalized(self, prompts: list[str], responses: list[str]) -> list[float]:
        return [
            sigmoid((x - self.center) / self.scale) for x in self.raw_scores(prompts, responses)
        ]

    def _forward(self, prompts: list[str], responses: list[str]) -> list[float]:
        import torch

        device = next(self.model.parameters()).device
        batch = {k: v.to(device) for k, v in self._encode(prompts, responses).items()}
        with torch.inference_mode():
            logits = self.model(**batch).logits.float()
        if logits.shape[-1] == 1:
            raw = logits[:, 0]
        else:
            chosen = logits[:, self.label]
            others = torch.cat(
                [
                    logits[:, : self.label % logits.shape[-1]],
                    logits[:, self.label % logits.shape[-1] + 1 :],
                ],
                dim=-1,
            )
            raw = chosen - torch.logsumexp(others, dim=-1)
        return [float(x) if math.isfinite(float(x)) else 0.0 for x in raw.cpu()]

    def _encode(self, prompts: list[str], responses: list[str]) -> Any:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            texts = [
                tok.apply_chat_template(
                    [{"role": "user", "content": p}, {"role": "assistant", "content": r}],
                    tokenize=False,
                )
                for p, r in zip(prompts, responses, strict=True)
            ]
            return tok(
                texts,
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
        return tok(
            prompts,
            responses,
            truncation="longest_first",
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )


def _prefixes(response: str) -> list[str]:
    steps = split_steps(response)
    return ["\n\n".join(steps[: i + 1]) for i in range(len(steps))]


def load_reward_model(
    spec: Any, *, tokenizer: Any = None, **options: Any
) -> Callable[[str, str], float]:
    """A ``(prompt, response) -> float`` scorer from a :class:`RewardModel`, a local path (or hub
    id), a transformers model with its ``tokenizer``, or any such callable; ``options`` go to
    :class:`RewardModel` (``kind``, ``aggregate``, ``center``, ``device`` for a path...)."""
    if isinstance(spec, RewardModel):
        return spec.score
    if isinstance(spec, str):
        return RewardModel.from_pretrained(spec, **options).score
    if hasattr(spec, "config") and hasattr(spec, "forward"):
        options.pop("device", None)
        return RewardModel(spec, tokenizer, **options).score
    if callable(spec):
        return spec  # type: ignore[no-any-return]
    raise TypeError(
        "Expects reward_model as a path, a RewardModel, a transformers sequence classifier "
        f"(with its tokenizer) or a callable (prompt, response) -> float; actual: {type(spec).__name__}"
    )


__all__ = [
    "AGGREGATES",
    "MAX_RM_CHARS",
    "RewardModel",
    "load_reward_model",
    "sigmoid",
    "split_steps",
]
