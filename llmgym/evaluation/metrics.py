"""Evaluation statistics: pass@k (unbiased), bootstrap intervals, significance tests, summaries.

Everything here is pure numpy on plain numbers and result records, seeded where random.
Episodes of the same task are correlated, so intervals resample *tasks* (clusters), not
episodes, whenever task groups are given.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

ANOMALY_STATUSES = ("timeout", "memory_limit", "output_limit", "sandbox_error", "protocol_error")
"""Execution statuses that are anomalies (limits hit, the sandbox or its harness failing),
as opposed to a program that ran and gave a wrong answer or raised."""
_CRASH_STATUSES = ("sandbox_error", "protocol_error")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): ``1 - C(n-c, k) / C(n, k)``.

    The chance that at least one of ``k`` samples drawn without replacement from ``n``
    samples, ``c`` of them correct, is correct. Computed exactly in integers, then rounded
    once to a float.

    >>> pass_at_k(10, 3, 1)
    0.3
    >>> round(pass_at_k(5, 2, 2), 6)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    0.7
    >>> pass_at_k(4, 0, 2), pass_at_k(4, 3, 2)
    (0.0, 1.0)
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"pass_at_k expects an int {name}, actual type: {type(value).__name__}")
    if n < 1 or k < 1:
        raise ValueError(f"pass_at_k needs n >= 1 and k >= 1, actual: n={n}, k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, actual: c={c}, n={n}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, actual: {n}")
    if n - c < k:
        return 1.0
    n, c, k = int(n), int(c), int(k)
    total = math.comb(n, k)
    return float(Fraction(total - math.comb(n - c, k), total))


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    groups: Sequence[Any] | None = None,
    statistic: Callable[[np.ndarray], float] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap confidence interval for ``statistic`` (the mean by default).

    With ``groups`` (a label per value, e.g. the task id), whole groups are resampled: the
    cluster bootstrap, right when a task's samples are correlated. Seeded: the same input
    gives the same interval. An empty input gives ``(nan, nan)``.

    >>> lo, hi = bootstrap_ci([0.0, 1.0] * 50, seed=1)
    >>> 0.38 < lo < 0.5 < hi < 0.62
    True
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), actual: {confidence!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, actual: {n_resamples!r}")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return (math.nan, math.nan)
    if not np.all(np.isfinite(x)):
        raise ValueError("bootstrap_ci expects finite values")
    rng = np.random.default_rng(seed)
    alpha = (1.0 - confidence) / 2.0
    if groups is None:
        if statistic is None:  # the fast path: means of resampled indices
            idx = rng.integers(0, x.size, size=(n_resamples, x.size))
            stats = x[idx].mean(axis=1)
        else:
            stats = np.array(
                [statistic(x[rng.integers(0, x.size, x.size)]) for _ in range(n_resamples)]
            )
    else:
        if len(groups) != x.size:
            raise ValueError(f"groups has {len(groups)} labels for {x.size} values")
        _, inverse = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
        n_groups = int(inverse.max()) + 1
        sums = np.bincount(inverse, weights=x, minlength=n_groups)
        counts = np.bincount(inverse, minlength=n_groups).astype(np.float64)
        if statistic is None:  # ratio estimator: resampled total over resampled count
            pick = rng.integers(0, n_groups, size=(n_resamples, n_groups))
            stats = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
        else:
            members = [x[inverse == g] for g in range(n_groups)]
            stats = np.array(
                [
                    statistic(
                        np.concatenate([members[g] for g in rng.integers(0, n_groups, n_groups)])
                    )
                    for _ in range(n_resamples)
                ]
            )
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


# --- significance tests -------------------------------------------------------------------


def paired_permutation_test(
    differences: Sequence[float] | np.ndarray, *, n_resamples: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value that matched differences have mean zero (sign-flip randomization).

    Exact (all 2**n sign patterns) for up to 16 pairs, Monte Carlo beyond, seeded.

    >>> paired_permutation_test([0.0, 0.0, 0.0])
    1.0
    >>> paired_permutation_test([1.0] * 12) < 0.001
    True
    """
    d = np.asarray(differences, dtype=np.float64).reshape(-1)
    if d.size == 0:
        return math.nan
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if d.size <= 16:
        signs = ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1) * 2.0 - 1.0
        stats = np.abs(signs @ d) / d.size
        return float(np.mean(stats >= observed - tol))
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:
        m = min(1000, n_resamples - done)
        signs = rng.integers(0, 2, size=(m, d.size)) * 2.0 - 1.0
        hits += int(np.sum(np.abs(signs @ d) / d.size >= observed - tol))
        done += m
    return (hits + 1) / (n_resamples + 1)


