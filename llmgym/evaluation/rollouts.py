"""Rollout storage and the data closed loop: JSONL (or Parquet), reverification, SFT export.

A rollout record is one episode: ``env_id``, ``env_kwargs``, ``seed``, ``task`` (or
``task_id``), the whole transcript in ``messages``, ``reward``, ``success``,
``components`` and per-step ``exec`` facts. ``llmgym eval`` writes them to
``results.jsonl``; a trainer may write ``rollouts*.jsonl`` or ``rollouts*.parquet``.

- :func:`read_rollouts` reads a file or a run folder; :func:`write_rollouts` writes JSONL
  or Parquet (Parquet needs pyarrow; nested fields are stored as JSON text columns).
- :func:`reverify` replays each stored transcript through the current env and verifiers
  (reset with the stored task and seed, re-step the stored assistant messages) and reports
  reward drift.
- :func:`export_sft` turns high-reward rollouts into a chat-messages SFT dataset.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmgym import error

JSON_COLUMNS_KEY = b"llmgym.json_columns"
_SCALAR_TYPES = (str, int, float, bool, type(None))


# --- JSON lines, written atomically -------------------------------------------------------------


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_line(record: Mapping[str, Any]) -> bytes:
    """One JSON line (with its newline) as UTF-8; never raises on odd content.

    Non-finite floats become null, unencodable objects their ``repr``, lone surrogates
    JSON escapes.

    >>> dumps_line({"a": float("nan"), "b": "\\ud800"})
    b'{"a": null, "b": "\\\\ud800"}\\n'
    """
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False, default=repr)
    except ValueError:
        text = json.dumps(_finite(record), ensure_ascii=False, allow_nan=False, default=repr)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(json.loads(text), ensure_ascii=True) + "\n").encode("ascii")


class JsonlAppender:
    """Appends one record per line with a single unbuffered ``os.write``, so a killed
    process (even by SIGKILL) leaves at most one torn last line (which :func:`load_jsonl`
    repairs). ``fsync`` (which guards against power loss, not process death) runs at most
    every ``sync_interval_s`` seconds and at close, instead of after every line."""

    def __init__(self, path: str | Path, *, sync_interval_s: float = 1.0):
        self.path = Path(path)
        self.sync_interval_s = sync_interval_s
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._last_sync = time.monotonic()

    def write(self, record: Mapping[str, Any]) -> None:
        data = memoryview(dumps_line(record))
        while data:
            written = os.write(self._fd, data)
            data = data[written:]
        now = time.monotonic()
        if now - self._last_sync >= self.sync_interval_s:
            os.fsync(self._fd)
            self._last_sync = now

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write a whole file through a temporary sibling and a rename: readers see old or new."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_jsonl(
    path: str | Path, *, key: str | None = None, repair: bool = False
) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, tolerating what an interrupted writer leaves.

    A torn last line (no newline, or not JSON) is dropped; so is any other line that does
    not parse (with a warning), and with ``key`` every record whose key was already seen.
    With ``repair`` the file is rewritten (atomically) without what was dropped.
    """
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    records: list[dict[str, Any]] = []
    seen: set[Any] = set()
    dropped = 0
    lines = raw.split(b"\n")
    torn = lines[-1] != b""  # the last write did not finish its line
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        if not isinstance(record, dict) or (i == len(lines) - 1 and torn):
            if not (i == len(lines) - 1 and torn):
                warnings.warn(f"{path}: line {i + 1} is not a JSON object; dropped", stacklevel=2)
            dropped += 1
            continue
        if key is not None:
            k = record.get(key)
            if k in seen:
                dropped += 1
                continue
            seen.add(k)
        records.append(record)
    if repair and (dropped or torn):
        write_atomic(path, b"".join(dumps_line(r) for r in records))
    return records


# --- reading and writing rollout files -------------------------------------------------------------


