"""``llmgym serve`` behind Ray Serve: the same app in N replicas, sessions that any replica serves.

:func:`serve_on_ray` deploys :func:`llmgym.serve.app.create_app` as a Ray Serve ingress with
``replicas`` copies behind Ray Serve's HTTP proxy. The envs do not live in the replicas: they live
in *session hosts*, named detached actors (``<app>-host-<i>-<random>`` in ``llmgym-serve``),
each a :class:`~llmgym.serve.sessions.SessionPool` of its share of ``max_sessions`` that keeps
each session's owner (the hash of its creator's token) and runs one call per session at a time.
A session id names its host, so a request reaching any replica finds the session (requests are
not sticky), and the host refuses any other owner. Each replica's :class:`RaySessionPool` is the
pool its app uses. Ray restarts a host that dies (its sessions are lost: calls on them answer as
for an unknown session); stopping the deployment stops the hosts and their envs.

Needs Ray Serve and the serve extra (``pip install 'llmgym[ray,serve]'``). Ray Serve's proxy,
routing and replica placement are Ray's; nothing here balances load itself.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import socket
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym

from llmgym import error
from llmgym.ray.actors import apply, describe
from llmgym.ray.cluster import connect, env_spec, install_specs, ray_module
from llmgym.ray.env import ActorDied, ActorEnv, CallTimedOut, fetch
from llmgym.serve.app import ServeConfig, create_app, served_env, served_env_ids
from llmgym.serve.metrics import Samples, ServeMetrics
from llmgym.serve.server import check_bind
from llmgym.serve.sessions import Session, SessionPool, TooManySessions, UnknownSession

NAMESPACE = "llmgym-serve"
"""The Ray namespace of the session hosts."""
REPLICA_HEADER = "x-llmgym-replica"
"""The response header naming the replica that answered."""


class _HostSessions(SessionPool):
    """A host's sessions, under the ids the replicas chose (each starts with the host's index,
    which is how replicas route; choosing it before the call lets a replica close a session
    whose create it could not confirm)."""

    def __init__(self, prefix: str, **kwargs: Any):
        super().__init__(served_env, **kwargs)
        self.prefix = prefix
        self._chosen = threading.local()

    def new_session_id(self) -> str:
        return str(self._chosen.id)

    def create_as(
        self, session_id: str, env_id: str, kwargs: dict[str, Any], owner: str
    ) -> Session:
        with self._lock:
            taken = session_id in self._sessions
        if taken or not session_id.startswith(f"{self.prefix}."):
            raise error.Error(f"Session id {session_id!r} is not free on host {self.prefix}")
        self._chosen.id = session_id
        try:
            return self.create(env_id, kwargs, owner)
        finally:
            del self._chosen.id


class SessionHost:
    """The body of a session-host actor: envs of sessions, for every replica."""

    def __init__(
        self,
        index: int,
        specs: Sequence[gym.envs.registration.EnvSpec],
        max_sessions: int,
        idle_timeout_s: float | None,
    ):
        install_specs(specs)
        self.pool = _HostSessions(
            f"h{index}", max_sessions=max_sessions, idle_timeout_s=idle_timeout_s
        )
        self.metrics = ServeMetrics(self.pool)  # its env metrics, merged by the replicas

    def create(
        self, session_id: str, env_id: str, kwargs: dict[str, Any], owner: str
    ) -> dict[str, Any]:
        session = self.pool.create_as(session_id, env_id, kwargs, owner)
        return describe(session.env)

    def describe(self, session_id: str, owner: str) -> tuple[str, dict[str, Any]]:
        session = self.pool.get(session_id, owner)
        return session.env_id, describe(session.env)

    def call(self, session_id: str, owner: str, op: str, args: Sequence[Any]) -> Any:
        return self.pool.call(session_id, owner, lambda s: self._apply(s, op, args))

    def _apply(self, session: Session, op: str, args: Sequence[Any]) -> Any:
        """An env call, counted in this host's env metrics when it is a reset or a step."""
        start = time.perf_counter()
        out = apply(session.env, op, args)
        seconds = time.perf_counter() - start
        if op == "reset":
            self.metrics.observe_reset(session.env_id, seconds)
        elif op == "step":
            _, reward, terminated, truncated, info = out
            ended = bool(terminated or truncated)
            self.metrics.observe_step(session.env_id, seconds, float(reward), ended, info)
        return out

    def metric_samples(self) -> Samples:
        return self.metrics.env_samples()

    def close(self, session_id: str, owner: str) -> None:
        self.pool.close(session_id, owner)

    def expire_idle(self) -> Counter[str]:
        """Close the idle sessions; how many of each env."""
        before = Counter(self.pool.expired_per_env)
        self.pool.expire_idle()
        return self.pool.expired_per_env - before

    def counts(self) -> dict[str, int]:
        return self.pool.counts()


