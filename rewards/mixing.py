"""How a reward model's or a judge's score joins an env's verifiable reward: the mixing rule.

What it is: :class:`ExtraReward`, one weighted extra term (``reward_model`` or ``judge``) that
any env takes through the core's ``reward_model=`` and ``judge=`` arguments, and
:func:`build_extra_rewards`, which reads those arguments. The rule, for a response whose
verifiable grade is ``v`` (the env's own reward) and whose model score is ``s`` in [0, 1]::

    reward = v + weight * gate * s * length_factor * repetition_factor
    gate   = 1 when the verifiable grade succeeded, else fail_cap (default 0)

so a verifiably wrong answer earns at most ``v + weight * fail_cap`` whatever the model thinks
(with the default, exactly ``v``: the model ranks right answers, it never pays for wrong ones),
and a right one at most ``v + weight``. Why: reward models and judges are known to be hackable
(longer, repetitive, flattering or instruction-injecting answers score higher), a verifier is
not; letting the model's opinion only break ties between verified answers keeps every hack
bounded by ``weight``. ``length_budget`` (words) is the length normalization: past the budget
the term is scaled by ``budget / words``, so padding a response cannot raise it;
``repetition_guard`` scales it by the share of distinct word 4-grams, so repeating a good
paragraph cannot either. A failed gate skips the model call altogether.

What it is not: a verifier (the env's verifiable reward is computed first, unchanged), nor a
judge or model itself (:mod:`llmgym.rewards.reward_model`, :mod:`llmgym.rewards.judge`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmgym import error

Scorer = Callable[..., Any]
"""``(prompt, response) -> float`` in [0, 1], or a judge's ``(prompt, response, reference)``."""

_WORD = re.compile(r"\w+")
_TERM_KEYS = ("weight", "fail_cap", "length_budget", "repetition_guard")


def length_factor(response: str, budget: int | None) -> float:
    """1 up to ``budget`` words, then ``budget / words`` (None: no budget).

    >>> length_factor("a b c d", 2), length_factor("a b", 2), length_factor("a b c", None)
    (0.5, 1.0, 1.0)
    """
    if budget is None:
        return 1.0
    words = len(_WORD.findall(response))
    return 1.0 if words <= budget else budget / words


def repetition_factor(response: str, n: int = 4) -> float:
    """The share of the response's word ``n``-grams that are distinct (1 for short texts).

    >>> repetition_factor("the cat sat on the mat today")
    1.0
    >>> round(repetition_factor("the cat sat on the mat. " * 4), 2)
    0.29
    """
    words = _WORD.findall(response.casefold())
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def unit(value: Any) -> float:
    """A score clipped into [0, 1]; NaN and junk score 0.

    >>> unit(1.7), unit(-2), unit(float("nan")), unit("x")
    (1.0, 0.0, 0.0, 0.0)
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(max(x, 0.0), 1.0) if math.isfinite(x) else 0.0


@dataclass
class ExtraReward:
    """One extra term of the mixing rule (see the module docstring).

    ``scorer(prompt, response, reference)`` returns a score in [0, 1] (or a ``(score,
    details)`` pair); one that raises anything but an :class:`llmgym.error.Error` scores 0 and
    says why in its details, so a model failure does not end a training run, while an
    unreachable judge (an ``Error``) does, loudly.
    """

    name: str
    scorer: Scorer
    weight: float = 0.5
    fail_cap: float = 0.0
    length_budget: int | None = None
    repetition_guard: bool = True
    takes_reference: bool = False

    def __post_init__(self) -> None:
        if not (_number(self.weight) and self.weight >= 0):
            raise error.InvalidSpec(
                f"{self.name}: weight must be a number >= 0, actual: {self.weight!r}"
            )
        if not (_number(self.fail_cap) and 0 <= self.fail_cap <= 1):
            raise error.InvalidSpec(
                f"{self.name}: fail_cap must be in [0, 1], actual: {self.fail_cap!r}"
            )
        budget = self.length_budget
        if budget is not None and not (
            isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1
        ):
            raise error.InvalidSpec(
                f"{self.name}: length_budget must be a number of words >= 1 or None, actual: {budget!r}"
            )

    @property
    def max_bonus(self) -> float:
        """The most this term can add to a reward."""
        return self.weight

    def __call__(
        self, prompt: str, response: str, *, success: bool, reference: str | None = None
    ) -> tuple[float, dict[str, Any]]:
        """The bonus for one response and what it was made of (for ``info``)."""
        gate = 1.0 if success else self.fail_cap
        if gate == 0.0 or self.weight == 0.0:
            return 0.0, {"gated": True}
        details: dict[str, Any] = {}
        try:
            out = (
                self.scorer(prompt, response, reference)
                if self.takes_reference
                else self.scorer(prompt, response)
            )
        except error.Error:
            raise
        except Exception as e:  # a model failure must not end a training run
            out = 0.0
            details["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if isinstance(out, tuple):
            out, more = out
            details.update(more)
        score = unit(out)
        factors = length_factor(response, self.length_budget)
        if self.repetition_guard:
            factors *= repetition_factor(response)
        details.update(score=score, factor=factors, gate=gate)
        return self.weight * gate * score * factors, details


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _split(spec: Any) -> tuple[Any, dict[str, Any]]:
    """A mapping spec's scorer part and its mixing options (``weight``, ``fail_cap``...)."""
    if not isinstance(spec, Mapping):
        return spec, {}
    options = {k: spec[k] for k in _TERM_KEYS if k in spec}
    return {k: v for k, v in spec.items() if k not in _TERM_KEYS}, options