def permutation_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided p-value that two independent samples have the same mean (label shuffling).

    >>> permutation_test([1.0] * 30, [0.0] * 30) < 0.001
    True
    """
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    if x.size == 0 or y.size == 0:
        return math.nan
    pooled = np.concatenate([x, y])
    observed = abs(x.mean() - y.mean())
    tol = 1e-12 * max(1.0, float(np.abs(pooled).max()))
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:
        m = min(500, n_resamples - done)
        perms = np.argsort(rng.random((m, pooled.size)), axis=1)
        shuffled = pooled[perms]
        diff = np.abs(shuffled[:, : x.size].mean(axis=1) - shuffled[:, x.size :].mean(axis=1))
        hits += int(np.sum(diff >= observed - tol))
        done += m
    return (hits + 1) / (n_resamples + 1)


def two_proportion_test(successes_a: int, n_a: int, successes_b: int, n_b: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (normal approximation).

    >>> round(two_proportion_test(60, 100, 40, 100), 4)
    0.0047
    >>> two_proportion_test(5, 10, 5, 10)
    1.0
    """
    if n_a < 1 or n_b < 1:
        return math.nan
    pooled = (successes_a + successes_b) / (n_a + n_b)
    var = pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b)
    diff = successes_a / n_a - successes_b / n_b
    if var <= 0.0:
        return 1.0 if diff == 0 else 0.0
    z = abs(diff) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2.0))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (NaNs stay NaN and are not counted).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    indexed = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    indexed.sort()
    m = len(indexed)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = round(running, 12)
    return out


# --- summaries of result records -------------------------------------------------------------


def _mean(values: Iterable[float]) -> float | None:
    v = [float(x) for x in values]
    return float(np.mean(v)) if v else None


def _ci(values: Sequence[float], groups: Sequence[Any], seed: int) -> list[float] | None:
    if not values:
        return None
    lo, hi = bootstrap_ci(values, groups=groups, seed=seed)
    return [lo, hi]


