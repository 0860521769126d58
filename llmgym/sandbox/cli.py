"""``llmgym sandbox``: check what isolation this host gives, run a file, measure the sandbox.

Used by ``llmgym/cli.py`` through :func:`add_subparser`; also runs alone as
``python -m llmgym.sandbox.cli {check,run,bench}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

__all__ = ["add_subparser", "main"]

_EXT_LANGUAGE = {
    ".py": "python",
    ".c": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".sh": "shell",
}


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sandbox`` command (with ``check``, ``run`` and ``bench``) to ``subparsers``."""
    parser = subparsers.add_parser(
        "sandbox", help="check, use and measure the code sandbox", description=__doc__
    )
    sub = parser.add_subparsers(dest="sandbox_command", metavar="{check,run,bench}")
    sub.required = True

    check = sub.add_parser("check", help="which isolation this host gives, and what is degraded")
    check.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(func=cmd_check)

    run = sub.add_parser("run", help="run a program file in the sandbox")
    run.add_argument("file", help="source file (language from its extension unless --language)")
    run.add_argument("--language", help="python, c, cpp or shell")
    run.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    run.add_argument("--wall-time", type=float, default=10.0, help="seconds (default 10)")
    run.add_argument("--cpu-time", type=float, default=None, help="seconds (default: wall time)")
    run.add_argument("--memory-mb", type=int, default=512)
    run.add_argument("--max-processes", type=int, default=64)
    run.add_argument("--max-output-bytes", type=int, default=1 << 20)
    run.add_argument("--network", action="store_true", help="share the host network")
    run.add_argument("--stdin", help="file whose content is the program's stdin")
    run.add_argument(
        "--file",
        action="append",
        default=[],
        dest="extra_files",
        metavar="NAME=PATH",
        help="extra file for /tmp",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.set_defaults(func=cmd_run)

    bench = sub.add_parser("bench", help="latency and throughput of a trivial program")
    bench.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    bench.add_argument("--runs", type=int, default=200)
    bench.set_defaults(func=cmd_bench)
    return parser


def _get(backend: str, **options: Any) -> Any:
    from llmgym.sandbox import get_sandbox

    return get_sandbox(backend, **options)


def cmd_check(args: argparse.Namespace) -> int:
    from llmgym.sandbox import BackendUnavailable, Limits

    try:
        sb = _get(args.backend)
    except BackendUnavailable as exc:
        report: dict[str, Any] = {"backend": args.backend, "usable": False, "reason": str(exc)}
        print(json.dumps(report) if args.json else f"{args.backend}: NOT usable: {exc}")
        return 1
    with sb:
        info = dict(sb.isolation())
        lim = Limits(wall_time_s=10, memory_mb=128)
        probes = {
            "runs python": sb.run(code="print(1)", limits=lim).stdout == "1\n",
            "network blocked": sb.run(
                code="import socket\ns=socket.socket(); s.settimeout(2)\n"
                "try:\n s.connect(('1.1.1.1', 53)); print('open')\nexcept OSError: print('blocked')",
                limits=lim,
            ).stdout
            == "blocked\n",
            "memory limit enforced": sb.run(
                code="x = bytearray(512 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1",
                limits=lim,
            ).status
            == "memory_limit",
            "runs unprivileged": sb.run(code="import os; print(os.getuid())", limits=lim).stdout
            not in ("0\n", ""),
        }
    info["usable"] = all(probes.values())
    info["probes"] = probes
    if args.json:
        print(json.dumps(info))
    else:
        print(f"sandbox backend: {info.pop('backend')}")
        for key, value in info.items():
            if key in ("probes", "degraded"):
                continue
            print(f"  {key}: {value}")
        for name, ok in probes.items():
            print(f"  [{'ok' if ok else 'FAIL'}] {name}")
        for line in info.get("degraded", []):
            print(f"  degraded: {line}")
        if not info.get("degraded"):
            print("  degraded: nothing")
    return 0 if info["usable"] else 1


def cmd_run(args: argparse.Namespace) -> int:
    import os

    from llmgym.sandbox import Limits

    with open(args.file, encoding="utf-8", errors="surrogateescape") as f:
        code = f.read()
    language = args.language or _EXT_LANGUAGE.get(os.path.splitext(args.file)[1], "python")
    files: dict[str, bytes] = {}
    for spec in args.extra_files:
        name, sep, path = spec.partition("=")
        if not sep:
            print(f"--file expects NAME=PATH, got {spec!r}", file=sys.stderr)
            return 2
        with open(path, "rb") as f:
            files[name] = f.read()
    stdin = b""
    if args.stdin:
        with open(args.stdin, "rb") as f:
            stdin = f.read()
    limits = Limits(
        wall_time_s=args.wall_time,
        cpu_time_s=args.cpu_time,
        memory_mb=args.memory_mb,
        max_processes=args.max_processes,
        max_output_bytes=args.max_output_bytes,
        network=args.network,
    )
    with _get(args.backend) as sb:
        res = sb.run(code=code, language=language, files=files, stdin=stdin, limits=limits)
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        sys.stdout.write(res.stdout)
        sys.stdout.flush()
        sys.stderr.write(res.compile_output if res.status == "compile_error" else res.stderr)
        print(
            f"[sandbox] status={res.status} exit_code={res.exit_code} signal={res.signal_name} "
            f"wall={res.wall_time_s:.3f}s cpu={res.cpu_time_s:.3f}s "
            f"peak_memory={res.peak_memory_mb:.1f}MiB {res.detail}".rstrip(),
            file=sys.stderr,
        )
    return 0 if res.ok else 1


def cmd_bench(args: argparse.Namespace) -> int:
    from llmgym.sandbox import Limits

    lim = Limits(wall_time_s=10, memory_mb=256)
    with _get(args.backend) as sb:
        sb.run(code="pass", limits=lim)
        lat = []
        for _ in range(args.runs):
            t = time.perf_counter()
            sb.run(code="print(1)", limits=lim)
            lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        results = sb.run_many([{"code": "print(1)", "limits": lim}] * args.runs)
        rate = args.runs / (time.perf_counter() - t)
    lat.sort()
    ok = sum(r.ok for r in results)
    print(f"backend={args.backend} runs={args.runs} ok={ok}")
    print(
        f"latency p50={statistics.median(lat) * 1e3:.2f}ms "
        f"p99={lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3:.2f}ms"
    )
    print(f"throughput (run_many, {sb.max_concurrency} in flight) {rate:.1f} runs/s")
    return 0 if ok == args.runs else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llmgym")
    sub = parser.add_subparsers(dest="command")
    add_subparser(sub)
    args = parser.parse_args(["sandbox", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
