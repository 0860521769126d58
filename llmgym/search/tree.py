"""The search tree shared by best-of-N, beam search and MCTS: nodes, budgets, expansion.

A node is an env snapshot (``get_state()``) plus the conversation that led to it. Expanding a node
asks the policy for K continuations in one ``generate`` call (one request per sample, so a policy
that batches samples them together), steps the node's state with each, and adds one child per
distinct continuation: two samples whose conversations are identical (the same text after the same
history) are one node (a transposition), since the env is deterministic from a snapshot. The steps
of one call's new children run together on clones of the env (``stepper.py``, ``env_workers``);
the tree is the same as when they run one by one.

What it is not: a strategy (``methods.py`` decides which node to expand), nor a value model
(``values.py``). The env is stepped through ``env.unwrapped`` (wrappers are bypassed: their own
state could not be restored) and is left at the root's state when a search ends.

Budgets: a *policy call* is one sampled assistant message (one answered request: a ``generate`` of
K samples counts K, as K independent episodes' turns would). Tokens are the policy's
``completion_tokens``, or for a policy that does not count them (a callable, the oracle) one per 4
characters of the message. Calls are never exceeded: a call is issued only when the budget has room
for it. Tokens in the tree are never exceeded either: when the policy declares its longest answer
(``settings["max_new_tokens"]`` or ``["max_tokens"]``) a batch is cut to what surely fits; when it
does not, an answer that would pass the budget is discarded (``stats["discarded_tokens"]``) and the
search ends.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmgym import error
from llmgym.core import to_assistant_message
from llmgym.policies import Policy, Request, Response
from llmgym.search.stepper import ENV_WORKERS, Stepped, Stepper

MAX_JSON_TEXT = 2000
"""Characters of an action or feedback kept per node in the tree's JSON (the rest is counted)."""


class SearchError(error.Error):
    """A search that could not go on: the env cannot be snapshot, or the policy failed.

    ``partial`` holds the :class:`SearchResult` of what was explored before the failure (None when
    the search could not start).
    """

    def __init__(self, message: str, partial: SearchResult | None = None):
        super().__init__(message)
        self.partial = partial


@dataclass(frozen=True)
class Budget:
    """What a search may spend: policy calls and generated tokens (None: no limit)."""

    calls: int | None = None
    """Sampled assistant messages, all nodes and rollouts together."""
    tokens: int | None = None
    """Generated tokens of the messages kept in the tree."""

    def __post_init__(self) -> None:
        for name in ("calls", "tokens"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise error.Error(
                    f"Expects Budget.{name} to be an int >= 1 or None, actual: {value!r}"
                )
        if self.calls is None and self.tokens is None:
            raise error.Error(
                "A search needs a budget: Budget(calls=..., tokens=...), at least one"
            )


@dataclass
class Node:
    """One state of the episode: the snapshot, the conversation, and what the search knows of it."""

    id: int
    parent: int | None
    depth: int
    state: dict[str, Any]
    messages: list[dict[str, Any]]
    action: str | dict[str, Any] | None = None
    """The assistant message that led here from the parent (None at the root)."""
    reward: float = 0.0
    """The env's reward for that message (a process reward, or the outcome at the end)."""
    ret: float = 0.0
    """Discounted sum of rewards from the root to here."""
    terminal: bool = False
    success: bool = False
    feedback: str = ""
    logprob: float | None = None
    """The message's sequence log-probability, when the policy gives token log-probs."""
    tokens: int = 0
    """Generated tokens of every sample of this message (duplicates included)."""
    samples: int = 1
    """How many samples produced this same message (duplicates are one node)."""
    visits: int = 0
    value_sum: float = 0.0
    best_value: float = -math.inf
    """The highest value backed up through the node (its best continuation found)."""
    estimate: float | None = None
    """What a value model or rollout said the node will still earn (None: not evaluated)."""
    children: list[int] = field(default_factory=list)
    found_at_call: int = 0
    """The policy call count when this node was created."""
    token_ids: list[int] | None = None
    """The sampled message's token ids and their log-probs, when the policy gives them (what
    tree-based training trains on; not in the JSON)."""
    token_logprobs: list[float] | None = None

    @property
    def q(self) -> float:
        """Mean backed-up value (reward of the step into this node plus what followed)."""
        return self.value_sum / self.visits if self.visits else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent": self.parent,
            "depth": self.depth,
            "action": _clip(_action_text(self.action)) if self.action is not None else None,
            "reward": self.reward,
            "return": self.ret,
            "terminal": self.terminal,
            "success": self.success,
            "feedback": _clip(self.feedback),
            "logprob": self.logprob,
            "tokens": self.tokens,
            "samples": self.samples,
            "visits": self.visits,
            "q": self.q,
            "best_value": self.best_value if self.visits else None,
            "estimate": self.estimate,
            "children": list(self.children),
            "found_at_call": self.found_at_call,
        }