def _json_columns(records: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for r in records:
        for k in r:
            names.setdefault(k)
    nested = []
    for name in names:
        values = [r.get(name) for r in records]
        kinds = {type(v) for v in values if v is not None}
        numeric = kinds <= {int, float} or kinds <= {bool}
        if not (numeric or kinds <= {str}) or (kinds and not kinds <= set(_SCALAR_TYPES)):
            nested.append(name)
    return nested


def write_rollouts(records: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write rollout records to ``path``: Parquet when it ends in ``.parquet`` (needs
    pyarrow), JSONL otherwise. Nested fields become JSON text columns in Parquet."""
    path = Path(path)
    rows = [dict(r) for r in records]
    if path.suffix == ".parquet":
        pa, pq = _pyarrow()
        nested = _json_columns(rows)
        columns: dict[str, list[Any]] = {}
        for name in dict.fromkeys(k for r in rows for k in r):
            if name in nested:
                columns[name] = [
                    None if r.get(name) is None else dumps_line({"v": r[name]})[:-1].decode("utf-8")
                    for r in rows
                ]
            else:
                values = [r.get(name) for r in rows]
                if {type(v) for v in values if v is not None} == {int, float}:
                    values = [None if v is None else float(v) for v in values]
                columns[name] = values
        table = pa.table(columns) if rows else pa.table({})
        table = table.replace_schema_metadata({JSON_COLUMNS_KEY: json.dumps(nested).encode()})
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path
    write_atomic(path, b"".join(dumps_line(r) for r in rows))
    return path


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise error.DependencyNotInstalled(
            "Parquet rollouts need pyarrow: pip install pyarrow (or use a .jsonl path)"
        ) from None
    return pa, pq


def parquet_available() -> bool:
    """Whether pyarrow can be imported (Parquet rollouts then work)."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    _, pq = _pyarrow()
    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    nested = set(json.loads(meta.get(JSON_COLUMNS_KEY, b"[]")))
    rows = table.to_pylist()
    for row in rows:
        for name in nested:
            if row.get(name) is not None:
                row[name] = json.loads(row[name])["v"]
    return rows


def rollout_files(path: str | Path) -> list[Path]:
    """The rollout files of ``path``: the file itself, or in a folder ``results.jsonl``,
    ``rollouts*.jsonl``, ``rollouts*.parquet`` and the files of a ``rollouts/`` subfolder."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise error.Error(f"No such rollout file or folder: {path}")
    files = sorted(
        p
        for pattern in (
            "results.jsonl",
            "rollouts*.jsonl",
            "rollouts*.parquet",
            "rollouts/*.jsonl",
            "rollouts/*.parquet",
        )
        for p in path.glob(pattern)
        if p.is_file()
    )
    if not files:
        raise error.Error(
            f"{path} holds no rollouts: expected results.jsonl (from llmgym eval), "
            "rollouts*.jsonl, rollouts*.parquet or a rollouts/ folder"
        )
    return files


def read_rollouts(path: str | Path) -> list[dict[str, Any]]:
    """Every rollout record under ``path`` (a file, or a run folder: see :func:`rollout_files`)."""
    records: list[dict[str, Any]] = []
    for file in rollout_files(path):
        if file.suffix == ".parquet":
            records.extend(_read_parquet(file))
        else:
            records.extend(load_jsonl(file))
    return records


def task_hash(task: Mapping[str, Any]) -> str:
    """A content hash of a task dict (what reverify checks when the task itself was not stored)."""
    text = json.dumps(task, sort_keys=True, ensure_ascii=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- reverify: replay stored transcripts through the current verifiers ----------------------------------

_ACTION_KEYS = ("content", "tool_calls", "reasoning_content")


@dataclass
class Replay:
    """One stored rollout replayed: the stored and recomputed reward and success."""

    key: str
    env: str
    task_id: str
    reward_before: float
    reward_after: float | None
    success_before: bool
    success_after: bool | None
    transcript_same: bool = True
    error: str | None = None

    def changed(self, tolerance: float) -> bool:
        if self.reward_after is None:
            return False
        return (
            abs(self.reward_after - self.reward_before) > tolerance
            or self.success_after != self.success_before
        )


@dataclass
class ReverifyReport:
    """Drift between stored rewards and the current verifiers' rewards on the same transcripts."""

    tolerance: float
    replays: list[Replay] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def checked(self) -> list[Replay]:
        return [r for r in self.replays if r.error is None]

    @property
    def changed(self) -> list[Replay]:
        return [r for r in self.checked if r.changed(self.tolerance)]

    @property
    def unbuildable(self) -> dict[str, str]:
        """Envs that could not be made here (unregistered: a spec or plugin not loaded), by
        env id, with the reason: their records are unverified, which is not drift."""
        return {
            r.error.split(":", 1)[0].removeprefix("cannot make ").strip(): r.error
            for r in self.replays
            if r.error and r.error.startswith("cannot make ")
        }

    @property
    def drift(self) -> bool:
        """A reward moved, a success flipped, or a replay failed on an env that was built."""
        return bool(self.changed) or any(
            r.error and not r.error.startswith("cannot make ") for r in self.replays
        )

    def _stats(self, rows: Sequence[Replay]) -> dict[str, Any]:
        ok = [r for r in rows if r.error is None]
        n = len(ok)
        before = sum(r.reward_before for r in ok)
        after = sum(r.reward_after or 0.0 for r in ok)
        return {
            "checked": n,
            "errors": sum(1 for r in rows if r.error),
            "changed": sum(1 for r in ok if r.changed(self.tolerance)),
            "mean_reward_before": before / n if n else None,
            "mean_reward_after": after / n if n else None,
            "max_abs_drift": max(
                (abs((r.reward_after or 0.0) - r.reward_before) for r in ok), default=0.0
            ),
            "success_before": sum(r.success_before for r in ok) / n if n else None,
            "success_after": sum(bool(r.success_after) for r in ok) / n if n else None,
            "became_success": sum(1 for r in ok if r.success_after and not r.success_before),
            "became_failure": sum(1 for r in ok if r.success_before and not r.success_after),
            "transcript_diverged": sum(1 for r in ok if not r.transcript_same),
        }

    def to_dict(self, examples: int = 20) -> dict[str, Any]:
        per_env: dict[str, list[Replay]] = defaultdict(list)
        for r in self.replays:
            per_env[r.env].append(r)
        return {
            "tolerance": self.tolerance,
            "drift": self.drift,
            "overall": self._stats(self.replays),
            "by_env": {env: self._stats(rows) for env, rows in sorted(per_env.items())},
            "skipped": dict(self.skipped),
            "changed_examples": [vars(r) for r in self.changed[:examples]],
            "error_examples": [vars(r) for r in self.replays if r.error][:examples],
        }

    def to_text(self) -> str:
        d = self.to_dict(examples=10)
        lines = [
            "| env | checked | changed | reward before | reward after | success before | success after | errors |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for env, s in [*d["by_env"].items(), ("**all**", d["overall"])]:
            lines.append(
                f"| {env} | {s['checked']} | {s['changed']} | {_fmt(s['mean_reward_before'])} | "
                f"{_fmt(s['mean_reward_after'])} | {_fmt(s['success_before'])} | "
                f"{_fmt(s['success_after'])} | {s['errors']} |"
            )
        if d["skipped"]:
            lines.append(f"\nskipped: {d['skipped']}")
        for r in d["changed_examples"]:
            lines.append(
                f"changed: {r['key']} ({r['env']} {r['task_id']}): reward {r['reward_before']:.4g} -> "
                f"{r['reward_after']:.4g}, success {r['success_before']} -> {r['success_after']}"
            )
        for r in d["error_examples"]:
            lines.append(f"error: {r['key']} ({r['env']} {r['task_id']}): {r['error']}")
        unbuilt = self.unbuildable
        for why in unbuilt.values():
            lines.append(
                f"not verified: {why} (register it first: --spec SPEC, LLMGYM_SPECS or its plugin)"
            )
        if d["drift"]:
            lines.append("drift found")
        elif unbuilt:
            lines.append(f"no drift in what could be checked; {len(unbuilt)} env(s) not verified")
        else:
            lines.append("no drift")
        return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _action(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: message[k] for k in _ACTION_KEYS if message.get(k) is not None}


def replay(record: Mapping[str, Any], env: Any) -> Replay:
    """Reset ``env`` to the record's task and seed and re-step its assistant messages."""
    key = str(record.get("key", ""))
    name = str(record.get("env") or record.get("env_id"))
    task_id = str(record.get("task_id"))
    before = float(record.get("reward") or 0.0)
    success_before = bool(record.get("success"))
    task = record.get("task")
    options = {"task": task} if isinstance(task, Mapping) else {"task_id": record.get("task_id")}
    try:
        _, info = env.reset(seed=record.get("seed"), options=options)
        stored_hash = record.get("task_hash")
        episode = getattr(env.unwrapped, "episode", None)
        if (
            task is None
            and stored_hash
            and episode is not None
            and task_hash(episode.task.to_dict()) != stored_hash
        ):
            raise error.Error("the task rebuilt from its id differs from the stored one")
        stored = list(record.get("messages") or [])
        total, success, done = 0.0, False, False
        messages = info.get("messages", [])
        for message in stored:
            if message.get("role") != "assistant":
                continue
            if done:
                break
            _, reward, terminated, truncated, info = env.step(_action(message))
            total += float(reward)
            success = bool(info.get("is_success"))
            messages = info.get("messages", messages)
            done = terminated or truncated
        same = _same_transcript(messages, stored)
    except Exception as e:
        return Replay(
            key, name, task_id, before, None, success_before, None, error=f"{type(e).__name__}: {e}"
        )
    return Replay(key, name, task_id, before, total, success_before, success, transcript_same=same)


def _same_transcript(new: Sequence[Mapping[str, Any]], old: Sequence[Mapping[str, Any]]) -> bool:
    if len(new) != len(old):
        return False
    return all(
        a.get("role") == b.get("role") and a.get("content") == b.get("content")
        for a, b in zip(new, old, strict=True)
    )


def reverify(
    source: str | Path | Sequence[Mapping[str, Any]],
    *,
    tolerance: float = 1e-6,
    limit: int | None = None,
    progress: bool = True,
) -> ReverifyReport:
    """Recompute the rewards of stored rollouts with the current envs and verifiers.

    Records the env raised on or that carry no transcript (policy or env errors) are
    skipped and counted in ``skipped``. ``drift`` is true when any reward moved by more
    than ``tolerance``, any success flipped, or a replay failed.
    """
    import gymnasium as gym
    from tqdm.auto import tqdm

    records = read_rollouts(source) if isinstance(source, (str, Path)) else list(source)
    if limit is not None:
        records = records[:limit]
    report = ReverifyReport(tolerance=tolerance)
    envs: dict[str, Any] = {}
    skipped: dict[str, int] = defaultdict(int)
    try:
        for record in tqdm(records, desc="reverify", unit="ep", disable=not progress):
            if (
                not isinstance(record, Mapping)
                or not record.get("env_id")
                or not record.get("messages")
            ):
                skipped["malformed"] += 1
                continue
            if record.get("status", "ok") == "env_error":
                skipped["env_error"] += 1
                continue
            kwargs = record.get("env_kwargs") or {}
            cache_key = json.dumps([record["env_id"], kwargs], sort_keys=True, default=repr)
            if cache_key not in envs:
                try:
                    envs[cache_key] = gym.make(record["env_id"], disable_env_checker=True, **kwargs)
                except Exception as e:
                    envs[cache_key] = e
            env = envs[cache_key]
            if isinstance(env, Exception):
                report.replays.append(
                    Replay(
                        str(record.get("key", "")),
                        str(record.get("env") or record["env_id"]),
                        str(record.get("task_id")),
                        float(record.get("reward") or 0.0),
                        None,
                        bool(record.get("success")),
                        None,
                        error=f"cannot make {record['env_id']}: {type(env).__name__}: {env}",
                    )
                )
                continue
            report.replays.append(replay(record, env))
    finally:
        for env in envs.values():
            if not isinstance(env, Exception):
                env.close()
    report.skipped = dict(skipped)
    return report


# --- export: high-reward rollouts as an SFT dataset ------------------------------------------------


def sft_example(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The chat-messages SFT example of one rollout: its transcript up to the last
    assistant message (the env's closing feedback dropped), plus tools and metadata."""
    messages = [dict(m) for m in record.get("messages") or [] if isinstance(m, Mapping)]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last < 0:
        return None
    example: dict[str, Any] = {"messages": messages[: last + 1]}
    if record.get("tools"):
        example["tools"] = record["tools"]
    example["metadata"] = {
        k: record.get(k)
        for k in ("env", "env_id", "task_id", "reward", "success", "key")
        if k in record
    }
    return example


def export_sft(
    source: str | Path | Sequence[Mapping[str, Any]],
    out: str | Path,
    *,
    min_reward: float | None = None,
    success_only: bool = True,
    best_per_task: bool = False,
) -> int:
    """Write the rollouts that pass the filters as an SFT dataset; returns how many.

    Kept: episodes that ended normally (no policy or env error), with ``success`` unless
    ``success_only=False``, with reward >= ``min_reward`` when given; with
    ``best_per_task`` only the highest-reward one per (env, task). Identical transcripts
    are written once. ``out`` is JSONL (``{"messages", "tools"?, "metadata"}`` per line) or
    Parquet when it ends in ``.parquet``.
    """
    records = read_rollouts(source) if isinstance(source, (str, Path)) else list(source)
    kept = []
    for r in records:
        if not isinstance(r, Mapping) or r.get("status", "ok") != "ok":
            continue
        if success_only and not r.get("success"):
            continue
        reward = r.get("reward")
        if min_reward is not None and not (
            isinstance(reward, (int, float)) and reward >= min_reward
        ):
            continue
        kept.append(r)
    if best_per_task:
        best: dict[tuple[str, str], Mapping[str, Any]] = {}
        for r in kept:
            k = (str(r.get("env") or r.get("env_id")), str(r.get("task_id")))
            if k not in best or float(r.get("reward") or 0) > float(best[k].get("reward") or 0):
                best[k] = r
        kept = list(best.values())
    examples, seen = [], set()
    for r in kept:
        example = sft_example(r)
        if example is None:
            continue
        fingerprint = json.dumps(example["messages"], sort_keys=True, default=repr)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        examples.append(example)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_rollouts(examples, out)
    return len(examples)
