"""Hostile answers against the reasoning-gym bridge: what a policy would try to be paid for, or
to break the trainer with. One attack per test, its class in the name."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from llmgym.envs.reasoning.bridge import library
from llmgym.envs.reasoning.bridge.worker import get_scorer

pytestmark = pytest.mark.timeout(300)

FAMILIES = ["gcd", "number_sorting", "spiral_matrix", "rotate_matrix", "simple_integration",
            "countdown", "word_sorting", "figlet_font", "advanced_geometry", "string_insertion"]  # fmt: skip


def _env(family: str, **kwargs: Any) -> Any:
    return gym.make("llm/ReasoningGym-v0", family=family, difficulty=0.5, **kwargs)


def _play(env: Any, action: Any, seed: int = 0) -> tuple[float, dict[str, Any], str, Any]:
    obs, _ = env.reset(seed=seed)
    task = env.unwrapped.episode.task
    _, reward, terminated, _, info = env.step(action)
    assert terminated
    return float(reward), info, obs, task


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_unicode_and_untagged_answers_earn_nothing(family: str) -> None:
    env = _env(family)
    for action in (
        "",
        "<answer></answer>",
        "<answer>\u202e\ud800\x00🙂</answer>",
        "42",
        "<answer>",
    ):
        reward, info, _, _ = _play(env, action)
        assert reward == 0.0 and not info["is_success"], (family, action)
    env.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_copy_never_gets_full_marks_or_partial_pay(family: str) -> None:
    env = _env(family)
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        task = env.unwrapped.episode.task
        if task.answer in task.prompt:
            continue  # copying the prompt is answering here (a matrix rotated by 0 degrees)
        _, reward, _, _, info = env.step(f"<answer>{task.prompt}</answer>")
        assert reward == 0.0 and not info["is_success"], (family, seed)
    env.close()


def test_partial_credit_is_gated_by_default_and_passed_through_on_request() -> None:
    """advanced_geometry pays 0.01 for any text: the default reward is 0; partial_credit shows it."""
    strict, lenient = _env("advanced_geometry"), _env("advanced_geometry", partial_credit=True)
    assert _play(strict, "<answer>no idea</answer>")[0] == 0.0
    assert 0.0 < _play(lenient, "<answer>no idea</answer>")[0] < 1.0
    strict.close(), lenient.close()


def test_a_shotgun_list_containing_the_gold_is_not_paid() -> None:
    """The library's default scorer pays len(gold)/len(answer) for any answer containing the gold."""
    env = _env("gcd", partial_credit=False)
    obs, _ = env.reset(seed=0)
    gold = env.unwrapped.episode.task.answer
    guesses = " ".join(str(n) for n in range(1, 200))
    assert gold in guesses
    _, reward, _, _, info = env.step(f"<answer>{guesses}</answer>")
    assert reward == 0.0 and not info["is_success"]
    env.close()


def test_ten_megabyte_answer_is_refused_before_the_scorer() -> None:
    env = _env("gcd")
    env.reset(seed=0)
    before = get_scorer().timeouts
    start = time.perf_counter()
    _, reward, _, _, info = env.step("<answer>" + "7" * (10 << 20) + "</answer>")
    assert reward == 0.0 and "longer" in info["feedback"]
    assert time.perf_counter() - start < 5 and get_scorer().timeouts == before
    env.close()


def test_many_opening_tags_are_read_in_linear_time() -> None:
    env = _env("gcd")
    env.reset(seed=0)
    start = time.perf_counter()
    _, reward, _, _, _ = env.step("<answer>" * 500_000)
    assert reward == 0.0 and time.perf_counter() - start < 5
    env.close()


@pytest.mark.parametrize("family", ["spiral_matrix", "string_insertion", "number_sorting",
                                    "binary_matrix", "n_queens"])  # fmt: skip
def test_code_injection_through_eval_scorers_does_not_run(family: str, tmp_path: Path) -> None:
    """These scorers eval() the answer to accept a Python list; in the worker eval is literal_eval."""
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x') or [1]"
    env = _env(family)
    reward, info, _, _ = _play(env, f"<answer>{payload}</answer>")
    assert not marker.exists() and reward == 0.0 and not info["is_success"]
    env.close()


@pytest.mark.parametrize("family", ["simple_integration", "countdown"])
def test_code_injection_through_sympy_parse_expr_does_not_run(family: str, tmp_path: Path) -> None:
    """sympy's parse_expr evals; builtins are names in its namespace, so names are allow-listed."""
    marker = tmp_path / "pwned"
    code = "".join(f"chr({ord(c)})+" for c in f"open({str(marker)!r},'w')")[:-1]
    env = _env(family)
    for payload in (f"eval({code})", f"__import__('os').system('touch {marker}')"):
        reward, _, _, _ = _play(env, f"<answer>{payload}</answer>")
        assert not marker.exists() and reward == 0.0
    env.close()


def test_a_scorer_that_would_run_forever_is_stopped_and_the_worker_replaced() -> None:
    env = _env("simple_integration", score_timeout_s=3.0)
    env.reset(seed=0)
    start = time.perf_counter()
    _, reward, _, _, info = env.step("<answer>9**9**9**9**9</answer>")
    assert reward == 0.0 and "did not finish" in info["feedback"]
    assert time.perf_counter() - start < 60
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.unwrapped.oracle_action())
    assert reward == 1.0 and info["is_success"]  # a fresh worker scores the next answer
    env.close()


def test_a_malformed_request_or_raising_scorer_scores_zero_not_a_crash() -> None:
    scorer = get_scorer()
    assert scorer.score("no_such_dataset", 0.0, 1, "1", 30.0) == 0.0
    assert scorer.score("prime_factorization", 0.0, 1, "Find the factors of", 30.0) == 0.0


def test_a_foreign_task_without_bridge_metadata_is_refused_at_reset() -> None:
    env = _env("gcd")
    task = {"id": "gcd:0.50:1", "prompt": "What is 2+2?", "answer": "4", "family": "gcd"}
    with pytest.raises(gym.error.Error, match="not a bridged"):
        env.reset(options={"task": task})
    env.close()


def test_plain_math_allows_answers_and_refuses_code() -> None:
    ok = ["x**2/2 + C", "3*sin(x) - cos(2*x) + C", "(4+4)*(8-5)", "-1/3*X**3 + 2.5*x", "sqrt(2)*E"]
    bad = [
        "exec(chr(112))",
        "x.__class__",
        "'a'",
        "lambda: 1",
        "[1]",
        "x; 1",
        "open",
        "x if 1 else 2",
    ]
    assert all(library.is_plain_math(s) for s in ok)
    assert not any(library.is_plain_math(s) for s in bad)
