"""Best-of-N, beam search and MCTS over any llmgym env and any policy.

Each search starts from the env's current state (reset it first), spends at most its
:class:`~llmgym.search.tree.Budget`, leaves the env at that starting state, and returns a
:class:`~llmgym.search.tree.SearchResult`: the best trajectory, the whole tree as JSON, statistics.

- :func:`best_of_n`: N samples of the first turn in one policy call, each played to the end.
- :func:`beam_search`: each round expands every node of the beam K ways and keeps the B children of
  highest value (discounted return so far, plus an estimate of what is still to come when a reward
  model or rollouts give one); finished episodes leave the beam.
- :func:`mcts`: PUCT selection (priors from the policy's sequence log-probabilities, uniform
  without them), progressive widening (a node gets more children as it is visited more), leaves
  valued by a rollout to the end (or a reward model), discounted backup. ``batch`` selections
  are made together (virtual loss) and their expansions sampled in one policy call.
  Deterministic: no randomness of its own (ties go to the older node), so a seeded policy gives
  the same tree.

Values come from the env's rewards: process rewards for intermediate steps, the outcome at the
end. With a verifier's reward this is search against the verifier (as pass@k is); a reward model
(``reward_model=``) only estimates unfinished nodes. The env steps of one policy call's new
children run together on clones of the env (``env_workers``, :mod:`llmgym.search.stepper`).
What this is not: a distributed search (one process; the policy and the env are where they are).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llmgym import error
from llmgym.policies import Policy, load_policy
from llmgym.search.tree import (
    Budget,
    Node,
    SearchResult,
    Tree,
    episode_fields,
    root_state,
    run_guarded,
)
from llmgym.search.values import value_function

MCTS_BATCH = 8
"""MCTS simulations selected together, their expansions sampled in one policy call."""

IDLE_SIMULATIONS = 64
"""MCTS stops after this many simulations in a row (plus one per node) that sampled nothing:
the tree is covered (each node finished or its children hold nearly all of the policy's mass)."""

BudgetLike = Budget | int | None
"""A Budget, a number of policy calls, or None (the method's default)."""


def _remaining_turns(env: Any) -> int:
    state = episode_fields(root_state(env))
    return max(1, int(state.get("max_turns", 1)) - int(state.get("turn", 0)))


def _budget(budget: BudgetLike, default_calls: int) -> Budget:
    if budget is None:
        return Budget(calls=default_calls)
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, int) and not isinstance(budget, bool):
        return Budget(calls=budget)
    raise error.Error(
        f"Expects budget as a Budget, an int (policy calls) or None, actual: {budget!r}"
    )


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise error.Error(f"Expects {name} to be an int >= 1, actual: {value!r}")
    return value


def _reseed(policy: Policy, seed: int | None) -> None:
    """Make a seeded search repeatable: a policy's ``reseed(seed)``, or its torch generator."""
    if seed is None:
        return
    if callable(getattr(policy, "reseed", None)):
        policy.reseed(seed)  # type: ignore[attr-defined]
    elif callable(getattr(getattr(policy, "generator", None), "manual_seed", None)):
        policy.generator.manual_seed(seed)  # type: ignore[attr-defined]


def _options(
    gamma: float,
    seed: int | None,
    policy_timeout_s: float | None,
    tools: Sequence[dict[str, Any]] | None,
    env_workers: int | None,
) -> dict[str, Any]:
    return {
        "gamma": gamma,
        "seed": seed,
        "policy_timeout_s": policy_timeout_s,
        "tools": tools,
        "env_workers": env_workers,
    }


def _setup(env: Any, policy: Any, budget: Budget, options: dict[str, Any]) -> Tree:
    loaded = load_policy(policy)
    _reseed(loaded, options.pop("seed", None))
    return Tree(env, loaded, budget=budget, **options)


