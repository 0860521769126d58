"""InstructEnv (``llm/Instruct-v0``): open-ended writing under verifiable instructions (IFEval's)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmgym import error
from llmgym.core import Action, Episode, LLMEnv, Message, Turn
from llmgym.envs.instruct.compose.task import InstructFamily, compose
from llmgym.envs.instruct.datasets import load_dataset
from llmgym.envs.instruct.families import FAMILIES
from llmgym.rewards import RewardResult
from llmgym.rewards.instruct import Assessment, assess, result_of
from llmgym.tasks import Family, ProceduralSource, Task, TaskSource

JOINT_INSTRUCTION = "Write one response that follows every instruction above; each instruction is graded on its own."


def _generator(family: InstructFamily) -> Any:
    def generate(rng: random.Random, difficulty: float) -> Task:
        return compose(family, rng, difficulty)

    return generate


class InstructEnv(LLMEnv):
    """Write, answer, summarize, rewrite or format text under instructions a program can check.

    ## Description
    Each task is an open-ended request (a blog post, a letter, a review, a yes/no question, a
    passage to summarize or rewrite, notes to list, facts to extract) with instructions in the
    style of IFEval: length in words, sentences or paragraphs, keywords present, forbidden or
    counted, letter frequency, response language, lower case or capitals, capital-word counts,
    start and end phrases, placeholders, a postscript, sections, bullet counts, highlights,
    a title, JSON (or JSON valid against a schema), quotation marks, no commas, two responses,
    the request repeated first, a fixed yes/no/maybe answer: 27 instruction types, IFEval's 25
    with its ids and arguments plus ``startend:start_checker`` and
    ``detectable_format:json_schema``. 29 families (``llmgym.list_families("llm/Instruct-v0")``)
    each about one kind of instruction or work; ``difficulty`` adds up to four more
    instructions and lengthens the content. IFEval's ``input_data.jsonl`` and llmgym JSONL
    load with ``tasks=path``.

    ## Action Space
    ``Text()``: the response (a ``str`` or an OpenAI-style dict).

    ## Observation Space
    ``Text()``: the request, the text to work on if any, and the instructions; then feedback
    naming the instructions not followed.

    ## Rewards
    :func:`llmgym.rewards.instruct.grade_instructions`, in ``[0, 1]``: the share of instructions
    followed (strict checks, or loose with ``loose=True``), one component per instruction.
    Nothing is paid to a response that is not one: fewer than 8 distinct words of its own, the
    instructions echoed back, or none of the task's subjects; and an instruction that only
    forbids or caps something pays only when every instruction that asks for something is
    followed. ``info["instruct"]`` holds IFEval's figures for the response (``prompt_strict``,
    ``prompt_loose``, ``instruction_strict``, ``instruction_loose``) and each instruction's
    verdicts. ``is_success``: every instruction followed.

    ## Starting State
    A task drawn with the env's ``np_random`` (or chosen by ``options``); the id
    ``"<family>:<difficulty>:<index>"`` rebuilds it anywhere.

    ## Episode End
    One step. ``subtask_mode="joint"``: one subtask per instruction, the same single response
    graded against each (``info["subtask_rewards"]``).

    ## Arguments
    ``loose`` (pay IFEval's loose verdicts), ``families`` (names to draw from), ``tasks`` /
    ``dataset_format`` (``"ifeval"`` or ``"jsonl"``), and the core's ``subtask_mode``
    (``"joint"``), ``difficulty``, ``family``, ``system_prompt``, ``render_mode``.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/Instruct-v0", family="write.no_comma", difficulty=0.0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.splitlines()[-1]
    'In your entire response refrain from the use of any commas.'
    >>> env.step(env.unwrapped.oracle_action())[1]
    1.0
    """

    domain = "instruct"
    reward_range = (0.0, 1.0)
    open_ended = True  # llmgym.audit: no single answer to hedge between
    default_max_turns = 1

    def __init__(
        self,
        *,
        loose: bool = False,
        families: Iterable[str] | None = None,
        tasks: str | Path | TaskSource | Iterable[Task | Mapping[str, Any]] | None = None,
        dataset_format: str | None = None,
        **kwargs: Any,
    ):
        if kwargs.get("subtask_mode") == "sequential":
            raise error.Error(
                "Instruct-v0 grades one response against every instruction; use subtask_mode='joint'"
            )
        self.loose = bool(loose)
        source: TaskSource
        if isinstance(tasks, TaskSource):
            source = tasks
        elif tasks is not None:
            source = load_dataset(tasks, dataset_format)
        else:
            catalogue = FAMILIES
            if families is not None:
                wanted = set(families)
                unknown = wanted - {f.name for f in FAMILIES}
                if unknown:
                    raise error.UnknownFamily(
                        f"No families {sorted(unknown)} in Instruct-v0; available: {[f.name for f in FAMILIES]}"
                    )
                catalogue = [f for f in FAMILIES if f.name in wanted]
            source = ProceduralSource(
                [
                    Family(f.name, _generator(f), f.description, has_subtasks=True)
                    for f in catalogue
                ],
                domain=self.domain,
            )
        super().__init__(source, **kwargs)

    # --- grading ---------------------------------------------------------------------------------

    def _assess(self, task: Task, message: Message) -> Assessment:
        return assess(message.get("content") or "", task.answer, loose=self.loose)

    def grade(self, task: Task, message: Message) -> RewardResult:
        return result_of(self._assess(task, message))

    def respond(self, episode: Episode, message: Message) -> Turn:
        a = self._assess(episode.task, message)
        return Turn.graded(result_of(a), info={"instruct": self._report(a)})

    @staticmethod
    def _report(a: Assessment) -> dict[str, Any]:
        return {
            **a.accuracy(),
            "gate": a.gate_reason,
            "instructions": [
                {"id": r.id, "strict": r.strict, "loose": r.loose, "credit": c}
                for r, c in zip(a.results, a.credits, strict=True)
            ],
        }

    def oracle(self, task: Task) -> Action:
        return str(task.metadata.get("oracle") or "")

    def secrets(self, task: Task) -> list[str]:
        return []  # the instructions are the prompt; no gold is hidden

    # --- joint mode: one response, each instruction a subtask ------------------------------------

    def joint_instructions(self, task: Task) -> str:
        return JOINT_INSTRUCTION

    def grade_joint(self, ep: Episode, message: Message) -> Turn:
        a = self._assess(ep.task, message)
        weights = self._weights(list(ep.task.subtasks))
        total = 0.0
        for sub, credit in zip(ep.task.subtask_order(), a.credits, strict=True):
            ep.subtask_rewards[sub.id] = credit
            total += weights[sub.id] * credit
        result = result_of(a)
        return Turn(
            reward=total,
            terminated=True,
            observation=result.feedback,
            components={"process": total},
            is_success=result.success,
            feedback=result.feedback,
            info={"instruct": self._report(a)},
        )

    def oracle_action(self) -> Action:
        ep = self._require_episode()
        return self.oracle(ep.task)
