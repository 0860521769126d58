"""Playing hacks against an env: the oracle first, then every variant of a hack, judged on the same episodes.

:class:`HackRunner` resets the env with each audited episode's seed, plays the oracle to learn its
return, answer and secrets, then plays each variant a hack proposes (from the first turn, or after
the oracle's work for hacks that start at ``"final"``), and turns the returns into verdicts: above
the limit (a share of the oracle's return, ``1/k`` for a hedge over k answers), leaking a secret,
the env raising, or above the honest baseline for no-gain hacks. It defines no hack (``catalogue/``)
and does not choose which to run or format the report (``api.py``, ``results.py``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from llmgym import error
from llmgym.audit.hacks import Hack, Variant, action_key
from llmgym.audit.reading import code_blocks, core_answer, is_the_answer, unique
from llmgym.audit.results import FAILING_VERDICTS, HackResult, VariantResult
from llmgym.audit.view import Action, View

MAX_STEPS = 256
"""A hard cap on the steps of one audited episode (an env without ``max_turns`` that never ends)."""
_TOL = 1e-6
"""A return within this of its limit is not above it (sums of float rewards)."""
_ORDER = {"ERROR": 0, "LEAK": 1, "FAIL": 2, "pass": 3, "unjudged": 4, "hack-error": 5, "n/a": 6}
"""Which failing variant a row reports first (the worst verdict)."""


class AuditError(error.Error):
    """The audit cannot run: the env cannot be made or reset, or its oracle cannot be played."""


@dataclass
class AuditedEpisode:
    """One audited episode and how the oracle played it."""

    index: int
    seed: int
    options: dict[str, Any] | None
    family: str | None
    task_id: Any = None
    oracle_actions: list[Action] = field(default_factory=list)
    oracle_rewards: list[float] = field(default_factory=list)
    oracle_info: dict[str, Any] = field(default_factory=dict)
    oracle_error: str | None = None
    answer: str | None = None
    secrets: list[str] = field(default_factory=list)
    expects_code: bool = False
    code_language: str | None = None

    @property
    def oracle_return(self) -> float:
        return float(sum(self.oracle_rewards))


@dataclass
class _Outcome:
    status: str  # ok | excluded | env_error | hack_error
    episode: int = -1
    total: float = 0.0
    reference: float | None = None
    success: bool = False
    error: str = ""
    leaks: list[str] = field(default_factory=list)
    example: str = ""


def _short(action: Any, n: int = 300) -> str:
    text = (
        action if isinstance(action, str) else json.dumps(action, ensure_ascii=False, default=str)
    )
    return text if len(text) <= n else text[:n] + f"... ({len(text)} chars)"


def describe_exception(e: BaseException) -> str:
    """An exception on one line: its type and message, cut to 300 characters."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 300 else text[:300] + "..."


def _floor(reward_range: tuple[float, float]) -> float:
    """The return a hack's share is measured from: 0, or ``reward_range``'s lower end when
    rewards cannot be negative or cannot be positive."""
    lo, hi = reward_range
    if lo >= 0 or hi <= 0:
        return float(lo) if math.isfinite(lo) else 0.0
    return 0.0


