"""The evaluation runner: plan episodes, play them against a policy, write results as they end.

A run lives in one output folder:

- ``run.json``: what is being evaluated (envs, kwargs, seeds, samples, policy, settings);
  a resumed run must match it.
- ``plan.json``: every episode's key, task id, sample index and reset seed, fixed once.
- ``results.jsonl``: one line per finished episode, appended with a single unbuffered write
  (fsync'd at most once a second), so an interrupted run (even by SIGKILL) loses at most the
  episodes in flight;
  running again resumes: finished keys are skipped, a torn last line is dropped, and the
  file is rewritten in plan order at the end.
- ``provenance.json``, ``summary.json`` and ``report.html`` when the run completes.

Episodes run concurrently (``episodes.py``); a policy or env that fails makes a failed episode
(``status="policy_error"`` or ``"env_error"``), never a stopped run. Errored episodes are played
again when the run resumes (``retry_errors``), and a run where more than ``max_error_rate`` of the
episodes errored is marked failed (``summary["errors"]``).

This module holds the run folder, :func:`run_evaluation` and the Python API (:func:`evaluate`).
What a run is asked to do is ``config.py``, which task each episode plays is ``plan.py``, and how
an episode is played is ``episodes.py``; their public names are importable from here too.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.evaluation import provenance as prov
from llmgym.evaluation.config import DEFAULT_MAX_ERROR_RATE, ERROR_STATUSES, MODES, EvalConfig
from llmgym.evaluation.episodes import MAX_STORED_TASK_CHARS, EpisodePlayer
from llmgym.evaluation.plan import (
    DEFAULT_EPISODES,
    EpisodePlan,
    episode_seed,
    make_plan,
    plan_tasks,
)
from llmgym.evaluation.rollouts import JsonlAppender, load_jsonl, write_atomic
from llmgym.evaluation.suites import EnvEntry, Suite, load_suite

__all__ = [
    "DEFAULT_EPISODES",
    "DEFAULT_MAX_ERROR_RATE",
    "ERROR_STATUSES",
    "MAX_STORED_TASK_CHARS",
    "MODES",
    "RUN_FORMAT",
    "EnvSpec",
    "EpisodePlan",
    "EvalConfig",
    "EvalResult",
    "default_ks",
    "episode_seed",
    "evaluate",
    "make_plan",
    "plan_tasks",
    "run_evaluation",
]

RUN_FORMAT = 1


@dataclass
class EvalResult:
    """A finished evaluation: where it is, its summary, and its per-episode records."""

    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def failed(self) -> bool:
        """Whether more episodes errored (policy or infrastructure) than ``max_error_rate``
        allows: the results then describe an outage, not the model."""
        return bool(self.summary.get("errors", {}).get("exceeded"))

    @property
    def results_path(self) -> Path:
        return self.out / "results.jsonl"

    @property
    def report_path(self) -> Path:
        return self.out / "report.html"

    @property
    def success_rate(self) -> float | None:
        return self.summary["overall"]["success_rate"]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        o = self.summary["overall"]
        return (
            f"EvalResult(out={str(self.out)!r}, episodes={o['episodes']}, "
            f"success_rate={o['success_rate']}, mean_reward={o['mean_reward']})"
        )


# --- the run folder -----------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _prepare_folder(config: EvalConfig) -> tuple[list[EpisodePlan], dict[str, int], bool]:
    """Create or resume the run folder; returns the plan, tasks per entry, and whether resumed."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    identity = config.identity()
    run = _read_json(out / "run.json")
    if run is not None and not config.overwrite:
        if run.get("identity") != identity:
            old, new = run.get("identity") or {}, identity
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise error.Error(
                f"{out} holds a run of a different evaluation (differs in {diff}); use another "
                "output folder, or overwrite=True (--overwrite) to discard it"
            )
        stored = _read_json(out / "plan.json")
        if stored is not None:
            plan = [EpisodePlan(**p) for p in stored["episodes"]]
            return plan, dict(stored["tasks"]), True
    if run is None and (out / "results.jsonl").exists() and not config.overwrite:
        raise error.Error(
            f"{out} holds a results.jsonl that no llmgym eval run.json describes; use another "
            "output folder, or overwrite=True (--overwrite) to replace it"
        )
    for name in (
        "results.jsonl",
        "summary.json",
        "report.html",
        "plan.json",
        "provenance.json",
        "rollouts.parquet",
    ):
        (out / name).unlink(missing_ok=True)
    plan, counts = make_plan(config)
    write_atomic(
        out / "plan.json", json.dumps({"tasks": counts, "episodes": [vars(p) for p in plan]})
    )
    write_atomic(
        out / "run.json", json.dumps({"format": RUN_FORMAT, "identity": identity}, indent=1)
    )
    return plan, counts, False


