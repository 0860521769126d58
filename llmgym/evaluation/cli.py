"""The evaluation commands of the ``llmgym`` CLI: eval, compare, report, reverify, export-rollouts.

``add_subparsers(subparsers)`` adds them to an ``argparse`` subparsers object; each sets
``func``, a callable taking the parsed arguments and returning the exit status.
``python -m llmgym.evaluation <command> ...`` runs them without the main CLI.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _load_specs(paths: list[str] | None) -> None:
    from llmgym.declarative import load_spec

    for p in paths or []:
        load_spec(p, overwrite=True)


def _cmd_eval(args: argparse.Namespace) -> int:
    from llmgym.evaluation import provenance
    from llmgym.evaluation.runner import evaluate
    from llmgym.evaluation.suites import load_suite

    suite = load_suite(args.suite) if args.suite else None  # a bad name fails before any output
    out = args.out or f"evals/{provenance.utc_now().replace(':', '')}"
    print(f"writing to {out} (run the same command with --out {out} to resume)", file=sys.stderr)
    from llmgym.evaluation.monitor import MonitorStop

    try:
        result = evaluate(
            args.envs or None,
            args.policy,
            suite=suite,
            episodes=args.episodes,
            samples=args.samples,
            k=args.k,
            seed=args.seed,
            env_kwargs=args.env_kwargs,
            settings=dict(args.set or []),
            concurrency=args.concurrency,
            mode=args.mode,
            env_workers=args.env_workers,
            out=out,
            overwrite=args.overwrite,
            report=not args.no_report,
            rollouts_format=args.rollouts_format,
            progress=not args.no_progress,
            retry_errors=not args.no_retry_errors,
            max_error_rate=args.max_error_rate,
            ray=args.ray,
            search=args.search or (),
            alerts=args.alerts,
        )
    except MonitorStop as stop:
        print(f"{stop} (alerts in {out}/alerts.jsonl; run again with --out {out} to resume)")
        return 1
    o = result.summary["overall"]
    print(
        f"{o['episodes']} episodes over {o['tasks']} tasks: success {o['success_rate']:.4f} "
        f"[{o['success_ci'][0]:.4f}, {o['success_ci'][1]:.4f}], mean reward {o['mean_reward']:.4f}"
    )
    for name, s in result.summary["by_env"].items():
        print(
            f"  {name}: success {s['success_rate']:.4f}, mean reward {s['mean_reward']:.4f}, "
            f"errors {s['error_rate']:.3f}"
        )
    for env, block in (result.summary.get("search") or {}).get("by_env", {}).items():
        for spec, m in block["methods"].items():
            eq = m["pass_at_equal_calls"]
            beside = (
                f", pass@{eq['k']} {eq['pass_at_k']:.4f} at {eq['calls']:.1f} calls" if eq else ""
            )
            print(
                f"  {env} {spec}: success {m['success_rate']:.4f} at {m['mean_calls']:.1f} calls{beside}"
            )
    print(f"results: {result.results_path}")
    if not args.no_report:
        print(f"report: {result.report_path}")
    errors = result.summary.get("errors") or {}
    if errors.get("episodes"):
        kinds = ", ".join(f"{n} {status}" for status, n in errors.get("by_status", {}).items())
        line = (
            f"{errors['episodes']} of {o['episodes']} episodes ({errors['rate']:.0%}) errored "
            f"({kinds}); run the same command again to retry them"
        )
        if result.failed:
            print(
                f"llmgym: error: {line}. That is more than --max-error-rate "
                f"{errors['max_rate']:.0%}: the results describe an outage, not the policy",
                file=sys.stderr,
            )
            return 1
        print(f"llmgym: warning: {line}", file=sys.stderr)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from llmgym.evaluation.compare import compare_runs, comparison_html, comparison_text
    from llmgym.evaluation.rollouts import write_atomic

    c = compare_runs(args.a, args.b, alpha=args.alpha, seed=args.seed)
    print(comparison_text(c))
    if args.json:
        write_atomic(args.json, json.dumps(c, indent=1, default=repr))
    if args.html:
        write_atomic(args.html, comparison_html(c).encode("utf-8", "replace"))
        print(f"report: {args.html}")
    if not c["comparable"]:
        print("llmgym compare: the runs have no env in common: nothing to compare", file=sys.stderr)
        return 1
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from llmgym.evaluation.report import write_report

    if args.watch:
        return _watch(args)
    if args.alerts:
        from llmgym import error

        raise error.Error("--alerts needs --watch (the rules are watched while a run goes on)")
    print(write_report(args.path, args.output))
    return 0


def _watch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from llmgym.evaluation.dashboard import DASHBOARD_FILE, watch
    from llmgym.evaluation.monitor import load_rules

    rules = load_rules(args.alerts) if args.alerts else []
    where = args.output or Path(args.path) / DASHBOARD_FILE
    print(
        f"dashboard: {where} (rewritten every {args.interval:g} s until the run ends; "
        "Ctrl-C stops watching)",
        file=sys.stderr,
    )
    try:
        path = watch(
            args.path, interval_s=args.interval, rules=rules, every=args.every, out=args.output
        )
    except KeyboardInterrupt:
        return 130
    print(path)
    return 0


def _cmd_reverify(args: argparse.Namespace) -> int:
    from llmgym.evaluation.rollouts import reverify, write_atomic

    rep = reverify(
        args.path, tolerance=args.tolerance, limit=args.limit, progress=not args.no_progress
    )
    print(rep.to_text())
    if args.json:
        write_atomic(args.json, json.dumps(rep.to_dict(examples=1000), indent=1, default=repr))
    if rep.drift:
        return 1
    if rep.unbuildable:  # could not verify: not drift, and not a clean bill either
        print(
            f"llmgym reverify: could not build {', '.join(rep.unbuildable)}: not verified",
            file=sys.stderr,
        )
        return 3
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from llmgym.evaluation.rollouts import export_sft

    n = export_sft(
        args.path,
        args.output,
        min_reward=args.min_reward,
        success_only=not args.include_failures,
        best_per_task=args.best_per_task,
    )
    print(f"wrote {n} examples to {args.output}")
    return 0


def _seconds(text: str) -> float:
    """argparse ``type``: a period in (0, 3600] seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:  # NaN too
        raise argparse.ArgumentTypeError(f"expects seconds in (0, 3600], got {text!r}")
    return value


