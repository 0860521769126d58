"""LLMEnv: the Gymnasium environment every llmgym domain subclasses, and its episode bookkeeping."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np

from llmgym import error
from llmgym.registry import import_callable
from llmgym.spaces import DEFAULT_MAX_LENGTH, Text
from llmgym.tasks import Difficulty, Subtask, Task, TaskSource, _draw_difficulty
from llmgym.verifiers import RewardResult, get_verifier, safe_verify

Message = dict[str, Any]
Action = str | Mapping[str, Any]

SUBTASK_MODES = (None, "joint", "sequential")
_EXTRA_REWARDS = "llmgym.rewards.mixing:build_extra_rewards"
_OPTION_KEYS = frozenset({"task_id", "task", "difficulty", "family"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "reasoning_content"})
_JOINT_TAG = re.compile(
    r"<answer\s+id\s*=\s*[\"']?([^\"'>\s]+)[\"']?\s*>(.*?)</answer\s*>", re.DOTALL | re.IGNORECASE
)


def clean_text(text: str) -> str:
    """The text with lone surrogates (unencodable in UTF-8) replaced by U+FFFD.

    >>> clean_text("ok \\ud800 ok")
    'ok \\ufffd ok'
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def to_assistant_message(action: Any) -> Message:
    """An OpenAI-style assistant message from a ``str`` or dict action; InvalidAction otherwise."""
    if isinstance(action, str):
        return {"role": "assistant", "content": clean_text(action)}
    if not isinstance(action, Mapping):
        raise error.InvalidAction(
            "Expects the assistant message as a str or a dict {'content': str, 'tool_calls': [...]}, "
            f"actual type: {type(action).__name__}"
        )
    unknown = set(action) - _MESSAGE_KEYS
    if unknown:
        raise error.InvalidAction(
            f"Unknown key(s) {sorted(map(str, unknown))} in the action; expected {sorted(_MESSAGE_KEYS)}"
        )
    if action.get("role", "assistant") != "assistant":
        raise error.InvalidAction(f"Expects role 'assistant', actual: {action.get('role')!r}")
    content = action.get("content")
    if content is not None and not isinstance(content, str):
        raise error.InvalidAction(
            f"Expects 'content' to be a str or None, actual type: {type(content).__name__}"
        )
    message: Message = {"role": "assistant", "content": clean_text(content or "")}
    if action.get("reasoning_content") is not None:
        reasoning = action["reasoning_content"]
        if not isinstance(reasoning, str):
            raise error.InvalidAction("Expects 'reasoning_content' to be a str")
        message["reasoning_content"] = clean_text(reasoning)
    calls = action.get("tool_calls")
    if calls:
        message["tool_calls"] = [_tool_call(c, i) for i, c in enumerate(_as_list(calls))]
    return message


def _as_list(calls: Any) -> list[Any]:
    if isinstance(calls, (list, tuple)):
        return list(calls)
    raise error.InvalidAction(
        f"Expects 'tool_calls' to be a list, actual type: {type(calls).__name__}"
    )


def _tool_call(call: Any, index: int) -> dict[str, Any]:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        raise error.InvalidAction(
            f"tool_calls[{index}] must be {{'type': 'function', 'function': {{'name': str, 'arguments': str}}}}"
        )
    fn = call["function"]
    name, arguments = fn.get("name"), fn.get("arguments", "{}")
    if not isinstance(name, str):
        raise error.InvalidAction(f"tool_calls[{index}].function.name must be a str")
    if not isinstance(arguments, (str, Mapping)):
        raise error.InvalidAction(
            f"tool_calls[{index}].function.arguments must be a JSON string or a dict"
        )
    call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{index}"
    if isinstance(arguments, str):
        arguments = clean_text(arguments)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": clean_text(name), "arguments": copy.deepcopy(arguments)},
    }


@dataclass
class Turn:
    """What one assistant message did: the reward, whether the episode ended, what comes next.

    ``messages`` are appended after the assistant message when the episode goes on (tool
    results, say); by default the ``observation`` becomes the next user message.
    """

    reward: float
    terminated: bool = True
    observation: str = ""
    components: dict[str, float] = field(default_factory=dict)
    is_success: bool = False
    feedback: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] | None = None

    @classmethod
    def graded(cls, result: RewardResult, *, terminated: bool = True, **kwargs: Any) -> Turn:
        """A turn from a verifier's result; the feedback is also the observation."""
        kwargs.setdefault("observation", result.feedback)
        return cls(
            reward=result.score,
            terminated=terminated,
            components=dict(result.components),
            is_success=result.success,
            feedback=result.feedback,
            **kwargs,
        )


