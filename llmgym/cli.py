"""The llmgym command: list, show, play and export envs; register specs; sandbox, train, eval.

Errors print one line on stderr (exit status 2; set LLMGYM_DEBUG=1 or pass --debug for the
traceback); a closed pipe on stdout (llmgym list | head -1) ends quietly with status 141.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

# Commands contributed by the upper layers, imported only when present: (module, function).
_EXTENSIONS = (
    ("llmgym.sandbox.cli", "add_subparser"),
    ("llmgym.agents.cli", "add_subparsers"),
    ("llmgym.evaluation.cli", "add_subparsers"),
    ("llmgym.serve.cli", "add_subparsers"),
)

DEBUG_ENV = "LLMGYM_DEBUG"
"""Set to 1 (or pass ``--debug``) to see the traceback of an error the CLI reports in one line."""
EXIT_ERROR = 2
"""Exit status of a usage error, bad input, or an error llmgym raised on purpose."""
EXIT_BROKEN_PIPE = 128 + int(getattr(signal, "SIGPIPE", 13))
"""Exit status when stdout's reader went away (``llmgym list | head -1``): what a shell reports
for a tool that SIGPIPE ended."""


# --- argument parsing -----------------------------------------------------------------------


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line on stderr.

    Subcommand parsers are of the same class (``add_subparsers`` makes them so).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse drops every OSError here; a closed stdout pipe goes on to run_cli (exit 141).
        if message:
            try:
                (file or sys.stderr).write(message)
            except BrokenPipeError:
                raise
            except (AttributeError, OSError):
                pass


def json_object(text: str) -> dict[str, Any]:
    """argparse ``type``: a JSON object, e.g. ``'{"difficulty": 0.5}'``.

    >>> json_object('{"difficulty": 0.5}')
    {'difficulty': 0.5}
    """
    example = "'{\"difficulty\": 0.5}'"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(
            f"not valid JSON ({e.msg} at character {e.pos}) in {text!r}; "
            f"expects a JSON object such as {example}"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expects a JSON object such as {example}, got {text!r}")
    return value


def key_value(text: str) -> tuple[str, Any]:
    """argparse ``type``: ``KEY=VALUE`` with VALUE read as JSON when it parses, else a string.

    >>> key_value("temperature=0.7"), key_value("name=abc")
    (('temperature', 0.7), ('name', 'abc'))
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def int_list(text: str) -> list[int]:
    """argparse ``type``: comma-separated positive ints such as ``1,5,10``."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expects comma-separated positive ints such as 1,5,10, got {text!r}"
        )
    return values


def fraction(text: str) -> float:
    """argparse ``type``: a number in [0, 1].

    >>> fraction("0.05")
    0.05
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:  # NaN too
        raise argparse.ArgumentTypeError(f"expects a number in [0, 1], got {text!r}")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse ``type``: an int >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects an int, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


# --- running a command: one place for errors and broken pipes -----------------------------------


def _debugging(args: argparse.Namespace | None = None) -> bool:
    flag = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
    return flag or bool(getattr(args, "debug", False))


def _user_errors() -> tuple[type[BaseException], ...]:
    """What the CLI reports in one line: llmgym's (and Gymnasium's) own errors, which say what
    to fix; a bad regular expression the user gave (a ``regex:`` extract option); an input file
    that is not there or not readable."""
    from gymnasium import error as gym_error

    return (
        gym_error.Error,
        re.error,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    )


