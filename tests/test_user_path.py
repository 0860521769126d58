"""The enterprise user's path (issue 15): declarative envs that cannot silently break.

Each test plays what a new user does (a typo in an option, a task file without answers, a verifier
module beside the spec, a multi-turn spec) and checks the answer is a clear error at registration
or a truthful result, never a reward that silently means nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import llmgym
from llmgym import error
from llmgym.declarative import DeclarativeEnv
from llmgym.rewards import RewardResult, get_verifier

TASKS = [
    {"id": "q1", "prompt": "Capital of France?", "answer": "Paris"},
    {"id": "q2", "prompt": "Capital of Japan?", "answer": "Tokyo"},
]


def _spec(tmp_path: Path, body: str, tasks: list[dict[str, Any]] | None = None) -> Path:
    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in (TASKS if tasks is None else tasks))
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(body)
    return spec


# --- verifier options are validated where the env is registered --------------------------------


def test_a_misspelt_verifier_option_is_refused_from_python_with_a_suggestion() -> None:
    with pytest.raises(error.InvalidSpec, match=r"case_sensitiv.*did you mean 'case_sensitive'"):
        llmgym.register_task_env(
            "user/Typo-v0", TASKS, "exact", verifier_options={"case_sensitiv": True}, overwrite=True
        )
    with pytest.raises(error.InvalidSpec, match="case_sensitive"):
        get_verifier("exact", case_sensitive="no")  # a bool option given a string
    assert get_verifier("exact", case_sensitive=True)("paris", "Paris").score == 0.0


def test_a_misspelt_verifier_option_is_refused_from_a_spec_file(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        "id: user/TypoSpec-v0\ntasks: tasks.jsonl\nverifier: exact\n"
        "verifier_options: {case_sensitiv: true}\n",
    )
    with pytest.raises(error.InvalidSpec, match="did you mean 'case_sensitive'"):
        llmgym.load_spec(spec, overwrite=True)
    cli = subprocess.run(
        [sys.executable, "-m", "llmgym.cli", "register", str(spec)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode != 0 and "case_sensitive" in cli.stdout + cli.stderr


def test_a_misspelt_verifier_option_in_llmgym_specs_warns_and_registers_nothing(
    tmp_path: Path,
) -> None:
    spec = _spec(
        tmp_path,
        "id: user/TypoEnv-v0\ntasks: tasks.jsonl\nverifier: numeric\n"
        "verifier_options: {abs_tol: 0.1, rel_toll: 0.01}\n",
    )
    code = (
        "import warnings, llmgym, gymnasium as gym\n"
        "print('registered' if 'user/TypoEnv-v0' in gym.registry else 'absent')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "LLMGYM_SPECS": str(spec)},
    )
    assert res.stdout.strip() == "absent", res.stdout + res.stderr
    assert "rel_toll" in res.stderr and "did you mean 'rel_tol'" in res.stderr


def test_a_python_verifiers_options_are_checked_against_its_signature() -> None:
    def scorer(response: str, gold: str, *, bonus: float = 0.0) -> float:
        return float(response == gold) + bonus

    with pytest.raises(error.InvalidSpec, match="did you mean 'bonus'"):
        DeclarativeEnv(tasks=TASKS, verifier=scorer, verifier_options={"bonuss": 1})

    def anything(response: str, gold: str, **options: Any) -> float:
        return float(response == gold)

    DeclarativeEnv(tasks=TASKS, verifier=anything, verifier_options={"free_form": 1})


# --- a task without a gold answer -----------------------------------------------------------------


def test_tasks_without_an_answer_are_refused_at_load(tmp_path: Path) -> None:
    rows = [{"id": "q1", "prompt": "Capital of France?"}, {"id": "q2", "prompt": "Capital?"}]
    with pytest.raises(error.InvalidSpec, match=r"no answer.*q1"):
        llmgym.register_task_env("user/NoGold-v0", rows, "exact", overwrite=True)
    spec = _spec(tmp_path, "id: user/NoGoldSpec-v0\ntasks: tasks.jsonl\nverifier: exact\n", rows)
    with pytest.raises(error.InvalidSpec, match="no answer"):
        llmgym.load_spec(spec, overwrite=True)
    cli = subprocess.run(
        [sys.executable, "-m", "llmgym.cli", "register", str(spec)], capture_output=True, text=True
    )
    assert cli.returncode != 0 and "ok" not in cli.stdout.split()


def test_a_verifier_that_needs_no_gold_is_declared_so() -> None:
    def polite(response: str, gold: Any) -> float:
        return float("please" in response.lower())

    rows = [{"id": "q1", "prompt": "Ask for the salt."}]
    env = DeclarativeEnv(tasks=rows, verifier=polite, answer_required=False)
    env.reset(seed=0)
    assert env.step("Salt please")[1] == 1.0
    env.reset(seed=0)
    assert env.step("None")[1] == 0.0


# --- RewardResult's success and Python verifiers beside the spec --------------------------------


def test_reward_result_success_follows_the_score_unless_given() -> None:
    assert RewardResult(1.0).success and not RewardResult(0.5).success
    assert RewardResult(0.5, success=True).success and not RewardResult(1.0, success=False).success

    def natural(response: str, gold: str) -> RewardResult:
        return RewardResult(1.0 if response.strip() == gold else 0.0)

    llmgym.check_env(DeclarativeEnv(tasks=TASKS, verifier=natural), seeds=(0,))


def test_a_verifier_module_beside_the_spec_imports_without_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "acme_checks.py").write_text(
        "def upper_match(response, gold):\n    return float(response.strip().upper() == gold.upper())\n"
    )
    spec = _spec(
        tmp_path, "id: user/Beside-v0\ntasks: tasks.jsonl\nverifier: acme_checks:upper_match\n"
    )
    code = (
        f"import llmgym, gymnasium as gym\nllmgym.load_spec({str(spec)!r}, overwrite=True)\n"
        "env = gym.make('user/Beside-v0')\nenv.reset(options={'task_id': 'q1'})\n"
        "print(env.step('PARIS')[1])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", env=env
    )
    assert res.returncode == 0 and res.stdout.strip() == "1.0", res.stdout + res.stderr


# --- multi-turn feedback and weighted verifiers ---------------------------------------------------


def test_declarative_max_turns_gives_feedback_and_another_try() -> None:
    llmgym.register_task_env("user/Retry-v0", TASKS, "exact", max_turns=3, overwrite=True)
    env = gym.make("user/Retry-v0")
    obs, info = env.reset(options={"task_id": "q1"})
    assert info["max_turns"] == 3
    obs, reward, terminated, truncated, info = env.step("Lyon")
    assert not terminated and not truncated and reward == 0.0
    assert "does not match" in obs  # the feedback is the next observation
    obs, reward, terminated, truncated, info = env.step("Paris")
    assert terminated and reward == 1.0 and info["is_success"]
    env.reset(options={"task_id": "q1"})
    for _ in range(2):
        *_, terminated, truncated, _ = env.step("Lyon")
    _, reward, terminated, truncated, _ = env.step("Lyon")
    assert truncated and not terminated and reward == 0.0


def starts_with_capital(response: str, gold: Any, *, strict: bool = True) -> float:
    return float(response[:1].isupper())


def test_several_weighted_verifiers_make_one_reward() -> None:
    rubric = [
        {"verifier": "exact", "weight": 0.8},
        {
            "verifier": starts_with_capital,
            "weight": 0.2,
            "options": {"strict": True},
            "name": "caps",
        },
    ]
    env = DeclarativeEnv(tasks=TASKS, verifier=rubric)
    env.reset(options={"task_id": "q1"})
    _, reward, *_, info = env.step("Paris")
    assert reward == pytest.approx(1.0) and info["is_success"]
    assert info["reward_components"] == pytest.approx({"exact": 0.8, "caps": 0.2})
    env.reset(options={"task_id": "q1"})
    _, reward, *_, info = env.step("paris")
    assert reward == pytest.approx(0.8) and not info["is_success"]
    with pytest.raises(error.InvalidSpec, match="weight"):
        DeclarativeEnv(tasks=TASKS, verifier=[{"verifier": "exact", "weight": "heavy"}])
    with pytest.raises(error.InvalidSpec, match="did you mean 'case_sensitive'"):
        DeclarativeEnv(
            tasks=TASKS, verifier=[{"verifier": "exact", "options": {"case_sensitiv": 1}}]
        )
    with pytest.raises(error.InvalidSpec, match="did you mean 'weight'"):
        DeclarativeEnv(tasks=TASKS, verifier=[{"verifier": "exact", "wieght": 1}])


def test_unknown_spec_keys_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "id: user/Keys-v0\ntasks: tasks.jsonl\nverifer: exact\n")
    with pytest.raises(error.InvalidSpec, match="did you mean 'verifier'"):
        llmgym.load_spec(spec, overwrite=True)


# --- errors: what the README promises ---------------------------------------------------------


def test_step_before_reset_through_gym_make_is_llmgyms_reset_needed() -> None:
    env = gym.make("llm/Math-v0")
    with pytest.raises(llmgym.error.ResetNeeded):
        env.step("1")
    with pytest.raises(gym.error.ResetNeeded):  # and still Gymnasium's
        gym.make("llm/Math-v0").step("1")


# --- evaluations survive outages ---------------------------------------------------------------


class _Answering:
    """A chat-completions server on loopback that answers every question with 'Paris'."""

    def __init__(self, port: int = 0) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                payload = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": "Paris"}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_eval_against_a_server_that_is_down_fails_loudly_and_resume_retries(
    tmp_path: Path,
) -> None:
    llmgym.register_task_env("user/Outage-v0", [TASKS[0]], "exact", overwrite=True)
    probe = _Answering()  # find a free port, then close it: the server is "down"
    port = probe.port
    probe.close()
    policy = f"openai:m@http://127.0.0.1:{port}/v1"
    settings = {"max_retries": 0, "timeout_s": 1.0}
    out = tmp_path / "eval"
    down = llmgym.evaluate(
        "user/Outage-v0", policy, out=out, episodes=1, samples=3, k=[1], settings=settings,
        progress=False,
    )  # fmt: skip
    assert down.failed and down.summary["errors"]["episodes"] == 3
    assert down.summary["errors"]["by_status"] == {"policy_error": 3}
    spec = _spec(tmp_path, "id: user/OutageCli-v0\ntasks: tasks.jsonl\nverifier: exact\n")
    cli = subprocess.run(
        [sys.executable, "-m", "llmgym.cli", "eval", "user/OutageCli-v0", "--policy", policy,
         "--episodes", "1", "--samples", "2", "--set", "max_retries=0", "--set", "timeout_s=1",
         "--out", str(tmp_path / "cli"), "--no-progress"],
        capture_output=True, text=True, env={**os.environ, "LLMGYM_SPECS": str(spec)},
    )  # fmt: skip
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "error" in cli.stderr.lower() and "100%" in cli.stderr, cli.stderr
    server = _Answering(port)  # the server is back
    try:
        back = llmgym.evaluate(
            "user/Outage-v0", policy, out=out, episodes=1, samples=3, k=[1], settings=settings,
            progress=False,
        )  # fmt: skip
    finally:
        server.close()
    assert not back.failed and back.summary["errors"]["episodes"] == 0
    assert back.success_rate == 1.0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["status"] == "ok" for x in lines)


# --- each task once: exports and TRL datasets ------------------------------------------------


def test_a_dataset_exports_each_task_once() -> None:
    from llmgym.tasks import DatasetSource, Task

    six = DatasetSource([Task(id=f"t{i}", prompt=str(i), answer=str(i)) for i in range(6)])
    once = [t.id for t in six.iter_tasks(10, seed=3, unique=True)]
    assert sorted(once) == [f"t{i}" for i in range(6)]
    assert [t.id for t in six.iter_tasks(None, seed=3)] == once
    assert len(list(six.iter_tasks(4, seed=3, unique=True))) == 4


def test_trl_prompt_dataset_covers_every_task_once() -> None:
    pytest.importorskip("datasets")
    from llmgym.integrations.trl import prompt_dataset

    rows = [{"id": f"t{i}", "prompt": f"{i} + 1?", "answer": str(i + 1)} for i in range(30)]
    llmgym.register_task_env("user/Cover-v0", rows, "exact", overwrite=True)
    ds = prompt_dataset("user/Cover-v0")
    assert sorted(ds["task_id"]) == sorted(r["id"] for r in rows)
    ds = prompt_dataset("user/Cover-v0", 12, seed=5)
    assert len(ds) == 12 and len(set(ds["task_id"])) == 12
    procedural = prompt_dataset("llm/Math-v0", 8, env_kwargs={"family": "arith.add_small"})
    assert len(set(procedural["task_id"])) == 8
    assert all(t.startswith("arith.add_small:") for t in procedural["task_id"])


# --- shipped configs on a fresh clone ------------------------------------------------------------


def _model_of(text: str) -> str:
    return next(
        line.split(":", 1)[1].split("#")[0].strip()
        for line in text.splitlines()
        if line.startswith("model:")
    )


@pytest.mark.parametrize("config", sorted(p.name for p in Path("configs").glob("*.yaml")))
def test_a_shipped_config_without_its_model_says_how_to_get_one(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a fresh clone, a shipped config whose model is not there fails with one clear line:
    run the demo first (the demo's models), or point --model at a local checkpoint (a real
    model's recipe, with no hub to download from), never a bare hub error."""
    from llmgym.agents.tiny import load_model_and_tokenizer

    text = (Path("configs") / config).read_text()
    model = _model_of(text)
    if model.startswith("runs/demo/"):
        assert "make demo" in text
        with pytest.raises(error.Error, match="make demo") as info:
            load_model_and_tokenizer(str(tmp_path / "fresh-clone" / model))
        assert "huggingface" not in str(info.value).lower()
        with pytest.raises(error.Error, match="make demo"):
            load_model_and_tokenizer("runs/demo/never-made/final")
    else:  # a real model's recipe: a hub id or a local directory, named with --model
        assert "--model" in text, "the header says how to use a local checkpoint"
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on a machine without the hub
        with pytest.raises(error.Error, match="save_pretrained") as info:
            load_model_and_tokenizer(model)
        assert repr(model) in str(info.value)


