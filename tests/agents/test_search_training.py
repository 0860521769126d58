"""Training from search: tree-GRPO samples (sibling groups, advantages, GRPO's own update) and
expert iteration (search, keep the successes, SFT on them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
import yaml
from agents_common import DIGITS_ENV, MATH

from llmgym import error
from llmgym.agents.expert_iteration import ExpertIterationConfig, search_demonstrations
from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.hf import HFPolicy, stop_ids_of
from llmgym.agents.tiny import load
from llmgym.agents.tree_grpo import group_values, sibling_groups, tree_rollouts
from llmgym.cli import main as llmgym_main
from llmgym.search import mcts


def _policy(tiny_dir: str) -> tuple[HFPolicy, Any]:
    model, tokenizer = load(tiny_dir)
    return HFPolicy(model, tokenizer, temperature=1.0, max_new_tokens=6), tokenizer


@pytest.mark.timeout(300)
def test_tree_grpo_samples_go_through_grpo_s_update(tiny_dir: str, tmp_path: Path) -> None:
    policy, tokenizer = _policy(tiny_dir)
    env = gym.make(DIGITS_ENV)
    trajs, adv, results = tree_rollouts(
        env, policy, tokenizer, [{"seed": s} for s in range(3)], "beam:1x4",
        stop_ids=stop_ids_of(tokenizer),
    )  # fmt: skip
    env.close()
    assert len(results) == 3 and len(trajs) == len(adv) >= 6
    for t in trajs:
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
        assert sum(t.loss_mask) == len(t.token_ids) - t.prompt_length > 0
        assert t.loss_mask[: t.prompt_length] == [0] * t.prompt_length
    for result in results:  # advantages are the group-normalised node values
        for group in sibling_groups(result):
            values = torch.tensor(group_values(group))
            if values.std() > 0:
                assert abs(float(((values - values.mean()) / values.std()).sum())) < 1e-4
    cfg = GRPOConfig(model=tiny_dir, env_id=DIGITS_ENV, output_dir=str(tmp_path), total_steps=1,
                     prompts_per_step=2, group_size=4, max_new_tokens=6, progress=False,
                     tensorboard=False, learning_rate=1e-3, micro_batch_size=8)  # fmt: skip
    trainer = GRPOTrainer(cfg)
    try:
        before = [p.detach().clone() for p in trainer._unwrapped().parameters()]
        stats = trainer._update(trajs, adv, {})
        after = list(trainer._unwrapped().parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
        assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    finally:
        trainer.close()


def test_sibling_groups_follow_the_tree_and_repeat_duplicates() -> None:
    env = gym.make("llm/Math-v0", family="arith.order_ops", difficulty=0.0,
                   subtask_mode="sequential")  # fmt: skip
    env.reset(seed=1)
    answers = iter(["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"] * 40)
    result = mcts(env, lambda m, t: next(answers), calls=12)
    env.close()
    for group in sibling_groups(result):
        parents = {n.parent for n in group}
        assert len(parents) == 1
        parent = result.nodes[parents.pop()]
        assert len(group) == sum(result.nodes[i].samples for i in parent.children
                                 if result.nodes[i].visits)  # fmt: skip
    assert any(n.samples > 1 for n in result.nodes)


def test_nodes_without_token_ids_are_skipped(tiny_dir: str) -> None:
    _, tokenizer = _policy(tiny_dir)
    env = gym.make(DIGITS_ENV)
    trajs, adv, results = tree_rollouts(
        env, lambda m, t: "x" * len(m), tokenizer, [{"seed": 0}], "beam:1x3", stop_ids=[0]
    )
    env.close()
    assert trajs == [] and adv == [] and len(results[0].nodes) > 1


@pytest.mark.timeout(300)
def test_expert_iteration_searches_keeps_successes_and_fine_tunes(
    tiny_dir: str, tmp_path: Path
) -> None:
    """Through ``llmgym train`` (``algo: expert_iteration``), as a user runs it."""
    config = tmp_path / "ei.yaml"
    config.write_text(yaml.safe_dump(dict(
        algo="expert_iteration", model=tiny_dir, env_id=DIGITS_ENV, output_dir=str(tmp_path),
        search="best_of_n:4", iterations=2, tasks_per_iteration=3, total_steps=2, batch_size=2,
        max_new_tokens=48)))  # fmt: skip
    assert llmgym_main(["train", "--config", str(config)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    rounds = results["rounds"]
    assert len(rounds) == 2 and results["policy_samples"] == 2 * 3 * 4
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["policy_samples"] == results["policy_samples"]
    for r in rounds:
        if r["examples"]:
            lines = (tmp_path / f"iter{r['iteration']}" / "demonstrations.jsonl").read_text()
            assert len(lines.splitlines()) == r["examples"] == r["solved"]
            assert Path(r["model"], "config.json").is_file()


def test_search_demonstrations_are_the_successful_best_trajectories(tiny_dir: str) -> None:
    env = gym.make(DIGITS_ENV)
    long_answer = "y" * 50
    records, stats = search_demonstrations(env, lambda m, t: long_answer, "best_of_n:2", range(3))
    env.close()
    assert stats == {"searched": 3, "solved": 3, "policy_samples": 6}
    assert all(r["messages"][-1] == {"role": "assistant", "content": long_answer} for r in records)


@pytest.mark.parametrize("bad", [{"search": "dfs:2"}, {"iterations": 0}, {"temperature": 0.0}])
def test_bad_expert_iteration_configs_are_refused(bad: dict[str, Any]) -> None:

    with pytest.raises(error.Error):
        ExpertIterationConfig(model="m", **bad)


@pytest.mark.timeout(300)
def test_a_transformers_sequence_classifier_values_unfinished_nodes(
    tiny_dir: str, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from llmgym.search import beam_search
    from llmgym.search.values import value_function

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_labels=1,
                         pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    LlamaForSequenceClassification(config).save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    env = gym.make("llm/Math-v0", family="arith.order_ops", difficulty=0.0,
                   subtask_mode="sequential")  # fmt: skip
    env.reset(seed=1)
    answers = iter(f"\\boxed{{{i}}}" for i in range(1000))
    result = beam_search(env, lambda m, t: next(answers), width=2, expand=2,
                         reward_model=str(tmp_path / "rm"))  # fmt: skip
    env.close()
    score = value_function(str(tmp_path / "rm"))
    unfinished = [n for n in result.nodes[1:] if not n.terminal]
    assert unfinished
    for node in unfinished:
        assert node.estimate == pytest.approx(score(node.messages), abs=1e-5)
    assert len({round(n.estimate, 6) for n in unfinished}) > 1  # it reads the conversation


@pytest.mark.timeout(300)
def test_grpo_with_tree_search_trains_on_sibling_groups(tiny_dir: str, tmp_path: Path) -> None:
    """``tree_search:`` in the GRPO config: each step searches its tasks and updates on the
    sibling groups (the same trainer, ``llmgym train``'s path)."""
    cfg = GRPOConfig(model=tiny_dir, env_id=DIGITS_ENV, output_dir=str(tmp_path), total_steps=2,
                     prompts_per_step=2, group_size=4, max_new_tokens=6, progress=False,
                     tensorboard=False, learning_rate=1e-3, micro_batch_size=8,
                     tree_search="beam:1x4")  # fmt: skip
    trainer = GRPOTrainer(cfg)
    try:
        before = [p.detach().clone() for p in trainer._unwrapped().parameters()]
        metrics = trainer.train_step()
        after = list(trainer._unwrapped().parameters())
        assert metrics["charts/episodes"] >= 4  # every searched sample counts as an episode
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    finally:
        trainer.close()
    for bad, words in (
        ({"tree_search": "mcts:0"}, "tree_search"),
        ({"tree_search": "beam:2x2", "dynamic_sampling": True}, "do not combine"),
    ):
        with pytest.raises(error.Error, match=words):
            GRPOConfig(model=tiny_dir, env_id=DIGITS_ENV, **bad)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["math", "mixture", "chain"])