def _provenance(config: EvalConfig, counts: dict[str, int], previous: Any) -> dict[str, Any]:
    envs = []
    for e in config.envs:
        item = e.to_dict()
        item["tasks"] = counts.get(e.name)
        try:
            item.update(prov.env_version(e.id))
        except Exception:  # unregistered: make_plan already failed loudly
            pass
        envs.append(item)
    info = prov.collect(
        envs=envs,
        suite=config.suite.provenance() if config.suite else None,
        overrides=config.overrides,
        policy=config.policy_spec(),
        settings=config.settings,
        samples=config.samples,
        k=list(config.k),
        seed=config.seed,
        concurrency=config.concurrency,
        mode=config.mode,
    )
    now = prov.utc_now()
    sessions = list(previous.get("sessions", [])) if isinstance(previous, dict) else []
    sessions.append({"started_at": now, "hostname": info["machine"]["hostname"]})
    info["started_at"] = previous.get("started_at", now) if isinstance(previous, dict) else now
    info["sessions"] = sessions
    info["finished_at"] = None
    return info


def run_evaluation(
    config: EvalConfig,
    *,
    ray: str | None = None,
    search: Sequence[str] = (),
    alerts: Sequence[Any] = (),
) -> EvalResult:
    """Run (or resume) the evaluation described by ``config``; see the module docstring.

    ``ray``: a Ray cluster address (``"auto"``, ``"local"``, ``host:port``) whose actors hold
    the envs (``llmgym.ray``); the records, summary and resumption are those of a local run.
    ``search``: search specs run once per task after the episodes (``llmgym.evaluation.search``).
    ``alerts``: alert rules (:class:`llmgym.evaluation.monitor.AlertRule`) watched as results
    arrive (``monitor.jsonl``, ``alerts.jsonl``); a ``stop`` alert ends the run with
    :class:`~llmgym.evaluation.monitor.MonitorStop`, and running again resumes it.
    """
    from tqdm.auto import tqdm

    from llmgym.evaluation.metrics import summarize
    from llmgym.policies import load_policy

    if config.suite is not None:
        config.suite.check_registered()
    plan, counts, _resumed = _prepare_folder(config)
    info = _provenance(config, counts, _read_json(config.out / "provenance.json"))
    write_atomic(config.out / "provenance.json", json.dumps(info, indent=1))

    results_path = config.out / "results.jsonl"
    keys = {p.key for p in plan}
    done = {
        r["key"]: r
        for r in load_jsonl(results_path, key="key", repair=True)
        if r.get("key") in keys and not (config.retry_errors and r.get("status") in ERROR_STATUSES)
    }
    todo = [p for p in plan if p.key not in done]

    policy = load_policy(config.policy, **config.settings) if todo else None
    owns_policy = policy is not None and policy is not config.policy
    bar = tqdm(
        total=len(plan), initial=len(done), desc="eval", unit="ep", disable=not config.progress
    )
    wins = sum(1 for r in done.values() if r.get("success"))
    monitor = None
    if alerts and todo:
        from llmgym.evaluation.monitor import EvalMonitor

        monitor = EvalMonitor(config.out, alerts, stop_on_alert=True)

    with JsonlAppender(results_path) as writer:

        def on_record(record: dict[str, Any]) -> None:
            nonlocal wins
            writer.write(record)
            if monitor is not None:
                monitor.add(record)  # a stop alert raises here: the run ends, resumable
            done[record["key"]] = record
            wins += bool(record.get("success"))
            bar.update(1)
            bar.set_postfix(success=f"{wins / len(done):.3f}", refresh=False)

        try:
            if todo:
                runner = EpisodePlayer(config, policy, todo, on_record, ray=ray)
                info["sessions"][-1]["mode"] = runner.mode
                if ray is not None:
                    info["sessions"][-1]["ray"] = ray
                asyncio.run(runner.run())
        finally:
            bar.close()
            if owns_policy and policy is not None:
                policy.close()
            if monitor is not None:
                monitor.close()

    records = [done[p.key] for p in plan]
    write_atomic(results_path, b"".join(_line(r) for r in records))
    info["finished_at"] = prov.utc_now()
    info["sessions"][-1]["finished_at"] = info["finished_at"]
    info["sessions"][-1]["episodes_run"] = len(todo)
    write_atomic(config.out / "provenance.json", json.dumps(info, indent=1))
    errored = Counter(str(r.get("status")) for r in records if r.get("status") in ERROR_STATUSES)
    rate = sum(errored.values()) / len(records) if records else 0.0
    summary = {
        "format": RUN_FORMAT,
        "suite": config.suite.name if config.suite else None,
        "k": list(config.k),
        "planned": len(plan),
        "tasks": counts,
        "provenance": info,
        "errors": {
            "episodes": sum(errored.values()),
            "by_status": dict(sorted(errored.items())),
            "rate": rate,
            "max_rate": float(config.max_error_rate),
            "exceeded": rate > float(config.max_error_rate),
        },
        **summarize(records, ks=config.k, seed=config.seed),
    }
    if search:
        summary["search"] = _search(config, plan, records, search)
    write_atomic(config.out / "summary.json", json.dumps(summary, indent=1, default=repr))
    if config.rollouts_format == "parquet":
        from llmgym.evaluation.rollouts import write_rollouts

        write_rollouts(records, config.out / "rollouts.parquet")
    if config.report:
        from llmgym.evaluation.report import write_eval_report

        write_eval_report(config.out)
    return EvalResult(out=config.out, summary=summary, records=records)


