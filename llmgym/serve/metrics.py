"""Prometheus metrics of one ``llmgym serve`` app (``GET /metrics``), in a registry of its own.

Each app has its own ``CollectorRegistry`` (never the process-wide default), so two servers in
one process, or a server beside a trainer that exports its own metrics, do not clash. Session
counts are read from the :class:`~llmgym.serve.sessions.SessionPool` when scraped; everything
else is counted as requests are served. Labels are bounded: env ids are the served ones,
routes are route templates, sandbox anomalies are four kinds. This module does not log: see
:mod:`llmgym.serve.logs`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from llmgym.evaluation.metrics import exec_stats
from llmgym.serve.sessions import SessionPool

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format."""

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
REWARD_BUCKETS = (-5, -1, -0.5, 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 2, 5, 10, 13)
ANOMALY_KINDS = {
    "timeout": "timeout_rate",
    "memory_limit": "memory_rate",
    "output_limit": "output_limit_rate",
    "crash": "crash_rate",
}
"""Sandbox anomaly kinds and the ``exec_stats`` rate that counts each (the eval report's)."""


class _PoolCollector:
    """Live, created and expired sessions per env, read from the pool at scrape time."""

    def __init__(self, pool: SessionPool):
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        live = GaugeMetricFamily(
            "llmgym_serve_sessions_live", "Sessions open now", labels=["env_id"]
        )
        for key, value in self.pool.counts().items():
            if key.startswith("env:"):
                live.add_metric([key[4:]], value)
        yield live
        for name, doc, table in (
            ("created", "Sessions created", self.pool.created_per_env),
            ("expired", "Sessions closed for being idle", self.pool.expired_per_env),
        ):
            family = CounterMetricFamily(f"llmgym_serve_sessions_{name}", doc, labels=["env_id"])
            for env_id, value in sorted(table.items()):
                family.add_metric([env_id], value)
            yield family


Samples = list[tuple[str, str, str, list[tuple[str, dict[str, str], float]]]]
"""Metric families as plain data (name, type, help, samples): what a session host sends."""


def merge_samples(parts: list[Samples]) -> Iterator[Metric]:
    """Families from several processes as one: values of the same sample and labels add up
    (counters, histogram buckets, sums, gauges of totals); ``_created`` keeps the earliest."""
    kinds: dict[str, tuple[str, str]] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for part in parts:
        for name, kind, doc, samples in part:
            kinds.setdefault(name, (kind, doc))
            table = values.setdefault(name, {})
            for sample, labels, value in samples:
                key = (sample, tuple(sorted(labels.items())))
                if key not in table:
                    table[key] = value
                elif sample.endswith("_created"):
                    table[key] = min(table[key], value)
                else:
                    table[key] += value
    for name, (kind, doc) in kinds.items():
        family = Metric(name, doc, kind)
        for (sample, label_items), value in values[name].items():
            family.add_sample(sample, dict(label_items), value)
        yield family


class _EnvsElsewhere:
    """The env metrics of a pool whose envs live in other processes (Ray session hosts),
    merged at scrape time."""

    def __init__(self, pool: SessionPool):
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        yield from merge_samples(self.pool.env_metric_samples())