def test_tree_search_feeds_the_scheduler_and_the_monitor(
    tiny_dir: str, tmp_path: Path, where: str
) -> None:
    """The whole episodes each search played (its terminal nodes, with their returns) reach the
    task scheduler, by the task drawn, and the live monitor under the task's family, as sampled
    groups do; an intermediate node is not an episode. On a mixture too, whose snapshots name no
    task, and on a multi-step env."""
    from llmgym.agents.joint import mixture_kwargs

    env_id, kwargs = {
        "math": (MATH, {"families": ["arith.add*"]}),
        "mixture": ("llm/Mixture-v0", mixture_kwargs()),
        "chain": (MATH, {"families": ["arith.order_ops"], "subtask_mode": "sequential"}),
    }[where]
    cfg = GRPOConfig(model=tiny_dir, env_id=env_id, env_kwargs=kwargs, output_dir=str(tmp_path),
                     total_steps=1, prompts_per_step=3, group_size=4, max_new_tokens=6,
                     progress=False, tensorboard=False, micro_batch_size=8,
                     tree_search="beam:2x2", scheduler={"strategy": "success_variance"})  # fmt: skip
    trainer = GRPOTrainer(cfg)
    played: list[Any] = []
    real = trainer._tree_rollouts

    def spy(tasks: list[Any]) -> Any:
        out = real(tasks)
        played.extend(out[3])
        return out

    trainer._tree_rollouts = spy  # type: ignore[method-assign]
    try:
        metrics = trainer.train_step()
        episodes = sum(len(eps) for eps in played)
        assert episodes > 0 and all(len(eps) <= 4 for eps in played)  # beam 2x2: <= 4 leaves
        assert sum(a.total_episodes for a in trainer.scheduler.arms.values()) == episodes
        assert metrics["overall/episodes"] == episodes
        families = {k.split("/")[2] for k in metrics if k.startswith("family/")}
        assert families and "unknown" not in families and "" not in families
        if where == "chain":  # an episode's reward is its return over the steps
            assert any(e.num_turns > 1 for eps in played for e in eps)
    finally:
        trainer.close()