def backup(tree: Tree, path: Sequence[Node], tail: float = 0.0) -> None:
    """Add one visit along ``path`` (root first): each node's value is its own reward plus the
    discounted value of what followed it, ``tail`` being the estimate after the last node."""
    value = tail
    for node in reversed(path):
        value = node.reward + tree.gamma * value
        node.visits += 1
        node.value_sum += value
        node.best_value = max(node.best_value, value)


def _estimator(
    tree: Tree, rollouts: bool, reward_model: Any
) -> Callable[[Sequence[Node]], list[list[Node]]]:
    """How fresh nodes are valued: sets each ``node.estimate`` and returns, per node, the nodes
    its rollout added (empty without rollouts)."""
    score = value_function(reward_model) if reward_model is not None else None

    def estimate_all(nodes: Sequence[Node]) -> list[list[Node]]:
        todo = [n for n in nodes if not n.terminal and score is None and rollouts]
        chains = dict(zip((n.id for n in todo), tree.rollouts(todo), strict=True))
        for node in nodes:
            if node.terminal or not (score is not None or rollouts):
                node.estimate = 0.0
            elif score is not None:
                node.estimate = score(node.messages)
            else:
                chain = chains[node.id]
                end = chain[-1] if chain else node
                node.estimate = (end.ret - node.ret) / tree.gamma**node.depth
        return [chains.get(node.id, []) for node in nodes]

    return estimate_all


# --- best-of-N ------------------------------------------------------------------------------------


def best_of_n(
    env: Any,
    policy: Any,
    n: int = 8,
    *,
    budget: BudgetLike = None,
    gamma: float = 1.0,
    seed: int | None = None,
    policy_timeout_s: float | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    env_workers: int | None = None,
) -> SearchResult:
    """N independent episodes from the current state (their first turns sampled in one call);
    the best by return. Default budget: N times the turns left."""
    n = _positive("n", n)
    tree = _setup(
        env,
        policy,
        _budget(budget, n * _remaining_turns(env)),
        _options(gamma, seed, policy_timeout_s, tools, env_workers),
    )

    def body() -> dict[str, Any]:
        firsts = tree.expand(tree.root, n)  # a duplicate first turn is played on again from it
        for first, chain in zip(firsts, tree.rollouts(firsts), strict=True):
            backup(tree, tree.path(chain[-1] if chain else first))
        return {"n": n, "episodes": len(firsts)}

    return run_guarded(tree, "best_of_n", body)


# --- beam search ----------------------------------------------------------------------------------


def beam_search(
    env: Any,
    policy: Any,
    width: int = 4,
    expand: int = 4,
    *,
    budget: BudgetLike = None,
    rollouts: bool = False,
    reward_model: Any = None,
    gamma: float = 1.0,
    seed: int | None = None,
    policy_timeout_s: float | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    env_workers: int | None = None,
) -> SearchResult:
    """Keep the ``width`` best unfinished nodes, expanding each ``expand`` ways per round.

    A node's value is its discounted return so far plus its estimate (a reward model's score,
    or a rollout's return with ``rollouts=True``; 0 otherwise, so process rewards rank). Each
    round is in ``stats["rounds"]``: the candidates with their values and the ids kept. Default
    budget: width x expand x the turns left.
    """
    width, expand = _positive("width", width), _positive("expand", expand)
    tree = _setup(
        env,
        policy,
        _budget(budget, width * expand * _remaining_turns(env)),
        _options(gamma, seed, policy_timeout_s, tools, env_workers),
    )
    estimate = _estimator(tree, rollouts, reward_model)
    rounds: list[dict[str, Any]] = []

    def value(node: Node) -> float:
        return node.ret + tree.gamma**node.depth * (node.estimate or 0.0)

    def body() -> dict[str, Any]:
        beam = [tree.root]
        while beam and tree.room(1):
            candidates: dict[int, Node] = {}
            for kids in tree.expand_many([(node, expand) for node in beam]):
                candidates.update((kid.id, kid) for kid in kids)
            fresh = list(candidates.values())
            for kid, chain in zip(fresh, estimate(fresh), strict=True):
                backup(tree, tree.path(chain[-1] if chain else kid))
            live = sorted(
                (c for c in candidates.values() if not c.terminal), key=lambda c: (-value(c), c.id)
            )
            beam = live[:width]
            rounds.append(
                {
                    "candidates": [[c.id, value(c), c.terminal] for c in candidates.values()],
                    "kept": [c.id for c in beam],
                }
            )
        return {"width": width, "expand": expand, "rounds": rounds}

    return run_guarded(tree, "beam", body)


