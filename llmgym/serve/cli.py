"""The ``llmgym serve`` command: registered envs over HTTP (and OpenEnv's WebSocket)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any


def add_subparsers(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve envs over HTTP with sessions (and OpenEnv's protocol)",
        description="Serve registered envs (built-in, declarative via --spec, plugins) over HTTP: "
        "sessions with reset, step, get/set state and close at /v1/sessions, plus OpenEnv's "
        "server for each env at /openenv/<ENV_ID> when openenv-core is installed. Binds "
        "loopback by default; any other host needs --token (or LLMGYM_SERVE_TOKEN).",
    )
    p.add_argument("envs", nargs="*", metavar="ENV_ID", help="envs to serve (default: all)")
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
        "--openenv",
        choices=("auto", "on", "off"),
        default="auto",
        help="mount OpenEnv's server per env at /openenv/<ENV_ID> (auto: if openenv-core is "
        "installed)",
    )
    p.set_defaults(func=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from llmgym import error
    from llmgym.serve.app import ServeConfig
    from llmgym.serve.server import Server, tokens_from

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise error.DependencyNotInstalled(
            "llmgym serve needs FastAPI and uvicorn: pip install 'llmgym[serve]'"
        )
    has_openenv = importlib.util.find_spec("openenv") is not None
    if args.openenv == "on" and not has_openenv:
        raise error.DependencyNotInstalled(
            "--openenv on needs openenv-core: pip install 'llmgym[serve]'"
        )
    config = ServeConfig(
        env_ids=list(args.envs),
        tokens=tokens_from(args.token),
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout if args.idle_timeout > 0 else None,
        max_body_bytes=args.max_body_bytes,
        max_action_chars=args.max_action_chars,
        openenv=args.openenv == "on" or (args.openenv == "auto" and has_openenv),
    )
    server = Server(config, host=args.host, port=args.port)
    print(f"llmgym serve: listening on {server.url}", flush=True)
    print(
        f"  envs: {', '.join(config.env_ids or ['all llm/ envs'])}; "
        f"auth: {'token' if config.tokens else 'none (loopback)'}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.run()
    finally:
        server.sock.close()
        server.app.pool.close_all()
    return 0