class HostedEnv(ActorEnv):
    """A session's env in a session host, as the replica's app sees it."""

    def __init__(
        self,
        host: Any,
        session_id: str,
        owner: str,
        env_id: str,
        description: dict[str, Any],
        timeout_s: float,
    ):
        super().__init__(env_id, description)
        self._host, self._sid, self._owner, self._timeout_s = host, session_id, owner, timeout_s

    def _remote(self, method: str, *args: Any) -> Any:
        what = f"{method} of session {self._sid!r}"
        try:
            return fetch(
                getattr(self._host, method).remote(self._sid, self._owner, *args),
                self._timeout_s,
                what,
            )
        except ActorDied as exc:
            raise UnknownSession(
                f"The actor holding session {self._sid!r} died ({exc}); the session is lost: "
                "create another with POST /v1/sessions"
            ) from None

    def _call(self, op: str, *args: Any) -> Any:
        return self._remote("call", op, args)

    def close(self) -> None:
        self._remote("close")


def _refuse_local(env_id: str, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    raise error.Error("A RaySessionPool makes its envs in session hosts, never in a replica")


class RaySessionPool(SessionPool):
    """The sessions of one replica's app: all live in the session hosts, shared by replicas.

    ``len()`` and :meth:`counts` add up the hosts' counts, waiting at most ``counts_wait_s``
    for them (``/health`` and ``/metrics`` run on the replica's event loop, and a host busy with
    slow steps may answer late): a host that has not answered by then counts as it last did,
    and is not asked again until it answers. :meth:`expire_idle` has every host close
    its idle sessions; :meth:`close_all` (a replica stopping) leaves them: they belong to the
    deployment, whose ``stop()`` stops the hosts.
    """

    envs_elsewhere = True

    def __init__(
        self,
        hosts: Sequence[Any],
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        timeout_s: float = 300.0,
        counts_wait_s: float = 1.0,
    ):
        super().__init__(_refuse_local, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s)
        self.hosts = list(hosts)
        self.timeout_s = timeout_s
        self.counts_wait_s = counts_wait_s
        self._asking: dict[tuple[str, int], Any] = {}
        """The call in flight to each host (by method and host index), if any."""
        self._last: dict[str, dict[int, Any]] = {"counts": {}, "metric_samples": {}}
        self._next = itertools.count()
        self._known: OrderedDict[tuple[str, str], tuple[str, dict[str, Any]]] = OrderedDict()

    def _host_of(self, session_id: str) -> Any:
        head = session_id.split(".", 1)[0]
        if head.startswith("h") and head[1:].isdigit() and int(head[1:]) < len(self.hosts):
            return self.hosts[int(head[1:])]
        raise UnknownSession(
            f"No session {session_id!r} for this client (closed, expired, or another "
            "client's); create one with POST /v1/sessions"
        )

    def _remember(self, key: tuple[str, str], value: tuple[str, dict[str, Any]]) -> None:
        with self._lock:
            self._known[key] = value
            while len(self._known) > 4 * self.max_sessions:
                self._known.popitem(last=False)

    def _session(
        self, host: Any, sid: str, owner: str, env_id: str, desc: dict[str, Any]
    ) -> Session:
        env = HostedEnv(host, sid, owner, env_id, desc, self.timeout_s)
        return Session(id=sid, env_id=env_id, owner=owner, env=env)

    def create(self, env_id: str, kwargs: dict[str, Any], owner: str) -> Session:
        start = next(self._next)
        token = SessionPool.new_session_id(self)
        for k in range(len(self.hosts)):
            index = (start + k) % len(self.hosts)
            host, sid = self.hosts[index], f"h{index}.{token}"
            try:
                desc = fetch(
                    host.create.remote(sid, env_id, kwargs, owner),
                    self.timeout_s,
                    "creating a session",
                )
            except TooManySessions:
                continue  # this host is full: the next one
            except (ActorDied, CallTimedOut):
                # the host may be unreachable for a while yet have made the session: close it
                # (a call queued behind the create) rather than leak it, and try the next host
                host.close.remote(sid, owner)
                continue
            with self._lock:
                self.created += 1
                self.created_per_env[env_id] += 1
            self._remember((sid, owner), (env_id, desc))
            return self._session(host, sid, owner, env_id, desc)
        raise TooManySessions(
            f"The server holds its limit of {self.max_sessions} sessions; close one "
            "(DELETE /v1/sessions/ID) or serve with a higher --max-sessions"
        )

    def get(self, session_id: str, owner: str) -> Session:
        host = self._host_of(session_id)
        with self._lock:
            known = self._known.get((session_id, owner))
        if known is None:
            try:
                known = fetch(
                    host.describe.remote(session_id, owner), self.timeout_s, "finding a session"
                )
            except ActorDied:
                raise UnknownSession(f"No session {session_id!r}: its host is gone") from None
            self._remember((session_id, owner), known)
        env_id, desc = known
        return self._session(host, session_id, owner, env_id, desc)

    def _each_host(self, method: str) -> list[Any]:
        refs = [getattr(h, method).remote() for h in self.hosts]
        out = []
        for ref in refs:
            try:
                out.append(fetch(ref, self.timeout_s, f"{method} on a session host"))
            except ActorDied:
                continue  # a host restarting holds no session
        return out

    def _ask_hosts(self, method: str, lost: Any) -> list[Any]:
        """Each host's answer to ``method``, fresh if it comes within ``counts_wait_s``, else
        its last (``lost`` for a host that died: a host restarting holds no session)."""
        ray = ray_module()
        with self._lock:
            for i, host in enumerate(self.hosts):
                if (method, i) not in self._asking:
                    self._asking[(method, i)] = getattr(host, method).remote()
            asked = {i: ref for (m, i), ref in self._asking.items() if m == method}
        refs = list(asked.values())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.counts_wait_s)
        answered = set(ready)
        for i, ref in asked.items():
            if ref not in answered:
                continue
            try:
                answer = fetch(ref, self.counts_wait_s, f"{method} on a session host")
            except (ActorDied, CallTimedOut):
                answer = lost
            with self._lock:
                if self._asking.get((method, i)) is ref:
                    del self._asking[(method, i)]
                    self._last[method][i] = answer
        with self._lock:
            return list(self._last[method].values())

    def _host_counts(self) -> list[dict[str, int]]:
        return self._ask_hosts("counts", {})

    def env_metric_samples(self) -> list[Samples]:
        """Every host's env metrics (steps, rewards, latencies, anomalies), to be merged.
        A host that restarted starts again from zero (as a restarted process does)."""
        return self._ask_hosts("metric_samples", [])

    def __len__(self) -> int:
        return sum(c.get("active", 0) for c in self._host_counts())

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for c in self._host_counts():
            total.update(c)
        return {"active": total.get("active", 0), **total}

    def expire_idle(self, now: float | None = None) -> int:
        expired: Counter[str] = Counter()
        for per_env in self._each_host("expire_idle"):
            expired.update(per_env)
        with self._lock:
            self.expired += sum(expired.values())
            self.expired_per_env.update(expired)
        return sum(expired.values())

    def close_all(self) -> None:
        """A replica stopping closes nothing: the sessions belong to the deployment."""