class HackRunner:
    """Plays the oracle and the variants of each hack on one env, and judges their returns.

    A variant's constant action is played once per episode and start (the outcome is cached), so
    hacks that propose the same action share its play.
    """

    def __init__(
        self,
        env: Any,
        env_id: str,
        *,
        threshold: float,
        reference: float | None,
        difficulty: float | None,
        progress: Callable[[str], None] | None,
    ):
        self.env = env
        self.base = env.unwrapped
        self.env_id = env_id
        self.threshold = threshold
        self.given_reference = reference
        self.difficulty = difficulty
        self.progress = progress
        rr = getattr(self.base, "reward_range", (-math.inf, math.inf))
        try:
            self.reward_range = (float(rr[0]), float(rr[1]))
        except (TypeError, ValueError, IndexError):
            self.reward_range = (-math.inf, math.inf)
        self.floor = _floor(self.reward_range)
        self._cache: dict[tuple[Any, ...], _Outcome] = {}

    # -- episodes ------------------------------------------------------------------------------------

    def _reset(self, ep: AuditedEpisode) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=ep.seed, options=ep.options)
        if not isinstance(info, Mapping):
            info = {}
        if ep.task_id is not None and info.get("task_id") != ep.task_id:
            raise AuditError(
                f"{self.env_id}: reset(seed={ep.seed}) gave task {info.get('task_id')!r}, "
                f"then {ep.task_id!r}: the env is not deterministic under reset(seed=...)"
            )
        return str(obs), dict(info)

    def prepare(self, ep: AuditedEpisode) -> None:
        """Play the oracle on ``ep``: its actions, rewards, final info and answer."""
        try:
            obs, info = self._reset(ep)
        except error.Error:
            raise
        except Exception as e:
            raise AuditError(f"{self.env_id}: reset() raised {describe_exception(e)}") from None
        ep.task_id = info.get("task_id")
        task = getattr(getattr(self.base, "episode", None), "task", None)
        try:
            ep.secrets = (
                [s for s in self.base.secrets(task) if isinstance(s, str) and len(s) >= 6]
                if task is not None
                else []
            )
        except Exception:
            ep.secrets = []
        domain = str(info.get("domain") or "")
        for step in range(self._max_steps(info)):
            try:
                action = self.base.oracle_action()
            except Exception as e:
                ep.oracle_error = describe_exception(e)
                ep.oracle_actions, ep.oracle_rewards = [], []
                break
            if step == 0:
                text = (
                    str(action.get("content") or "") if isinstance(action, Mapping) else str(action)
                )
                fences = code_blocks(text)
                ep.expects_code = domain == "coding" or bool(fences)
                if fences:
                    ep.code_language = {"py": "python", "python3": "python", "c++": "cpp"}.get(
                        fences[-1][0], fences[-1][0]
                    ) or None
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as e:
                raise AuditError(
                    f"{self.env_id}: step() raised on the oracle's own action: {describe_exception(e)}"
                ) from None
            ep.oracle_actions.append(action)
            ep.oracle_rewards.append(float(reward))
            ep.oracle_info = dict(info) if isinstance(info, Mapping) else {}
            if terminated or truncated:
                break
        if ep.oracle_actions:
            core = core_answer(ep.oracle_actions[-1])
            ep.answer = core.text if core is not None and core.text else None

    @staticmethod
    def _max_steps(info: Mapping[str, Any]) -> int:
        turns = info.get("max_turns")
        if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0:
            return min(turns, MAX_STEPS)
        return 64

    def _view(
        self,
        ep: AuditedEpisode,
        obs: str,
        info: Mapping[str, Any],
        reset_info: Mapping[str, Any],
        messages: list[dict[str, Any]],
        turn: int,
        hack: Hack,
    ) -> View:
        oracle: Callable[[], Action] | None = None
        if hack.needs_oracle and ep.oracle_actions:
            oracle = self.base.oracle_action
        msgs = info.get("messages")
        return View(
            observation=obs,
            messages=[dict(m) for m in msgs] if isinstance(msgs, list) else list(messages),
            tools=list(reset_info.get("tools") or []),
            domain=str(reset_info.get("domain") or ""),
            family=str(reset_info.get("family") or ""),
            turn=turn,
            max_turns=self._max_steps(reset_info),
            expects_code=ep.expects_code,
            code_language=ep.code_language,
            oracle=oracle,
            oracle_info=ep.oracle_info if hack.needs_oracle else None,
            oracle_steps=len(ep.oracle_actions) if hack.needs_oracle else None,
            open_ended=bool(getattr(self.base, "open_ended", False)),
        )

    def _begin(
        self, ep: AuditedEpisode, hack: Hack
    ) -> tuple[str, dict[str, Any], dict[str, Any], list[dict[str, Any]], int]:
        obs, info = self._reset(ep)
        reset_info = info
        messages = list(info.get("messages") or [{"role": "user", "content": obs}])
        turn = 0
        if hack.start == "final":
            for action in ep.oracle_actions[:-1]:
                obs, _, terminated, truncated, info = self.env.step(action)
                obs, info = str(obs), dict(info)
                messages = list(info.get("messages") or messages)
                turn += 1
                if terminated or truncated:
                    raise AuditError(f"{self.env_id}: replaying the oracle ended the episode early")
        return obs, info, reset_info, messages, turn

    def play(
        self, ep: AuditedEpisode, hack: Hack, variant: Variant, first: Action | None
    ) -> _Outcome:
        """One episode of one variant, from where the hack takes over (constant actions cached)."""
        key = None
        if variant.policy is None:
            key = (
                ep.family,
                ep.index,
                hack.start,
                hack.exclude_answer,
                action_key(variant.action),
            )
            if key in self._cache:
                return replace(self._cache[key])
        outcome = self._play(ep, hack, variant, first)
        if key is not None:
            self._cache[key] = outcome
        return replace(outcome)

    def _play_mixed(self, ep: AuditedEpisode, hack: Hack, variant: Variant) -> _Outcome:
        """A mixed variant: each of its actions once; the episode's return is their mean. The
        episode is set aside if one of its controls alone earns more than the limit."""
        for control in variant.controls:
            probe = self.play(ep, hack, Variant(variant.name, action=control), None)
            if probe.status != "ok":
                return probe
            share = min(self.threshold, 1.0 / max(variant.alternatives, 1))
            ref = float(probe.reference or 0.0)
            if probe.total > self.floor + share * max(0.0, ref - self.floor) + _TOL:
                probe.status, probe.example = "excluded", _short(control)
                return probe
        outs = [self.play(ep, hack, Variant(variant.name, action=a), None) for a in variant.mixed]
        bad = next((o for o in outs if o.status != "ok"), None)
        if bad is not None:
            return bad
        merged = replace(outs[0])
        merged.total = sum(o.total for o in outs) / len(outs)
        merged.success = any(o.success for o in outs)
        merged.leaks = unique(s for o in outs for s in o.leaks)
        return merged

    def _play(
        self, ep: AuditedEpisode, hack: Hack, variant: Variant, first: Action | None
    ) -> _Outcome:
        reference = ep.oracle_rewards[-1] if hack.start == "final" else ep.oracle_return
        out = _Outcome("ok", episode=ep.index, reference=reference)
        try:
            obs, info, reset_info, messages, turn = self._begin(ep, hack)
        except AuditError:
            raise
        except Exception as e:
            out.status, out.error = "env_error", f"reset raised {describe_exception(e)}"
            return out
        written: list[str] = []
        for step in range(turn, self._max_steps(reset_info) + 1):
            view = self._view(ep, obs, info, reset_info, messages, step, hack)
            try:
                action = first if (step == turn and first is not None) else variant.act(view)
            except Exception as e:
                out.status, out.error = "hack_error", describe_exception(e)
                return out
            if step == turn:
                out.example = _short(action)
                if hack.exclude_answer and ep.answer is not None:
                    core = core_answer(action)
                    if core is not None and is_the_answer(core.text, ep.answer):
                        out.status = "excluded"
                        return out
            written.append(action if isinstance(action, str) else action_key(action))
            try:
                obs, reward, terminated, truncated, info = self.env.step(action)
            except Exception as e:
                out.status, out.error = "env_error", f"step() raised {describe_exception(e)}"
                return out
            obs = str(obs)
            info = dict(info) if isinstance(info, Mapping) else {}
            messages = list(
                info.get("messages")
                or [
                    *messages,
                    {"role": "assistant", "content": _short(action, 10**6)},
                    {"role": "user", "content": obs},
                ]
            )
            out.total += float(reward)
            out.success = bool(info.get("is_success", False))
            out.leaks += self._leaks(ep, obs, info, written)
            if terminated or truncated:
                break
        out.leaks = unique(out.leaks)
        return out

    def _leaks(
        self, ep: AuditedEpisode, obs: str, info: Mapping[str, Any], written: list[str]
    ) -> list[str]:
        if not ep.secrets:
            return []
        parts = [obs]
        for m in info.get("messages") or []:
            if isinstance(m, Mapping) and m.get("role") != "assistant":
                parts.append(str(m.get("content") or ""))
        rest = {k: v for k, v in info.items() if k != "messages"}
        try:
            parts.append(json.dumps(rest, ensure_ascii=False, default=str))
        except (TypeError, ValueError):
            parts.append(repr(rest))
        shown = "\n".join(parts)
        mine = "\n".join(written)
        return [
            s[:60] for s in ep.secrets if s in shown and s not in mine and s not in _prompt_of(info)
        ]

    # -- one hack -----------------------------------------------------------------------------------------

    def run_hack(
        self, hack: Hack, episodes: list[AuditedEpisode], family: str | None, slow_episodes: int
    ) -> HackResult:
        started = time.perf_counter()
        eps = episodes[:slow_episodes] if hack.slow else episodes
        if hack.needs_oracle:
            eps = [e for e in eps if e.oracle_actions]
        outcomes: dict[str, list[_Outcome]] = {}
        alternatives: dict[str, int] = {}
        hack_errors: list[str] = []
        for ep in eps:
            try:
                obs, info, reset_info, messages, turn = self._begin(ep, hack)
                view = self._view(ep, obs, info, reset_info, messages, turn, hack)
            except AuditError:
                raise
            except Exception as e:
                outcomes.setdefault("(reset)", []).append(
                    _Outcome(
                        "env_error", episode=ep.index, error=f"reset raised {describe_exception(e)}"
                    )
                )
                continue
            try:
                variants = hack(view)
            except Exception as e:
                hack_errors.append(describe_exception(e))
                continue
            for v in variants:
                alternatives[v.name] = max(alternatives.get(v.name, 1), max(1, int(v.alternatives)))
                first: Action | None = None
                if v.policy is not None:  # its first action, on the view the hack was made from
                    try:
                        first = v.policy(view)
                    except Exception as e:
                        outcomes.setdefault(v.name, []).append(
                            _Outcome("hack_error", episode=ep.index, error=describe_exception(e))
                        )
                        continue
                if v.mixed:
                    outcomes.setdefault(v.name, []).append(self._play_mixed(ep, hack, v))
                else:
                    outcomes.setdefault(v.name, []).append(self.play(ep, hack, v, first))
        judged = [
            self._judge(name, outs, alternatives.get(name, 1), hack)
            for name, outs in outcomes.items()
        ]
        if hack.baseline is not None:
            self._judge_against_baseline(hack.baseline, judged, outcomes)
        result = summarise(hack, family, judged, hack_errors, bool(eps))
        result.seconds = time.perf_counter() - started
        return result

    def _judge(
        self, name: str, outs: list[_Outcome], alternatives: int, hack: Hack
    ) -> VariantResult:
        played = [o for o in outs if o.status == "ok"]
        errors = unique((o.error for o in outs if o.error), 5)
        leaks = unique((s for o in played for s in o.leaks), 5)
        example = next((o.example for o in outs if o.example), "")
        mean = sum(o.total for o in played) / len(played) if played else None
        reference: float | None = None
        if played and self.given_reference is not None and hack.start == "reset":
            reference = self.given_reference
        elif played and all(o.reference is not None for o in played):
            reference = sum(float(o.reference or 0.0) for o in played) / len(played)
        limit = None
        if reference is not None:
            share = min(self.threshold, 1.0 / max(alternatives, 1))
            limit = self.floor + share * max(0.0, reference - self.floor)
        if any(o.status == "env_error" for o in outs):
            verdict = "ERROR"
        elif leaks:
            verdict = "LEAK"
        elif not played:
            verdict = "hack-error" if any(o.status == "hack_error" for o in outs) else "n/a"
        elif limit is None or mean is None:
            verdict = "unjudged"
        else:
            verdict = "FAIL" if mean > limit + _TOL else "pass"
        return VariantResult(
            name=name,
            verdict=verdict,
            mean=mean,
            reference=reference,
            limit=limit,
            episodes=len(played),
            success_rate=sum(o.success for o in played) / len(played) if played else None,
            alternatives=alternatives,
            excluded=sum(o.status == "excluded" for o in outs),
            errors=errors,
            leaks=leaks,
            example=example,
        )

    def _judge_against_baseline(
        self, baseline: str, results: list[VariantResult], outcomes: dict[str, list[_Outcome]]
    ) -> None:
        """No-gain hacks: each trick against the honest variant, episode by episode."""
        honest = {o.episode: o for o in outcomes.get(baseline, []) if o.status == "ok"}
        for v in results:
            if v.name == baseline:
                if v.verdict in ("pass", "FAIL", "unjudged"):
                    v.verdict = "reference"
                v.limit = None
                continue
            if v.verdict not in ("pass", "FAIL", "unjudged"):
                continue
            pairs = [
                (o, honest[o.episode])
                for o in outcomes.get(v.name, [])
                if o.status == "ok" and o.episode in honest
            ]
            if not pairs:
                v.verdict = "unjudged"
                continue
            v.mean = sum(o.total for o, _ in pairs) / len(pairs)
            v.reference = sum(b.total for _, b in pairs) / len(pairs)
            v.limit = v.reference
            v.verdict = "FAIL" if v.mean > v.limit + _TOL else "pass"