@dataclass
class Episode:
    """The mutable state of one episode; ``extra`` holds whatever a domain needs."""

    task: Task
    messages: list[Message]
    max_turns: int
    mode: str | None
    subtasks: list[Subtask] = field(default_factory=list)
    subtask_index: int = 0
    subtask_rewards: dict[str, float] = field(default_factory=dict)
    turn: int = 0
    done: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class LLMEnv(gym.Env[str, str]):
    """Base class of llmgym environments: text in, text out, rewards from a verifier.

    A subclass sets ``domain`` and ``reward_range`` and implements :meth:`grade` (and
    :meth:`oracle` when the gold answer is not itself a right response); a multi-turn
    domain overrides :meth:`respond`. See DESIGN.md for the contract.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012
    domain: ClassVar[str] = "generic"
    reward_range: tuple[float, float] = (0.0, 1.0)
    """The range of one step's reward without subtasks (each env documents its own)."""
    default_max_turns: ClassVar[int] = 1
    default_system_prompt: ClassVar[str | None] = None

    def __init__(
        self,
        source: TaskSource,
        *,
        max_turns: int | None = None,
        subtask_mode: str | None = None,
        system_prompt: str | None = None,
        difficulty: Difficulty = None,
        family: str | None = None,
        render_mode: str | None = None,
        max_observation_length: int = DEFAULT_MAX_LENGTH,
        reward_model: Any = None,
        judge: Any = None,
    ):
        if not isinstance(source, TaskSource):
            raise error.Error(f"Expects a TaskSource, actual type: {type(source).__name__}")
        if subtask_mode not in SUBTASK_MODES:
            raise error.Error(f"Expects subtask_mode in {SUBTASK_MODES}, actual: {subtask_mode!r}")
        max_turns = self.default_max_turns if max_turns is None else max_turns
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise error.Error(f"Expects max_turns to be an int >= 1, actual: {max_turns!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise error.Error(
                f"Expects render_mode in {self.metadata['render_modes']} or None, actual: {render_mode!r}"
            )
        _draw_difficulty(np.random.default_rng(0), difficulty)  # validates
        if family is not None and family not in source.families():
            raise error.UnknownFamily(
                f"No family {family!r} in {type(self).__name__}; available: {source.families()}"
            )
        self.source = source
        self.max_turns = max_turns
        self.subtask_mode = subtask_mode
        self.system_prompt = (
            system_prompt if system_prompt is not None else self.default_system_prompt
        )
        self.difficulty = difficulty
        self.family = family
        self.render_mode = render_mode
        self.observation_space = Text(max_observation_length)
        self.action_space = Text(None)
        self.extra_rewards: list[Any] = []
        """Extra terms scored at the end of an episode (``reward_model=``, ``judge=``): mixed
        with the verifiable reward by the rule of :mod:`llmgym.rewards.mixing`."""
        if reward_model is not None or judge is not None:
            build = import_callable(_EXTRA_REWARDS)  # the rewards layer, reached by name
            self.extra_rewards = build(reward_model=reward_model, judge=judge)
        lo, hi = self.reward_range
        hi += sum(term.max_bonus for term in self.extra_rewards)
        self.reward_range = (lo, hi)
        self.outcome_reward_range = (lo, hi)
        """The range of a plain (subtask-free) episode's reward, whatever the subtask mode."""
        if subtask_mode == "sequential":
            self.reward_range = (min(lo, 0.0), hi + 1.0)  # process credit of at most 1 per episode
        elif subtask_mode == "joint":
            self.reward_range = self.joint_reward_range()
        self._episode: Episode | None = None

    # --- hooks for subclasses ------------------------------------------------------------

    def render_prompt(self, task: Task) -> str:
        """The first user message for ``task``."""
        return task.prompt

    def secrets(self, task: Task) -> list[str]:
        """Strings that must never reach the model: the gold answer, hidden tests.

        By default a text answer of 3+ characters that the prompt does not itself contain.
        """
        answer = task.answer
        if isinstance(answer, str) and len(answer.strip()) >= 3 and answer not in task.prompt:
            return [answer]
        return []

    def tools(self, task: Task) -> list[dict[str, Any]]:
        """JSON-schema function specs offered to the model (``info["tools"]``)."""
        return []

    def on_reset(self, episode: Episode) -> None:
        """Set up per-episode resources (a database, a document index...)."""

    def grade(self, task: Task, message: Message) -> RewardResult:
        """Score one assistant message as the answer to ``task``."""
        raise NotImplementedError(f"{type(self).__name__} must implement grade()")

    def respond(self, episode: Episode, message: Message) -> Turn:
        """What the env does with an assistant message; single-turn grading by default."""
        return Turn.graded(self.grade(episode.task, message))

    def oracle(self, task: Task) -> Action:
        """A gold response to ``task`` (default: its answer as text)."""
        return str(task.answer)

    def grade_subtask(self, task: Task, subtask: Subtask, message: Message) -> RewardResult:
        """Score an answer to one subtask with the subtask's named verifier."""
        return safe_verify(get_verifier(subtask.verifier), message["content"], subtask.answer)

    def oracle_subtask(self, task: Task, subtask: Subtask) -> str:
        """A gold answer to one subtask."""
        return str(subtask.answer)

    def render_subtask(self, task: Task, subtask: Subtask, index: int, total: int) -> str:
        return f"Step {index + 1} of {total}: {subtask.prompt}"

    def grade_outcome(self, episode: Episode, message: Message) -> RewardResult:
        """The outcome reward at the end of a sequential episode (the final step's answer)."""
        return self.grade(episode.task, message)

    def task_reward_range(self, task: Task) -> tuple[float, float]:
        """The range of a plain (subtask-free) episode's reward on ``task``; a mixture of
        envs answers for the member that owns the task."""
        return self.outcome_reward_range

    def joint_reward_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def joint_instructions(self, task: Task) -> str:
        """How the joint-mode prompt asks for every part (default: one tagged answer each)."""
        parts = "\n".join(
            f'<answer id="{s.id}">...</answer>  {s.prompt}' for s in task.subtask_order()
        )
        return "Answer every part below, each inside its own tag:\n" + parts

    def grade_joint(self, ep: Episode, message: Message) -> Turn:
        """Grade a joint-mode answer: each subtask's tagged answer, weighted partial credit."""
        answers: dict[str, set[str]] = {}
        for sid, text in _JOINT_TAG.findall(message["content"]):
            answers.setdefault(sid, set()).add(text.strip())
        weights = self._weights(list(ep.task.subtasks))
        total = 0.0
        notes = []
        for sub in ep.task.subtask_order():
            given = answers.get(sub.id, set())
            if len(given) == 1:
                reply = {"role": "assistant", "content": next(iter(given))}
                score = min(max(self.grade_subtask(ep.task, sub, reply).score, 0.0), 1.0)
            else:
                score = 0.0
                notes.append(f"{sub.id}: {'missing' if not given else 'several different answers'}")
            ep.subtask_rewards[sub.id] = score
            total += weights[sub.id] * score
        solved = sum(1 for s in ep.subtask_rewards.values() if s >= 1.0)
        feedback = f"{solved} of {len(ep.task.subtasks)} parts correct"
        if notes:
            feedback += " (" + "; ".join(notes) + ")"
        return Turn(
            reward=total,
            terminated=True,
            observation=feedback,
            components={"process": total},
            is_success=solved == len(ep.task.subtasks),
            feedback=feedback,
        )

    def save_extra(self, extra: dict[str, Any]) -> Any:
        """A snapshot of ``Episode.extra`` for :meth:`get_state` (override for live resources)."""
        return copy.deepcopy(extra)

    def load_extra(self, snapshot: Any) -> dict[str, Any]:
        """Rebuild ``Episode.extra`` from a :meth:`save_extra` snapshot."""
        return copy.deepcopy(snapshot)

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self._select_task(options)
        mode = self.subtask_mode if task.subtasks else None
        messages: list[Message] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        ep = Episode(task=task, messages=messages, max_turns=self.max_turns, mode=mode)
        prompt = self.render_prompt(task)
        if mode == "sequential":
            ep.subtasks = task.subtask_order()
            ep.max_turns = len(ep.subtasks)
            prompt += "\n\n" + self.render_subtask(task, ep.subtasks[0], 0, len(ep.subtasks))
        elif mode == "joint":
            prompt += "\n\n" + self.joint_instructions(task)
        messages.append({"role": "user", "content": prompt})
        self._episode = ep
        self.on_reset(ep)
        info = {
            "task_id": task.id,
            "domain": task.domain,
            "family": task.family,
            "difficulty": task.difficulty,
            "messages": _copy_messages(ep.messages),
            "tools": self.tools(task),
            "subtask": self._subtask_info(ep),
            "max_turns": ep.max_turns,
        }
        return prompt, info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        ep = self._require_episode()
        message = to_assistant_message(action)
        ep.messages.append(message)
        ep.turn += 1
        if ep.mode == "sequential":
            turn = self._sequential_step(ep, message)
        elif ep.mode == "joint":
            turn = self.grade_joint(ep, message)
        else:
            turn = self.respond(ep, message)
        reward = float(turn.reward)
        if not math.isfinite(reward):
            raise error.Error(f"{type(self).__name__} produced a non-finite reward {reward!r}")
        terminated = bool(turn.terminated)
        truncated = not terminated and ep.turn >= ep.max_turns
        if self.extra_rewards and (terminated or truncated):
            self._add_extra_rewards(ep, message, turn)
            reward = float(turn.reward)
        observation = turn.observation
        if not terminated:
            if turn.messages is not None:
                ep.messages.extend(turn.messages)
            else:
                ep.messages.append({"role": "user", "content": observation})
        ep.done = terminated or truncated
        info: dict[str, Any] = {
            "task_id": ep.task.id,
            "turn": ep.turn,
            "messages": _copy_messages(ep.messages),
            "reward_components": dict(turn.components),
            "is_success": bool(turn.is_success),
            "feedback": turn.feedback,
            "subtask": self._subtask_info(ep),
        }
        if ep.mode is not None:
            info["subtask_rewards"] = dict(ep.subtask_rewards)
        info.update(turn.info)
        return observation, reward, terminated, truncated, info

    def render(self) -> str | None:  # type: ignore[override]
        if self.render_mode != "ansi":
            return None
        if self._episode is None:
            return ""
        lines = []
        for m in self._episode.messages:
            lines.append(f"[{m['role']}] {m.get('content') or ''}")
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                lines.append(f"  -> {fn['name']}({fn['arguments']})")
        return "\n".join(lines)

    # --- episode snapshots -------------------------------------------------------------------

    @property
    def episode(self) -> Episode | None:
        """The current episode, or None before the first reset."""
        return self._episode

    def get_state(self) -> dict[str, Any]:
        """A snapshot of the episode and the env's RNG that :meth:`set_state` restores."""
        ep = self._episode
        if ep is None:
            raise error.ResetNeeded("Cannot snapshot an env before reset(); call reset() first")
        return {
            "format": 1,
            "env": type(self).__name__,
            "task": ep.task.to_dict(),
            "messages": _copy_messages(ep.messages),
            "max_turns": ep.max_turns,
            "mode": ep.mode,
            "subtask_index": ep.subtask_index,
            "subtask_rewards": dict(ep.subtask_rewards),
            "turn": ep.turn,
            "done": ep.done,
            "extra": self.save_extra(ep.extra),
            "rng": copy.deepcopy(self.np_random.bit_generator.state),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`get_state` snapshot (taken from an env of the same class)."""
        if not isinstance(state, Mapping) or state.get("format") != 1:
            raise error.InvalidState("Expects a snapshot returned by get_state()")
        if state.get("env") != type(self).__name__:
            raise error.InvalidState(
                f"Snapshot of a {state.get('env')!r} env cannot be restored into {type(self).__name__}"
            )
        try:
            ep = episode_of(state)
            ep.extra = self.load_extra(state["extra"])
            self.np_random.bit_generator.state = copy.deepcopy(state["rng"])
        except (KeyError, TypeError, ValueError, error.InvalidTask) as e:
            raise error.InvalidState(f"Malformed snapshot: {e!r}") from None
        self._episode = ep

    # --- the gold action -----------------------------------------------------------------------

    def oracle_action(self) -> Action:
        """A gold action for the current state (what the ``oracle`` policy plays)."""
        ep = self._require_episode()
        if ep.mode == "sequential":
            return self.oracle_subtask(ep.task, ep.subtasks[ep.subtask_index])
        if ep.mode == "joint":
            return "\n".join(
                f'<answer id="{s.id}">{self.oracle_subtask(ep.task, s)}</answer>'
                for s in ep.task.subtask_order()
            )
        return self.oracle(ep.task)

    # --- internals -------------------------------------------------------------------------------

    def _require_episode(self) -> Episode:
        ep = self._episode
        if ep is None:
            raise error.ResetNeeded("Cannot call step() before reset(); call env.reset() first")
        if ep.done:
            raise error.ResetNeeded(
                "The episode has ended (terminated or truncated); call env.reset() to start another"
            )
        return ep

    def _select_task(self, options: Mapping[str, Any] | None) -> Task:
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise error.Error(f"Expects options as a dict, actual type: {type(options).__name__}")
        unknown = set(options) - _OPTION_KEYS
        if unknown:
            raise error.Error(
                f"Unknown reset option(s) {sorted(map(str, unknown))}; expected some of {sorted(_OPTION_KEYS)}"
            )
        if options.get("task") is not None:
            task = options["task"]
            return task if isinstance(task, Task) else Task.from_dict(task)
        if options.get("task_id") is not None:
            return self.source.get(options["task_id"])
        difficulty = options.get("difficulty", self.difficulty)
        family = options.get("family", self.family)
        return self.source.sample(self.np_random, difficulty=difficulty, family=family)

    def _add_extra_rewards(self, ep: Episode, message: Message, turn: Turn) -> None:
        """Add each extra term's bonus for the episode's last answer to ``turn`` (its reward,
        a component under the term's name, the term's details in ``info["extra_rewards"]``)."""
        prompt = next((m["content"] for m in ep.messages if m["role"] == "user"), "")
        answer = ep.task.answer
        reference = answer if isinstance(answer, str) else None
        details = {}
        for term in self.extra_rewards:
            bonus, details[term.name] = term(
                prompt, message["content"], success=turn.is_success, reference=reference
            )
            turn.reward = float(turn.reward) + bonus
            turn.components[term.name] = bonus
        turn.info["extra_rewards"] = details

    def _subtask_info(self, ep: Episode) -> dict[str, Any] | None:
        if ep.mode != "sequential" or ep.subtask_index >= len(ep.subtasks):
            return None
        sub = ep.subtasks[ep.subtask_index]
        return {"index": ep.subtask_index, "total": len(ep.subtasks), "id": sub.id}

    def _weights(self, subtasks: list[Subtask]) -> dict[str, float]:
        total = sum(s.weight for s in subtasks)
        if total <= 0:
            return {s.id: 1.0 / len(subtasks) for s in subtasks}
        return {s.id: s.weight / total for s in subtasks}

    def _sequential_step(self, ep: Episode, message: Message) -> Turn:
        sub = ep.subtasks[ep.subtask_index]
        result = self.grade_subtask(ep.task, sub, message)
        score = min(max(result.score, 0.0), 1.0)
        ep.subtask_rewards[sub.id] = score
        process = self._weights(ep.subtasks)[sub.id] * score
        ep.subtask_index += 1
        if ep.subtask_index < len(ep.subtasks):
            nxt = ep.subtasks[ep.subtask_index]
            prompt = self.render_subtask(ep.task, nxt, ep.subtask_index, len(ep.subtasks))
            feedback = result.feedback
            return Turn(
                reward=process,
                terminated=False,
                observation=f"{feedback}\n\n{prompt}" if feedback else prompt,
                components={"process": process},
                is_success=result.success,
                feedback=feedback,
            )
        outcome = self.grade_outcome(ep, message)
        return Turn(
            reward=process + outcome.score,
            terminated=True,
            observation=outcome.feedback,
            components={"process": process, **outcome.components},
            is_success=outcome.success,
            feedback=outcome.feedback,
        )


def episode_of(state: Mapping[str, Any]) -> Episode:
    """The episode a :meth:`LLMEnv.get_state` snapshot describes, without the domain's
    ``extra`` (which only the env's own ``load_extra`` can read). Raises KeyError, TypeError or
    ValueError on a malformed snapshot."""
    task = Task.from_dict(state["task"])
    return Episode(
        task=task,
        messages=_copy_messages(state["messages"]),
        max_turns=int(state["max_turns"]),
        mode=state["mode"],
        subtasks=task.subtask_order() if state["mode"] == "sequential" else [],
        subtask_index=int(state["subtask_index"]),
        subtask_rewards=dict(state["subtask_rewards"]),
        turn=int(state["turn"]),
        done=bool(state["done"]),
    )


def _copy_messages(messages: list[Message]) -> list[Message]:
    return [copy.deepcopy(m) if "tool_calls" in m else dict(m) for m in messages]
