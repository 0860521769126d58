"""Live monitoring of a training or evaluation run: per-domain and per-family metrics, and alerts.

A :class:`Monitor` is handed each step's finished episodes (a training step's rollouts, or a
window of an evaluation's results), the run-wide scalars (``kl``, ``entropy``) and, from a
trainer, each family's :class:`TokenSums` (its trained tokens and their summed KL and entropy).
It returns the step's metrics under three scopes, and the alerts that fired:

- ``overall/<metric>``, ``domain/<domain>/<metric>``, ``family/<domain>/<family>/<metric>``
  with ``<metric>`` one of ``reward``, ``success``, ``length`` (completion tokens),
  ``episodes`` and ``anomaly`` (the share of code-running episodes with a sandbox anomaly:
  a timeout, a memory kill, a crash or a sandbox error, counted by
  :func:`llmgym.evaluation.metrics.exec_stats`, as the evaluation report counts them); and
  from token sums ``kl``, ``entropy`` (per trained token: token-weighted, so ``overall/kl`` is
  the trainer's run-wide ``kl``) and ``trained_tokens``. KL is a training metric (against the
  reference model, or the update's own KL): an evaluation has none, nor entropy (it keeps no
  log-probs);
- alerts from the rules of a run's config (:class:`AlertRule`): ``reward_collapse``,
  ``kl_above``, ``anomaly_above`` and ``forgetting`` (a family's success at one difficulty
  dropping more than ``points`` below its best). A rule fires once when its condition starts
  to hold and again only after it has cleared; each alert names an ``action``: ``log``,
  ``checkpoint`` or ``stop``. What an action does is the caller's (the trainer saves or stops;
  :class:`EvalMonitor` raises :class:`MonitorStop`).

Names that reach metric keys come from ``info`` (model- and env-controlled text): they are
reduced to ``[A-Za-z0-9_.-]`` and 64 characters, and at most :data:`MAX_FAMILIES` families are
tracked (the rest count as ``_other``). This module decides nothing about the run itself and
draws nothing: :mod:`llmgym.evaluation.dashboard` draws; ``llmgym.agents.monitoring`` wires it
into the trainers.

>>> m = Monitor([AlertRule("kl_above", bound=0.1, window=1)])
>>> metrics, alerts = m.observe(1, [Episode("math", "add", 0.0, 1.0, True, 12)], {"kl": 0.5})
>>> metrics["family/math/add/success"], [a.rule for a in alerts]
(1.0, ['kl_above'])
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from llmgym import error

log = logging.getLogger(__name__)

RULES = ("reward_collapse", "kl_above", "anomaly_above", "forgetting")
ACTIONS = ("log", "checkpoint", "stop")
SCOPES = ("all", "domain", "family")
MAX_FAMILIES = 2000
"""Distinct families tracked; an env that invents a family per episode cannot grow the keys
(or the dashboard) without bound."""
ALERTS_FILE = "alerts.jsonl"
MONITOR_FILE = "monitor.jsonl"
_THRESHOLD = {"reward_collapse": "drop", "kl_above": "bound", "anomaly_above": "bound"}
_THRESHOLD["forgetting"] = "points"


class MonitorStop(error.Error):
    """An alert whose action is ``stop`` fired; the run stopped (and can be resumed)."""


def clean_name(value: Any) -> str:
    """A domain or family name fit for a metric key.

    >>> clean_name("math/../x y"), clean_name(None), clean_name("a" * 99)[-3:]
    ('math_.._x_y', 'unknown', 'aaa')
    """
    text = value if isinstance(value, str) else "unknown"
    text = re.sub(r"[^A-Za-z0-9_.\-]+", "_", text)[:64]
    return text if text.strip("._") else "unknown"


def _number(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    number = float(value)
    return number if math.isfinite(number) else default


# --- episodes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """What the monitor needs of one finished episode."""

    domain: str
    family: str
    difficulty: float
    reward: float
    success: bool
    length: int
    """Completion tokens (0 when the policy does not report them)."""
    ran_code: bool = False
    anomalous: bool = False
    """At least one execution hit a limit, crashed or failed in the sandbox."""

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Episode:
        """An episode of an evaluation's ``results.jsonl`` (any malformed field is tolerated)."""
        from llmgym.evaluation.metrics import exec_stats

        stats = exec_stats([record])
        return cls(
            domain=clean_name(record.get("domain")),
            family=clean_name(record.get("family")),
            difficulty=round(_number(record.get("difficulty")), 2),
            reward=_number(record.get("reward")),
            success=record.get("success") is True,
            length=int(_number(record.get("completion_tokens"))),
            ran_code=stats is not None,
            anomalous=bool(stats and stats["episode_anomaly_rate"] > 0),
        )