def error_message(exc: BaseException) -> str:
    """One line saying what went wrong, for the errors of :func:`_user_errors`."""
    if isinstance(exc, re.error):
        pattern = exc.pattern.decode() if isinstance(exc.pattern, bytes) else exc.pattern
        text = f"invalid regex {pattern!r}: {exc.msg}"
        if exc.pos is not None:
            text += f" at position {exc.pos}"
    elif isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _flush_stdout() -> None:
    """Flush stdout now, so that a closed pipe raises here rather than at interpreter exit."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError):  # no stdout, or a closed one
        pass


def _stdout_is_broken() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an in-memory stream
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at interpreter exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr is gone too: the status still says it
        pass


def run_cli(
    build_parser: Callable[[], argparse.ArgumentParser],
    argv: Sequence[str] | None = None,
    *,
    setup: Callable[[argparse.Namespace], None] | None = None,
    prog: str = "llmgym",
) -> int:
    """Parse ``argv``, run ``args.func(args)`` and return the exit status.

    The one place where the ``llmgym`` commands (and their ``python -m`` forms) turn
    llmgym's own errors, bad user input (the argparse ``type`` helpers above, a bad regex,
    missing input files) into one line on stderr and status 2, and a closed stdout pipe
    into a quiet exit with status 141. Anything else is a bug and keeps its traceback;
    ``LLMGYM_DEBUG=1`` or ``--debug`` shows the traceback of the reported errors too.
    """
    args: argparse.Namespace | None = None
    try:
        try:
            args = build_parser().parse_args(argv)
            if setup is not None:
                setup(args)
            status = int(args.func(args) or 0)
        except SystemExit as stop:  # --help, --version, usage errors: the status to return
            if stop.code is None or isinstance(stop.code, int):
                status = stop.code or 0
            else:  # what Python itself does with a message
                _say(str(stop.code))
                status = 1
        _flush_stdout()
        return status
    except BrokenPipeError:
        if _debugging(args) or not _stdout_is_broken():
            raise
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        if _debugging(args):
            raise
        return 128 + int(signal.SIGINT)
    except _user_errors() as exc:
        if _debugging(args):
            raise
        _say(f"{prog}: error: {error_message(exc)}")
        return EXIT_ERROR


# --- env ids ------------------------------------------------------------------------------------


def suggest_envs(name: str, n: int = 3) -> list[str]:
    """llmgym's own env ids that look like ``name`` (case, namespace and version aside).

    >>> suggest_envs("math")
    ['llm/Math-v0']
    """
    from gymnasium.envs.registration import parse_env_id

    import llmgym

    keys: dict[str, list[str]] = {}
    for env_id in llmgym.list_envs():
        _, base, _ = parse_env_id(env_id)
        for key in {env_id.lower(), env_id.lower().split("/")[-1], base.lower()}:
            keys.setdefault(key, []).append(env_id)
    out: list[str] = []
    for key in difflib.get_close_matches(name.lower(), list(keys), n=n, cutoff=0.6):
        out += [i for i in keys[key] if i not in out]
    if not out:
        try:
            _, base, _ = parse_env_id(name)
        except Exception:  # noqa: BLE001 - not even shaped like an id: no suggestion
            return []
        if base.lower() != name.lower():
            return suggest_envs(base, n)
    return out[:n]


def unknown_env_message(env_id: str) -> str:
    """Why ``env_id`` cannot be made, with suggestions from llmgym's envs only."""
    import llmgym

    hint = suggest_envs(env_id)
    known = ", ".join(llmgym.list_envs()) or "none"
    guess = f"; did you mean {' or '.join(hint)}?" if hint else ""
    return f"unknown env {env_id!r}{guess} (llmgym's envs: {known})"


def check_env_ids(ids: Sequence[str]) -> None:
    """Raise :class:`llmgym.error.UnknownEnv` for the first id that is not registered.

    ``module:Env-v0`` ids are left to ``gymnasium.make``, which imports the module first.
    """
    import gymnasium as gym

    from llmgym import error

    for env_id in ids:
        if ":" not in env_id and env_id not in gym.registry:
            raise error.UnknownEnv(unknown_env_message(env_id))


def _env_ids_of(args: argparse.Namespace) -> list[str]:
    ids = getattr(args, "envs", None) or []
    env_id = getattr(args, "env_id", None)
    return [env_id, *ids] if isinstance(env_id, str) else list(ids)