# --- compare and reverify say what they could not do -------------------------------------------


def test_compare_with_no_env_in_common_has_no_overall_test(tmp_path: Path) -> None:
    from llmgym.evaluation.compare import compare_runs

    llmgym.register_task_env("user/CmpA-v0", TASKS, "exact", overwrite=True)
    llmgym.register_task_env("user/CmpB-v0", TASKS, "exact", overwrite=True)
    a = llmgym.evaluate("user/CmpA-v0", "oracle", out=tmp_path / "a", progress=False, report=False)
    b = llmgym.evaluate("user/CmpB-v0", "oracle", out=tmp_path / "b", progress=False, report=False)
    c = compare_runs(a.out, b.out)
    assert c["comparable"] is False and c["overall"]["envs"] == []
    assert all(c["overall"][m]["p"] != c["overall"][m]["p"] for m in ("success", "reward"))  # NaN
    assert any("no env in common" in w for w in c["warnings"])
    same = compare_runs(a.out, a.out)
    assert same["comparable"] is True and same["overall"]["envs"] == ["user/CmpA-v0"]


def test_reverify_of_an_env_it_cannot_build_is_not_drift(tmp_path: Path) -> None:
    from llmgym.evaluation.rollouts import reverify

    llmgym.register_task_env("user/Gone-v0", TASKS, "exact", overwrite=True)
    run = llmgym.evaluate(
        "user/Gone-v0", "oracle", out=tmp_path / "r", progress=False, report=False
    )
    del gym.registry["user/Gone-v0"]  # as in a process that did not load the spec
    report = reverify(run.out / "results.jsonl", progress=False)
    assert not report.drift and list(report.unbuildable) == ["user/Gone-v0"]
    llmgym.register_task_env("user/Gone-v0", TASKS, "exact", overwrite=True)
    again = reverify(run.out / "results.jsonl", progress=False)
    assert not again.drift and not again.unbuildable and len(again.checked) == 2