def _search(
    config: EvalConfig, plan: list[EpisodePlan], records: list[dict[str, Any]], specs: Sequence[str]
) -> dict[str, Any]:
    from llmgym.evaluation.search import run_searches, summarize_search
    from llmgym.policies import load_policy

    policy = load_policy(config.policy, **config.settings)
    try:
        found = run_searches(config, policy, plan, specs, progress=config.progress)
    finally:
        if policy is not config.policy:
            policy.close()
    return summarize_search(found, records)


def _line(record: Mapping[str, Any]) -> bytes:
    from llmgym.evaluation.rollouts import dumps_line

    return dumps_line(record)


# --- the Python API -------------------------------------------------------------------------------


EnvSpec = str | EnvEntry | Mapping[str, Any]
"""An env to evaluate: its id, an :class:`EnvEntry`, or a dict of an entry's fields."""


def _entries(
    envs: EnvSpec | Sequence[EnvSpec] | None,
    suite: Suite | None,
    *,
    episodes: int | None,
    env_kwargs: Mapping[str, Any] | None,
    seed: int,
) -> tuple[tuple[EnvEntry, ...], dict[str, Any]]:
    overrides: dict[str, Any] = {}
    if suite is not None:
        if envs:
            raise error.Error("Give env ids or a suite, not both")
        entries = list(suite.envs)
        if episodes is not None:
            overrides["episodes"] = episodes
        if env_kwargs:
            overrides["env_kwargs"] = dict(env_kwargs)
        entries = [
            EnvEntry(
                id=e.id,
                kwargs={**e.kwargs, **(env_kwargs or {})},
                seed=e.seed,
                episodes=episodes if episodes is not None else e.episodes,
                name=e.name,
            )
            for e in entries
        ]
        return tuple(entries), overrides
    if envs is None:
        raise error.Error("Nothing to evaluate: give env ids (or entries) or a suite")
    items = [envs] if isinstance(envs, (str, EnvEntry, Mapping)) else list(envs)
    out = []
    for item in items:
        if isinstance(item, EnvEntry):
            out.append(item)
        elif isinstance(item, str):
            out.append(
                EnvEntry(id=item, kwargs=dict(env_kwargs or {}), seed=seed, episodes=episodes)
            )
        elif isinstance(item, Mapping):
            data = {"seed": seed, "episodes": episodes, **item}
            data["kwargs"] = {**(env_kwargs or {}), **(item.get("kwargs") or {})}
            try:
                out.append(EnvEntry(**data))
            except TypeError as e:
                raise error.Error(f"Bad env entry {dict(item)!r}: {e}") from None
        else:
            raise error.Error(
                f"Expects env ids, EnvEntry or dicts, actual type: {type(item).__name__}"
            )
    return tuple(out), overrides