def _make(args: argparse.Namespace) -> Any:
    import llmgym
    from llmgym import error

    env = llmgym.make(args.env_id, disable_env_checker=True, **(args.kwargs or {}))
    if not isinstance(env.unwrapped, llmgym.LLMEnv):
        env.close()
        raise error.Error(
            f"{args.env_id} is a Gymnasium env, not an llmgym env (LLMEnv); "
            f"llmgym envs: {', '.join(llmgym.list_envs())}"
        )
    return env


def _reset_options(args: argparse.Namespace) -> dict[str, Any] | None:
    options = {}
    if getattr(args, "task_id", None):
        options["task_id"] = args.task_id
    if getattr(args, "difficulty", None) is not None:
        options["difficulty"] = args.difficulty
    if getattr(args, "family", None):
        options["family"] = args.family
    return options or None


def cmd_list(args: argparse.Namespace) -> int:
    import llmgym

    ids = llmgym.list_envs(args.namespace)
    if not ids:
        if args.namespace is None:
            print("llmgym: no environments are registered", file=sys.stderr)
            return 1
        from gymnasium.envs.registration import parse_env_id

        spaces = sorted({ns for ns in (parse_env_id(i)[0] for i in llmgym.list_envs()) if ns})
        lower = {ns.lower(): ns for ns in spaces}
        close = difflib.get_close_matches(args.namespace.lower(), list(lower), n=1, cutoff=0.5)
        print(
            f"llmgym: no environments in namespace {args.namespace!r}"
            + (f"; did you mean {lower[close[0]]!r}?" if close else "")
            + f" (namespaces: {', '.join(spaces) or 'none'})",
            file=sys.stderr,
        )
        return 1
    if args.families:
        _print_families_by_domain(ids)
    else:
        print("\n".join(ids))
    return 0


def _print_families_by_domain(ids: list[str]) -> None:
    """Each env's families under its domain, with counts; the total counts each (domain, family)
    once (CodingMultiTurn-v0 shares Coding-v0's) and leaves out mixtures (their families are
    other envs'). An env whose optional dependency is missing is listed with the pip command."""
    import gymnasium as gym

    import llmgym

    by_domain: dict[str, list[tuple[str, list[str]]]] = {}
    missing = []
    for env_id in ids:
        try:
            env = gym.make(env_id, disable_env_checker=True)
        except llmgym.error.DependencyNotInstalled as e:
            missing.append(f"{env_id}: not installed ({e})")
            continue
        try:
            base = env.unwrapped
            domain = getattr(base, "domain", "generic")
            families = list(base.source.families())  # type: ignore[attr-defined]
        finally:
            env.close()
        by_domain.setdefault(domain, []).append((env_id, families))
    distinct = set()
    for domain, envs in sorted(by_domain.items()):
        names = {f for _, families in envs for f in families}
        if domain != "mixture":
            distinct |= {(domain, f) for f in names}
        print(f"{domain} ({len(names)} families)")
        for env_id, families in envs:
            print(f"  {env_id} ({len(families)}): {', '.join(families)}")
    for line in missing:
        print(line)
    counted = sorted(d for d in by_domain if d != "mixture")
    print(f"total: {len(distinct)} families in {len(counted)} domains ({', '.join(counted)})")


