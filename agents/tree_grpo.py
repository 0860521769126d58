"""Tree-GRPO: GRPO groups made of the sibling nodes of search trees.

Plain GRPO samples G whole episodes of a task and normalises their rewards within the group.
Here a search (``llmgym.search``: beam or MCTS) grows a tree from each task; every node with two
or more children is a group, each child's message is one sample, and its reward is the child's
backed-up value (its own step reward plus the discounted return that followed it, averaged over
the visits). Advantages are the group-normalised values, exactly as :func:`group_advantages`
computes them, so the samples go through GRPO's own clipped update unchanged.

Where it departs from the tree-search GRPO variants it follows (TreeRL, TreeRPO, "Tree-GRPO"):
they fork at token entropy peaks or fixed token segments and credit with the mean leaf outcome
under a node; here a fork is a whole assistant turn (the unit the env rewards), the value is the
search's (process rewards included, rollouts or reward-model estimates where the search made
them), and groups at every depth are kept, not only the root's. A node's prompt is its
conversation rendered again by the chat template, not the token-exact concatenation the
episode rollouts build (:mod:`llmgym.agents.rollout`); samples whose sampled tokens are unknown
(a policy that gives no token ids) are skipped.

What it is not: a trainer. :func:`tree_rollouts` returns trajectories and advantages for
``GRPOTrainer._update``; the hook into ``agents/grpo.py`` is ``GRPOConfig.tree_search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmgym.agents.hf import render_prompt
from llmgym.agents.rollout import EpisodeSummary, Trajectory
from llmgym.search import SearchResult, search


def sibling_groups(result: SearchResult, min_size: int = 2) -> list[list[Any]]:
    """The children of every node with at least ``min_size`` visited children, one list each;
    a child sampled several times appears that many times (the group is what was sampled)."""
    groups = []
    for node in result.nodes:
        kids = [result.nodes[i] for i in node.children if result.nodes[i].visits > 0]
        group = [kid for kid in kids for _ in range(kid.samples)]
        if len(kids) >= min_size:
            groups.append(group)
    return groups


def group_values(group: Sequence[Any]) -> list[float]:
    """Each sample's reward for the group: its node's mean backed-up value."""
    return [float(node.q) for node in group]


def node_trajectory(
    result: SearchResult, node: Any, tokenizer: Any, tools: Sequence[Any], stop_ids: Sequence[int]
) -> Trajectory | None:
    """The node's message as one GRPO sample after its parent's conversation; None when the
    policy gave no token ids."""
    if not node.token_ids or node.parent is None:
        return None
    parent = result.nodes[node.parent]
    prompt = render_prompt(tokenizer, parent.messages, list(tools))
    completion = list(node.token_ids)
    logprobs = list(node.token_logprobs or [0.0] * len(completion))
    task = parent.state.get("task") or {}
    return Trajectory(
        task_id=str(task.get("id", "")),
        domain=str(task.get("domain", "")),
        family=str(task.get("family", "")),
        difficulty=float(task.get("difficulty", 0.0)),
        token_ids=prompt + completion,
        loss_mask=[0] * len(prompt) + [1] * len(completion),
        logprobs=[0.0] * len(prompt) + logprobs,
        prompt_length=len(prompt),
        turn_rewards=[node.reward],
        turn_ends=[len(prompt) + len(completion) - 1],
        is_success=bool(node.terminal and node.success),
        completion_truncated=completion[-1] not in stop_ids,
    )


def stamp(sample: Trajectory, info: dict[str, Any]) -> None:
    """Name ``sample``'s task as the env's reset named it (id, domain, family, difficulty)."""
    sample.task_id = str(info.get("task_id", sample.task_id))
    sample.domain = str(info.get("domain", sample.domain) or sample.domain)
    sample.family = str(info.get("family", sample.family) or sample.family)
    sample.difficulty = float(info.get("difficulty", sample.difficulty) or 0.0)


def search_episodes(result: SearchResult, task_id: str, domain: str) -> list[EpisodeSummary]:
    """The whole episodes a search played (its terminal nodes), each with its return and
    success: what the task scheduler and the live monitor count (an intermediate node is not an
    episode, and a node's own reward is one step's)."""
    out = []
    for node in result.nodes:
        if not node.terminal:
            continue
        path = result.path(node)[1:]
        out.append(
            EpisodeSummary(
                task_id=task_id,
                domain=domain,
                reward=float(node.ret),
                is_success=bool(node.success),
                completion_tokens=sum(int(n.tokens) for n in path),
                num_turns=len(path),
                completion_truncated=False,
                truncated=False,
                env_error=None,
                exec_statuses=[],
            )
        )
    return out


def tree_rollouts(
    env: Any,
    policy: Any,
    tokenizer: Any,
    resets: Sequence[dict[str, Any]],
    spec: str,
    *,
    stop_ids: Sequence[int],
    seed: int = 0,
) -> tuple[list[Trajectory], list[float], list[SearchResult]]:
    """Search each task (``resets``: ``env.reset`` keyword arguments) with ``spec`` and return
    every sibling group's samples with their group-normalised advantages, and the searches."""
    import torch

    from llmgym.agents.advantages import group_advantages

    trajs: list[Trajectory] = []
    advantages: list[float] = []
    results = []
    for i, reset in enumerate(resets):
        _, info = env.reset(**reset)
        result = search(env, policy, spec, seed=seed + i)
        results.append(result)
        for group in sibling_groups(result):
            samples = [
                node_trajectory(result, n, tokenizer, info.get("tools") or [], stop_ids)
                for n in group
            ]
            kept = [(s, v) for s, v in zip(samples, group_values(group), strict=True) if s]
            if len(kept) < 2:
                continue
            for sample, _ in kept:  # the task as drawn (a mixture's snapshot names no task)
                stamp(sample, info)
            values = torch.tensor([v for _, v in kept], dtype=torch.float32)
            adv = group_advantages(values, len(kept), "group")
            trajs += [s for s, _ in kept]
            advantages += [float(a) for a in adv]
    return trajs, advantages, results