# --- the deployment -------------------------------------------------------------------------------


class ServeReplica:
    """One replica of the ingress: builds the app around the shared session hosts."""

    def __init__(
        self,
        config: ServeConfig,
        specs: list[gym.envs.registration.EnvSpec],
        host_names: list[str],
        timeout_s: float,
    ):
        self.config, self.specs, self.host_names, self.timeout_s = (
            config,
            specs,
            host_names,
            timeout_s,
        )

    def __serve_build_asgi_app__(self) -> Any:
        ray = ray_module()
        from ray import serve

        install_specs(self.specs)
        hosts = [ray.get_actor(name, namespace=NAMESPACE) for name in self.host_names]
        pool = RaySessionPool(
            hosts,
            max_sessions=self.config.max_sessions,
            idle_timeout_s=self.config.idle_timeout_s,
            timeout_s=self.timeout_s,
        )
        replica = serve.get_replica_context().replica_id.unique_id
        return _tagged(create_app(self.config, pool=pool), replica)


def _tagged(app: Any, replica: str) -> Any:
    """``app`` with a header naming this replica on every HTTP response (for tracing)."""
    header = (REPLICA_HEADER.encode(), replica.encode())

    async def tagged(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await app(scope, receive, send_tagged)

    return tagged


@dataclass
class RayServe:
    """A running deployment: its URL, and :meth:`stop` to take it down."""

    url: str
    app_name: str
    host_names: list[str]
    _owns_ray: bool
    _owns_serve: bool
    _deployed: bool = False
    """Whether this deployment's ``serve.run`` was called (so the app name is its own)."""

    def wait(self) -> None:
        """Block until SIGINT or SIGTERM (handled here when called from the main thread)."""
        stop = threading.Event()
        handled = (signal.SIGINT, signal.SIGTERM)
        main = threading.current_thread() is threading.main_thread()
        before = [signal.signal(sig, lambda *_: stop.set()) for sig in handled] if main else []
        try:
            while not stop.wait(1.0):
                pass
        finally:
            for sig, handler in zip(handled, before, strict=False):
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Delete the Serve application and stop its session hosts (and their envs); then
        Ray Serve and Ray themselves if this deployment started them. Touches nothing it did
        not create (an app of the same name deployed by another call is left alone)."""
        ray = ray_module()
        from ray import serve

        if self._deployed:
            with contextlib.suppress(Exception):  # gone already
                serve.delete(self.app_name)
        for name in self.host_names:
            try:
                ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            except ValueError:
                pass  # not there: never started, or stopped already
        if self._owns_serve:
            serve.shutdown()
        if self._owns_ray:
            ray.shutdown()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_on_ray(
    config: ServeConfig,
    *,
    address: str | None = None,
    replicas: int = 2,
    hosts: int | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    app_name: str = "llmgym",
    cpus_per_replica: float = 1,
    cpus_per_host: float = 1,
    timeout_s: float = 300.0,
    start_timeout_s: float = 300.0,
) -> RayServe:
    """Serve ``config``'s envs on the Ray cluster at ``address`` with ``replicas`` replicas of
    the app behind Ray Serve's proxy at ``host:port`` (``port=0`` picks a free one), and
    ``hosts`` session hosts (default: one per replica) sharing ``config.max_sessions``.

    Returns once the app answers; ``.url`` is where clients connect
    (``llmgym.remote.make(url, env_id)``), ``.stop()`` takes it all down (Ray Serve too, if
    this call started it). A Ray Serve already running on the cluster keeps its proxy's
    address: ``host`` and ``port`` are then ignored, the bind check applies to the proxy's
    own host, and ``.url`` names it. An ``app_name`` that the cluster's Serve already runs is
    refused.
    """
    ray = ray_module()
    try:
        from ray import serve
    except ImportError:
        raise error.DependencyNotInstalled(
            "serving on Ray needs Ray Serve: pip install 'llmgym[ray,serve]'"
        ) from None
    if replicas < 1:
        raise error.Error(f"Expects replicas >= 1, actual: {replicas}")
    hosts = replicas if hosts is None else hosts
    if not 1 <= hosts <= config.max_sessions:
        raise error.Error(f"Expects 1 <= hosts <= max_sessions, actual: {hosts}")
    check_bind(host, config.tokens)
    config = replace(config, env_ids=served_env_ids(config.env_ids))
    specs = [env_spec(e) for e in config.env_ids]
    owns_ray = connect(address)
    try:
        status = serve.status()
        owns_serve = not status.proxies  # a Serve already running keeps its proxy's address
        if app_name in status.applications:
            raise error.Error(
                f"Ray Serve on this cluster already runs an app named {app_name!r}; "
                "stop it or pick another app name"
            )
        if owns_serve:
            port = _free_port(host) if port == 0 else port
        else:
            host, port = _running_proxy(config.tokens)
    except BaseException:
        if owns_ray:
            ray.shutdown()
        raise
    suffix = uuid.uuid4().hex[:8]  # two deployments' hosts never share a name
    names = [f"{app_name}-host-{i}-{suffix}" for i in range(hosts)]
    served = RayServe(_url(host, port), app_name, names, owns_ray, owns_serve)
    try:
        host_class = ray.remote(SessionHost)
        for i, name in enumerate(names):
            share = config.max_sessions // hosts + (i < config.max_sessions % hosts)
            host_class.options(
                name=name,
                namespace=NAMESPACE,
                lifetime="detached",
                max_restarts=-1,
                max_concurrency=64,
                num_cpus=cpus_per_host,
            ).remote(i, specs, share, config.idle_timeout_s)
        if owns_serve:
            serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly")
        deployment = serve.deployment(
            name="llmgym-serve",
            num_replicas=replicas,
            ray_actor_options={"num_cpus": cpus_per_replica},
            # each replica takes as many requests at once as a standalone server takes
            # connections (a WebSocket holds one for its lifetime: Ray's default of 5 would
            # let a 6th client wait for ever); past that the proxy queues as many, then 503
            max_ongoing_requests=config.max_connections,
            max_queued_requests=config.max_connections,
        )(serve.ingress()(ServeReplica))
        served._deployed = True  # from here on, whatever runs under the name is this call's
        serve.run(
            deployment.bind(config, specs, names, timeout_s),
            name=app_name,
            route_prefix="/",
            blocking=False,
        )
        _wait_ready(served.url, start_timeout_s)
    except BaseException:
        served.stop()
        raise
    return served


def _running_proxy(tokens: list[str]) -> tuple[str, int]:
    """The ``host, port`` where the cluster's running Serve proxy listens, checked as a bind
    of this server's (a proxy on all interfaces needs tokens, as ``llmgym serve`` does)."""
    try:
        from ray.serve.context import _get_global_client

        client = _get_global_client()  # Ray Serve has no public reader of the proxy's options
        if client is None:
            raise error.Error("no Serve controller")
        options = client.http_config
        host, port = str(options.host), int(options.port)
    except Exception as exc:
        if tokens:
            raise error.Error(
                f"Could not read the address of the Ray Serve proxy already running ({exc})"
            ) from None
        raise error.Error(
            "Ray Serve already runs on this cluster and its proxy's address could not be read "
            f"({exc}): it may listen beyond loopback, so serving there needs --token"
        ) from None
    check_bind(host, tokens)
    return host, port


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def _wait_ready(url: str, timeout_s: float) -> None:
    """Poll ``/health`` until the app answers (Serve reports ready before the proxy routes)."""
    import http.client
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError as exc:
            last = repr(exc)
        finally:
            conn.close()
        time.sleep(0.2)
    raise error.Error(f"llmgym serve on Ray did not answer at {url} within {timeout_s:g} s {last}")