def test_export_all_writes_each_task_of_a_dataset_once(tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "prompt": f"{i}?", "answer": str(i)} for i in range(6)]
    spec = _spec(tmp_path, "id: user/Six-v0\ntasks: tasks.jsonl\nverifier: exact\n", rows)
    env = {**os.environ, "LLMGYM_SPECS": str(spec)}

    def export(*args: str) -> list[str]:
        out = tmp_path / "out.jsonl"
        res = subprocess.run(
            [sys.executable, "-m", "llmgym.cli", "export", "user/Six-v0", "--out", str(out),
             "--quiet", *args],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        return [json.loads(line)["id"] for line in out.read_text().splitlines()]

    assert sorted(export("--all")) == sorted(r["id"] for r in rows)
    assert len(set(export("--n", "4", "--unique"))) == 4
    res = subprocess.run(
        [sys.executable, "-m", "llmgym.cli", "export", "llm/Math-v0", "--all", "--out",
         str(tmp_path / "x.jsonl")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode != 0 and "--n" in res.stderr and "Traceback" not in res.stderr


# --- the README's enterprise walkthrough, as written ---------------------------------------------

PRIORITY_CHECK = """
from llmgym.rewards import RewardResult


def priority(response, gold, *, strict=True):
    ok = response.strip() in ("P1", "P2", "P3")
    return RewardResult(1.0 if ok else 0.0, {"format": float(ok)}, "" if ok else "not P1-P3")
"""

WALKTHROUGH_SPEC = """envs:
  - id: acme/Tickets-v0
    tasks: tickets.jsonl
    verifier:
      - {verifier: exact, weight: 0.8, options: {case_sensitive: false}}
      - {verifier: "acme_checks:priority", weight: 0.2, name: format}
    extract: answer_tag
    prompt_template: "Ticket: {prompt}\\nReply with the priority in <answer> tags."
    system_prompt: You triage support tickets.
    max_turns: 3
"""


def test_the_readme_enterprise_walkthrough_runs_end_to_end(tmp_path: Path) -> None:
    acme = tmp_path / "acme"
    acme.mkdir()
    tickets = [
        {"id": f"t{i}", "prompt": text, "answer": p}
        for i, (text, p) in enumerate(
            [("Printer on fire in room 4", "P1"), ("Mouse squeaks", "P3"), ("VPN slow", "P2")]
        )
    ]
    (acme / "tickets.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tickets))
    (acme / "acme_checks.py").write_text(PRIORITY_CHECK)
    (acme / "spec.yaml").write_text(WALKTHROUGH_SPEC)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def cli(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "llmgym", *args], capture_output=True, text=True,
            cwd=tmp_path, env={**env, **extra_env}, timeout=600,
        )  # fmt: skip

    registered = cli("register", "acme/spec.yaml")
    assert registered.returncode == 0, registered.stdout + registered.stderr
    audited = cli("--spec", "acme/spec.yaml", "audit", "acme/Tickets-v0", "--episodes", "3", "-q")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    evaluated = cli(
        "eval", "acme/Tickets-v0", "--policy", "oracle", "--out", "runs/eval-tickets",
        "--no-progress", LLMGYM_SPECS="acme/spec.yaml",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    summary = json.loads((tmp_path / "runs/eval-tickets/summary.json").read_text())
    assert summary["overall"]["success_rate"] == 1.0 and summary["overall"]["episodes"] == 3
    exported = cli(
        "export", "acme/Tickets-v0", "--all", "--out", "all.jsonl", "--quiet",
        LLMGYM_SPECS="acme/spec.yaml",
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 3
    # And the same env plays: a wrong answer gets the feedback and another try.
    llmgym.load_spec(acme / "spec.yaml", overwrite=True)
    game = gym.make("acme/Tickets-v0")
    game.reset(options={"task_id": "t0"})
    obs, reward, terminated, *_ = game.step("<answer>P3</answer>")
    assert not terminated and reward == 0.0 and "Try again" in obs
    obs, reward, terminated, truncated, _ = game.step("<answer>p1</answer>")
    assert not terminated and reward == 0.0 and "format" in obs  # right, not in P1-P3 form
    _, reward, terminated, truncated, _ = game.step("<answer>p1</answer>")
    assert truncated and not terminated and reward == pytest.approx(0.8)  # the last try counts
    game.reset(options={"task_id": "t0"})
    _, reward, terminated, _, info = game.step("<answer>P1</answer>")
    assert terminated and reward == pytest.approx(1.0) and info["is_success"]
    assert info["reward_components"] == pytest.approx({"exact": 0.8, "format": 0.2})
