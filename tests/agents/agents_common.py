"""What the agents tests share: env ids, a tiny tool env and task lists (imported by name, not
through ``conftest``, whose module name the suite's root conftest also uses)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from llmgym.core import Episode, LLMEnv, Message, Turn
from llmgym.rewards import RewardResult
from llmgym.tasks import Family, ProceduralSource, Task, draft

HERE = Path(__file__).resolve().parent

MATH = "llm/Math-v0"
MATH_KWARGS = {"family": "arith.add_small", "difficulty": 0.0}

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "first addend"},
                "b": {"type": "integer", "description": "second addend"},
            },
            "required": ["a", "b"],
        },
    },
}


def _gen(rng: random.Random, difficulty: float) -> Task:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return draft(
        f"Use the add tool, then answer: what is {a} + {b}?", str(a + b), metadata={"a": a, "b": b}
    )


class ToolAddEnv(LLMEnv):
    """Multi-turn test env: the model may call ``add`` (a tool message comes back), then answers."""

    domain = "toyarith"
    reward_range = (0.0, 1.0)
    default_max_turns = 3

    def __init__(self, **kwargs: Any):
        super().__init__(ProceduralSource([Family("add2", _gen)], domain="toyarith"), **kwargs)

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [ADD_TOOL]

    def respond(self, episode: Episode, message: Message) -> Turn:
        calls = message.get("tool_calls") or []
        if calls:
            out = []
            for call in calls:
                args = call["function"]["arguments"]
                try:
                    args = args if isinstance(args, dict) else __import__("json").loads(args)
                    result = str(int(args["a"]) + int(args["b"]))
                except Exception:
                    result = "error: expects integer a and b"
                out.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            episode.extra["calls"] = episode.extra.get("calls", 0) + 1
            return Turn(0.0, terminated=False, observation=out[-1]["content"], messages=out)
        ok = message["content"].strip() == str(episode.task.answer)
        return Turn.graded(RewardResult.of(ok, "correct" if ok else "wrong"))

    def oracle_action(self) -> Any:
        ep = self.episode
        assert ep is not None
        if not ep.extra.get("calls"):
            a, b = ep.task.metadata["a"], ep.task.metadata["b"]
            fn = {"name": "add", "arguments": {"a": a, "b": b}}
            return {
                "content": "",
                "tool_calls": [{"id": "call_0", "type": "function", "function": fn}],
            }
        return str(ep.task.answer)


TOOL_ENV = "agents-test/ToolAdd-v0"


DIGITS_ENV = "agents-test/Length-v0"
DIGITS_TASKS = [
    {"id": f"d{i}", "prompt": f"Write a long line ({i}).", "answer": "0"} for i in range(64)
]


def free_port() -> int:
    """A free loopback port (for ``accelerate launch --main_process_port``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_length_spec(folder: Path, env_id: str, tasks: list[dict[str, Any]], **extra: Any) -> Path:
    """A spec file of ``tasks`` graded by ``agents_testing_verifiers:length_reward`` (for the
    launched processes, which register it from ``LLMGYM_SPECS``)."""
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    spec = folder / "spec.yaml"
    body = {"id": env_id, "tasks": str(path), "verifier": "agents_testing_verifiers:length_reward"}
    spec.write_text(yaml.safe_dump({**body, **extra}))
    return spec


def launch_two_processes(
    module: str, config: Path, spec: Path, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """``accelerate launch`` of ``python -m module --config config`` on 2 CPU processes (gloo).

    ``--cpu`` with ``--num_processes 2`` starts one process in Accelerate 1.16, so this launches
    the multi-process launcher with ``ACCELERATE_USE_CPU=true`` (tests check
    ``charts/processes``)."""
    env = dict(
        os.environ,
        LLMGYM_SPECS=str(spec),
        PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        ACCELERATE_USE_CPU="true",
    )
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
        "--multi_gpu", "--main_process_port", str(free_port()), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", module, "--config", str(config),
    ]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_identity(record: Mapping[str, Any], metric: str, depth: int) -> None:
    """The token-weighted mean of a step record's scopes at ``depth`` (1: domains, 2: families)
    is the run-wide ``metric`` (KL or entropy per trained token)."""
    import pytest

    scopes = {k.rsplit("/", 1)[0] for k in record if k.endswith(f"/{metric}")}
    scopes = {s for s in scopes if s.count("/") == depth}
    assert scopes, f"no {metric} scopes at depth {depth}"
    tokens = sum(record[f"{s}/trained_tokens"] for s in scopes)
    weighted = sum(record[f"{s}/{metric}"] * record[f"{s}/trained_tokens"] for s in scopes)
    assert tokens == pytest.approx(record["charts/trained_tokens"])
    assert weighted / tokens == pytest.approx(record[metric], rel=1e-5, abs=1e-9)
    assert record[f"overall/{metric}"] == pytest.approx(record[metric], rel=1e-5, abs=1e-9)