# --- MCTS -----------------------------------------------------------------------------------------


def _priors(children: list[Node]) -> list[float]:
    """Softmax of the children's sequence log-probs when all have one; else sample counts."""
    if all(c.logprob is not None for c in children):
        top = max(c.logprob for c in children)  # type: ignore[type-var]
        weights = [math.exp(c.logprob - top) for c in children]  # type: ignore[operator]
    else:
        weights = [float(c.samples) for c in children]
    total = sum(weights)
    return [w / total for w in weights]


def unseen_mass(tree: Tree, node: Node) -> float:
    """How much of the policy's probability the node's children do not cover yet: 1 minus
    their summed sequence probabilities when the policy gives log-probs, else the Good-Turing
    estimate (children sampled once / samples drawn)."""
    children = [tree.nodes[i] for i in node.children]
    if not children:
        return 1.0
    logprobs = [c.logprob for c in children if c.logprob is not None]
    if len(logprobs) == len(children):
        return max(0.0, 1.0 - sum(math.exp(lp) for lp in logprobs))
    drawn = sum(c.samples for c in children)
    return sum(1 for c in children if c.samples == 1) / drawn


def puct_child(
    tree: Tree,
    node: Node,
    c_puct: float,
    value: str = "mean",
    virtual: Mapping[int, int] | None = None,
) -> Node:
    """The child maximising Q + c_puct * P * sqrt(N) / (1 + n); the oldest on ties. Q is the
    mean backed-up value, or with ``value="max"`` the best one. ``virtual`` holds visits of
    selections not backed up yet (a virtual loss: each counts in N and n, with value 0 in the
    mean), so that selections made together spread over the tree."""
    extra = virtual or {}
    children = [tree.nodes[i] for i in node.children]
    root_n = math.sqrt(max(1, node.visits + extra.get(node.id, 0)))

    def q(c: Node) -> float:
        if value != "mean":
            return c.best_value
        n = c.visits + extra.get(c.id, 0)
        return c.value_sum / n if n else 0.0

    scores = [
        q(c) + c_puct * p * root_n / (1 + c.visits + extra.get(c.id, 0))
        for c, p in zip(children, _priors(children), strict=True)
    ]
    best = max(range(len(children)), key=lambda i: (scores[i], -children[i].id))
    return children[best]


class _Round:
    """The selections of one MCTS round, made before any is expanded: the virtual visits of
    their paths, the samples planned per node, and the simulations done."""

    def __init__(self) -> None:
        self.virtual: Counter[int] = Counter()
        self.pending: Counter[int] = Counter()
        self.simulations = 0
        """Selections that expanded a node (one per new child at most) or backed up a finished
        episode; a selection that ended on a node it could not grow did nothing."""

    def take(self, path: Sequence[Node], samples: int) -> None:
        self.virtual.update(n.id for n in path)
        if samples:
            self.pending[path[-1].id] += samples

    def release(self, path: Sequence[Node]) -> None:
        self.virtual.subtract(n.id for n in path)

    def planned(self) -> int:
        return sum(self.pending.values())


