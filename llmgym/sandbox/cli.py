"""``llmgym sandbox``: check what isolation this host gives, run a file, measure the sandbox.

Used by ``llmgym/cli.py`` through ``add_subparser``; also runs alone as
``python -m llmgym.sandbox.cli {check,run,bench,clean}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

__all__ = ["add_subparser", "language_of", "main"]

_MORE_EXTENSIONS = {".cc": "cpp", ".cxx": "cpp", ".c++": "cpp", ".bash": "shell"}
"""Extensions beyond each language's own source file name (``main.cpp`` gives ``.cpp``)."""

_LIMIT_OPTIONS = {
    "wall_time_s": "--wall-time",
    "cpu_time_s": "--cpu-time",
    "memory_mb": "--memory-mb",
    "max_processes": "--max-processes",
    "max_output_bytes": "--max-output-bytes",
}


def extensions() -> dict[str, str]:
    """File extension -> language name, for every language of ``llmgym.sandbox.LANGUAGES``.

    >>> extensions()[".py"], extensions()[".cc"], extensions()[".sh"]
    ('python', 'cpp', 'shell')
    """
    from llmgym.sandbox.languages import LANGUAGES

    table = {os.path.splitext(lang.source)[1].lower(): name for name, lang in LANGUAGES.items()}
    table.update({ext: name for ext, name in _MORE_EXTENSIONS.items() if name in LANGUAGES})
    table.pop("", None)
    return table


def _supported() -> str:
    by_language: dict[str, list[str]] = {}
    for ext, name in extensions().items():
        by_language.setdefault(name, []).append(ext)
    return ", ".join(f"{name} ({', '.join(exts)})" for name, exts in sorted(by_language.items()))


def language_of(path: str, language: str | None = None) -> str:
    """The sandbox language to run ``path`` as: ``language`` when given (a name or an alias),
    else the one its extension says; a clear error when neither tells.

    >>> language_of("prog.cpp"), language_of("notes.txt", "python")
    ('cpp', 'python')
    """
    from llmgym.sandbox.errors import UnknownLanguage
    from llmgym.sandbox.languages import resolve_language

    if language is not None:
        try:
            return resolve_language(language).name
        except UnknownLanguage:
            raise UnknownLanguage(
                f"unknown --language {language!r}; supported: {_supported()}"
            ) from None
    ext = os.path.splitext(path)[1].lower()
    name = extensions().get(ext)
    if name is None:
        what = f"extension {ext!r}" if ext else "no extension"
        raise UnknownLanguage(
            f"cannot tell the language of {path} ({what}); supported: {_supported()}; "
            "or name it with --language"
        )
    return name


def _limits(args: argparse.Namespace) -> Any:
    """The run's ``Limits``, whose errors name the command-line options."""
    from llmgym.sandbox import Limits
    from llmgym.sandbox.errors import InvalidLimits

    try:
        return Limits(
            wall_time_s=args.wall_time,
            cpu_time_s=args.cpu_time,
            memory_mb=args.memory_mb,
            max_processes=args.max_processes,
            max_output_bytes=args.max_output_bytes,
            network=args.network,
        )
    except InvalidLimits as e:
        message = str(e)
        for field, option in _LIMIT_OPTIONS.items():
            message = message.replace(f"Limits.{field}", option)
        raise InvalidLimits(message) from None