class ServeMetrics:
    """The metrics of one app; every method is safe from any thread.

    When the pool's envs live elsewhere (``pool.envs_elsewhere``: Ray session hosts), the
    env metrics (steps, rewards, latencies, sandbox anomalies) are counted where each env runs
    and merged from there when scraped; this app then counts only its requests.
    """

    def __init__(self, pool: SessionPool):
        self.registry = CollectorRegistry()
        self.registry.register(_PoolCollector(pool))  # type: ignore[arg-type]
        self.envs_here = not pool.envs_elsewhere
        if not self.envs_here:
            self.registry.register(_EnvsElsewhere(pool))  # type: ignore[arg-type]
        reg: CollectorRegistry | None = self.registry if self.envs_here else None
        env = ["env_id"]
        self.steps = Counter("llmgym_serve_steps", "Env steps served", env, registry=reg)
        self.step_seconds = Histogram(
            "llmgym_serve_step_seconds", "Env step time", env, buckets=LATENCY_BUCKETS, registry=reg
        )
        self.reset_seconds = Histogram(
            "llmgym_serve_reset_seconds",
            "Env reset time",
            env,
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.reward = Histogram(
            "llmgym_serve_step_reward",
            "Reward of each step (no _sum: Prometheus drops it when buckets go negative)",
            env,
            buckets=REWARD_BUCKETS,
            registry=reg,
        )
        self.reward_sum = Gauge(
            "llmgym_serve_reward_sum",
            "Sum of the rewards of all steps (a gauge: rewards may be negative)",
            env,
            registry=reg,
        )
        self.successes = Counter(
            "llmgym_serve_success", "Steps with info['is_success'] true", env, registry=reg
        )
        self.episodes = Counter(
            "llmgym_serve_episodes_ended", "Steps that terminated or truncated", env, registry=reg
        )
        self.sandbox_runs = Counter(
            "llmgym_serve_sandbox_runs",
            "Sandbox executions reported in info['exec']",
            env,
            registry=reg,
        )
        self.anomalies = Counter(
            "llmgym_serve_sandbox_anomalies",
            "Sandbox executions that hit a limit or crashed (timeout, memory_limit, "
            "output_limit, crash)",
            ["env_id", "kind"],
            registry=reg,
        )
        self.requests = Counter(
            "llmgym_serve_requests",
            "Requests answered, by route (HTTP route template or ws:<op>) and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "llmgym_serve_rate_limited",
            "Steps refused by a steps/s limit (scope: server or session)",
            ["scope"],
            registry=self.registry,
        )
        self.ws_open = Gauge(
            "llmgym_serve_ws_connections", "WebSocket connections open", registry=self.registry
        )
        self._step_series: dict[str, tuple[Any, ...]] = {}
        self._request_series: dict[tuple[str, int], Any] = {}

    def observe_reset(self, env_id: str, seconds: float) -> None:
        if self.envs_here:
            self.reset_seconds.labels(env_id).observe(seconds)

    def observe_step(
        self, env_id: str, seconds: float, reward: float, ended: bool, info: Mapping[str, Any]
    ) -> None:
        if not self.envs_here:  # counted where the env runs
            return
        series = self._step_series.get(env_id)
        if series is None:  # one label lookup per env, not six per step
            metrics: tuple[Any, ...] = (self.steps, self.step_seconds, self.reward)
            metrics += (self.reward_sum, self.successes, self.episodes)
            series = self._step_series[env_id] = tuple(m.labels(env_id) for m in metrics)
        steps, step_seconds, reward_hist, reward_sum, successes, episodes = series
        steps.inc()
        step_seconds.observe(seconds)
        reward_hist.observe(reward)
        reward_sum.inc(reward)
        if info.get("is_success") is True:
            successes.inc()
        if ended:
            episodes.inc()
        if "exec" in info:
            self._observe_exec(env_id, info["exec"])

    def _observe_exec(self, env_id: str, facts: Any) -> None:
        stats = exec_stats([{"exec": facts}])
        if stats is None:
            return
        runs = stats["executions"]
        self.sandbox_runs.labels(env_id).inc(runs)
        for kind, rate in ANOMALY_KINDS.items():
            count = round(stats[rate] * runs)
            if count:
                self.anomalies.labels(env_id, kind).inc(count)

    def count_request(self, route: str, status: int) -> None:
        series = self._request_series.get((route, status))
        if series is None:  # routes and statuses are bounded sets: one label lookup each
            series = self.requests.labels(route, str(status))
            self._request_series[(route, status)] = series
        series.inc()

    def count_rate_limited(self, scope: str) -> None:
        self.rate_limited.labels(scope).inc()

    def env_samples(self) -> Samples:
        """The env metrics as plain data, for an app that merges them (:func:`merge_samples`)."""
        env_metrics: list[Any] = [self.steps, self.step_seconds, self.reset_seconds, self.reward]
        env_metrics += [self.reward_sum, self.successes, self.episodes, self.sandbox_runs]
        env_metrics += [self.anomalies]
        out: Samples = []
        for metric in env_metrics:
            for family in metric.collect():
                samples = [(x.name, dict(x.labels), float(x.value)) for x in family.samples]
                out.append((family.name, family.type, family.documentation, samples))
        return out

    def render(self) -> bytes:
        return generate_latest(self.registry)