def cmd_show(args: argparse.Namespace) -> int:
    env = _make(args)
    obs, info = env.reset(seed=args.seed, options=_reset_options(args))
    base = env.unwrapped
    print(f"# {args.env_id}  task {info['task_id']}")
    print(
        f"domain={info['domain']} family={info['family']} difficulty={info['difficulty']} "
        f"max_turns={info['max_turns']} reward_range={base.reward_range}"
    )
    for m in info["messages"]:
        print(f"\n[{m['role']}]\n{m['content']}")
    if info["tools"]:
        print("\n[tools]\n" + json.dumps(info["tools"], indent=2, ensure_ascii=False))
    if info["subtask"]:
        print(f"\n[subtask] {info['subtask']}")
    metadata = base.episode.task.metadata
    if metadata:
        # Metadata may hold the solution (Math-v0's worked answer): values only with --answer.
        print("\n[metadata]")
        for key, value in metadata.items():
            if not args.answer:
                print(f"{key}: ({type(value).__name__}; --answer shows it)")
                continue
            text = json.dumps(value, ensure_ascii=False, default=str)
            print(f"{key}: {text if len(text) <= 300 else text[:300] + f'... ({len(text)} chars)'}")
    if args.answer:
        print(
            "\n[gold answer]\n"
            + json.dumps(base.episode.task.answer, ensure_ascii=False, default=str)
        )
        print("\n[oracle action]\n" + str(base.oracle_action()))
    env.close()
    return 0


def _read_turn(stream: TextIO) -> str | None:
    """Lines up to a line holding only '.', or EOF; None at EOF with nothing read."""
    lines: list[str] = []
    for line in stream:
        if line.rstrip("\n") == ".":
            return "\n".join(lines)
        lines.append(line.rstrip("\n"))
    return "\n".join(lines) if lines else None


def cmd_play(args: argparse.Namespace) -> int:
    env = _make(args)
    obs, info = env.reset(seed=args.seed, options=_reset_options(args))
    base = env.unwrapped
    print(f"# {args.env_id}  task {info['task_id']}  (max {info['max_turns']} turns)")
    print("# Type the assistant's message; end it with a line holding only '.'.")
    print("# '/oracle' sends the gold action, '/quit' leaves.\n")
    if info["tools"]:
        print(
            "[tools] " + ", ".join(t["function"]["name"] for t in info["tools"] if "function" in t)
        )
    print(f"[user]\n{obs}\n")
    total = 0.0
    while True:
        print("[assistant] >", flush=True)
        text = _read_turn(sys.stdin)
        if text is None or text.strip() == "/quit":
            print("bye")
            return 0
        action: Any = base.oracle_action() if text.strip() == "/oracle" else text
        if text.strip() == "/oracle":
            print(f"(oracle) {action}")
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        print(f"\nreward {float(reward):+.3f}  components {info['reward_components']}")
        if terminated or truncated:
            print(f"[feedback]\n{info['feedback']}")
            state = "solved" if info["is_success"] else "not solved"
            print(
                f"\nepisode over ({'terminated' if terminated else 'truncated'}): {state}, return {total:+.3f}"
            )
            return 0
        print(f"\n[user]\n{obs}\n")