def mcts(
    env: Any,
    policy: Any,
    calls: int = 64,
    *,
    budget: BudgetLike = None,
    expand: int = 1,
    batch: int = MCTS_BATCH,
    c_puct: float = 1.0,
    widen_c: float = 1.0,
    widen_alpha: float = 0.5,
    rollouts: bool = True,
    reward_model: Any = None,
    simulations: int | None = None,
    min_unseen: float = 0.02,
    value: str = "max",
    gamma: float = 1.0,
    seed: int | None = None,
    policy_timeout_s: float | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    env_workers: int | None = None,
) -> SearchResult:
    """Monte Carlo tree search spending ``calls`` policy calls (or ``budget``).

    A simulation descends by PUCT while the node has as many children as progressive widening
    allows (``widen_c * visits ** widen_alpha``); otherwise it samples ``expand`` new
    continuations of the node, values each new child (a rollout to the end by default;
    ``reward_model`` scores it instead) and backs the values up with discount ``gamma``.
    ``batch`` simulations are selected together (each counting the others' paths as visits of
    value 0, a virtual loss) and their expansions sampled in one policy call, their rollouts one
    call per turn; ``batch=1`` is the one-at-a-time search. ``simulations`` caps the simulations
    (default: until the budget is spent); a simulation is a selection that expanded a node or
    backed up a finished episode (a round's selection that found nothing to grow is not one).
    A node stops widening once its children cover all but ``min_unseen`` of the policy's
    probability (:func:`unseen_mass`): sampling it again would only repeat known messages.
    Q is ``value="max"``: the best value backed up through a child (the env is deterministic
    from a snapshot, so a path found can be replayed; this departs from AlphaZero's mean,
    ``value="mean"``, which a policy that favours a decoy drags down).
    """
    calls, expand, batch = (
        _positive("calls", calls),
        _positive("expand", expand),
        _positive("batch", batch),
    )
    if simulations is not None:
        _positive("simulations", simulations)
    if c_puct < 0 or widen_c <= 0 or not 0 <= widen_alpha <= 1 or not 0 <= min_unseen < 1:
        raise error.Error(
            "Expects c_puct >= 0, widen_c > 0, 0 <= widen_alpha <= 1 and 0 <= min_unseen < 1"
        )
    if value not in ("max", "mean"):
        raise error.Error(f"Expects value 'max' or 'mean', actual: {value!r}")
    tree = _setup(
        env,
        policy,
        _budget(budget, calls),
        _options(gamma, seed, policy_timeout_s, tools, env_workers),
    )
    estimate = _estimator(tree, rollouts and reward_model is None, reward_model)

    def widen(node: Node, rnd: _Round) -> bool:
        planned = rnd.pending[node.id]
        if not node.children and not planned:
            return True
        if node.children and unseen_mass(tree, node) < min_unseen:
            return False  # sampling again would repeat what is known
        visits = node.visits + rnd.virtual[node.id]  # the round's other selections count
        return len(node.children) + planned < widen_c * visits**widen_alpha

    def descend(path: list[Node], rnd: _Round, skip_first: bool) -> list[Node]:
        """From the end of ``path`` down to a node to expand (added to the round's plan), to a
        node that cannot grow, or to a finished episode (backed up at once)."""
        node, skip = path[-1], skip_first
        while not node.terminal:
            planned = rnd.planned()
            if not skip and widen(node, rnd) and tree.room(planned + 1) > planned:
                rnd.take(path, expand)
                return path
            skip = False
            if not node.children:
                break
            node = puct_child(tree, node, c_puct, value, rnd.virtual)
            path = [*path, node]
        else:
            backup(tree, path)  # a finished episode reached again: its value, one visit more
            rnd.simulations += 1
        rnd.take(path, 0)
        return []

    def expand_planned(selected: list[list[Node]], rnd: _Round) -> list[list[Node]]:
        """Sample the round's planned expansions in one call, value and back up the new
        children; the selections whose node gave nothing new descend on (selected again)."""
        leaves = list({path[-1].id: path[-1] for path in selected}.values())
        before = {leaf.id: set(leaf.children) for leaf in leaves}
        wanted = [(leaf, rnd.pending[leaf.id]) for leaf in leaves]
        rnd.pending.clear()
        grown: dict[int, list[Node]] = {}
        for leaf, kids in zip(leaves, tree.expand_many(wanted), strict=True):
            grown[leaf.id] = list({k.id: k for k in kids if k.id not in before[leaf.id]}.values())
        fresh = [kid for leaf in leaves for kid in grown[leaf.id]]
        for kid, chain in zip(fresh, estimate(fresh), strict=True):
            backup(tree, tree.path(kid) + chain, 0.0 if chain else kid.estimate or 0.0)
        credit = {leaf_id: len(kids) for leaf_id, kids in grown.items()}
        again = []
        for path in selected:
            if credit[path[-1].id]:  # this selection's samples gave a new child
                credit[path[-1].id] -= 1
                rnd.simulations += 1
            elif not grown[path[-1].id]:
                rnd.release(path)
                again.append(descend(path, rnd, skip_first=True))
        return [path for path in again if path]

    def play_round(width: int) -> int:
        """``width`` selections, then their expansions together; the simulations done."""
        rnd = _Round()
        selected = [descend([tree.root], rnd, skip_first=False) for _ in range(width)]
        selected = [path for path in selected if path]
        while selected:
            selected = expand_planned(selected, rnd)
        return rnd.simulations

    def body() -> dict[str, Any]:
        done = idle = 0
        while tree.room(1) and (simulations is None or done < simulations):
            width = batch if simulations is None else min(batch, simulations - done)
            spent = tree.calls
            done += play_round(width)
            idle = idle + width if tree.calls == spent else 0
            if idle > IDLE_SIMULATIONS + len(tree.nodes):
                break  # every node is finished or covered: more calls would only repeat
        return {
            "simulations": done,
            "expand": expand,
            "batch": batch,
            "c_puct": c_puct,
            "widen": [widen_c, widen_alpha],
            "stopped_early": bool(tree.room(1)) and (simulations is None or done < simulations),
        }

    return run_guarded(tree, "mcts", body)


