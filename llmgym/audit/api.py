"""The :func:`audit` call: check its arguments, make the env, and run the chosen hacks family by family.

It picks the hacks (:data:`~llmgym.audit.hacks.HACKS`, or those named, less those skipped), makes
or takes the env, builds the audited episodes of each family (seeds ``seed, seed+1, ...``), has
the runner play the oracle on them and decides the reference (the oracle, the env's documented
maximum, a given number, or none), then runs every hack and gathers the rows into an
:class:`~llmgym.audit.results.AuditReport`. How a hack is played and judged is ``playing.py``.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llmgym import error
from llmgym.audit.hacks import HACKS, Hack
from llmgym.audit.playing import AuditedEpisode, AuditError, HackRunner, describe_exception
from llmgym.audit.reading import unique
from llmgym.audit.results import AuditReport, HackResult

DEFAULT_EPISODES = 5
DEFAULT_THRESHOLD = 0.5


def _select(hacks: Sequence[str | Hack] | None, skip: Sequence[str], slow: bool) -> list[Hack]:
    chosen: list[Hack] = []
    if hacks is None:
        chosen = list(HACKS.values())
    else:
        for h in hacks:
            if isinstance(h, Hack):
                chosen.append(h)
            elif h in HACKS:
                chosen.append(HACKS[h])
            else:
                raise error.Error(f"No hack named {h!r}; available: {', '.join(HACKS)}")
    unknown = [s for s in skip if s not in HACKS and not any(c.name == s for c in chosen)]
    if unknown:
        raise error.Error(f"No hack named {unknown[0]!r} to skip; available: {', '.join(HACKS)}")
    return [h for h in chosen if h.name not in set(skip) and (slow or not h.slow)]


def _entry_takes(env_id: str, param: str) -> bool:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    try:
        spec = gym.spec(env_id)
        creator = (
            spec.entry_point
            if callable(spec.entry_point)
            else load_env_creator(str(spec.entry_point))
        )
        sig = inspect.signature(creator)
    except Exception:
        return False
    return param in sig.parameters


def _open(
    env_or_id: Any, env_kwargs: Mapping[str, Any] | None, backend: str | None
) -> tuple[Any, str, bool]:
    import gymnasium as gym

    kwargs = dict(env_kwargs or {})
    if isinstance(env_or_id, gym.Env):
        if kwargs or backend:
            raise error.Error("env_kwargs and backend apply to an env id; this env is already made")
        spec = getattr(env_or_id, "spec", None)
        return env_or_id, getattr(spec, "id", None) or type(env_or_id.unwrapped).__name__, False
    if not isinstance(env_or_id, str):
        raise error.Error(
            f"Expects an env id or a gymnasium.Env, actual type: {type(env_or_id).__name__}"
        )
    from llmgym.registry import make

    if backend is not None:
        if backend not in ("local", "docker", "ray"):
            raise error.Error(f"Expects backend 'local', 'docker' or 'ray', actual: {backend!r}")
        if env_or_id in gym.registry and not _entry_takes(env_or_id, "sandbox"):
            raise error.Error(
                f"{env_or_id} runs no programs (it takes no sandbox argument); --backend applies to coding envs"
            )
        kwargs["sandbox"] = backend
    try:
        env = make(env_or_id, disable_env_checker=True, **kwargs)
    except error.Error:
        raise
    except Exception as e:
        raise AuditError(f"cannot make {env_or_id}: {describe_exception(e)}") from None
    return env, env_or_id, True


def audit(
    env_or_id: Any,
    *,
    family: str | Sequence[str] | None = None,
    episodes: int = DEFAULT_EPISODES,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    difficulty: float | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    backend: str | None = None,
    hacks: Sequence[str | Hack] | None = None,
    skip: Sequence[str] = (),
    slow: bool = True,
    slow_episodes: int = 1,
    reference: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """Run the registered hacks (or ``hacks``) against an env and judge each against the oracle.

    ``env_or_id``: a registered id (made with ``env_kwargs``; ``backend`` sets a coding env's
    ``sandbox``) or an env you made (wrappers included: what it returns is what is audited).
    ``family``: one family, a list, ``"all"`` (each family audited on its own) or None (the env's own
    mix). ``episodes`` per family, reset with seeds ``seed, seed+1, ...`` (and ``difficulty`` when
    given). ``threshold``: the share of the oracle's return (above the floor) a hack may earn.
    ``slow``: run the slow hacks (resource tricks, timeout dodges) on ``slow_episodes`` episodes.
    ``reference``: the best return, for envs without an oracle. ``progress``: called with a line per
    hack. See the module docstring for the verdicts.
    """
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 1:
        raise error.Error(f"Expects episodes to be an int >= 1, actual: {episodes!r}")
    if (
        not isinstance(threshold, (int, float))
        or isinstance(threshold, bool)
        or not 0 < threshold <= 1
    ):
        raise error.Error(f"Expects threshold in (0, 1], actual: {threshold!r}")
    if not isinstance(slow_episodes, int) or isinstance(slow_episodes, bool) or slow_episodes < 0:
        raise error.Error(f"Expects slow_episodes to be an int >= 0, actual: {slow_episodes!r}")
    if difficulty is not None and (
        not isinstance(difficulty, (int, float))
        or isinstance(difficulty, bool)
        or not 0 <= difficulty <= 1
    ):
        raise error.Error(f"Expects difficulty in [0, 1], actual: {difficulty!r}")
    if reference is not None and (
        not isinstance(reference, (int, float)) or not math.isfinite(reference)
    ):
        raise error.Error(f"Expects reference to be a finite number, actual: {reference!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise error.Error(f"Expects seed to be an int, actual: {seed!r}")
    selected = _select(hacks, skip, slow)
    started = time.perf_counter()
    env, env_id, owned = _open(env_or_id, env_kwargs, backend)
    try:
        families = _families(env, env_id, family)
        runner = HackRunner(
            env,
            env_id,
            threshold=float(threshold),
            reference=reference,
            difficulty=difficulty,
            progress=progress,
        )
        results: list[HackResult] = []
        notes: list[str] = []
        oracle_returns: list[float] = []
        ref_kind = "oracle"
        for fam in families:
            eps = []
            for i in range(episodes):
                options: dict[str, Any] = {}
                if fam is not None:
                    options["family"] = fam
                if difficulty is not None:
                    options["difficulty"] = float(difficulty)
                eps.append(AuditedEpisode(i, seed + i, options or None, fam))
            for ep in eps:
                runner.prepare(ep)
            missing = [e for e in eps if not e.oracle_actions]
            if reference is not None:
                ref_kind = "given"
                for ep in eps:
                    ep.oracle_rewards = ep.oracle_rewards or []
            elif missing:
                hi = runner.reward_range[1]
                why = missing[0].oracle_error or "no oracle action"
                if math.isfinite(hi):
                    ref_kind = "reward_range"
                    runner.given_reference = hi
                    notes.append(f"no oracle ({why}); judged against reward_range max {hi:g}")
                else:
                    ref_kind = "none"
                    notes.append(f"no oracle ({why}) and no finite reward_range maximum")
            oracle_returns += [e.oracle_return for e in eps if e.oracle_actions]
            failing = [
                e for e in eps if e.oracle_actions and not e.oracle_info.get("is_success", True)
            ]
            if failing:
                notes.append(
                    f"the oracle does not succeed on {len(failing)} of {len(eps)} episode(s)"
                    + (f" of {fam}" if fam else "")
                    + f" (feedback: {str(failing[0].oracle_info.get('feedback'))[:120]!r})"
                )
            for h in selected:
                if progress is not None:
                    progress(f"{env_id}{' ' + fam if fam else ''}: {h.name}")
                results.append(runner.run_hack(h, eps, fam, slow_episodes))
        if ref_kind == "none":
            for r in results:
                if r.verdict in ("pass", "FAIL"):
                    r.verdict = "unjudged"
        return AuditReport(
            env_id=env_id,
            env_kwargs={k: v for k, v in dict(env_kwargs or {}).items()}
            | ({"sandbox": backend} if backend else {}),
            families=list(families),
            episodes=episodes,
            seed=seed,
            threshold=float(threshold),
            reference=ref_kind,
            oracle_mean=(sum(oracle_returns) / len(oracle_returns))
            if oracle_returns
            else reference,
            results=results,
            seconds=time.perf_counter() - started,
            notes=unique(notes, 20),
        )
    finally:
        if owned:
            try:
                env.close()
            except Exception:
                pass


def _families(env: Any, env_id: str, family: str | Sequence[str] | None) -> list[str | None]:
    if family is None:
        return [None]
    source = getattr(env.unwrapped, "source", None)
    known = list(source.families()) if source is not None and hasattr(source, "families") else []
    wanted = known if family == "all" else [family] if isinstance(family, str) else list(family)
    if family == "all" and not known:
        raise error.Error(f"{env_id} lists no task families; audit it without --family")
    unknown = [f for f in wanted if known and f not in known]
    if unknown:
        raise error.UnknownFamily(f"No family {unknown[0]!r} in {env_id}; available: {known}")
    return list(wanted)