def default_ks(samples: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, 100 up to ``samples``, and ``samples`` itself.

    >>> default_ks(1), default_ks(8)
    ((1,), (1, 2, 5, 8))
    """
    return tuple(sorted({1, samples} | {k for k in (2, 5, 10, 20, 50, 100) if k <= samples}))


def evaluate(
    envs: EnvSpec | Sequence[EnvSpec] | None = None,
    policy: Any = "oracle",
    *,
    suite: str | Path | Suite | None = None,
    episodes: int | None = None,
    samples: int | None = None,
    k: Sequence[int] | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    concurrency: int = 16,
    mode: str = "auto",
    env_workers: int = 8,
    out: str | Path | None = None,
    overwrite: bool = False,
    report: bool = True,
    rollouts_format: str = "jsonl",
    progress: bool = True,
    retry_errors: bool = True,
    max_error_rate: float | None = None,
    ray: str | None = None,
    search: Sequence[str] = (),
    alerts: Any = None,
) -> EvalResult:
    """Evaluate a policy on envs or a suite; write results, summary and report to ``out``.

    Episodes that end in ``policy_error`` or ``env_error`` (a server that is down) are played
    again when the run resumes (``retry_errors``); when more than ``max_error_rate`` of the
    episodes errored (default 0.05) the result is marked ``failed`` and the report says so.
    ``ray``: play the episodes in env actors on the Ray cluster at this address (``"auto"``,
    ``"local"``, ``host:port``); the records are those of a local run, and either resumes
    the other. ``search``: search specs (``"best_of_n:8"``, ``"beam:4x4"``, ``"mcts:64"``) run
    once per task after the episodes; ``summary["search"]`` compares them with pass@k at the
    same policy calls (``llmgym.evaluation.search``). ``alerts``: alert rules (a list of
    ``{"rule", ...}`` dicts or a rules file, as ``llmgym.evaluation.monitor.load_rules`` reads)
    watched as results arrive; a ``stop`` alert ends the run (resumable) with ``MonitorStop``.

    ``envs``: env ids, :class:`EnvEntry` objects or dicts ``{"id", "kwargs", "seed",
    "episodes", "name"}``; or ``suite``: a shipped suite name (``"core-v0"``) or a suite
    file. ``episodes`` is the number of distinct tasks per env (default: the suite's pin,
    else every task of a dataset env, else 100), ``samples`` the episodes per task (for
    pass@k), ``seed`` the task seed of env ids given by name. ``out`` defaults to
    ``evals/<UTC time>``; running again with the same ``out`` and arguments resumes.

    >>> import llmgym
    >>> llmgym.register_task_env("doc/Eval-v0", tasks=[{"id": "q", "prompt": "2+2?", "answer": "4"}],
    ...                          overwrite=True)
    'doc/Eval-v0'
    >>> import tempfile
    >>> result = evaluate("doc/Eval-v0", "oracle", out=tempfile.mkdtemp(), report=False, progress=False)
    >>> result.summary["overall"]["success_rate"], result.summary["overall"]["episodes"]
    (1.0, 1)
    """
    loaded = load_suite(suite) if isinstance(suite, (str, Path)) else suite
    entries, overrides = _entries(envs, loaded, episodes=episodes, env_kwargs=env_kwargs, seed=seed)
    n = samples if samples is not None else (loaded.samples if loaded else 1)
    if loaded is not None and samples is not None and samples != loaded.samples:
        overrides["samples"] = samples
    ks = (
        tuple(k)
        if k is not None
        else tuple(x for x in (loaded.k if loaded else ()) if x <= n) or default_ks(n)
    )
    if out is None:
        out = Path("evals") / prov.utc_now().replace(":", "")
    config = EvalConfig(
        envs=entries,
        policy=policy,
        out=Path(out),
        samples=n,
        k=ks,
        seed=seed,
        settings=dict(settings or {}),
        concurrency=concurrency,
        mode=mode,
        env_workers=env_workers,
        suite=loaded,
        overrides=overrides,
        overwrite=overwrite,
        report=report,
        rollouts_format=rollouts_format,
        progress=progress,
        retry_errors=retry_errors,
        max_error_rate=DEFAULT_MAX_ERROR_RATE if max_error_rate is None else max_error_rate,
    )
    if search:
        from llmgym.search import parse_spec

        for spec in search:
            parse_spec(spec)  # a bad spec fails before any episode
    rules: list[Any] = []
    if alerts is not None:  # bad rules fail before any episode too
        from llmgym.evaluation.monitor import load_rules, parse_rules

        rules = load_rules(alerts) if isinstance(alerts, (str, Path)) else parse_rules(alerts)
    return run_evaluation(config, ray=ray, search=tuple(search), alerts=rules)