def task_groups(
    records: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Records grouped by (env name, task id): the samples of each task."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(str(r.get("env")), str(r.get("task_id")))].append(r)
    return dict(groups)


def pass_at_k_table(
    records: Sequence[Mapping[str, Any]], ks: Sequence[int], *, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """pass@k for each k (mean over tasks of the per-task estimate) with a bootstrap interval.

    A k larger than some task's sample count is left out (it cannot be estimated).
    """
    groups = task_groups(records)
    if not groups:
        return {}
    counts = [(len(g), sum(1 for r in g if r.get("success"))) for g in groups.values()]
    smallest = min(n for n, _ in counts)
    table: dict[str, dict[str, Any]] = {}
    for k in sorted(set(ks)):
        if k < 1 or k > smallest:
            continue
        per_task = [pass_at_k(n, c, k) for n, c in counts]
        lo, hi = bootstrap_ci(per_task, seed=seed)
        table[str(k)] = {"value": float(np.mean(per_task)), "ci": [lo, hi], "tasks": len(per_task)}
    return table


def _exec_facts(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    facts = record.get("exec") or []
    if isinstance(facts, Mapping):
        facts = [facts]
    return [f for f in facts if isinstance(f, Mapping) and isinstance(f.get("status"), str)]


def _is_crash(fact: Mapping[str, Any]) -> bool:
    """The sandbox or harness failed, the process died of a signal that no limit sent
    (SIGKILL and SIGXCPU are the limits'), or a test reports a ``crashed`` program."""
    if fact["status"] in _CRASH_STATUSES:
        return True
    sig = fact.get("signal")
    if fact["status"] == "runtime_error" and isinstance(sig, int) and sig not in (0, 9, 24):
        return True
    tests = fact.get("tests")
    return isinstance(tests, list) and any(
        isinstance(t, Mapping) and t.get("category") == "crashed" for t in tests
    )


def exec_stats(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Sandbox anomaly rates from the ``exec`` facts of each step (None when no step ran code).

    ``exec`` is a dict with a ``status`` (the sandbox's ``ExecResult`` statuses, or the
    coding env's verdicts: ``passed``, ``failed``, ``timeout``, ``memory_limit``...) or a
    list of them. Rates are per execution: ``timeout_rate``, ``memory_rate``, ``crash_rate``
    (see :func:`_is_crash`), ``output_limit_rate``;
    ``status_rates`` has every status seen; ``episode_anomaly_rate`` is the share of
    episodes with at least one anomaly.
    """
    facts = [(i, f) for i, r in enumerate(records) for f in _exec_facts(r)]
    if not facts:
        return None
    n = len(facts)
    statuses = Counter(f["status"] for _, f in facts)
    anomalous = {i for i, f in facts if f["status"] in ANOMALY_STATUSES or _is_crash(f)}
    return {
        "executions": n,
        "status_rates": {s: c / n for s, c in sorted(statuses.items())},
        "timeout_rate": statuses.get("timeout", 0) / n,
        "memory_rate": statuses.get("memory_limit", 0) / n,
        "output_limit_rate": statuses.get("output_limit", 0) / n,
        "crash_rate": sum(1 for _, f in facts if _is_crash(f)) / n,
        "episode_anomaly_rate": len(anomalous) / len(records),
    }


def group_stats(
    records: Sequence[Mapping[str, Any]], *, ks: Sequence[int] = (1,), seed: int = 0
) -> dict[str, Any]:
    """Success, reward (with task-clustered bootstrap intervals), pass@k, components, turns,
    tokens, statuses and sandbox anomalies of a set of episode records."""
    n = len(records)
    tasks = [f"{r.get('env')}\x1f{r.get('task_id')}" for r in records]
    success = [1.0 if r.get("success") else 0.0 for r in records]
    reward = [float(r.get("reward") or 0.0) for r in records]
    components: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for name, value in (r.get("components") or {}).items():
            components[name].append(float(value))
    statuses = Counter(str(r.get("status", "ok")) for r in records)
    return {
        "episodes": n,
        "tasks": len(set(tasks)),
        "success_rate": _mean(success),
        "success_ci": _ci(success, tasks, seed),
        "mean_reward": _mean(reward),
        "reward_ci": _ci(reward, tasks, seed),
        "reward_std": float(np.std(reward)) if reward else None,
        "pass_at_k": pass_at_k_table(records, ks, seed=seed),
        # A component missing from an episode counts 0 there: means over all episodes.
        "components": {k: sum(v) / n for k, v in sorted(components.items())},
        "turns_mean": _mean(r.get("turns", 0) for r in records),
        "prompt_tokens_mean": _mean(r.get("prompt_tokens", 0) for r in records),
        "completion_tokens_mean": _mean(r.get("completion_tokens", 0) for r in records),
        "completion_chars_mean": _mean(r.get("completion_chars", 0) for r in records),
        "status": dict(sorted(statuses.items())),
        "error_rate": (n - statuses.get("ok", 0)) / n if n else None,
        "exec": exec_stats(records),
    }


def difficulty_bins(values: Iterable[float]) -> Callable[[float], str]:
    """How to label difficulties: each distinct value when there are at most 10, else 5 bins.

    >>> label = difficulty_bins([0.1, 0.5, 0.9])
    >>> label(0.5)
    '0.50'
    >>> difficulty_bins([i / 100 for i in range(50)])(0.33)
    '0.2-0.4'
    """
    distinct = sorted({round(float(v), 2) for v in values})
    if len(distinct) <= 10:
        return lambda d: f"{round(float(d), 2):.2f}"

    def label(d: float) -> str:
        i = min(int(float(d) * 5), 4)
        return f"{i / 5:.1f}-{(i + 1) / 5:.1f}"

    return label


def summarize(
    records: Sequence[Mapping[str, Any]], *, ks: Sequence[int] = (1,), seed: int = 0
) -> dict[str, Any]:
    """Statistics overall and per env, domain, family (``domain/family``) and difficulty.

    Difficulty is broken down within each env (each env maps difficulty to its own knobs).
    """
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = {
        k: defaultdict(list) for k in ("env", "domain", "family")
    }
    by_difficulty: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    per_env: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        per_env[str(r.get("env"))].append(r)
        by["env"][str(r.get("env"))].append(r)
        by["domain"][str(r.get("domain"))].append(r)
        by["family"][f"{r.get('domain')}/{r.get('family')}"].append(r)
    for env, rs in per_env.items():
        label = difficulty_bins(float(r.get("difficulty") or 0.0) for r in rs)
        for r in rs:
            by_difficulty[env][label(float(r.get("difficulty") or 0.0))].append(r)

    def table(groups: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
        return {k: group_stats(v, ks=ks, seed=seed) for k, v in sorted(groups.items())}

    return {
        "overall": group_stats(records, ks=ks, seed=seed),
        "by_env": table(by["env"]),
        "by_domain": table(by["domain"]),
        "by_family": table(by["family"]),
        "by_difficulty": {env: table(g) for env, g in sorted(by_difficulty.items())},
    }