def _name_path(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expects NAME=PATH, got {text!r}")
    return name, path


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an int, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sandbox`` command (``check``, ``run``, ``bench``, ``clean``) to ``subparsers``."""
    from llmgym.sandbox.languages import LANGUAGES

    parser = subparsers.add_parser(
        "sandbox",
        help="check, use and measure the code sandbox",
        description="Check what isolation this host gives, run a program file in the "
        "sandbox, measure it, and remove what dead sandboxes left behind.",
    )
    sub = parser.add_subparsers(dest="sandbox_command", metavar="{check,run,bench,clean}")
    sub.required = True

    check = sub.add_parser("check", help="which isolation this host gives, and what is degraded")
    check.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(func=cmd_check)

    run = sub.add_parser(
        "run",
        help="run a program file in the sandbox",
        description="Run a program file in the sandbox and report its status, exit code, "
        "time and peak memory; exit status 0 when the program ran and exited 0. The "
        f"language comes from the file's extension unless --language names it: {_supported()}.",
    )
    run.add_argument("file", help="source file (language from its extension unless --language)")
    run.add_argument(
        "--language",
        help=f"{', '.join(sorted(LANGUAGES))} (or an alias such as py, c++, bash); "
        "overrides the extension",
    )
    run.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    run.add_argument("--wall-time", type=float, default=10.0, help="seconds (default 10)")
    run.add_argument("--cpu-time", type=float, default=None, help="seconds (default: wall time)")
    run.add_argument("--memory-mb", type=int, default=512, help="MiB, at least 8 (default 512)")
    run.add_argument("--max-processes", type=int, default=64, help="(default 64)")
    run.add_argument(
        "--max-output-bytes", type=int, default=1 << 20, help="per stream (default 1 MiB)"
    )
    run.add_argument("--network", action="store_true", help="share the host network")
    run.add_argument("--stdin", help="file whose content is the program's stdin")
    run.add_argument(
        "--file",
        type=_name_path,
        action="append",
        default=[],
        dest="extra_files",
        metavar="NAME=PATH",
        help="extra file for /tmp (repeatable)",
    )
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.set_defaults(func=cmd_run)

    bench = sub.add_parser("bench", help="latency and throughput of a trivial program")
    bench.add_argument("--backend", default="local", choices=["local", "docker", "ray"])
    bench.add_argument("--runs", type=_positive_int, default=200, help="(default 200)")
    bench.set_defaults(func=cmd_bench)

    clean = sub.add_parser(
        "clean",
        help="remove the cgroups that dead sandboxes left on this host",
        description="Remove every cgroup a sandbox made whose owner is gone (killed, OOM), in "
        "every hierarchy, containers' cgroups included. One that still holds a process is kept "
        "unless --kill. Exit status 1 when something is kept.",
    )
    clean.add_argument("--kill", action="store_true", help="kill what orphans still hold")
    clean.add_argument("--dry-run", action="store_true", help="only list what would go")
    clean.add_argument("--json", action="store_true", help="print one JSON object")
    clean.set_defaults(func=cmd_clean)
    return parser


def _leftovers() -> list[dict[str, Any]]:
    from dataclasses import asdict

    from llmgym.sandbox._cgroup import find_leftovers

    try:
        return [asdict(o) for o in find_leftovers()]
    except OSError:  # no cgroup file system: nothing can be left there
        return []


def cmd_clean(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from llmgym.sandbox import _cgroup

    removed: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    if not args.dry_run:  # first: it removes a gone container's cgroup with its own
        from llmgym.sandbox.docker import sweep_container_cgroups

        removed += [
            {"path": p, "kind": "container", "owner_pid": 0, "holds_processes": False}
            for p in sweep_container_cgroups(_NoDocker())
        ]
    for base in _cgroup.llmgym_directories():
        if args.dry_run:
            kept += [asdict(o) for o in _cgroup.orphans(base, legacy_anywhere=True)]
            continue
        gone, left = _cgroup.sweep(base, kill=args.kill, legacy_anywhere=True)
        removed += [asdict(o) for o in gone]
        kept += [asdict(o) for o in left]
        try:
            os.rmdir(base)  # nobody's any more (a starting sandbox makes it again)
            removed.append({"path": base, "kind": "base", "owner_pid": 0, "holds_processes": False})
        except OSError:
            pass
    if args.json:
        key = "would_remove" if args.dry_run else "removed"
        print(
            json.dumps(
                {key: kept if args.dry_run else removed, "kept": [] if args.dry_run else kept}
            )
        )
    elif args.dry_run:
        print(
            f"{len(kept)} leftover cgroup(s) would go" + "".join(f"\n  {o['path']}" for o in kept)
        )
    else:
        print(f"removed {len(removed)} leftover cgroup(s)")
        for o in removed:
            print(f"  removed {o['path']}")
        for o in kept:
            why = "holds processes (--kill to end them)" if o["holds_processes"] else "busy"
            print(f"  kept {o['path']}: {why}")
    return 1 if kept and not args.dry_run else 0


class _NoDocker:
    """For ``clean``: containers whose cgroups are found are asked about only when the
    daemon answers; without one, a container's own cgroup is never removed."""

    @property
    def containers(self) -> Any:
        from llmgym.sandbox.docker import _client

        return _client().containers


def _get(backend: str, **options: Any) -> Any:
    from llmgym.sandbox import get_sandbox

    return get_sandbox(backend, **options)


def cmd_check(args: argparse.Namespace) -> int:
    from llmgym.sandbox import BackendUnavailable, Limits

    left = _leftovers()  # before the sandbox starts: its start sweeps some of them
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
    info["leftover_cgroups"] = left
    if args.json:
        print(json.dumps(info))
    else:
        print(f"sandbox backend: {info.pop('backend')}")
        for key, value in info.items():
            if key in ("probes", "degraded", "leftover_cgroups"):
                continue
            print(f"  {key}: {value}")
        for name, ok in probes.items():
            print(f"  [{'ok' if ok else 'FAIL'}] {name}")
        for line in info.get("degraded", []):
            print(f"  degraded: {line}")
        if not info.get("degraded"):
            print("  degraded: nothing")
        left = info["leftover_cgroups"]
        print(
            f"  leftover cgroups of dead sandboxes: {len(left)}"
            + (" (llmgym sandbox clean)" if left else "")
        )
        for o in left[:20]:
            busy = ", holds processes" if o["holds_processes"] else ""
            print(f"    {o['path']} ({o['kind']}, owner pid {o['owner_pid']}{busy})")
    return 0 if info["usable"] else 1


def cmd_run(args: argparse.Namespace) -> int:
    language = language_of(args.file, args.language)
    limits = _limits(args)
    with open(args.file, encoding="utf-8", errors="surrogateescape") as f:
        code = f.read()
    files: dict[str, bytes] = {}
    for name, path in args.extra_files:
        with open(path, "rb") as f:
            files[name] = f.read()
    stdin = b""
    if args.stdin:
        with open(args.stdin, "rb") as f:
            stdin = f.read()
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
    """``python -m llmgym.sandbox.cli ARGS``: ``llmgym sandbox ARGS``."""
    from llmgym.cli import ArgumentParser, run_cli

    def build() -> argparse.ArgumentParser:
        parser = ArgumentParser(prog="llmgym")
        add_subparser(parser.add_subparsers(dest="command"))
        return parser

    return run_cli(build, ["sandbox", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