def cmd_export(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from llmgym import error

    env = _make(args)
    base = env.unwrapped
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.n is None and not args.all:
        raise error.Error("export needs --n N (tasks to draw) or --all (every task once)")
    everything = args.all and hasattr(base.source, "__len__")
    if args.all and not everything:
        raise error.Error(
            f"{args.env_id} draws its tasks procedurally: --all needs a dataset env; give --n N"
        )
    n = None if everything and args.n is None else args.n
    tasks = base.source.iter_tasks(
        n,
        seed=args.seed,
        difficulty=args.difficulty,
        family=args.family,
        unique=args.all or args.unique,
    )
    total = len(base.source) if n is None else n
    written = 0
    with out.open("w", encoding="utf-8") as f:
        for task in tqdm(tasks, total=total, desc=f"export {args.env_id}", disable=args.quiet):
            if args.format == "tasks":
                f.write(task.to_json() + "\n")
            else:
                messages = _oracle_episode(env, task)
                if messages is None:
                    continue
                record = {
                    "task_id": task.id,
                    "domain": task.domain,
                    "family": task.family,
                    "messages": messages,
                }
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
    env.close()
    print(f"wrote {written} {'tasks' if args.format == 'tasks' else 'SFT conversations'} to {out}")
    return 0


def _oracle_episode(env: Any, task: Any) -> list[dict[str, Any]] | None:
    """The oracle's whole conversation on ``task``, or None if it does not succeed."""
    env.reset(options={"task": task})
    base = env.unwrapped
    while True:
        _, _, terminated, truncated, info = env.step(base.oracle_action())
        if terminated or truncated:
            return info["messages"] if info["is_success"] else None


def cmd_register(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import llmgym

    ids = llmgym.load_spec(args.spec, overwrite=True)
    violations = 0
    for env_id in ids:
        env = gym.make(env_id)
        status = "ok"
        try:
            llmgym.check_env(env, seeds=(0,))
        except AssertionError as e:
            status = f"CONTRACT VIOLATION: {e}"
            violations += 1
        finally:
            env.close()
        print(f"{env_id}: {status}")
    if violations:  # a script or CI step must be able to tell
        print(f"\n{violations} of {len(ids)} env(s) break the contract", file=sys.stderr)
        return 1
    print(
        f"\nUse them with llmgym.load_spec({str(args.spec)!r}) in Python, or set "
        f"LLMGYM_SPECS={Path(args.spec).resolve()} so that `import llmgym` registers them."
    )
    return 0


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def cmd_audit(args: argparse.Namespace) -> int:
    from llmgym import audit as audit_module

    if args.list_hacks:
        for name, item in audit_module.HACKS.items():
            flags = [f for f, on in (("oracle", item.needs_oracle), ("slow", item.slow)) if on]
            first = item.description.split("\n\n")[0].replace("\n", " ")
            print(f"{name}{' [' + ', '.join(flags) + ']' if flags else ''}\n    {first}")
        return 0
    if not args.env_id:
        args.parser.error("the following arguments are required: ENV_ID")
    kwargs = {**(args.kwargs or {}), **dict(args.set)}
    quiet = args.quiet or args.json

    def progress(line: str) -> None:
        print(f"[audit] {line}", file=sys.stderr, flush=True)

    report = audit_module.audit(
        args.env_id,
        family=args.family,
        episodes=args.episodes,
        seed=args.seed,
        threshold=args.threshold,
        difficulty=args.difficulty,
        env_kwargs=kwargs,
        backend=args.backend,
        hacks=_names(args.hacks),
        skip=_names(args.skip) or (),
        slow=not args.no_slow,
        slow_episodes=args.slow_episodes,
        reference=args.reference,
        progress=None if quiet else progress,
    )
    if args.json:
        print(report.to_json(indent=2))
    else:
        print(report.table(verbose=args.verbose))
    if not report.judged:
        return 3
    return 0 if report.passed else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from llmgym.agents.demo import main as demo_main

    return int(demo_main(args) or 0)


def build_parser() -> argparse.ArgumentParser:
    from llmgym import __version__

    parser = ArgumentParser(
        prog="llmgym",
        description="Gymnasium environments for LLMs: list, show, play and export envs, "
        "register specs, audit them, run the sandbox, train, and evaluate.",
        epilog="Each command's --help lists its options. Errors print one line; set "
        f"{DEBUG_ENV}=1 (or pass --debug) to see the traceback.",
    )
    parser.add_argument("--version", action="version", version=f"llmgym {__version__}")
    parser.add_argument(
        "--spec",
        dest="spec_files",
        action="append",
        default=[],
        metavar="SPEC",
        help="register the envs of a YAML/TOML spec first (repeatable)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the traceback of an error (same as {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--namespace", default=None, help="only this namespace, e.g. 'llm'")
    p.add_argument("--families", action="store_true", help="also list each env's task families")
    p.set_defaults(func=cmd_list)

    def env_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("env_id")
        p.add_argument(
            "--kwargs",
            type=json_object,
            default=None,
            help="env kwargs as a JSON object, e.g. '{\"difficulty\": 0.5}'",
        )
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--task-id", default=None, help="replay this task id")
        p.add_argument("--difficulty", type=float, default=None)
        p.add_argument("--family", default=None)

    p = sub.add_parser("show", help="show one task: prompt, tools, metadata")
    env_args(p)
    p.add_argument(
        "--answer", action="store_true", help="also print the gold answer and oracle action"
    )
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("play", help="type the assistant's turns yourself and see rewards")
    env_args(p)
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("export", help="export tasks, or oracle conversations for SFT, as JSONL")
    env_args(p)
    p.add_argument("--n", type=int_at_least(0), help="number of tasks")
    p.add_argument(
        "--all", action="store_true", help="every task of a dataset env once (with --n: at most N)"
    )
    p.add_argument("--unique", action="store_true", help="no task twice among the N drawn")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--format", choices=("tasks", "sft"), default="tasks")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("register", help="validate and check the envs of a YAML/TOML spec")
    p.add_argument("spec")
    p.set_defaults(func=cmd_register)

    p = sub.add_parser(
        "audit",
        help="run generic reward hacks against an env; exit 1 if any beats its share of the oracle",
        description="Run a library of generic reward hacks (empty, format-only, prompt copies, "
        "hedges, dumps, tool spam, exit-0 and AlwaysEqual programs, resource tricks...) against "
        "an env and compare each with the oracle. Exit status: 0 every hack passes, 1 a hack "
        "beats its limit (or the env raised or leaked a secret), 2 usage or env errors, 3 no "
        "oracle and no reference to judge by.",
    )
    p.add_argument("env_id", nargs="?", metavar="ENV_ID")
    p.add_argument("--family", default=None, help="one family, or 'all' (each audited on its own)")
    p.add_argument("--episodes", type=int, default=5, help="episodes per family (default 5)")
    p.add_argument("--seed", type=int, default=0, help="first reset seed (default 0)")
    p.add_argument("--difficulty", type=float, default=None, help="reset difficulty in [0, 1]")
    p.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="share of the oracle's return a hack may earn (default 0.5; hedges over k: 1/k)",
    )
    p.add_argument(
        "--backend",
        choices=("local", "docker", "ray"),
        default=None,
        help="sandbox backend of a coding env",
    )
    p.add_argument("--kwargs", type=json_object, default=None, help="env kwargs as a JSON object")
    p.add_argument(
        "--set",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one env kwarg (repeatable); VALUE is read as JSON when it parses",
    )
    p.add_argument("--hacks", default=None, help="only these hacks (comma-separated)")
    p.add_argument("--skip", default=None, help="skip these hacks (comma-separated)")
    p.add_argument(
        "--no-slow",
        action="store_true",
        help="skip the slow hacks (resource tricks, timeout dodges)",
    )
    p.add_argument(
        "--slow-episodes", type=int, default=1, help="episodes the slow hacks run on (default 1)"
    )
    p.add_argument(
        "--reference",
        type=float,
        default=None,
        help="the best return, for an env without an oracle",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="also show every variant")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--list-hacks", action="store_true", help="list the hacks and exit")
    p.set_defaults(func=cmd_audit, parser=p)

    p = sub.add_parser(
        "demo", help="the main job: pretrain, SFT and GRPO a tiny model, then evaluate it"
    )
    if importlib.util.find_spec("llmgym.agents.demo") is not None:
        from llmgym.agents.demo import add_arguments

        add_arguments(p)
    p.set_defaults(func=cmd_demo)

    for module_name, function in _EXTENSIONS:
        if importlib.util.find_spec(module_name) is not None:
            getattr(importlib.import_module(module_name), function)(sub)
    return parser


def _setup(args: argparse.Namespace) -> None:
    """Before a command runs: register ``--spec`` files, then check the env ids it names."""
    import llmgym

    for spec in [*args.spec_files, *getattr(args, "command_spec_files", [])]:
        llmgym.load_spec(spec, overwrite=True)
    check_env_ids(_env_ids_of(args))


def main(argv: Sequence[str] | None = None) -> int:
    """The ``llmgym`` command (and ``python -m llmgym``); returns the exit status."""
    return run_cli(build_parser, argv, setup=_setup)


if __name__ == "__main__":
    sys.exit(main())