# --- by name ---------------------------------------------------------------------------------------

_SPEC = re.compile(r"^(best_of_n|bon|beam|mcts):(\d+)(?:x(\d+))?$")
METHODS = ("best_of_n", "beam", "mcts")


def parse_spec(spec: str) -> tuple[str, dict[str, int]]:
    """``best_of_n:8``, ``beam:4x4`` (width x expansions) or ``mcts:64`` (policy calls).

    >>> parse_spec("beam:4x4"), parse_spec("mcts:64")
    (('beam', {'width': 4, 'expand': 4}), ('mcts', {'calls': 64}))
    """
    m = _SPEC.match(spec.strip()) if isinstance(spec, str) else None
    if m is None:
        raise error.Error(
            f"Unknown search {spec!r}; expected best_of_n:N, beam:WIDTHxEXPAND or mcts:CALLS "
            "(e.g. best_of_n:8, beam:4x4, mcts:64)"
        )
    name, a, b = m.group(1), int(m.group(2)), m.group(3)
    if a < 1 or (b is not None and int(b) < 1):
        raise error.Error(f"Search sizes must be >= 1 in {spec!r}")
    if name in ("best_of_n", "bon"):
        if b is not None:
            raise error.Error(f"Search {spec!r}: best_of_n takes one number (best_of_n:N)")
        return "best_of_n", {"n": a}
    if name == "beam":
        return "beam", {"width": a, "expand": int(b) if b is not None else a}
    if b is not None:
        raise error.Error(f"Search {spec!r}: mcts takes one number (mcts:CALLS)")
    return "mcts", {"calls": a}


def search(env: Any, policy: Any, spec: str, **options: Any) -> SearchResult:
    """Run the search a spec names (:func:`parse_spec`) with any of its keyword options."""
    name, sizes = parse_spec(spec)
    method = {"best_of_n": best_of_n, "beam": beam_search, "mcts": mcts}[name]
    return method(env, policy, **sizes, **options)  # type: ignore[operator]