@dataclass(frozen=True)
class TokenSums:
    """One family's trained completion tokens in one update, and the sums over those tokens of
    the per-token KL (None: the run measures none) and entropy. Scopes add sums, then divide:
    the token-weighted means that reproduce the trainer's run-wide figures."""

    tokens: float
    kl: float | None = None
    entropy: float | None = None

    def __add__(self, other: TokenSums) -> TokenSums:
        def both(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        return TokenSums(
            self.tokens + other.tokens, both(self.kl, other.kl), both(self.entropy, other.entropy)
        )


FamilyTokens = Mapping[tuple[str, str], TokenSums]
"""Token sums by ``(domain, family)``."""


def _scopes(episode: Episode) -> tuple[str, str, str]:
    return _key_scopes(episode.domain, episode.family)


def _key_scopes(domain: str, family: str) -> tuple[str, str, str]:
    d, f = clean_name(domain), clean_name(family)
    return "overall", f"domain/{d}", f"family/{d}/{f}"


def _scope_tokens(tokens: FamilyTokens) -> dict[str, TokenSums]:
    """Every scope's summed :class:`TokenSums` (families with no trained token are left out)."""
    out: dict[str, TokenSums] = {}
    for (domain, family), sums in tokens.items():
        if not (_number(sums.tokens) > 0):
            continue
        for scope in _key_scopes(domain, family):
            out[scope] = out[scope] + sums if scope in out else sums
    return out


def scope_metrics(
    episodes: Sequence[Episode], tokens: FamilyTokens | None = None
) -> dict[str, float]:
    """``<scope>/{reward,success,length,episodes,anomaly}`` of a batch of episodes, and
    ``<scope>/{kl,entropy,trained_tokens}`` of its families' token sums."""
    groups: dict[str, list[Episode]] = {}
    for e in episodes:
        for scope in _scopes(e):
            groups.setdefault(scope, []).append(e)
    out: dict[str, float] = {}
    for scope, group in groups.items():
        n = len(group)
        out[f"{scope}/reward"] = sum(e.reward for e in group) / n
        out[f"{scope}/success"] = sum(e.success for e in group) / n
        out[f"{scope}/length"] = sum(e.length for e in group) / n
        out[f"{scope}/episodes"] = float(n)
        coded = [e for e in group if e.ran_code]
        if coded:
            out[f"{scope}/anomaly"] = sum(e.anomalous for e in coded) / len(coded)
    for scope, sums in _scope_tokens(tokens or {}).items():
        out[f"{scope}/trained_tokens"] = sums.tokens
        for name in ("kl", "entropy"):
            value = getattr(sums, name)
            if value is not None:
                out[f"{scope}/{name}"] = value / sums.tokens
    return out


# --- rules ------------------------------------------------------------------------------------


@dataclass
class AlertRule:
    """One alert rule (an item of ``alerts:`` in a trainer's YAML config, or of an alerts file).

    >>> AlertRule.from_dict({"rule": "forgetting", "points": 10, "action": "checkpoint"}).scope
    'family'
    """

    rule: str
    """``reward_collapse``, ``kl_above``, ``anomaly_above`` or ``forgetting``."""
    drop: float | None = None
    """reward_collapse: fire when the windowed mean reward falls more than this (in reward
    units) below its best window."""
    bound: float | None = None
    """kl_above: fire when the windowed KL (per token) exceeds it; anomaly_above: when the windowed share
    of code-running episodes with a sandbox anomaly exceeds it (a fraction in [0, 1])."""
    points: float | None = None
    """forgetting: fire when a family's windowed success at one difficulty falls more than
    this many percentage points below its best window. The best is taken at its lower bound
    (mean minus 3 standard errors): the best of many noisy windows is high by chance, and a
    quiet run must stay quiet."""
    action: str = "log"
    """``log`` (every alert is logged and marked on the dashboard), ``checkpoint`` (also save
    a checkpoint) or ``stop`` (also end the run: a trainer saves and returns; ``llmgym eval``
    stops and can be resumed)."""
    window: int = 3
    """kl_above: steps whose KL is averaged (a family's: the steps that trained it)."""
    episodes: int = 200
    """The other rules: each scope's latest steps holding at least this many episodes are
    averaged, and nothing is judged before it has them (200 episodes: a success rate within
    about 3 points; with 50, noise alone moves it 6)."""
    scope: str = ""
    """Where the rule looks: ``all``, ``domain`` or ``family`` (default: ``all``, and
    ``family`` for forgetting). kl_above at ``all`` judges the run-wide ``kl``; at ``domain``
    or ``family`` each one's token-weighted KL, so one family drifting away from the
    reference fires for that family alone."""

    def __post_init__(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise error.Error(f"alert rule {self.rule!r}: {message}")

        if self.rule not in RULES:
            raise error.Error(f"alert rule must be one of {RULES}, got {self.rule!r}")
        wanted = _THRESHOLD[self.rule]
        for name in ("drop", "bound", "points"):
            value = getattr(self, name)
            if name == wanted:
                need(
                    _number(value, -1.0) >= 0 and not isinstance(value, bool),
                    f"needs {name}: a number >= 0 (e.g. {name}: {_EXAMPLE[self.rule]})",
                )
            else:
                need(value is None, f"takes {wanted}, not {name}")
        if self.rule == "anomaly_above":
            need(_number(self.bound) <= 1, "bound is a share of episodes, in [0, 1]")
        need(self.action in ACTIONS, f"action must be one of {ACTIONS}, got {self.action!r}")
        need(
            isinstance(self.window, int) and not isinstance(self.window, bool) and self.window >= 1,
            f"window must be an integer >= 1, got {self.window!r}",
        )
        need(
            isinstance(self.episodes, int)
            and not isinstance(self.episodes, bool)
            and self.episodes >= 1,
            f"episodes must be an integer >= 1, got {self.episodes!r}",
        )
        default = "family" if self.rule == "forgetting" else "all"
        self.scope = self.scope or default
        allowed = {"forgetting": ("domain", "family")}.get(self.rule, SCOPES)
        need(self.scope in allowed, f"scope must be one of {allowed}, got {self.scope!r}")

    @property
    def threshold(self) -> float:
        return float(getattr(self, _THRESHOLD[self.rule]))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AlertRule:
        if not isinstance(data, Mapping):
            raise error.Error(f"an alert rule is a mapping such as {_EXAMPLE_RULE}, got {data!r}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise error.Error(f"alert rule has no field(s) {unknown}; fields: {sorted(names)}")
        if "rule" not in data:
            raise error.Error(f"an alert rule needs 'rule' (one of {RULES}): {_EXAMPLE_RULE}")
        return cls(**dict(data))


_EXAMPLE = {"reward_collapse": 0.5, "kl_above": 0.1, "anomaly_above": 0.2, "forgetting": 10}
_EXAMPLE_RULE = "{rule: forgetting, points: 10, action: checkpoint}"


def parse_rules(items: Any) -> list[AlertRule]:
    """Rules from a config value: a list of mappings (``None`` or ``[]``: no rules)."""
    if items is None:
        return []
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise error.Error(f"alerts must be a list of rules such as [{_EXAMPLE_RULE}]")
    return [r if isinstance(r, AlertRule) else AlertRule.from_dict(r) for r in items]


def load_rules(path: str | Path) -> list[AlertRule]:
    """Rules from a YAML file: a list, or a mapping with an ``alerts:`` list (a trainer config)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise error.Error(f"cannot read alert rules from {path}: {e}") from None
    if isinstance(data, Mapping):
        data = data.get("alerts")
    return parse_rules(data)


@dataclass
class Alert:
    """A rule that fired: where, when, the value it saw and what to do."""

    step: int
    rule: str
    key: str
    value: float
    threshold: float
    action: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _RuleState:
    windows: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    best: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The best window's rank (its lower bound for forgetting, else its mean) and its mean."""
    active: set[str] = field(default_factory=set)


# --- the monitor ------------------------------------------------------------------------------


class Monitor:
    """Turns each step's episodes into scoped metrics and fires the alert rules."""

    def __init__(self, rules: Sequence[AlertRule] = ()):
        self.rules = list(rules)
        self._states = [_RuleState() for _ in self.rules]
        self._families: set[str] = set()

    def _family(self, domain: str, family: str) -> str:
        """The family's name, or ``_other`` once :data:`MAX_FAMILIES` others are tracked."""
        key = f"{clean_name(domain)}/{clean_name(family)}"
        if key not in self._families and len(self._families) >= MAX_FAMILIES:
            return "_other"
        self._families.add(key)
        return family

    def _fold(self, episodes: Iterable[Episode]) -> list[Episode]:
        out = []
        for e in episodes:
            family = self._family(e.domain, e.family)
            out.append(e if family == e.family else Episode(**{**asdict(e), "family": family}))
        return out

    def _fold_tokens(self, tokens: FamilyTokens) -> dict[tuple[str, str], TokenSums]:
        out: dict[tuple[str, str], TokenSums] = {}
        for (domain, family), sums in tokens.items():
            key = (clean_name(domain), clean_name(self._family(domain, family)))
            out[key] = out[key] + sums if key in out else sums
        return out

    def observe(
        self,
        step: int,
        episodes: Sequence[Episode],
        scalars: Mapping[str, Any] | None = None,
        tokens: FamilyTokens | None = None,
    ) -> tuple[dict[str, float], list[Alert]]:
        """This step's metrics (``<scope>/<metric>``, plus ``alerts/fired``) and new alerts;
        ``tokens``: each family's :class:`TokenSums` of the step's update (a trainer's)."""
        episodes = self._fold(episodes)
        folded = self._fold_tokens(tokens or {})
        metrics = scope_metrics(episodes, folded)
        alerts: list[Alert] = []
        for rule, state in zip(self.rules, self._states, strict=True):
            seen = _observations(rule, episodes, scalars or {}, folded)
            for key, (total, count) in seen.items():
                alert = _judge(rule, state, step, key, total, count)
                if alert is not None:
                    alerts.append(alert)
        metrics["alerts/fired"] = float(len(alerts))
        return metrics, alerts

    def state_dict(self) -> dict[str, Any]:
        """JSON-able: rolling windows, bests and which alerts are active (for checkpoints)."""
        return {
            "rules": [asdict(r) for r in self.rules],
            "states": [
                {
                    "windows": {k: [list(p) for p in w] for k, w in s.windows.items()},
                    "best": {k: list(v) for k, v in s.best.items()},
                    "active": sorted(s.active),
                }
                for s in self._states
            ],
            "families": sorted(self._families),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the rules must be the same (change them in a new run)."""
        if state.get("rules") != [asdict(r) for r in self.rules]:
            raise error.Error(
                "the checkpoint's alert rules differ from the config's: resume with the same "
                "alerts, or start a new run (output_dir) with the new ones"
            )
        self._states = [
            _RuleState(
                windows={
                    k: deque((float(a), float(b)) for a, b in w) for k, w in s["windows"].items()
                },
                best={k: (float(v[0]), float(v[1])) for k, v in s["best"].items()},
                active=set(s["active"]),
            )
            for rule, s in zip(self.rules, state["states"], strict=True)
        ]
        self._families = set(state.get("families", []))


def _observations(
    rule: AlertRule, episodes: Sequence[Episode], scalars: Mapping[str, Any], tokens: FamilyTokens
) -> dict[str, tuple[float, float]]:
    """``{key: (sum, count)}`` the rule looks at this step."""
    level = {"all": 0, "domain": 1, "family": 2}[rule.scope]
    if rule.rule == "kl_above":
        return _kl_observations(level, scalars, tokens)
    out: dict[str, tuple[float, float]] = {}
    for e in episodes:
        key = _scopes(e)[level]
        if rule.rule == "reward_collapse":
            value = e.reward
        elif rule.rule == "anomaly_above":
            if not e.ran_code:
                continue
            value = float(e.anomalous)
        else:  # forgetting: success at one difficulty (a curriculum's harder level is no loss)
            key, value = f"{key}@{e.difficulty:.2f}", float(e.success)
        total, count = out.get(key, (0.0, 0.0))
        out[key] = (total + value, count + 1)
    return out


def _kl_observations(
    level: int, scalars: Mapping[str, Any], tokens: FamilyTokens
) -> dict[str, tuple[float, float]]:
    """The run-wide ``kl`` (level 0), or each domain's or family's KL per trained token. A
    missing KL (none measured) is not judged; a NaN or infinite one is above any bound (a
    diverged update is when the alert is needed most)."""
    if level == 0:
        value = scalars.get("kl")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return {}
        return {"kl": (float(value) if math.isfinite(value) else math.inf, 1.0)}
    out = {}
    for scope, sums in _scope_tokens(tokens).items():
        if scope.count("/") == level and sums.kl is not None:
            kl = sums.kl / sums.tokens
            out[scope] = (kl if math.isfinite(kl) else math.inf, 1.0)
    return out


def _judge(
    rule: AlertRule, state: _RuleState, step: int, key: str, total: float, count: float
) -> Alert | None:
    window = state.windows.setdefault(key, deque())
    window.append((total, count))
    if rule.rule == "kl_above":
        while len(window) > rule.window:
            window.popleft()
    else:  # the latest steps holding at least rule.episodes episodes
        while len(window) > 1 and sum(c for _, c in window) - window[0][1] >= rule.episodes:
            window.popleft()
    n = sum(c for _, c in window)
    if rule.rule != "kl_above" and n < rule.episodes:
        return None
    mean = sum(t for t, _ in window) / n
    if rule.rule in ("kl_above", "anomaly_above"):
        firing, ref = mean > rule.threshold, rule.threshold
    else:
        # forgetting ranks windows by their lower bound; reward_collapse by their mean.
        low = mean - 3 * math.sqrt(max(mean * (1 - mean), 1 / n) / n)
        rank = low if rule.rule == "forgetting" else mean
        if key not in state.best or rank > state.best[key][0]:
            state.best[key] = (rank, mean)
        best_rank, ref = state.best[key]
        margin = rule.threshold / 100 if rule.rule == "forgetting" else rule.threshold
        firing = best_rank - mean > margin
    if not firing:
        state.active.discard(key)
        return None
    if key in state.active:
        return None
    state.active.add(key)
    return Alert(step, rule.rule, key, mean, ref, rule.action, _message(rule, key, mean, ref))


def _message(rule: AlertRule, key: str, value: float, ref: float) -> str:
    if rule.rule == "kl_above":
        where = "" if key == "kl" else f"{key}: "
        return f"{where}KL {value:.4g} per token is above {ref:.4g}"
    if rule.rule == "anomaly_above":
        return f"{key}: sandbox anomalies in {value:.0%} of code-running episodes (bound {ref:.0%})"
    if rule.rule == "reward_collapse":
        return f"{key}: mean reward {value:.4g} fell more than {rule.threshold:g} below its best {ref:.4g}"
    return (
        f"{key}: success {value:.0%} is {100 * (ref - value):.1f} points below its best "
        f"{ref:.0%} (forgetting; bound {rule.threshold:g} points)"
    )


# --- files: the alert log, and an evaluation's monitor ------------------------------------------


def write_alerts(run_dir: str | Path, alerts: Sequence[Alert], *, where: str = "") -> None:
    """Log each alert and append it to ``<run_dir>/alerts.jsonl`` (what the dashboard marks)."""
    if not alerts:
        return
    path = Path(run_dir) / ALERTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        for a in alerts:
            log.warning(
                "alert %s (%s) at %s %d: %s", a.rule, a.action, where or "step", a.step, a.message
            )
            f.write(json.dumps(a.to_dict()) + "\n")


def read_alerts(run_dir: str | Path) -> list[dict[str, Any]]:
    """The alerts a run logged (malformed lines skipped)."""
    from llmgym.evaluation.rollouts import load_jsonl

    return [a for a in load_jsonl(Path(run_dir) / ALERTS_FILE) if isinstance(a.get("step"), int)]


class EvalMonitor:
    """Monitors an evaluation as its results arrive: every ``every`` episodes make one step of
    ``<out>/monitor.jsonl`` (and TensorBoard under ``<out>/tb`` when available), and alerts go
    to ``<out>/alerts.jsonl``. With ``stop_on_alert`` (in-process use) a ``stop`` alert raises
    :class:`MonitorStop` from :meth:`add`."""

    def __init__(
        self,
        out: str | Path,
        rules: Sequence[AlertRule] = (),
        *,
        every: int = 16,
        tensorboard: bool = True,
        stop_on_alert: bool = False,
    ):
        if every < 1:
            raise error.Error(f"EvalMonitor: every must be >= 1 episode, got {every}")
        self.out = Path(out)
        self.every = every
        self.monitor = Monitor(rules)
        self.stop_on_alert = stop_on_alert
        self.step = 0
        self.alerts: list[Alert] = []
        self._pending: list[Episode] = []
        self._tb: Any = None
        self.out.mkdir(parents=True, exist_ok=True)
        if tensorboard:
            self._tb = _tensorboard_writer(self.out / "tb")

    def add(self, record: Mapping[str, Any]) -> list[Alert]:
        """Count one finished episode record; returns the alerts of a step it completed."""
        self._pending.append(Episode.from_record(record))
        return self.flush() if len(self._pending) >= self.every else []

    def flush(self) -> list[Alert]:
        """Make a step of the episodes not yet counted (none: nothing happens)."""
        if not self._pending:
            return []
        self.step += 1
        metrics, alerts = self.monitor.observe(self.step, self._pending)
        self._pending = []
        import time

        line = {"step": self.step, "time": round(time.time(), 3), **metrics}
        with (self.out / MONITOR_FILE).open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        if self._tb is not None:
            for key, value in metrics.items():
                self._tb.add_scalar(key, value, self.step)
            self._tb.flush()
        write_alerts(self.out, alerts, where="window")
        self.alerts += alerts
        stops = [a for a in alerts if a.action == "stop"]
        if stops and self.stop_on_alert:
            raise MonitorStop(f"stopped by alert: {stops[0].message}")
        return alerts

    def close(self) -> None:
        """Count the last partial window and close TensorBoard."""
        try:
            self.flush()
        finally:
            if self._tb is not None:
                self._tb.close()
                self._tb = None


def _tensorboard_writer(path: Path) -> Any:
    """torch's ``SummaryWriter`` (the trainers' own), or None when torch or tensorboard is
    missing: ``monitor.jsonl`` is the record."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(path))
