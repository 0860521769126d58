"""Task scheduler for joint training: learning-progress sampling, curriculum, pausing converged tasks.

Each *arm* is a task family (every family is a domain of its own; for ``llm/Mixture-v0`` the
families are ``"<env id>::<family>"``). The scheduler keeps, per arm, a fast and a slow smoothed
success rate, the share of its groups that gave a gradient, its current difficulty and whether
it is paused, and each step:

- samples arms by ``strategy`` plus a floor so that no active arm starves:
  ``learning_progress`` (default) weighs an arm by ``|p_fast - p_slow|``, how fast its success
  moves either way (rising: it is learning; falling: it is being forgotten), the absolute
  learning progress of Kanitscheider et al. (2021) without their rank-based reweighting;
  ``success_variance`` by ``p (1 - p)`` (high where success is uncertain, near zero where the
  model always or never succeeds); ``signal`` by the share of groups whose rewards differed;
  ``uniform``;
- with ``question_rest``, skips questions whose last group was all right or all wrong (no GRPO
  gradient) for that many steps, drawing another question of the family instead;
- raises an arm's difficulty by ``difficulty_step`` when ``p >= raise_at`` and lowers it when
  ``p <= lower_at`` (a curriculum), after ``min_episodes`` episodes at the current level;
- pauses an arm whose ``p >= pause_at`` at its hardest difficulty (converged: compute goes to
  arms still improving) and re-probes one paused arm every ``reprobe_every`` steps; each probe
  updates the arm's ``p``, and the arm resumes when ``p`` falls below ``resume_below`` (default
  ``pause_at``; lower for hysteresis), which is what catches forgetting of a resting family;
  ``rest_weight`` keeps a paused arm in the mix at a small share (rehearsal) instead of only
  re-probing it.

Its state is checkpointed (``state_dict``, registered with the trainer's checkpoints: a resumed
run makes the same choices as an uninterrupted one) and logged (``metrics`` ->
``scheduler/<arm>/...``, with ``picks``: the prompts each arm got this step, its decisions).

>>> import numpy as np
>>> s = TaskScheduler(["easy", "hard"], SchedulerConfig(min_episodes=4, ema=1.0))
>>> picks = s.choose(4, np.random.default_rng(0))
>>> sorted({arm for arm, _ in picks}) <= ["easy", "hard"]
True
>>> s.update("easy", [True] * 8, step=1); s.arms["easy"].difficulty
0.1
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from llmgym import error

MAX_REDRAWS = 1000
"""The most fresh draws ``redraws`` may ask for (each is an env reset)."""

_MAX_RESTING = 100_000
"""Questions remembered for ``question_rest`` at most (a procedural family never repeats one)."""


def metric_names(arms: Sequence[str]) -> dict[str, str]:
    """Each arm's name fit for a metric key (arm names come from task data): cleaned as the
    monitor cleans names, and made distinct where two clean alike (``_2``, ``_3``...)."""
    from llmgym.evaluation.monitor import clean_name

    out: dict[str, str] = {}
    taken: set[str] = set()
    for arm in sorted(set(arms)):  # the same names whatever order the arms come in
        base = clean_name(arm)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base[:60]}_{n}"
        taken.add(name)
        out[arm] = name
    return out


def question_key(arm: str, prompt: Any) -> str:
    """A question's identity for ``question_rest``: its arm and a hash of its prompt text."""
    digest = hashlib.blake2b(str(prompt).encode("utf-8", "replace"), digest_size=12).hexdigest()
    return f"{arm}|{digest}"


STRATEGIES = ("learning_progress", "success_variance", "signal", "uniform", "sequential")


