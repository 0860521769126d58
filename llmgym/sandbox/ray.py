"""The ray backend: the local backend on a Ray cluster's CPU workers, for more than one machine.

Each run is a Ray task needing one CPU (so Ray keeps as many in flight as the cluster has
cores); the worker process keeps one warm :class:`~llmgym.sandbox.local.LocalSandbox` for all
the tasks it executes. A worker that dies mid-run, or a task that does not answer within its
limits plus a grace period, yields a ``sandbox_error`` result for that run, never a hang.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llmgym.sandbox.base import RunRequest, Sandbox, make_request
from llmgym.sandbox.errors import BackendUnavailable, InvalidRunRequest
from llmgym.sandbox.result import ExecResult

__all__ = ["RaySandbox"]

_GRACE_S = 60.0
_WORKER_SANDBOX: dict[str, Any] = {}


def _run_on_worker(request: RunRequest, options: dict[str, Any]) -> ExecResult:
    """Body of the Ray task: run on this worker's warm local sandbox."""
    from llmgym.sandbox.local import LocalSandbox

    key = repr(sorted(options.items()))
    sb = _WORKER_SANDBOX.get(key)
    if sb is None:
        sb = _WORKER_SANDBOX[key] = LocalSandbox(**options)
    return sb.execute(request)


class RaySandbox(Sandbox):
    """Runs programs with the local backend on Ray workers.

    Args:
        address: Ray cluster address (``None``: connect to the running cluster or start a
            local one, as ``ray.init`` does).
        local_options: keyword arguments of each worker's ``LocalSandbox``.
        init_options: more ``ray.init`` keyword arguments (e.g. ``num_cpus``).
        max_concurrency: runs in flight for ``run_many``/``arun`` (default: the cluster's CPUs).
    """

    backend = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        local_options: Mapping[str, Any] | None = None,
        init_options: Mapping[str, Any] | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise BackendUnavailable(
                "the ray backend needs Ray: pip install 'llmgym[ray]'"
            ) from None
        self._ray = ray
        if not ray.is_initialized():
            try:
                ray.init(address=address, **dict(init_options or {}))
            except Exception as exc:  # noqa: BLE001
                raise BackendUnavailable(f"cannot connect to or start Ray: {exc}") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))
        super().__init__(max_concurrency=max_concurrency or max(1, cpus))
        self._options = dict(local_options or {})
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run_on_worker)

    def _timeout(self, request: RunRequest) -> float:
        t = request.limits.wall_time_s + _GRACE_S
        if request.compiled:
            t += request.compile_limits.wall_time_s
        return t

    def _collect(self, ref: Any, request: RunRequest) -> ExecResult:
        ray = self._ray
        try:
            return ray.get(ref, timeout=self._timeout(request))
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            detail = "the Ray task did not answer in time"
        except ray.exceptions.RayError as exc:  # worker died, task cancelled, node lost...
            detail = f"the Ray worker failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        return ExecResult.sandbox_failure(
            detail, language=request.language.name, backend=self.backend
        )

    def _execute(self, request: RunRequest) -> ExecResult:
        return self._collect(self._remote.remote(request, self._options), request)

    def run_many(
        self, items: Iterable[Mapping[str, Any]], *, concurrency: int | None = None
    ) -> list[ExecResult]:
        """All items are submitted at once; Ray runs one per free CPU. Order is kept."""
        requests = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidRunRequest(f"run_many item {i} expects a dict of run() arguments")
            requests.append(make_request(**item))
        refs = [self._remote.remote(r, self._options) for r in requests]
        return [self._collect(ref, r) for ref, r in zip(refs, requests, strict=True)]

    def isolation(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "cluster_cpus": self._ray.cluster_resources().get("CPU", 0),
            "workers": "each Ray worker runs the local backend (see `llmgym sandbox check`)",
            "degraded": [],
        }