def _search_spec(text: str) -> str:
    from llmgym import error
    from llmgym.search import parse_spec

    try:
        parse_spec(text)
    except error.Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_subparsers(subparsers: Any) -> None:
    """Add ``eval``, ``compare``, ``report``, ``reverify`` and ``export-rollouts``."""
    from llmgym.cli import fraction, int_at_least, int_list, json_object, key_value

    p = subparsers.add_parser(
        "eval",
        help="evaluate a policy on env ids or a suite",
        description="Evaluate a policy on env ids or a versioned suite; writes results.jsonl, "
        "summary.json and report.html to --out. Running again with the same --out resumes "
        "(and plays the episodes that errored again). Exit status 1 when more than "
        "--max-error-rate of the episodes errored.",
    )
    p.add_argument("envs", nargs="*", help="env ids (or use --suite)")
    p.add_argument("--suite", help="a shipped suite (core-v0) or a suite file")
    p.add_argument(
        "--policy",
        default="oracle",
        help="oracle | hf:<path> | openai:<model>@<url> | module:function (default: oracle)",
    )
    p.add_argument(
        "--episodes",
        type=int_at_least(1),
        help="distinct tasks per env (default: suite pin, all of a dataset, or 100)",
    )
    p.add_argument(
        "--samples", type=int_at_least(1), help="episodes per task, for pass@k (default 1)"
    )
    p.add_argument(
        "--k",
        type=int_list,
        help="pass@k values, e.g. 1,5,10 (default: 1,2,5,10,... up to samples)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="task seed of env ids given here, and the statistics seed",
    )
    p.add_argument(
        "--env-kwargs",
        type=json_object,
        help="JSON object of env kwargs, e.g. '{\"difficulty\": 0.5}'",
    )
    p.add_argument(
        "--set",
        type=key_value,
        action="append",
        metavar="KEY=VALUE",
        help="a sampling setting for the policy, e.g. temperature=0.7 (repeatable)",
    )
    p.add_argument(
        "--concurrency",
        type=int_at_least(1),
        default=16,
        help="episodes in flight (batch size) (default 16)",
    )
    p.add_argument(
        "--mode",
        choices=("auto", "batch", "async"),
        default="auto",
        help="batched generate() or per-episode agenerate() (default: auto)",
    )
    p.add_argument(
        "--env-workers",
        type=int_at_least(0),
        default=8,
        help="threads stepping envs (default 8; 0: inline)",
    )
    p.add_argument("--out", help="output folder (default evals/<UTC time>); reuse it to resume")
    p.add_argument(
        "--overwrite", action="store_true", help="discard a different run found in --out"
    )
    p.add_argument(
        "--rollouts-format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="also write rollouts.parquet (needs pyarrow)",
    )
    p.add_argument(
        "--max-error-rate",
        type=fraction,
        default=None,
        metavar="RATE",
        help="share of episodes that may end in a policy or env error before the run counts "
        "as failed and the command exits 1 (default 0.05)",
    )
    p.add_argument(
        "--no-retry-errors",
        action="store_true",
        help="on resume, keep the episodes that errored instead of playing them again",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="play the episodes in env actors on a Ray cluster: auto (the running one), local "
        "(start Ray here) or HOST:PORT; same results and resuming as a local run (needs "
        "llmgym[ray])",
    )
    p.add_argument(
        "--search",
        type=_search_spec,
        action="append",
        metavar="SPEC",
        help="also search each task: best_of_n:N | beam:WIDTHxEXPAND | mcts:CALLS (repeatable); "
        "the summary and report put its success beside pass@k at the same policy calls",
    )
    p.add_argument(
        "--alerts",
        metavar="FILE",
        help="alert rules watched as results arrive (a YAML list, or a file with an 'alerts:' "
        "list): monitor.jsonl and alerts.jsonl in --out; a 'stop' alert ends the run (exit 1; "
        "running again resumes it)",
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_eval)

    p = subparsers.add_parser(
        "compare",
        help="compare two evaluation folders",
        description="Two evaluation folders side by side: differences (B - A) with 95% intervals "
        "and p-values (paired on matched tasks, Holm-adjusted across envs).",
    )
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling tests")
    p.add_argument("--json", help="also write the comparison as JSON here")
    p.add_argument("--html", help="also write an HTML page here")
    p.set_defaults(func=_cmd_compare)

    p = subparsers.add_parser(
        "report",
        help="HTML report of an evaluation folder or a training run",
        description="Write report.html for an evaluation folder (results.jsonl) or a training "
        "run (metrics.jsonl: every numeric key plotted, grouped by prefix).",
    )
    p.add_argument("path", help="RUN_DIR (or its metrics.jsonl / results.jsonl)")
    p.add_argument(
        "-o",
        "--output",
        help="where to write the page (default: PATH/report.html, or PATH/dashboard.html)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="follow a running train or eval: rewrite a self-reloading PATH/dashboard.html "
        "(curves per domain and family, KL, entropy, sandbox anomalies, alerts) until it ends",
    )
    p.add_argument(
        "--interval",
        type=_seconds,
        default=5.0,
        metavar="S",
        help="seconds between rewrites with --watch (default 5)",
    )
    p.add_argument(
        "--alerts",
        metavar="FILE",
        help="with --watch on an evaluation: alert rules (a YAML list, or a file with an "
        "'alerts:' list); a training run uses its config's",
    )
    p.add_argument(
        "--every",
        type=int_at_least(1),
        default=16,
        metavar="N",
        help="with --watch on an evaluation: episodes per monitored step (default 16)",
    )
    p.set_defaults(func=_cmd_report)

    p = subparsers.add_parser(
        "reverify",
        help="recompute stored rollouts' rewards with the current verifiers",
        description="Replay stored rollouts (results.jsonl, rollouts*.jsonl/.parquet) through the "
        "current envs and verifiers and report reward drift. Exit status 1 when there is drift, "
        "3 when an env could not be built (its records are not verified).",
    )
    p.add_argument("path", help="a rollout file or folder")
    p.add_argument("--tolerance", type=float, default=1e-6, help="reward change counted as drift")
    p.add_argument("--limit", type=int_at_least(1), help="check only the first N rollouts")
    p.add_argument("--json", help="also write the drift report as JSON here")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=_cmd_reverify)

    p = subparsers.add_parser(
        "export-rollouts",
        help="turn high-reward rollouts into an SFT dataset",
        description="Write successful (or high-reward) rollouts as chat-messages SFT data: one "
        '{"messages", "tools", "metadata"} per line (.jsonl) or a .parquet file.',
    )
    p.add_argument("path", help="a rollout file or folder")
    p.add_argument("-o", "--output", required=True, help="output .jsonl or .parquet")
    p.add_argument("--min-reward", type=float, help="keep rollouts with at least this reward")
    p.add_argument("--include-failures", action="store_true", help="do not require success")
    p.add_argument(
        "--best-per-task", action="store_true", help="keep only the best rollout per task"
    )
    p.set_defaults(func=_cmd_export)


def main(argv: list[str] | None = None) -> int:
    """``python -m llmgym.evaluation``: the evaluation commands on their own."""
    from llmgym.cli import ArgumentParser, check_env_ids, run_cli

    def build() -> argparse.ArgumentParser:
        parser = ArgumentParser(prog="python -m llmgym.evaluation")
        parser.add_argument(
            "--spec",
            action="append",
            dest="spec_files",
            default=[],
            metavar="FILE",
            help="register the envs of a YAML/TOML spec first (repeatable)",
        )
        add_subparsers(parser.add_subparsers(dest="command", required=True))
        return parser

    def setup(args: argparse.Namespace) -> None:
        _load_specs(args.spec_files)
        check_env_ids(getattr(args, "envs", None) or [])

    return run_cli(build, argv, setup=setup, prog="llmgym")


if __name__ == "__main__":
    sys.exit(main())