@dataclass
class SearchResult:
    """The best trajectory a search found, the whole tree, and what the search spent."""

    method: str
    best: Node
    nodes: list[Node]
    stats: dict[str, Any]

    @property
    def success(self) -> bool:
        return self.best.terminal and self.best.success

    @property
    def reward(self) -> float:
        """Discounted return of the best trajectory."""
        return self.best.ret

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The best trajectory's whole conversation."""
        return self.best.messages

    @property
    def actions(self) -> list[str | dict[str, Any]]:
        """The assistant messages of the best trajectory, in order."""
        return [n.action for n in self.path(self.best)[1:] if n.action is not None]

    def path(self, node: Node) -> list[Node]:
        out = [node]
        while out[-1].parent is not None:
            out.append(self.nodes[out[-1].parent])  # type: ignore[index]
        return out[::-1]

    def tree(self) -> dict[str, Any]:
        """The whole tree as JSON-serializable data."""
        return {
            "method": self.method,
            "root": 0,
            "best": self.best.id,
            "best_path": [n.id for n in self.path(self.best)],
            "nodes": [n.to_json() for n in self.nodes],
            "stats": dict(self.stats),
        }


def _action_text(action: Any) -> str:
    return action if isinstance(action, str) else json.dumps(action, sort_keys=True, default=repr)


def _clip(text: str) -> str:
    if len(text) <= MAX_JSON_TEXT:
        return text
    return text[:MAX_JSON_TEXT] + f"…[{len(text) - MAX_JSON_TEXT} more characters]"


def _tokens_of(response: Response) -> int:
    if response.completion_tokens > 0:
        return int(response.completion_tokens)
    return max(1, math.ceil(len(_action_text(response.action)) / 4))


def _sequence_logprob(response: Response) -> float | None:
    if not response.logprobs:
        return None
    total = float(sum(response.logprobs))
    return total if math.isfinite(total) else None


def snapshot_env(env: Any) -> Any:
    """The object a search steps and snapshots (``env.unwrapped``); SearchError if it cannot."""
    base = getattr(env, "unwrapped", env)
    for name in ("get_state", "set_state", "step"):
        if not callable(getattr(base, name, None)):
            raise SearchError(
                f"Search needs an env with get_state() and set_state() (an llmgym.LLMEnv); "
                f"{type(base).__name__} has no {name}()"
            )
    return base


