"""FunctionCallingEnv: single-shot function calling graded by a BFCL-style AST match."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from llmgym import error
from llmgym.core import Action, LLMEnv, Message
from llmgym.envs.tools import scenario
from llmgym.envs.tools.env import _FORMAT_HELP
from llmgym.rewards import RewardResult
from llmgym.rewards.tools import (
    FORMATS,
    ToolCall,
    ast_match_result,
    format_tool_calls,
    parse_tool_calls,
)
from llmgym.tasks import DatasetSource, Family, ProceduralSource, Task, TaskSource, draft

# --- procedural requests: (tool, sampler(rng) -> (request text, possible answer params)) --------------

Sample = tuple[str, dict[str, list[Any]]]
_CITIES = {
    "BOS": "Boston",
    "SEA": "Seattle",
    "AUS": "Austin",
    "DEN": "Denver",
    "SFO": "San Francisco",
}
_DEPTS = {"ENG": "Engineering", "SAL": "Sales", "FIN": "Finance", "OPS": "Operations"}


def _employees(r: random.Random) -> Sample:
    name = f"{r.choice(scenario.FIRST)} {r.choice(scenario.LAST)}"
    if r.random() < 0.5:
        dept = r.choice(sorted(_DEPTS))
        return f"find employees named {name} in {_DEPTS[dept]}", {
            "name": [name],
            "department": [_DEPTS[dept], dept],
        }
    return f"search the directory for {name}", {"name": [name], "department": [""]}


def _flights(r: random.Random) -> Sample:
    a, b = r.sample(sorted(_CITIES), 2)
    day = f"2024-04-{r.randrange(1, 29):02d}"
    return (
        f"list flights from {_CITIES[a]} ({a}) to {_CITIES[b]} ({b}) on {day}",
        {"origin": [a], "destination": [b], "day": [day]},
    )


def _convert(r: random.Random) -> Sample:
    src, dst = r.choice(
        (("ft", "m"), ("lb", "kg"), ("F", "C"), ("mi", "km"), ("gal", "l"), ("oz", "g"))
    )
    value = round(r.uniform(1, 500), 1)
    return f"convert {value} {src} to {dst}", {
        "value": [value],
        "from_unit": [src],
        "to_unit": [dst],
    }


def _transfer(r: random.Random) -> Sample:
    a, b = r.sample(range(1000, 1999), 2)
    amount = r.randrange(5, 900) + r.choice((0, 0.5, 0.25))
    if r.random() < 0.5:
        memo = r.choice(("rent", "groceries", "gift", "invoice 77"))
        return (
            f"send ${amount} from ACC-{a} to ACC-{b} with the memo '{memo}'",
            {
                "from_account": [f"ACC-{a}"],
                "to_account": [f"ACC-{b}"],
                "amount": [amount],
                "memo": [memo],
            },
        )
    return (
        f"transfer ${amount} from account ACC-{a} to ACC-{b}",
        {
            "from_account": [f"ACC-{a}"],
            "to_account": [f"ACC-{b}"],
            "amount": [amount],
            "memo": [""],
        },
    )


def _priority(r: random.Random) -> Sample:
    tid, level = r.randrange(1000, 1100), r.choice(("low", "normal", "high", "urgent"))
    return f"set the priority of ticket {tid} to {level}", {"ticket_id": [tid], "priority": [level]}


def _move(r: random.Random) -> Sample:
    sku = f"P-{r.randrange(200, 216)}"
    a, b = (f"{z}-{r.randrange(1, 7):02d}" for z in r.sample("ABCD", 2))
    q = r.randrange(1, 60)
    return f"move {q} units of {sku} from bin {a} to bin {b}", {
        "sku": [sku],
        "from_bin": [a],
        "to_bin": [b],
        "quantity": [q],
    }


def _tickets(r: random.Random) -> Sample:
    cat = r.choice(("billing", "shipping", "account", "technical"))
    if r.random() < 0.5:
        return (
            f"show the open {cat} tickets that nobody is assigned to",
            {
                "status": ["open", ""],
                "category": [cat],
                "customer": [""],
                "unassigned_only": [True],
            },
        )
    return (
        f"list the closed {cat} tickets",
        {"status": ["closed"], "category": [cat], "customer": [""], "unassigned_only": [False, ""]},
    )


def _hotel(r: random.Random) -> Sample:
    hid, nights = f"H{r.randrange(1, 29):03d}", r.randrange(1, 6)
    who = f"{r.choice(scenario.FIRST)} {r.choice(scenario.LAST)}"
    day = f"2024-04-{r.randrange(1, 25):02d}"
    return (
        f"book hotel {hid} for {who}, checking in on {day} for {nights} nights",
        {"hotel_id": [hid], "traveler": [who], "check_in": [day], "nights": [nights]},
    )


def _deal(r: random.Random) -> Sample:
    did, stage = (
        r.randrange(1, 30),
        r.choice(("qualified", "proposal", "negotiation", "won", "lost")),
    )
    return f"move deal {did} to the {stage} stage", {"deal_id": [did], "stage": [stage]}


def _mkdir(r: random.Random) -> Sample:
    path = f"/home/{r.choice(scenario.FIRST).lower()}/{r.choice(('archive', 'reports', 'tmp2', 'photos'))}"
    return f"create the directory {path}", {"path": [path]}


REQUESTS: dict[str, Callable[[random.Random], Sample]] = {
    "search_employees": _employees,
    "search_flights": _flights,
    "convert": _convert,
    "transfer": _transfer,
    "set_priority": _priority,
    "move_stock": _move,
    "list_tickets": _tickets,
    "book_hotel": _hotel,
    "update_deal_stage": _deal,
    "make_dir": _mkdir,
}


def _function(name: str) -> dict[str, Any]:
    return dict(scenario.tool_spec(name)["function"])


def _build(kind: str) -> Callable[[random.Random, float], Task]:
    def generate(rng: random.Random, difficulty: float) -> Task:
        names = sorted(REQUESTS)
        parallel = kind in ("parallel", "parallel_multiple")
        n_calls = 2 + round(difficulty * 2) if parallel else 1
        if kind == "parallel":
            picks = [rng.choice(names)] * n_calls
        elif kind == "parallel_multiple":
            picks = rng.sample(names, n_calls)
        else:
            picks = [rng.choice(names)]
        offered = list(dict.fromkeys(picks))
        if kind in ("multiple", "parallel_multiple"):
            others = [n for n in names if n not in offered]
            offered += rng.sample(others, min(len(others), 1 + round(difficulty * 5)))
            rng.shuffle(offered)
        requests, gold = [], []
        for name in picks:
            text, params = REQUESTS[name](rng)
            requests.append(text)
            gold.append({name: params})
        prompt = "Please " + "; also ".join(requests) + "."
        return draft(
            prompt,
            {"ground_truth": gold},
            metadata={"functions": [_function(n) for n in offered], "category": kind},
        )

    return generate


FAMILIES = [
    Family("fc_simple", _build("simple"), description="One function offered, one call."),
    Family("fc_multiple", _build("multiple"), description="Several functions offered, one call."),
    Family(
        "fc_parallel", _build("parallel"), description="One function, several calls in one message."
    ),
    Family(
        "fc_parallel_multiple",
        _build("parallel_multiple"),
        description="Several functions, several calls.",
    ),
]


# --- the env ---------------------------------------------------------------------------------------------


def _first_value(options: Any) -> tuple[bool, Any]:
    """(present, value): the first acceptable value; absent when only "" (optional) is allowed."""
    values = options if isinstance(options, list) else [options]
    for v in values:
        if v == "":
            continue
        if isinstance(v, Mapping):
            return True, {
                k: val for k, (ok, val) in ((k, _first_value(o)) for k, o in v.items()) if ok
            }
        return True, v
    return False, None


def gold_calls(ground_truth: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """One concrete call per possible-answer entry (first acceptable value of each parameter)."""
    calls = []
    for entry in ground_truth:
        ((name, params),) = entry.items()
        args = {k: v for k, (ok, v) in ((k, _first_value(o)) for k, o in params.items()) if ok}
        calls.append(ToolCall(name, args))
    return calls


class FunctionCallingEnv(LLMEnv):
    """Single-shot function calling (BFCL-style): one message of calls, graded by AST match.

    ## Description
    The prompt lists function specs and asks for one or more calls; the reply is parsed in
    ``call_format`` and matched against the possible answers with
    :func:`llmgym.rewards.tools.ast_match` (exact names, required parameters, no unknown
    ones, types, normalised strings, parallel calls in any order). Tasks come from BFCL
    files (``tasks=<questions.json>``, ``dataset_format="bfcl"``) or from four procedural
    families (``fc_simple``, ``fc_multiple``, ``fc_parallel``, ``fc_parallel_multiple``)
    whose functions are the ToolCalling tools; ``difficulty`` adds calls and distractors.

    ## Action Space
    ``Text()`` (or an OpenAI dict with ``tool_calls`` when ``call_format="openai"``).

    ## Observation Space
    ``Text()``: the request and the function specs; then the grader's feedback.

    ## Rewards
    1 if the calls match, else 0 (``correctness``). ``reward_range = (0, 1)``.

    ## Starting State
    A task drawn with the env's ``np_random`` (or chosen by ``options``).

    ## Episode End
    Terminates after one step.

    ## Arguments
    ``call_format`` (``"hermes"``, ``"json"``, ``"python"`` default, ``"openai"``), ``tasks``
    (None: procedural; a path, TaskSource or list), ``dataset_format`` (``"bfcl"`` or None
    for llmgym's JSONL), ``answers`` (BFCL possible-answer file; default
    ``possible_answer/<same name>`` beside the questions), plus the core's arguments.

    ## Version History
    * v0: initial version.

    ## Example
    >>> import gymnasium as gym, llmgym
    >>> env = gym.make("llm/FunctionCalling-v0", family="fc_simple")
    >>> obs, info = env.reset(seed=0)
    >>> env.step(env.unwrapped.oracle_action())[1]
    1.0
    """

    domain: ClassVar[str] = "tools"
    reward_range = (0.0, 1.0)

    def __init__(
        self,
        *,
        call_format: str = "python",
        tasks: TaskSource | str | Path | Sequence[Any] | None = None,
        dataset_format: str | None = None,
        answers: str | Path | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ):
        if call_format not in FORMATS or call_format == "auto":
            raise error.Error(
                f"Expects call_format in {list(FORMATS[:4])}, actual: {call_format!r}"
            )
        if dataset_format not in (None, "bfcl"):
            raise error.Error(f"Expects dataset_format None or 'bfcl', actual: {dataset_format!r}")
        self.call_format = call_format
        kwargs.setdefault(
            "system_prompt",
            "You call functions to fulfil the user's request. "
            + _FORMAT_HELP[call_format]
            + " Reply with the calls only, using exactly the functions and parameter names given.",
        )
        super().__init__(_source(tasks, dataset_format, answers), **kwargs)

    def _openai_name(self, name: str) -> str:
        return name.replace(".", "_") if self.call_format == "openai" else name

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {**f, "name": self._openai_name(f["name"])}}
            for f in task.metadata["functions"]
        ]

    def render_prompt(self, task: Task) -> str:
        specs = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in self.tools(task))
        return f"{task.prompt}\n\nFunctions:\n{specs}"

    def secrets(self, task: Task) -> list[str]:
        return []

    def grade(self, task: Task, message: Message) -> RewardResult:
        calls = parse_tool_calls(message, self.call_format)
        if self.call_format == "openai":
            back = {self._openai_name(f["name"]): f["name"] for f in task.metadata["functions"]}
            calls = [ToolCall(back.get(c.name, c.name), c.arguments, c.id, c.error) for c in calls]
        if not calls:
            return RewardResult.of(False, "no function call found")
        result = ast_match_result(calls, task.answer["ground_truth"], task.metadata["functions"])
        return RewardResult.of(
            result.matched, "the calls match" if result.matched else "; ".join(result.reasons[:5])
        )

    def oracle(self, task: Task) -> Action:
        calls = [
            ToolCall(self._openai_name(c.name), c.arguments, f"call_{i}")
            for i, c in enumerate(gold_calls(task.answer["ground_truth"]))
        ]
        return format_tool_calls(calls, self.call_format)  # type: ignore[no-any-return]


def _source(tasks: Any, dataset_format: str | None, answers: Any) -> TaskSource:
    if tasks is None:
        if dataset_format is not None:
            raise error.Error("dataset_format needs tasks (a path or a list of records)")
        return ProceduralSource(FAMILIES, domain="tools")
    if isinstance(tasks, TaskSource):
        return tasks
    if dataset_format == "bfcl":
        from llmgym.envs.tools.bfcl import load_bfcl

        return DatasetSource(load_bfcl(tasks, answers), domain="tools")
    from llmgym.envs.declarative import load_tasks

    return load_tasks(tasks, domain="tools")