def reward_model_term(spec: Any) -> ExtraReward:
    """The ``reward_model`` term from a path, a :class:`~llmgym.rewards.reward_model.RewardModel`,
    a callable, or a mapping ``{"model": ..., "tokenizer", "kind", "aggregate", "label",
    "center", "scale", "batch_size", "max_length", "device"`` and the mixing options``}``."""
    from llmgym.rewards.reward_model import load_reward_model

    body, options = _split(spec)
    try:
        if isinstance(body, Mapping):
            body = dict(body)
            if "model" not in body:
                raise error.InvalidSpec("reward_model: a mapping needs 'model' (a path or a model)")
            scorer = load_reward_model(body.pop("model"), **body)
        else:
            scorer = load_reward_model(body)
    except (TypeError, ValueError) as e:
        raise error.InvalidSpec(f"reward_model: {e}") from None
    return ExtraReward("reward_model", scorer, **options)


def judge_term(spec: Any) -> ExtraReward:
    """The ``judge`` term from a :class:`~llmgym.rewards.judge.Judge`, ``"<model>@<url>"``, or a
    mapping of the judge's settings (``url``, ``model``, ``rubric``...) and the mixing options."""
    from llmgym.rewards.judge import Judge

    body, options = _split(spec)
    if isinstance(body, Judge):
        judge = body
    elif isinstance(body, str):
        judge = Judge.from_spec(body)
    elif isinstance(body, Mapping):
        try:
            judge = Judge(**body)
        except TypeError as e:
            raise error.InvalidSpec(f"judge: {e}") from None
    else:
        raise error.InvalidSpec(
            "judge: expects a Judge, '<model>@<url>' or a mapping with 'url' and 'model', "
            f"actual type: {type(body).__name__}"
        )
    return ExtraReward("judge", judge.grade, takes_reference=True, **options)


def build_extra_rewards(*, reward_model: Any = None, judge: Any = None) -> list[ExtraReward]:
    """The extra terms an env's ``reward_model=`` and ``judge=`` arguments ask for (the core
    reaches this function by name)."""
    terms = []
    if reward_model is not None:
        terms.append(
            reward_model
            if isinstance(reward_model, ExtraReward)
            else reward_model_term(reward_model)
        )
    if judge is not None:
        terms.append(judge if isinstance(judge, ExtraReward) else judge_term(judge))
    return terms


__all__ = [
    "ExtraReward",
    "build_extra_rewards",
    "judge_term",
    "length_factor",
    "repetition_factor",
    "reward_model_term",
    "unit",
]
