"""Reaching Ray: importing it lazily, connecting to a cluster, shipping env specs, and a
several-node Ray cluster on loopback for tests and benchmarks.

Ray is an optional dependency (``pip install 'llmgym[ray]'``): nothing here imports it before a
function needs it, and a missing Ray is a :class:`llmgym.error.DependencyNotInstalled`. Env specs
travel to the actors by value (Gymnasium's ``EnvSpec``), so envs registered in the driver only
(declarative envs, ``--spec`` files) are made the same way on every node. This module starts no
production cluster: :class:`LoopbackCluster` wraps Ray's own test utility
(``ray.cluster_utils.Cluster``) and binds every node to 127.0.0.1 with a private temp folder.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from llmgym import error

RAY_EXTRA = "pip install 'llmgym[ray]'"


def ray_module() -> Any:
    """The ``ray`` package, or DependencyNotInstalled naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise error.DependencyNotInstalled(f"llmgym.ray needs Ray: {RAY_EXTRA}") from None
    return ray


def connect(address: str | None = None) -> bool:
    """Connect this process to Ray; True when this call started the connection.

    ``address``: ``None`` (Ray's default: the cluster this machine last started, else a new
    local one), ``"auto"`` (a running cluster), ``"local"`` (a new single-node Ray here), or a
    ``host:port`` / ``ray://`` address. A process already connected keeps its connection.
    """
    ray = ray_module()
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False}
    if address == "local":
        options["include_dashboard"] = False
    try:
        ray.init(address=address, **options)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; all mean "not connected"
        raise error.Error(
            f"Cannot connect to Ray at {address or 'its default address'}: {exc} (start one with "
            "`ray start --head`, or pass 'local' to start Ray in this process)"
        ) from None
    return True


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The registered spec of ``env_id`` (what an actor makes its env from)."""
    if env_id not in gym.registry:
        import llmgym

        hint = error.did_you_mean(env_id, gym.registry)
        raise error.UnknownEnv(
            f"No registered env {env_id!r}{hint} (llmgym envs: {llmgym.list_envs()})"
        )
    return gym.registry[env_id]


def install_specs(specs: Iterable[gym.envs.registration.EnvSpec]) -> None:
    """Register specs shipped from the driver in this (worker) process, replacing any of the
    same id: the driver's registration is the one the user asked for."""
    import llmgym  # noqa: F401  (the built-ins and plugins first, as in the driver)

    for spec in specs:
        gym.registry[spec.id] = spec


def cluster_cpus() -> int:
    """The CPUs of the connected cluster (at least 1)."""
    return max(1, int(ray_module().cluster_resources().get("CPU", 1)))


# --- a cluster of several nodes on this machine -----------------------------------------------

_LOOPBACK = "127.0.0.1"
_ENV = {
    # Ray replaces 127.0.0.1 by the machine's address unless clusters are "disabled", which
    # only makes it use loopback (the variable's name says macOS/Windows; it works on Linux).
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}


class LoopbackCluster:
    """A head node and worker nodes, each a real raylet with its own resources, all on
    127.0.0.1 and in a private temp folder (so that no other Ray on the machine finds it).

    For tests and benchmarks on one machine. The head has no CPUs, so actors that need a CPU
    land on the worker nodes. ``with LoopbackCluster([{"num_cpus": 2, "resources": {"a": 1}}])
    as c: ...`` connects this process (``c.address``) and leaves no Ray process behind.
    """

    def __init__(self, workers: Iterable[Mapping[str, Any]] = ({"num_cpus": 1},)):
        ray = ray_module()
        from ray.cluster_utils import Cluster

        self._saved = {k: os.environ.get(k) for k in (*_ENV, "RAY_TMPDIR")}
        self._tmp = tempfile.TemporaryDirectory(prefix="llmgym-ray-", ignore_cleanup_errors=True)
        os.environ.update(_ENV, RAY_TMPDIR=self._tmp.name)
        constants = ray._private.ray_constants
        self._saved_constant = constants.ENABLE_RAY_CLUSTER
        constants.ENABLE_RAY_CLUSTER = False  # this process read the variable when Ray loaded
        self.nodes: list[Any] = []
        try:
            self._cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 0,
                    "include_dashboard": False,
                    "node_ip_address": _LOOPBACK,
                    # a node that stops answering is declared dead after ~1.5 s, not ~15 s
                    "_system_config": {
                        "health_check_period_ms": 500,
                        "health_check_failure_threshold": 3,
                    },
                },
            )
            for args in workers:
                self.add_node(**args)
            self.address: str = self._cluster.address
            ray.init(address=self.address, log_to_driver=False)
        except BaseException:
            self.shutdown()
            raise

    def add_node(self, **args: Any) -> Any:
        """Start one more worker node (``num_cpus``, ``resources``...); returns Ray's node."""
        node = self._cluster.add_node(node_ip_address=_LOOPBACK, **args)
        self._cluster.wait_for_nodes()
        self.nodes.append(node)
        return node

    def remove_node(self, node: Any) -> None:
        """Stop a worker node as a crash would (its processes killed at once)."""
        self._cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)

    def shutdown(self) -> None:
        ray = ray_module()
        try:
            ray.shutdown()
            if hasattr(self, "_cluster"):
                self._cluster.shutdown()
        finally:
            ray._private.ray_constants.ENABLE_RAY_CLUSTER = self._saved_constant
            for key, value in self._saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._tmp.cleanup()

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