@dataclass
class SchedulerConfig:
    """How tasks are chosen during training (``scheduler:`` in a trainer's YAML config)."""

    strategy: str = "learning_progress"
    """How active arms are weighted: ``success_variance`` (``p (1 - p)``), ``learning_progress``
    (``|fast - slow|`` success averages: how fast an arm's success moves, either way),
    ``signal`` (the smoothed share of an arm's groups whose rewards differ: the groups that give
    GRPO a gradient), ``uniform``, or ``sequential`` (every prompt from one arm, the arms of
    ``order`` in turn, ``phase_steps`` steps each: the baseline that forgets; nothing pauses)."""
    order: list[str] | None = None
    """``sequential``: the arms in the order they are trained (None: sorted)."""
    phase_steps: int = 0
    """``sequential``: steps each arm of ``order`` gets (the last one keeps the rest)."""
    slow_ema: float = 0.05
    """Smoothing of the slow success average of ``learning_progress`` (``ema`` is the fast one)."""
    ema: float = 0.3
    """Smoothing of each arm's success rate: ``p <- (1 - ema) p + ema * batch_success``."""
    floor: float = 0.05
    """Minimum share of the sampling weight every active arm keeps (exploration)."""
    curriculum: bool = True
    """Raise or lower each arm's difficulty with its success rate."""
    start_difficulty: float = 0.0
    """Difficulty every arm starts at (with ``curriculum``)."""
    max_difficulty: float = 1.0
    """Hardest difficulty the curriculum goes to."""
    difficulty_step: float = 0.1
    """How much one raise or lower moves the difficulty."""
    raise_at: float = 0.8
    """Success rate at or above which the difficulty rises."""
    lower_at: float = 0.2
    """Success rate at or below which the difficulty falls."""
    min_episodes: int = 32
    """Episodes an arm plays at a level before it may be raised, lowered or paused."""
    pause_at: float = 0.95
    """Success rate at the hardest level at which an arm counts as converged and is paused."""
    reprobe_every: int = 20
    """Steps between re-probes of a paused arm (0: never re-probe)."""
    rest_weight: float = 0.0
    """Sampling probability each paused arm keeps (rehearsal: a resting family keeps a little
    practice, and the episodes update its ``p``); 0: only the re-probes. When several arms rest
    their shares are capped at half the mass together."""
    question_rest: int = 0
    """Steps a question rests after a group on it gave GRPO no gradient (its advantages all
    equal: all right or all wrong, with no partial credit to tell them apart), so that it would
    only spend episodes; its family draws another question meanwhile (up to ``redraws`` times).
    0: off. Steps are training steps (a dynamic-sampling refill round is not one). Questions are
    known by their prompt text, so a family that never repeats a question is unaffected. GRPO
    only (PPO has no groups). Measured on the joint benchmark it did not pay (see the README)."""
    redraws: int = 8
    """Fresh draws tried when a drawn question is resting (the last one is kept regardless)."""
    resume_below: float | None = None
    """A paused arm's smoothed success (updated by each re-probe) below which it resumes; None:
    ``pause_at``. Lower than ``pause_at`` gives hysteresis: a converged arm whose sampled success
    hovers near ``pause_at`` is not resumed by one unlucky probe, only by a real decline."""

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise error.Error(f"SchedulerConfig: {message}")

        for name, top in (
            ("min_episodes", 10**9),
            ("reprobe_every", 10**9),
            ("phase_steps", 10**9),
            ("question_rest", 10**9),
            ("redraws", MAX_REDRAWS),
        ):
            value = getattr(self, name)
            need(
                isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top,
                f"{name} must be an integer in [0, {top}], got {value!r}",
            )
        for name in ("ema", "slow_ema", "floor", "pause_at", "rest_weight", "raise_at", "lower_at"):
            value = getattr(self, name)
            need(
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value),
                f"{name} must be a finite number, got {value!r}",
            )
        need(
            self.strategy in STRATEGIES,
            f"strategy must be one of {STRATEGIES}, got {self.strategy!r}",
        )
        need(0 < self.ema <= 1, "ema must be in (0, 1]; 0.3 adapts within a few steps")
        need(0 < self.slow_ema <= 1, f"slow_ema must be in (0, 1], got {self.slow_ema}")
        need(
            self.strategy != "learning_progress" or self.slow_ema < self.ema,
            f"learning_progress needs 0 < slow_ema < ema (the slow average is the slower one), "
            f"got slow_ema {self.slow_ema} and ema {self.ema}",
        )
        need(0 <= self.floor < 1, "floor must be in [0, 1)")
        need(
            0 <= self.start_difficulty <= self.max_difficulty <= 1,
            "need 0 <= start_difficulty <= max_difficulty <= 1",
        )
        need(0 < self.difficulty_step <= 1, "difficulty_step must be in (0, 1]")
        need(
            0 <= self.lower_at < self.raise_at <= 1,
            f"need lower_at < raise_at (got {self.lower_at} and {self.raise_at}); e.g. 0.2 and 0.8",
        )
        need(
            0 < self.pause_at <= 1, "pause_at must be in (0, 1]; set 1.0 to pause only perfect arms"
        )
        need(self.min_episodes >= 1, "min_episodes must be >= 1")
        need(
            self.strategy != "sequential" or self.phase_steps >= 1,
            "strategy 'sequential' needs phase_steps >= 1 (steps per arm)",
        )
        need(
            self.order is None
            or (isinstance(self.order, list) and all(isinstance(a, str) for a in self.order)),
            f"order must be a list of arm names, got {self.order!r}",
        )
        need(0 <= self.rest_weight < 1, f"rest_weight must be in [0, 1), got {self.rest_weight}")
        need(
            self.resume_below is None or 0 <= self.resume_below <= self.pause_at,
            f"resume_below must be in [0, pause_at] (or null: pause_at), got {self.resume_below}",
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SchedulerConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise error.Error(f"SchedulerConfig has no field(s) {unknown}; fields: {sorted(names)}")
        return cls(**data)


@dataclass
class ArmState:
    """What the scheduler knows about one task family."""

    difficulty: float
    p_success: float = 0.5
    episodes: int = 0
    """Episodes played at the current difficulty."""
    total_episodes: int = 0
    adv_abs: float = 0.0
    """Smoothed mean absolute advantage of the arm's episodes (how much signal it gives)."""
    p_slow: float = 0.5
    """Slowly smoothed success rate (``slow_ema``); ``|p_success - p_slow|`` is the progress."""
    signal: float = 1.0
    """Smoothed share of the arm's groups with differing rewards (a GRPO gradient)."""
    paused: bool = False
    paused_at_step: int = -1


class TaskScheduler:
    """Chooses ``(arm, difficulty)`` for each prompt of a step and learns from the outcomes."""

    def __init__(self, arms: Sequence[str], config: SchedulerConfig | None = None):
        if not arms:
            raise error.Error("TaskScheduler needs at least one arm (task family)")
        self.config = config or SchedulerConfig()
        start = (
            self.config.start_difficulty if self.config.curriculum else self.config.max_difficulty
        )
        self.arms: dict[str, ArmState] = {a: ArmState(difficulty=start) for a in sorted(set(arms))}
        order = self.config.order
        if order is not None and (
            sorted(set(order)) != list(self.arms) or len(order) != len(self.arms)
        ):
            raise error.Error(
                f"scheduler order must name every arm once: arms {list(self.arms)}, order {order}"
            )
        self.order = list(order or self.arms)
        self.metric_names = metric_names(list(self.arms))
        """Each arm's name in ``scheduler/<name>/...`` metric keys (cleaned, distinct)."""
        self.step = 0
        self._probe_cursor = 0
        self._picks: dict[str, int] = {}
        self._resting: dict[str, int] = {}
        """Question key -> the step up to which it rests (``question_rest``)."""
        self._skipped = 0

    # --- choosing ---------------------------------------------------------------------------

    def current(self) -> str:
        """``sequential``: the arm of the step being chosen (the last one once all are done)."""
        phase = max(self.step - 1, 0) // self.config.phase_steps
        return self.order[min(phase, len(self.order) - 1)]

    def weights(self) -> dict[str, float]:
        """Sampling probability of each arm now (``rest_weight`` for paused arms)."""
        if self.config.strategy == "sequential":
            return {a: float(a == self.current()) for a in self.arms}
        active = [a for a, s in self.arms.items() if not s.paused]
        if not active:
            return {a: 1.0 / len(self.arms) for a in self.arms}  # all converged: keep probing
        raw = {a: self._raw_weight(self.arms[a]) for a in active}
        total = sum(raw.values())
        n = len(active)
        floor = self.config.floor
        resting = len(self.arms) - n
        rest = min(self.config.rest_weight, 0.5 / resting) if resting else 0.0
        share = 1 - rest * resting  # what the active arms share
        probs = {
            a: share * ((1 - floor) * (raw[a] / total if total > 0 else 1 / n) + floor / n)
            for a in active
        }
        return {a: probs.get(a, rest) for a in self.arms}

    def _raw_weight(self, s: ArmState) -> float:
        strategy = self.config.strategy
        if strategy == "success_variance":
            return s.p_success * (1 - s.p_success)
        if strategy == "learning_progress":
            return abs(s.p_success - s.p_slow)
        if strategy == "signal":
            return s.signal
        return 1.0

    def choose(
        self, n: int, rng: np.random.Generator, *, advance: bool = True
    ) -> list[tuple[str, float]]:
        """``n`` ``(arm, difficulty)`` picks for this step (a paused arm is re-probed when due).
        ``advance=False`` draws more for the same step (a trainer's refill round): the step
        count, which ``phase_steps``, ``question_rest`` and ``reprobe_every`` count in, stays."""
        if advance or not self.step:
            self.step += 1
        if self.config.strategy == "sequential":  # draws nothing from rng
            arm = self.current()
            self._picks = {a: n if a == arm else 0 for a in self.arms}
            return [(arm, self.arms[arm].difficulty)] * n
        names = list(self.arms)
        probs = self.weights()
        p = np.array([probs[a] for a in names], dtype=float)
        picks = [names[int(i)] for i in rng.choice(len(names), size=n, p=p / p.sum())]
        paused = [a for a in names if self.arms[a].paused]
        every = self.config.reprobe_every
        if advance and paused and every and self.step % every == 0 and len(paused) < len(names):
            probe = paused[self._probe_cursor % len(paused)]
            self._probe_cursor += 1
            picks[-1] = probe
        self._picks = {a: picks.count(a) for a in names}
        return [(a, self.arms[a].difficulty) for a in picks]

    def resting(self, question: str) -> bool:
        """Whether ``question`` (a prompt's key, see :func:`question_key`) rests this step."""
        return self._resting.get(question, -1) >= self.step

    def skipped(self) -> None:
        """Count one resting question passed over (``scheduler/questions_skipped``)."""
        self._skipped += 1

    def _note_question(self, question: str, flat: bool) -> None:
        rest = self.config.question_rest
        if not rest:
            return
        if flat:
            self._resting[question] = self.step + rest
        else:
            self._resting.pop(question, None)
        if len(self._resting) > _MAX_RESTING:  # procedural families: forget the stalest
            for key in sorted(self._resting, key=self._resting.__getitem__)[: _MAX_RESTING // 4]:
                del self._resting[key]

    # --- learning -------------------------------------------------------------------------------

    def update(
        self,
        arm: str,
        successes: Sequence[bool],
        *,
        advantages: Sequence[float] = (),
        step: int | None = None,
        question: str | None = None,
    ) -> None:
        """Record one step's outcomes for ``arm`` (all its episodes of that step; with
        ``question``, one group on that question)."""
        if arm not in self.arms or not successes:
            return
        # no GRPO gradient: the group's advantages are all equal (its successes, without them)
        flat = len(successes) > 1 and (
            bool(np.ptp(advantages) <= 1e-8) if len(advantages) else len(set(successes)) == 1
        )
        if question is not None:
            self._note_question(question, flat)
        cfg = self.config
        s = self.arms[arm]
        rate = float(np.mean(successes))
        if s.paused:  # a re-probe: keeps tracking the resting arm's success
            s.p_success = (1 - cfg.ema) * s.p_success + cfg.ema * rate
            resume_below = cfg.pause_at if cfg.resume_below is None else cfg.resume_below
            if s.p_success < resume_below:
                s.paused, s.episodes = False, 0
            return
        s.p_success = (1 - cfg.ema) * s.p_success + cfg.ema * rate
        s.p_slow = (1 - cfg.slow_ema) * s.p_slow + cfg.slow_ema * rate
        s.signal = (1 - cfg.ema) * s.signal + cfg.ema * float(not flat)
        s.episodes += len(successes)
        s.total_episodes += len(successes)
        if cfg.strategy == "sequential":  # a fixed plan: no curriculum, no pauses
            return
        if advantages:
            s.adv_abs = (1 - cfg.ema) * s.adv_abs + cfg.ema * float(np.mean(np.abs(advantages)))
        if s.episodes < cfg.min_episodes:
            return
        at_top = not cfg.curriculum or s.difficulty >= cfg.max_difficulty - 1e-9
        if at_top and s.p_success >= cfg.pause_at:
            s.paused, s.paused_at_step = True, self.step if step is None else step
        elif cfg.curriculum and s.p_success >= cfg.raise_at and not at_top:
            s.difficulty = round(min(s.difficulty + cfg.difficulty_step, cfg.max_difficulty), 2)
            s.p_success, s.p_slow, s.episodes = 0.5, 0.5, 0
        elif cfg.curriculum and s.p_success <= cfg.lower_at and s.difficulty > 0:
            s.difficulty = round(max(s.difficulty - cfg.difficulty_step, 0.0), 2)
            s.p_success, s.p_slow, s.episodes = 0.5, 0.5, 0

    # --- observability and checkpoints --------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """``scheduler/<arm>/{p_success,difficulty,weight,paused,adv_abs,picks}`` (the arm's
        :attr:`metric_names` entry) and totals."""
        probs = self.weights()
        out: dict[str, float] = {
            "scheduler/active_arms": float(sum(not s.paused for s in self.arms.values())),
            "scheduler/mean_difficulty": float(np.mean([s.difficulty for s in self.arms.values()])),
            "scheduler/questions_resting": float(
                sum(v >= self.step for v in self._resting.values())
            ),
            "scheduler/questions_skipped": float(self._skipped),
        }
        for a, s in self.arms.items():
            key = f"scheduler/{self.metric_names[a]}"
            out[f"{key}/p_success"] = s.p_success
            out[f"{key}/difficulty"] = s.difficulty
            out[f"{key}/weight"] = probs[a]
            out[f"{key}/paused"] = float(s.paused)
            out[f"{key}/adv_abs"] = s.adv_abs
            out[f"{key}/picks"] = float(self._picks.get(a, 0))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "arms": {a: asdict(s) for a, s in self.arms.items()},
            "step": self.step,
            "probe_cursor": self._probe_cursor,
            "resting": dict(self._resting),
            "skipped": self._skipped,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the arms must be the run's (same env and families)."""
        if sorted(state["arms"]) != sorted(self.arms):
            gone = sorted(set(state["arms"]) ^ set(self.arms))[:5]
            raise error.Error(
                f"the checkpoint's scheduler arms differ from this run's (e.g. {gone}): resume "
                "with the same env_id and env_kwargs, or start a new output_dir"
            )
        self.arms = {a: ArmState(**s) for a, s in state["arms"].items()}
        self.step = int(state["step"])
        self._probe_cursor = int(state["probe_cursor"])
        self._resting = {str(k): int(v) for k, v in state.get("resting", {}).items()}
        self._skipped = int(state.get("skipped", 0))
