"""The ``llmgym serve`` command: registered envs over HTTP and WebSocket (and OpenEnv's routes)."""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
from typing import TYPE_CHECKING, Any

from llmgym import error

if TYPE_CHECKING:
    from llmgym.serve.app import ServeConfig
    from llmgym.serve.server import TLS


def add_subparsers(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve envs over HTTP with sessions (and OpenEnv's protocol)",
        description="Serve registered envs (built-in, declarative via --spec, plugins) over HTTP: "
        "sessions with reset, step, get/set state and close at /v1/sessions, batch steps at "
        "/v1/step_batch, the same ops over one WebSocket at /v1/ws, Prometheus metrics at "
        "/metrics, plus OpenEnv's server for each env at /openenv/<ENV_ID> when openenv-core is "
        "installed. Binds loopback by default; any other host needs --token (or "
        "LLMGYM_SERVE_TOKEN) or mutual TLS (--tls-cert, --tls-key, --tls-client-ca).",
    )
    p.add_argument("envs", nargs="*", metavar="ENV_ID", help="envs to serve (default: all)")
    p.add_argument(
        "--spec",
        dest="command_spec_files",  # its own dest: a subcommand's value would replace the global
        action="append",
        default=[],
        metavar="FILE",
        help="register the envs of a YAML/TOML spec first, as `llmgym --spec FILE serve` does "
        "(repeatable)",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks one)")
    p.add_argument(
        "--token",
        action="append",
        default=None,
        help="a client token (repeatable); every request then needs 'Authorization: Bearer "
        "TOKEN', and a session answers only to its creator's token",
    )
    p.add_argument("--max-sessions", type=int, default=256, help="live sessions at once")
    p.add_argument(
        "--idle-timeout", type=float, default=600.0, help="close sessions idle this long (s)"
    )
    p.add_argument("--max-body-bytes", type=int, default=8 << 20, help="largest request body")
    p.add_argument("--max-action-chars", type=int, default=1 << 20, help="largest action")
    p.add_argument(
        "--max-session-chars",
        type=int,
        default=8 << 20,
        help="characters of conversation one session may hold (default 8Mi; 0: no limit): "
        "a step past it is refused until the session resets",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=32,
        help="threads that run env calls (create, reset, step...): how many env calls run at "
        "once (default 32; one process and one event loop serve all connections)",
    )
    p.add_argument(
        "--max-steps-per-s",
        type=float,
        default=None,
        help="steps per second, all sessions together (over it: 429 with Retry-After)",
    )
    p.add_argument(
        "--session-steps-per-s",
        type=float,
        default=None,
        help="steps per second of each session (over it: 429 with Retry-After)",
    )
    p.add_argument(
        "--max-rss-mb",
        type=float,
        default=None,
        help="refuse new sessions (503) while the server's resident memory is over this",
    )
    p.add_argument(
        "--allow-kwarg",
        action="append",
        default=[],
        metavar="ENV_ID:NAME",
        help="let clients pass the env kwarg NAME to ENV_ID ('*:NAME': every env), beyond the "
        "safe default (repeatable); kwargs that reach the host (tasks paths, sandbox, "
        "verifier, prompt_template, models...) are refused unless allowed here",
    )
    p.add_argument(
        "--kwarg-max",
        action="append",
        default=[],
        metavar="ENV_ID:NAME=VALUE",
        help="the largest number clients may pass in the env kwarg NAME of ENV_ID ('*:NAME': "
        "every env; repeatable); numbers that size work (token lengths, timeouts, caches, turns) "
        "have defaults, every other number is bounded by 10000",
    )
    p.add_argument(
        "--close-timeout",
        type=float,
        default=10.0,
        help="seconds closing a session or stopping the server waits for an env call in flight",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (https://host:port) allowed to call a server without a token",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        help="open connections at once, HTTP and WebSocket (past it: 503)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        help="seconds for a request's headers and body to arrive (slow clients are cut off)",
    )
    p.add_argument(
        "--log-json",
        action="store_true",
        help="log one JSON line per request (HTTP and WebSocket op) to stderr: route, status, "
        "latency, session and env ids (never tokens or actions); default: no access log",
    )
    p.add_argument(
        "--openenv",
        choices=("auto", "on", "off"),
        default="auto",
        help="mount OpenEnv's server per env at /openenv/<ENV_ID> (auto: if openenv-core is "
        "installed)",
    )
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate chain")
    p.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    p.add_argument(
        "--tls-client-ca",
        metavar="PEM",
        help="mutual TLS: every client must present a certificate signed by this CA (then a "
        "non-loopback bind needs no token; tokens still separate sessions when given)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="serve behind Ray Serve on the Ray cluster at ADDRESS (auto, local or HOST:PORT): "
        "--replicas copies of the app behind Ray Serve's proxy at --host/--port, sessions in named "
        "actors that any replica serves (needs llmgym[ray,serve])",
    )
    p.add_argument(
        "--replicas", type=int, default=2, help="with --ray: replicas of the app (default 2)"
    )
    p.set_defaults(func=_cmd_serve)


SERVE_MODULES = ("fastapi", "uvicorn", "prometheus_client")
"""What ``llmgym serve`` imports (the ``serve`` extra)."""


def allowed_kwargs(flags: list[str]) -> dict[str, list[str]]:
    """``--allow-kwarg ENV_ID:NAME`` flags as ``{env_id: [names]}`` (the last ':' splits)."""
    from llmgym import error

    table: dict[str, list[str]] = {}
    for flag in flags:
        env_id, sep, name = flag.rpartition(":")
        if not sep or not env_id or not name.isidentifier():
            raise error.Error(f"Expects --allow-kwarg ENV_ID:NAME (or '*:NAME'), actual: {flag!r}")
        table.setdefault(env_id, []).append(name)
    return table


def kwarg_maxima(flags: list[str]) -> dict[str, dict[str, float]]:
    """``--kwarg-max ENV_ID:NAME=VALUE`` flags as ``{env_id: {name: value}}``."""
    from llmgym import error

    table: dict[str, dict[str, float]] = {}
    for flag in flags:
        target, _, value = flag.partition("=")
        env_id, sep, name = target.rpartition(":")
        try:
            bound = float(value)
        except ValueError:
            bound = -1.0
        if not sep or not env_id or not name.isidentifier() or not 0 <= bound < float("inf"):
            raise error.Error(
                f"Expects --kwarg-max ENV_ID:NAME=VALUE (VALUE a number >= 0), actual: {flag!r}"
            )
        table.setdefault(env_id, {})[name] = bound
    return table


def config_from(args: argparse.Namespace) -> ServeConfig:
    """The server's config from the command's flags (checking the ``serve`` extra is there)."""
    from llmgym import error

    missing = [m for m in SERVE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise error.DependencyNotInstalled(
            f"llmgym serve needs {', '.join(missing)}: pip install 'llmgym[serve]'"
        )
    from llmgym.serve.app import ServeConfig
    from llmgym.serve.server import tokens_from

    has_openenv = importlib.util.find_spec("openenv") is not None
    if args.openenv == "on" and not has_openenv:
        raise error.DependencyNotInstalled(
            "--openenv on needs openenv-core: pip install 'llmgym[serve]'"
        )
    return ServeConfig(
        env_ids=list(args.envs),
        tokens=tokens_from(args.token),
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout if args.idle_timeout > 0 else None,
        max_body_bytes=args.max_body_bytes,
        max_action_chars=args.max_action_chars,
        max_session_chars=args.max_session_chars or None,
        openenv=args.openenv == "on" or (args.openenv == "auto" and has_openenv),
        workers=args.workers,
        max_steps_per_s=args.max_steps_per_s,
        session_steps_per_s=args.session_steps_per_s,
        max_rss_mb=args.max_rss_mb,
        allow_kwargs=allowed_kwargs(args.allow_kwarg),
        kwarg_max=kwarg_maxima(args.kwarg_max),
        close_timeout_s=args.close_timeout,
        allowed_origins=list(args.allow_origin),
        max_connections=args.max_connections,
        request_timeout_s=args.request_timeout,
    )


def tls_from(args: argparse.Namespace) -> TLS | None:
    """The ``--tls-*`` flags as a :class:`~llmgym.serve.server.TLS` (None: plain HTTP)."""
    from llmgym.serve.server import TLS

    cert, key, client_ca = args.tls_cert, args.tls_key, args.tls_client_ca
    if cert is None and key is None and client_ca is None:
        return None
    if cert is None or key is None:
        raise error.Error("HTTPS needs both --tls-cert and --tls-key")
    return TLS(cert, key, client_ca)


def _cmd_serve(args: argparse.Namespace) -> int:
    config = config_from(args)
    tls = tls_from(args)
    if args.ray is not None:
        if tls is not None:
            raise error.Error(
                "--tls-* applies to llmgym's own server; under --ray, Ray Serve's "
                "proxy owns the HTTP connections (terminate TLS in front of it)"
            )
        return _serve_on_ray(config, args)
    from llmgym.serve.logs import enable_json_logs
    from llmgym.serve.server import Server

    if args.log_json:
        enable_json_logs()
    server = Server(config, host=args.host, port=args.port, tls=tls)
    print(f"llmgym serve: listening on {server.url}", flush=True)
    print(
        f"  envs: {', '.join(config.env_ids or ['all llm/ envs'])}; "
        f"auth: {'token' if config.tokens else 'none (loopback)'}",
        file=sys.stderr,
        flush=True,
    )
    # uvicorn handles SIGTERM by shutting down and then re-raising it, which would end the process
    # without atexit: the sandbox's cgroups would be left behind. Exiting normally runs it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        server.run()
    finally:
        server.sock.close()
        server.app.service.shutdown()
    return 0


def _serve_on_ray(config: ServeConfig, args: argparse.Namespace) -> int:
    """``--ray``: the app in ``--replicas`` Ray Serve replicas; blocks until SIGINT/SIGTERM."""
    from llmgym import error
    from llmgym.ray.serving import serve_on_ray

    if args.replicas < 1:
        raise error.Error(f"Expects --replicas >= 1, actual: {args.replicas}")
    served = serve_on_ray(
        config, address=args.ray, replicas=args.replicas, host=args.host, port=args.port
    )
    print(
        f"llmgym serve: listening on {served.url} (Ray Serve, {args.replicas} replicas)",
        flush=True,
    )
    try:
        served.wait()
    finally:
        served.stop()
    return 0
