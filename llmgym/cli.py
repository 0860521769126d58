"""The ``llmgym`` command: list, show, play and export envs; register specs; sandbox, train, eval."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

# Commands contributed by the upper layers, imported only when present: (module, function).
_EXTENSIONS = (
    ("llmgym.sandbox.cli", "add_subparser"),
    ("llmgym.agents.cli", "add_subparsers"),
    ("llmgym.evaluation.cli", "add_subparsers"),
)


def _env_kwargs(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(f"--kwargs must be a JSON object: {e}") from None
    if not isinstance(kwargs, dict):
        raise SystemExit("--kwargs must be a JSON object, e.g. '{\"difficulty\": 0.5}'")
    return kwargs


def _make(args: argparse.Namespace) -> Any:
    import llmgym

    return llmgym.make(args.env_id, disable_env_checker=True, **_env_kwargs(args.kwargs))


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
    if args.families:
        for env_id in ids:
            print(f"{env_id}: {', '.join(llmgym.list_families(env_id))}")
    else:
        print("\n".join(ids))
    return 0


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

    env = _make(args)
    base = env.unwrapped
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tasks = base.source.iter_tasks(
        args.n, seed=args.seed, difficulty=args.difficulty, family=args.family
    )
    written = 0
    with out.open("w", encoding="utf-8") as f:
        for task in tqdm(tasks, total=args.n, desc=f"export {args.env_id}", disable=args.quiet):
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


def cmd_demo(args: argparse.Namespace) -> int:
    from llmgym.agents.demo import main as demo_main

    return int(demo_main(args) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmgym", description=__doc__)
    parser.add_argument(
        "--spec",
        dest="spec_files",
        action="append",
        default=[],
        help="register the envs of a YAML/TOML spec first (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--namespace", default=None, help="only this namespace, e.g. 'llm'")
    p.add_argument("--families", action="store_true", help="also list each env's task families")
    p.set_defaults(func=cmd_list)

    def env_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("env_id")
        p.add_argument("--kwargs", default=None, help="env kwargs as a JSON object")
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
    p.add_argument("--n", type=int, required=True, help="number of tasks")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.add_argument("--format", choices=("tasks", "sft"), default="tasks")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("register", help="validate and check the envs of a YAML/TOML spec")
    p.add_argument("spec")
    p.set_defaults(func=cmd_register)

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


def main(argv: Sequence[str] | None = None) -> int:
    from llmgym import error

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        import llmgym

        for spec in args.spec_files:
            llmgym.load_spec(spec, overwrite=True)
        if getattr(args, "n", 0) is not None and getattr(args, "n", 0) < 0:
            parser.error("--n must be >= 0")
        return int(args.func(args) or 0)
    except error.Error as e:
        print(f"llmgym: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