def episode_fields(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields of an :meth:`LLMEnv.get_state` snapshot (``messages``, ``turn``, ``max_turns``,
    ``done``), looking inside an env that nests its member's snapshot under ``"state"`` (the
    mixture env does)."""
    while "messages" not in state and isinstance(state.get("state"), Mapping):
        state = state["state"]
    return state


def root_state(env: Any) -> dict[str, Any]:
    """The snapshot a search starts from; SearchError when the env cannot give one."""
    try:
        state: dict[str, Any] = snapshot_env(env).get_state()
    except error.Error as e:
        if isinstance(e, SearchError):
            raise
        raise SearchError(f"Cannot snapshot the env to search from it: {e}") from None
    return state


@dataclass
class _Op:
    """What one sampled response does to the tree (see :meth:`Tree._plan`)."""

    kind: str
    """"new" child, "seen" (a child that exists), "pending" (a new child earlier in the batch),
    "discard" (past the token budget) or "invalid" (not a message: the batch fails)."""
    parent: Node
    response: Response
    cost: int
    job: int = -1
    seen: int = -1
    key: str = ""


class EnvAt:
    """The env as one node sees it, handed to the policy in a request batched with other
    nodes' requests: reading any attribute first restores the node's state (the oracle policy
    calls ``request.env.unwrapped.oracle_action()``)."""

    def __init__(self, env: Any, state: dict[str, Any]):
        self._env = env
        self._state = state

    @property
    def unwrapped(self) -> EnvAt:
        return self

    def __getattr__(self, name: str) -> Any:
        self._env.set_state(self._state)
        return getattr(self._env, name)


class Tree:
    """Nodes, budget accounting and expansion for one search from the env's current state."""

    def __init__(
        self,
        env: Any,
        policy: Policy,
        *,
        budget: Budget,
        gamma: float = 1.0,
        policy_timeout_s: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        env_workers: int | None = None,
    ):
        if not 0.0 < gamma <= 1.0:
            raise error.Error(f"Expects 0 < gamma <= 1, actual: {gamma!r}")
        if policy_timeout_s is not None and not policy_timeout_s > 0:
            raise error.Error(f"Expects policy_timeout_s > 0, actual: {policy_timeout_s!r}")
        workers = ENV_WORKERS if env_workers is None else env_workers
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise error.Error(f"Expects env_workers to be an int >= 1, actual: {env_workers!r}")
        start = root_state(env)
        self.env = snapshot_env(env)
        self.stepper = Stepper(self.env, workers)
        self.policy = policy
        self.budget = budget
        self.gamma = gamma
        self.policy_timeout_s = policy_timeout_s
        self.tools = list(tools) if tools is not None else self._tools_of_env()
        fields = episode_fields(start)
        root = Node(
            id=0,
            parent=None,
            depth=0,
            state=start,
            messages=list(fields.get("messages", [])),
            terminal=bool(fields.get("done")),
        )
        self.nodes: list[Node] = [root]
        self.keys: dict[tuple[int, str], int] = {}
        self.calls = 0
        self.generate_calls = 0
        self.tokens = 0
        self.env_steps = 0
        self.duplicates = 0
        self.discarded_tokens = 0
        self.exhausted = False
        self.started = time.perf_counter()
        settings = getattr(policy, "settings", None) or {}
        cap = settings.get("max_new_tokens") or settings.get("max_tokens")
        self.answer_cap = int(cap) if isinstance(cap, int) and cap > 0 else None

    @property
    def root(self) -> Node:
        return self.nodes[0]

    def _tools_of_env(self) -> list[dict[str, Any]]:
        episode = getattr(self.env, "episode", None)
        tools_fn = getattr(self.env, "tools", None)
        if episode is None or not callable(tools_fn):
            return []
        return list(tools_fn(episode.task))

    # --- budget ----------------------------------------------------------------------------------

    def room(self, wanted: int) -> int:
        """How many of ``wanted`` samples the budget lets the next policy call ask for."""
        if self.exhausted:
            return 0
        n = wanted
        if self.budget.calls is not None:
            n = min(n, self.budget.calls - self.calls)
        if self.budget.tokens is not None:
            left = self.budget.tokens - self.tokens
            if left <= 0:
                return 0
            if self.answer_cap is not None:
                n = min(n, left // self.answer_cap)
            # without a declared cap an answer past the budget is discarded after the call
        return max(0, n)

    # --- expansion -------------------------------------------------------------------------------

    def expand(self, node: Node, k: int) -> list[Node]:
        """Sample up to ``k`` continuations of ``node`` in one policy call; one entry per kept
        sample, in order (a duplicate sample gives the node it duplicates again)."""
        return self.expand_many([(node, k)])[0]

    def expand_many(self, wanted: Sequence[tuple[Node, int]]) -> list[list[Node]]:
        """:meth:`expand` for several nodes in one policy call (the budget goes to them in
        order); one list per node."""
        counts, room = [], self.room(sum(k for node, k in wanted if not node.terminal))
        for node, k in wanted:
            n = 0 if node.terminal else min(k, room)
            counts.append(n)
            room -= n
        if not any(counts):
            self.exhausted = self.exhausted or any(not n.terminal for n, _ in wanted)
            return [[] for _ in wanted]
        requests = []
        for (node, _), n in zip(wanted, counts, strict=True):
            env = EnvAt(self.env, node.state) if len(wanted) > 1 else self._at(node)
            requests += [Request(messages=node.messages, tools=self.tools, env=env)] * n
        responses = iter(self._generate(requests))
        self.calls += len(requests)
        self.generate_calls += 1
        pairs = [
            (node, next(responses))
            for (node, _), n in zip(wanted, counts, strict=True)
            for _ in range(n)
        ]
        made = self._add_children(pairs)
        out, start = [], 0
        for n in counts:
            out.append([kid for kid in made[start : start + n] if kid is not None])
            start += n
        return out

    def _at(self, node: Node) -> Any:
        self.env.set_state(node.state)
        return self.env

    def _add_children(self, pairs: Sequence[tuple[Node, Response]]) -> list[Node | None]:
        """The child each (parent, response) makes, in order (None when the token budget cannot
        hold it). New children's env steps run together (:class:`Stepper`); the tree, budgets and
        errors come out as if each response were taken in turn: the nodes before a failure are
        kept, and the failure raised."""
        plan, jobs, failure = self._plan(pairs)
        outcomes = self.stepper.step_all(jobs)
        made: list[Node | None] = []
        by_job: dict[int, Node] = {}
        for op in plan:
            if op.kind == "discard":
                self.discarded_tokens += op.cost
                self.exhausted = True
                made.append(None)
                continue
            self.tokens += op.cost
            if op.kind == "invalid":
                break
            if op.kind == "new":
                outcome = outcomes[op.job]
                if isinstance(outcome, Exception):
                    raise outcome
                node = by_job[op.job] = self._child(op.parent, op.response, op.cost, outcome)
                self.keys[(op.parent.id, op.key)] = node.id
            else:  # the same message as a child already made: one node, one sample more
                node = self.nodes[op.seen] if op.kind == "seen" else by_job[op.job]
                self.duplicates += 1
                node.samples += 1
                node.tokens += op.cost
            made.append(node)
        if failure is not None:
            raise failure
        return made

    def _plan(
        self, pairs: Sequence[tuple[Node, Response]]
    ) -> tuple[list[_Op], list[tuple[dict[str, Any], Any]], SearchError | None]:
        """What each response will do (charged, discarded, a duplicate or a new child), the env
        steps the new children need, and the failure that stops the batch (None if none)."""
        plan: list[_Op] = []
        jobs: list[tuple[dict[str, Any], Any]] = []
        pending: dict[tuple[int, str], int] = {}
        tokens = self.tokens
        for parent, response in pairs:
            if response.error is not None:
                return (
                    plan,
                    jobs,
                    SearchError(f"The policy failed on node {parent.id}: {response.error}"),
                )
            cost = _tokens_of(response)
            if self.budget.tokens is not None and tokens + cost > self.budget.tokens:
                plan.append(_Op("discard", parent, response, cost))
                continue
            tokens += cost
            try:
                message = to_assistant_message(response.action)
            except error.InvalidAction as e:
                plan.append(_Op("invalid", parent, response, cost))
                return (
                    plan,
                    jobs,
                    SearchError(f"The policy returned an invalid message on node {parent.id}: {e}"),
                )
            key = hashlib.sha256(
                json.dumps(message, sort_keys=True, default=repr).encode()
            ).hexdigest()
            if (parent.id, key) in self.keys:
                plan.append(_Op("seen", parent, response, cost, seen=self.keys[(parent.id, key)]))
            elif (parent.id, key) in pending:
                plan.append(_Op("pending", parent, response, cost, job=pending[(parent.id, key)]))
            else:
                pending[(parent.id, key)] = len(jobs)
                plan.append(_Op("new", parent, response, cost, job=len(jobs), key=key))
                jobs.append((parent.state, response.action))
        return plan, jobs, None

    def _generate(self, requests: list[Request]) -> list[Response]:
        if self.policy_timeout_s is None:
            try:
                responses = self.policy.generate(requests)
            except Exception as e:
                raise SearchError(f"The policy raised {type(e).__name__}: {e}") from e
        else:
            responses = self._generate_with_timeout(requests, self.policy_timeout_s)
        if not isinstance(responses, list) or len(responses) != len(requests):
            raise SearchError(
                f"The policy returned {len(responses) if isinstance(responses, list) else type(responses).__name__}"
                f" responses for {len(requests)} requests"
            )
        return responses

    def _generate_with_timeout(self, requests: list[Request], timeout: float) -> list[Response]:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["out"] = self.policy.generate(requests)
            except Exception as e:  # reported in the caller's thread
                box["err"] = e

        worker = threading.Thread(target=call, name="llmgym-search-policy", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():  # the call cannot be interrupted; its answer will be ignored
            raise SearchError(f"The policy did not answer within policy_timeout_s={timeout:g} s")
        if "err" in box:
            e = box["err"]
            raise SearchError(f"The policy raised {type(e).__name__}: {e}") from e
        return box["out"]  # type: ignore[no-any-return]

    def _child(self, parent: Node, response: Response, cost: int, stepped: Stepped) -> Node:
        self.env_steps += 1
        info, state = stepped.info, stepped.state
        node = Node(
            id=len(self.nodes),
            parent=parent.id,
            depth=parent.depth + 1,
            state=state,
            messages=list(info.get("messages") or episode_fields(state).get("messages", [])),
            action=response.action,
            reward=stepped.reward,
            ret=parent.ret + self.gamma**parent.depth * stepped.reward,
            terminal=stepped.terminated or stepped.truncated,
            success=bool(info.get("is_success")),
            feedback=str(info.get("feedback") or ""),
            logprob=_sequence_logprob(response),
            tokens=cost,
            found_at_call=self.calls,
            token_ids=response.token_ids,
            token_logprobs=response.logprobs,
        )
        self.nodes.append(node)
        parent.children.append(node.id)
        return node

    def rollouts(self, starts: Sequence[Node]) -> list[list[Node]]:
        """Play every start on to the end of its episode (or of the budget), one sample per
        episode and turn, the episodes' turns batched in one policy call; for each start, the
        nodes passed through (the start excluded)."""
        chains: list[list[Node]] = [[] for _ in starts]
        ends = list(starts)
        while True:
            live = [i for i, node in enumerate(ends) if not node.terminal]
            if not live:
                return chains
            kids = self.expand_many([(ends[i], 1) for i in live])
            if not any(kids):
                return chains
            for i, got in zip(live, kids, strict=True):
                if got:
                    ends[i] = got[0]
                    chains[i].append(got[0])

    # --- results ---------------------------------------------------------------------------------

    def path(self, node: Node) -> list[Node]:
        out = [node]
        while out[-1].parent is not None:
            out.append(self.nodes[out[-1].parent])  # type: ignore[index]
        return out[::-1]

    def best(self) -> Node:
        """The terminal node of highest return (the earliest found on ties); without one, the
        deepest node of highest return."""
        ended = [n for n in self.nodes if n.terminal and n.id != 0]
        pool = ended or self.nodes
        return max(pool, key=lambda n: (n.ret, n.success, n.depth, -n.id))

    def result(self, method: str, **extra: Any) -> SearchResult:
        """The search's result; the env is put back at the root's state."""
        try:
            self.env.set_state(self.root.state)
        except Exception as e:  # a broken env (the failure being reported): say so, keep the tree
            extra["env_not_restored"] = f"{type(e).__name__}: {e}"
        best = self.best()
        successes = [n.found_at_call for n in self.nodes if n.terminal and n.success]
        stats = {
            "calls": self.calls,
            "generate_calls": self.generate_calls,
            "tokens": self.tokens,
            "budget": {"calls": self.budget.calls, "tokens": self.budget.tokens},
            "nodes": len(self.nodes),
            "env_steps": self.env_steps,
            "env_clones": self.stepper.clones,
            "duplicates": self.duplicates,
            "discarded_tokens": self.discarded_tokens,
            "terminal_nodes": sum(1 for n in self.nodes if n.terminal and n.id != 0),
            "max_depth": max(n.depth for n in self.nodes),
            "first_success_call": min(successes) if successes else None,
            "wall_s": time.perf_counter() - self.started,
            **extra,
        }
        return SearchResult(method=method, best=best, nodes=self.nodes, stats=stats)


def run_guarded(tree: Tree, method: str, body: Callable[[], dict[str, Any]]) -> SearchResult:
    """Run a strategy's ``body`` (returning extra stats); a failure raises SearchError with the
    partial tree attached."""
    try:
        extra = body()
    except SearchError as e:
        e.partial = tree.result(method, failed=str(e))
        raise
    except Exception as e:  # the env's own failure (a sandbox down, a bug): keep what was found
        message = f"The env failed during the search: {type(e).__name__}: {e}"
        raise SearchError(message, tree.result(method, failed=message)) from e
    finally:
        tree.stepper.close()
    return tree.result(method, **extra)
