"""CodeRepairEnv: fix a module under constraints; rewarded on effectiveness, compliance, safety."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmgym import error
from llmgym.core import Message
from llmgym.envs.coding.env import CachingSource, CodingEnv, Refusal
from llmgym.envs.coding.extract import code_blocks, strip_reasoning
from llmgym.envs.coding.families import REPAIR_FAMILIES
from llmgym.envs.coding.judge.program import static_facts
from llmgym.envs.coding.judge.verdicts import Verdict, describe
from llmgym.envs.coding.patch import PatchError, apply_patch, looks_like_diff
from llmgym.envs.coding.problem import Problem
from llmgym.rewards.base import RewardResult
from llmgym.rewards.coding import compliance_score, forbidden_uses, signature_changes
from llmgym.tasks import DatasetSource, Task, TaskSource

DEFAULT_REPAIR_WEIGHTS = {"effectiveness": 0.6, "compliance": 0.2, "safety": 0.2}


class CodeRepairEnv(CodingEnv):
    """Fix a bug or add a missing behaviour in a module without breaking its contract.

    ## Description
    The model gets a small Python module and a change request: fix a described bug (or add
    the error handling a requirement asks for), do not change the public interface of the
    other functions, raise the required exceptions, and use no forbidden imports or calls.
    It answers with the whole corrected module or a unified diff against it. Six module
    templates (ledger, inventory, text utilities, statistics, scheduling, configuration)
    with several injected bugs each; tasks in llmgym JSONL with a ``"repair"`` section load
    too.

    ## Action Space
    ``Text()``: the assistant's message: a ```python block with the module, or a ```diff
    block (or a bare unified diff) against the shipped module.

    ## Observation Space
    ``Text()``: the module and the change request; after the step, the feedback.

    ## Rewards
    A reward matrix, each part in ``[0, 1]``: *effectiveness*, the fraction of the hidden
    fail-to-pass tests (those the shipped module fails) that pass times the fraction of the
    pass-to-pass tests still passing; *compliance*, the fraction of the other public
    functions whose signature (by AST) is unchanged; *safety*, 0 with any forbidden import
    or call, else the fraction of the required-exception tests passed. The reward is
    ``effectiveness * (0.6 + 0.2 * compliance + 0.2 * safety)`` (weights configurable), in
    ``[0, 1]``: compliance and safety count only as far as the fix works, so resubmitting the
    module unchanged earns nothing. ``info["reward_components"]`` has the three weighted
    terms (they add up to the reward), ``info["repair"]`` the raw facts, ``info["exec"]``
    the test run.

    ## Starting State
    A repair task drawn with the env's ``np_random`` (or ``options={"task_id": ...}``).

    ## Episode End
    Terminates after one step (``max_turns > 1`` gives execute-verify-correct turns as in
    ``CodingMultiTurnEnv``).

    ## Arguments
    ``tasks`` (JSONL path or records in llmgym's schema with a ``"repair"`` section),
    ``weights`` (``{"effectiveness", "compliance", "safety"}``), ``families``, ``sandbox``,
    ``max_code_chars``, plus the LLMEnv arguments.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/CodeRepair-v0")
    >>> obs, info = env.reset(seed=0)
    >>> "Change request:" in obs
    True
    """

    reward_range = (0.0, 1.0)

    def __init__(
        self,
        *,
        tasks: Any = None,
        weights: Mapping[str, float] | None = None,
        families: Sequence[str] | None = None,
        **kwargs: Any,
    ):
        merged = dict(DEFAULT_REPAIR_WEIGHTS)
        for key, value in dict(weights or {}).items():
            if key not in merged or not isinstance(value, (int, float)) or value < 0:
                raise error.Error(
                    f"weights expects non-negative numbers for {sorted(merged)}, got {key!r}={value!r}"
                )
            merged[key] = float(value)
        total = sum(merged.values())
        if total <= 0:
            raise error.Error("weights must not all be zero")
        self.weights = {k: v / total for k, v in merged.items()}
        self._repair_families = families
        for bad in ("language", "reward", "dataset_format"):
            if bad in kwargs:
                raise error.Error(f"CodeRepairEnv does not take {bad}=")
        super().__init__(tasks=tasks, **kwargs)

    def step_reward_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def build_source(
        self, tasks: Any, dataset_format: str | None, families: Sequence[str] | None
    ) -> TaskSource:
        if tasks is not None:
            from llmgym.envs.coding.datasets import load_coding_tasks

            source = load_coding_tasks(tasks, dataset_format=None, domain=self.domain)
            for task in source if isinstance(source, DatasetSource) else ():
                _repair_meta(task)
            return source
        pool = REPAIR_FAMILIES
        if self._repair_families is not None:
            known = {f.name: f for f in REPAIR_FAMILIES}
            unknown = [n for n in self._repair_families if n not in known]
            if unknown:
                raise error.UnknownFamily(
                    f"No repair families {unknown}; available: {sorted(known)}"
                )
            pool = [known[n] for n in self._repair_families]
        return CachingSource(pool, domain=self.domain, size=self.task_cache)

    def render_prompt(self, task: Task) -> str:
        return task.prompt

    def module_of(self, message: Message, task: Task) -> tuple[str | None, Refusal | None, str]:
        """(module source or None, why not, answer format: ``"diff"`` or ``"module"``)."""
        meta = _repair_meta(task)
        text = strip_reasoning(message.get("content") or "")
        blocks = code_blocks(text)
        diffs = [
            code
            for tag, code in blocks
            if tag in ("diff", "patch", "udiff") or (not tag and looks_like_diff(code))
        ]
        diff = diffs[-1] if diffs else None
        if diff is None and not blocks and looks_like_diff(text):
            diff = text  # a bare diff, no fences
        if diff is not None:
            if len(diff) > self.max_code_chars:
                reason = (
                    f"The diff is {len(diff)} characters long; the limit is {self.max_code_chars}."
                )
                return None, Refusal("too_long", reason), "diff"
            try:
                return apply_patch(meta["original"], diff), None, "diff"
            except PatchError as e:
                return None, Refusal("no_code", f"The diff does not apply: {e}"), "diff"
        code, refusal = self.code_of(message, self.problem(task), "python")
        return code, refusal, "module"

    def evaluate(
        self, task: Task, message: Message
    ) -> tuple[Verdict, RewardResult, dict[str, Any]]:
        problem = self.problem(task)
        meta = _repair_meta(task)
        module, refusal, form = self.module_of(message, task)
        verdict = self.judge(problem, module, refusal, "python", static=True)
        hidden = list(zip(problem.tests, verdict.tests, strict=True))
        hidden = [(t, r) for t, r in hidden if t["hidden"]]
        f2p = [r.passed for t, r in hidden if t.get("f2p")]
        p2p = [r.passed for t, r in hidden if not t.get("f2p")]
        f2p_rate = sum(f2p) / len(f2p) if f2p else float(verdict.all_passed)
        p2p_rate = sum(p2p) / len(p2p) if p2p else 1.0
        effectiveness = f2p_rate * p2p_rate
        facts = verdict.static
        changes: list[str] = []
        forbidden: list[str] = []
        if facts is None:
            compliance = safety = 0.0
        else:
            original = dict(meta.get("signatures") or {})
            exempt = [meta["target"]]
            changes = signature_changes(original, facts.get("functions", {}), exempt=exempt)
            compliance = compliance_score(original, facts.get("functions", {}), exempt=exempt)
            forbidden = forbidden_uses(
                facts,
                imports=meta.get("forbidden_imports", ()),
                calls=meta.get("forbidden_calls", ()),
            )
            raising = [r.passed for t, r in hidden if "raises" in t]
            safety = 0.0 if forbidden else (sum(raising) / len(raising) if raising else 1.0)
        w = self.weights
        components = {
            "effectiveness": w["effectiveness"] * effectiveness,
            "compliance": w["compliance"] * effectiveness * compliance,
            "safety": w["safety"] * effectiveness * safety,
        }
        score = sum(components.values())
        success = (
            effectiveness >= 1.0 and compliance >= 1.0 and safety >= 1.0 and verdict.all_passed
        )
        notes = [describe(verdict, problem)]
        if changes:
            notes.append("Interface changed: " + "; ".join(changes) + ".")
        if forbidden:
            notes.append("Forbidden: " + ", ".join(forbidden) + ".")
        feedback = "\n".join(notes)
        info = {
            "exec": verdict.to_info(problem),
            "repair": {
                "answer_format": form,
                "effectiveness": effectiveness,
                "compliance": compliance,
                "safety": safety,
                "fail_to_pass": [sum(f2p), len(f2p)],
                "pass_to_pass": [sum(p2p), len(p2p)],
                "signature_changes": changes,
                "forbidden": forbidden,
            },
        }
        return verdict, RewardResult(score, components, feedback, success), info

    def oracle(self, task: Task) -> str:
        return f"```python\n{self.problem(task).reference['python'].rstrip()}\n```"


def _repair_meta(task: Task) -> dict[str, Any]:
    meta = task.answer.get("repair") if isinstance(task.answer, Mapping) else None
    if (
        not isinstance(meta, Mapping)
        or not isinstance(meta.get("original"), str)
        or not isinstance(meta.get("target"), str)
    ):
        raise error.InvalidTask(
            f"task {task.id!r}: a repair task's answer needs a 'repair' section with 'original' "
            "(the shipped module) and 'target' (the function to fix)"
        )
    Problem.from_answer(task.answer, where=f"task {task.id!r}")
    out = dict(meta)
    if not isinstance(out.get("signatures"), Mapping):
        try:  # a dataset record without them: read them from the shipped (trusted) module
            out["signatures"] = static_facts(out["original"])["functions"]
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            raise error.InvalidTask(
                f"task {task.id!r}: the shipped module does not parse: {e}"
            ) from None
    return out