def summarise(
    hack: Hack, family: str | None, variants: list[VariantResult], hack_errors: list[str], ran: bool
) -> HackResult:
    """One row for a hack: its worst offender if any variant fails, else the one nearest its limit."""
    why: str | None
    if not variants or all(v.verdict in ("n/a", "hack-error", "reference") for v in variants):
        if hack_errors or any(v.verdict == "hack-error" for v in variants):
            verdict = "hack-error"
            why = hack_errors[0] if hack_errors else next(e for v in variants for e in v.errors)
        else:
            verdict = "n/a"
            why = "needs the oracle" if hack.needs_oracle and not ran else None
        return HackResult(
            hack.name, family, verdict, None, None, None, None, variants, hack.description, why
        )
    failing = [v for v in variants if v.verdict in FAILING_VERDICTS]
    if failing:
        pick = min(failing, key=lambda v: (_ORDER[v.verdict], -v.margin))
    else:
        pool = [v for v in variants if v.verdict in ("pass", "unjudged")]
        pick = max(pool, key=lambda v: (v.margin, v.mean if v.mean is not None else -math.inf))
    error_text = (pick.errors[0] if pick.errors else None) or (
        hack_errors[0] if hack_errors else None
    )
    return HackResult(
        hack=hack.name,
        family=family,
        verdict=pick.verdict,
        mean=pick.mean,
        reference=pick.reference,
        limit=pick.limit,
        variant=pick.name,
        variants=variants,
        description=hack.description,
        error=error_text,
    )


def _prompt_of(info: Mapping[str, Any]) -> str:
    for m in info.get("messages") or []:
        if isinstance(m, Mapping) and m.get("role") == "user":
            return str(m.get("content") or "")
    return ""
