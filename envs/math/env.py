"""MathEnv (``llm/Math-v0``): procedural math families or math datasets, graded by the math verifier."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llmgym import error
from llmgym.core import Episode, LLMEnv, Message
from llmgym.envs.math.build import ANSWER_INSTRUCTION
from llmgym.envs.math.datasets import load_tasks
from llmgym.envs.math.families import FAMILIES
from llmgym.rewards import RewardResult
from llmgym.rewards.math.form import is_factored
from llmgym.tasks import ProceduralSource, Subtask, Task, select_families

__all__ = ["DEFAULT_FORM", "MathEnv", "is_factored", "milestones_of"]

SEQUENTIAL_INSTRUCTION = "Answer the questions below one at a time; put each answer in \\boxed{}."
SHOW_WORK = "Show your work, writing each intermediate result as an equation (for example $a \\times b = c$)."
DEFAULT_FORM = "auto"
"""The final form of a task that declares none (``metadata["form"]``): the gold's own."""


class MathEnv(LLMEnv):
    """Math problems with exact answers, graded by :func:`llmgym.rewards.math.math_reward`.

    ## Description
    Each episode poses one problem: by default drawn from 87 procedural families (arithmetic,
    fractions, percentages, ratios, equations, systems, polynomials, inequalities, sequences
    and series, combinatorics, probability, number theory, sets, statistics, geometry,
    trigonometry, unit conversion, logarithms, matrices, vectors, complex numbers, polynomial
    calculus, multi-step word problems), each mapping ``difficulty`` to its own parameters and
    computing its gold answer exactly; or taken from a dataset (GSM8K, MATH, JSONL). The
    model answers in free form and puts its final answer in ``\\boxed{}``. Multi-step
    families carry their intermediate results as subtasks ``s1, s2, ...`` (the last one asks
    the task's own question), so ``subtask_mode="sequential"`` asks them one per step and
    ``"joint"`` asks for all of them in one tagged answer. ``llmgym.list_families("llm/Math-v0")``
    lists the families; ``arith.add_small`` at difficulty 0 is single-digit addition.

    ## Action Space
    ``Text()``: the assistant's message (a ``str`` or an OpenAI-style dict; ``reasoning_content``
    is read by the step checker).

    ## Observation Space
    ``Text()``: the problem with its answer format (for example "Write the solution set in
    interval notation"), then the verifier's feedback.

    ## Rewards
    ``correctness`` (1 if the boxed answer equals the gold, strictly: no x100 percent leniency,
    intervals' ends matter, hedged answers score 0, and written in the task's final form:
    ``metadata["form"]``, declared by every family, such as ``"number"``, ``"fraction"`` or
    ``"radical"``, so that the question's own expression boxed back scores 0; GSM8K answers are
    numbers, other datasets' take the form of their gold, ``"auto"``), optionally scaled by the verifier's
    ``format_weight``; plus ``process_reward * process`` where ``process`` in [0, 1] is the
    rule-based step checker (:mod:`llmgym.rewards.math.process`: intermediate results stated as
    equations, in dependency order, without wrong arithmetic or listing; capped at 0.5 when the
    final answer is wrong; equal to the outcome for tasks without intermediate results); plus
    ``reward_model_weight * reward_model`` where ``reward_model`` in [0, 1] is an outcome or
    process reward model's score. ``reward_components`` holds each weighted term and the reward
    is their sum, in ``[0, 1 + process_reward + reward_model_weight]`` (``[0, 1]`` by default).
    ``is_success`` is the correctness of the final answer. Sequential subtask mode adds the
    weight-normalised subtask credit (at most 1) to the outcome of the last step; joint mode
    rewards the weighted fraction of parts answered correctly, in [0, 1].

    ## Starting State
    A task drawn with the env's ``np_random``: a family (uniformly, or ``family=``/``families=``),
    a difficulty (``difficulty=`` a number, a range, or the whole [0, 1]) and an index, so the
    task id ``"<family>:<difficulty>:<index>"`` rebuilds it anywhere.

    ## Episode End
    Terminates after one step (or after the last subtask in sequential mode).

    ## Arguments
    ``tasks`` (None: procedural families; else a JSONL path, records, Tasks, a TaskSource or a
    ``datasets.Dataset``), ``dataset_format`` (``"gsm8k"``, ``"math"``, ``"jsonl"``; default: each
    record's schema is recognised), ``families`` (names or glob patterns such as ``"arith.*"``
    restricting the procedural families), ``process_reward`` (weight of the step checker, default
    0), ``reward_model`` (a path, a :class:`~llmgym.rewards.math.process.RewardModel`, a
    transformers sequence classifier with ``reward_tokenizer``, or a callable
    ``(prompt, response) -> float`` in [0, 1]), ``reward_model_kind`` (``"orm"`` or ``"prm"``),
    ``reward_model_weight`` (default 0.5), ``rel_tol``/``abs_tol`` (numeric tolerance, default
    exact), ``format_weight`` (verifier's format share, default 0), ``timeout_s`` (symbolic
    comparison budget), and the core's ``subtask_mode``, ``difficulty``, ``family``,
    ``system_prompt``, ``max_turns``, ``render_mode``.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/Math-v0", family="arith.add_small", difficulty=0.0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[0]
    'What is 4 + 7?'
    >>> env.step("4 + 7 = 11, so the answer is \\\\boxed{11}.")[1]
    1.0
    """

    domain = "math"
    reward_range = (0.0, 1.0)
    default_max_turns = 1

    def __init__(
        self,
        *,
        tasks: Any = None,
        dataset_format: str | None = None,
        families: Sequence[str] | None = None,
        process_reward: float = 0.0,
        reward_model: Any = None,
        reward_model_kind: str = "orm",
        reward_model_weight: float = 0.5,
        reward_tokenizer: Any = None,
        rel_tol: float = 0.0,
        abs_tol: float = 0.0,
        format_weight: float = 0.0,
        timeout_s: float = 2.0,
        **kwargs: Any,
    ):
        for name, value in (
            ("process_reward", process_reward),
            ("reward_model_weight", reward_model_weight),
            ("rel_tol", rel_tol),
            ("abs_tol", abs_tol),
        ):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise error.Error(f"Expects {name} to be a finite number >= 0, actual: {value!r}")
        if not 0.0 <= format_weight <= 1.0:
            raise error.Error(f"Expects format_weight in [0, 1], actual: {format_weight!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise error.Error(f"Expects timeout_s > 0, actual: {timeout_s!r}")
        self.process_reward = float(process_reward)
        self.verifier_options = {
            "rel_tol": float(rel_tol),
            "abs_tol": float(abs_tol),
            "timeout_s": float(timeout_s),
            "format_weight": float(format_weight),
        }
        self.reward_model = None
        self.reward_model_weight = 0.0
        if reward_model is not None:
            from llmgym.rewards.math.process import load_reward_model

            try:
                self.reward_model = load_reward_model(
                    reward_model, tokenizer=reward_tokenizer, kind=reward_model_kind
                )
            except (TypeError, ValueError) as e:
                raise error.Error(str(e)) from None
            self.reward_model_weight = float(reward_model_weight)
        self.reward_range = (0.0, 1.0 + self.process_reward + self.reward_model_weight)
        if tasks is None:
            if dataset_format is not None:
                raise error.Error(
                    "dataset_format needs tasks= (a dataset); procedural families have none"
                )
            source = ProceduralSource(select_families(FAMILIES, families), domain="math")
        else:
            if families is not None:
                raise error.Error("families= selects procedural families; with tasks=, use family=")
            source = load_tasks(tasks, dataset_format)
        super().__init__(source, **kwargs)

    # --- prompts -----------------------------------------------------------------------------

    def render_prompt(self, task: Task) -> str:
        prompt = task.prompt
        mode = self.subtask_mode if task.subtasks else None
        if mode is not None and prompt.endswith(ANSWER_INSTRUCTION):
            head = prompt[: -len(ANSWER_INSTRUCTION)].rstrip()
            return head if mode == "joint" else f"{head}\n\n{SEQUENTIAL_INSTRUCTION}"
        if self.process_reward > 0 and mode is None:
            return f"{prompt}\n{SHOW_WORK}"
        return prompt

    def render_subtask(self, task: Task, subtask: Subtask, index: int, total: int) -> str:
        return f"Question {index + 1} of {total}: {subtask.prompt}"

    def oracle(self, task: Task) -> str:
        solution = task.metadata.get("solution")
        if isinstance(solution, str) and solution:
            return solution
        answer = task.answer
        if isinstance(answer, (list, tuple)) and answer:
            answer = answer[0]  # several acceptable golds: any one will do
        return f"The answer is $\\boxed{{{answer}}}$."

    def grade_subtask(self, task: Task, subtask: Subtask, message: Message) -> RewardResult:
        if subtask.verifier != "math":
            return super().grade_subtask(task, subtask, message)
        from llmgym.rewards.math import math_reward

        options = {k: v for k, v in self.verifier_options.items() if k != "format_weight"}
        form = subtask.metadata.get("form", DEFAULT_FORM)
        return math_reward(message["content"], subtask.answer, form=form, **options)

    def oracle_subtask(self, task: Task, subtask: Subtask) -> str:
        if self.subtask_mode == "sequential":
            return f"\\boxed{{{subtask.answer}}}"
        return str(subtask.answer)

    def secrets(self, task: Task) -> list[str]:
        answer = str(task.answer)
        if len(answer.strip()) >= 3 and answer not in task.prompt:
            return [answer]
        return []

    # --- grading -------------------------------------------------------------------------------

    def grade(self, task: Task, message: Message) -> RewardResult:
        return self._grade(task, message, process=self.process_reward > 0)

    def grade_outcome(self, episode: Episode, message: Message) -> RewardResult:
        # The subtasks are this episode's process reward; the step checker would count twice.
        return self._grade(episode.task, message, process=False)

    def _grade(self, task: Task, message: Message, *, process: bool) -> RewardResult:
        from llmgym.rewards.math import math_reward

        content = message["content"]
        form = task.metadata.get("form", DEFAULT_FORM)
        result = math_reward(content, task.answer, form=form, **self.verifier_options)
        correct = result.success
        score = result.score
        feedback = result.feedback
        components = {"correctness": 1.0 if correct else 0.0}
        if self.verifier_options["format_weight"] > 0:
            components["format"] = result.components.get("format", 0.0)
        if process:
            credit = self._step_credit(task, message, correct)
            components["process"] = self.process_reward * credit
            score += self.process_reward * credit
        if self.reward_model is not None:
            try:
                value = _unit(self.reward_model(self.render_prompt(task), content))
            except Exception as e:  # a reward-model failure must not end a training run
                value = 0.0
                feedback += f" (reward model error: {type(e).__name__}: {str(e)[:200]})"
            components["reward_model"] = self.reward_model_weight * value
            score += self.reward_model_weight * value
        for secret in self.secrets(task):
            feedback = feedback.replace(secret, "...")
        return RewardResult(score, components, feedback, correct)

    def _step_credit(self, task: Task, message: Message, correct: bool) -> float:
        from llmgym.rewards.math.process import check_steps

        milestones = milestones_of(task)
        text = str(message.get("reasoning_content") or "") + "\n" + message["content"]
        return check_steps(text, milestones, final_correct=correct).score


def milestones_of(task: Task) -> list[Any]:
    """The intermediate results of a task: its subtasks but the last (the task's own question),
    or a dataset's ``metadata["steps"]`` (in no particular order)."""
    from llmgym.rewards.math.process import Milestone

    if task.subtasks:
        order = task.subtask_order()[:-1]
        return [Milestone(s.id, str(s.answer), tuple(s.depends_on)) for s in order]
    steps = task.metadata.get("steps") or []
    return [Milestone(f"m{i + 1}", str(v)) for i, v in enumerate(steps)]


def _unit(value: Any) -> float:
    """A reward model's score clipped into [0, 1] (NaN and junk score 0)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(max(x, 0.0), 1.0) if math.isfinite(x) else 0.0
