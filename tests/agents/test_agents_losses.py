"""The GRPO and PPO objectives against values computed by hand on small tensors."""

from __future__ import annotations

import math

import pytest
import torch

from llmgym.agents.grpo import group_advantages, grpo_loss
from llmgym.agents.ppo import gae, ppo_losses, whiten
from llmgym.agents.reference import AdaptiveKLController, ReferenceModel, k3

LP = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]])
OLD = torch.tensor([[-1.2, -1.5, 0.0], [-0.5, -0.1, -0.9]])
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
ADV = torch.tensor([1.0, -2.0])


def _per_token_by_hand() -> list[list[float]]:
    """-min(r A, clip(r, 0.8, 1.28) A) for each unmasked token, written out term by term."""
    out = []
    for lp_row, old_row, m_row, a in zip(
        LP.tolist(), OLD.tolist(), MASK.tolist(), ADV.tolist(), strict=True
    ):
        row = []
        for lp, old, m in zip(lp_row, old_row, m_row, strict=True):
            if not m:
                continue
            r = math.exp(lp - old)
            row.append(-min(r * a, min(max(r, 0.8), 1.28) * a))
        out.append(row)
    return out


def test_grpo_loss_variants_match_hand_computation() -> None:
    rows = _per_token_by_hand()
    # Spot-check the hand table itself: row 1 token 1 has ratio e^-0.4 < 0.8 with A < 0 -> clipped at 0.8.
    assert rows[1][1] == pytest.approx(1.6)
    assert rows[1][2] == pytest.approx(2 * math.exp(0.4))
    flat = [x for r in rows for x in r]
    expected = {
        "grpo": sum(sum(r) / len(r) for r in rows) / 2,
        "bnpo": sum(flat) / 5,
        "dapo": sum(flat) / 5,
        "dr_grpo": sum(flat) / (2 * 4),
    }
    for loss_type, value in expected.items():
        loss, stats = grpo_loss(LP, OLD, ADV, MASK, loss_type=loss_type, max_completion_length=4)
        assert float(loss) == pytest.approx(value, rel=1e-5), loss_type
        assert float(stats["clip_low"]) == 1.0 and float(stats["clip_high"]) == 0.0


def test_grpo_loss_normalisers_let_micro_batches_add_up() -> None:
    whole, _ = grpo_loss(LP, OLD, ADV, MASK, loss_type="dapo")
    parts = [
        grpo_loss(
            LP[i : i + 1],
            OLD[i : i + 1],
            ADV[i : i + 1],
            MASK[i : i + 1],
            loss_type="dapo",
            num_tokens=5,
        )[0]
        for i in range(2)
    ]
    assert float(sum(parts)) == pytest.approx(float(whole))
    whole_g, _ = grpo_loss(LP, OLD, ADV, MASK, loss_type="grpo")
    parts_g = [
        grpo_loss(
            LP[i : i + 1],
            OLD[i : i + 1],
            ADV[i : i + 1],
            MASK[i : i + 1],
            loss_type="grpo",
            num_sequences=2,
        )[0]
        for i in range(2)
    ]
    assert float(sum(parts_g)) == pytest.approx(float(whole_g))


def test_grpo_loss_kl_term_is_beta_times_k3() -> None:
    ref = torch.tensor([[-1.1, -1.9, 0.0], [-0.7, -0.4, -0.6]])
    base, _ = grpo_loss(LP, OLD, ADV, MASK, loss_type="bnpo")
    with_kl, stats = grpo_loss(LP, OLD, ADV, MASK, loss_type="bnpo", beta=0.1, ref_logprobs=ref)
    k3_sum = 0.0
    for lp_row, ref_row, m_row in zip(LP.tolist(), ref.tolist(), MASK.tolist(), strict=True):
        for lp, rf, m in zip(lp_row, ref_row, m_row, strict=True):
            if m:
                k3_sum += math.exp(rf - lp) - (rf - lp) - 1
    assert float(with_kl - base) == pytest.approx(0.1 * k3_sum / 5, abs=1e-6)
    assert float(stats["kl"]) == pytest.approx(k3_sum, rel=1e-5)


def test_grpo_loss_gradient_raises_logprob_of_positive_advantage_tokens() -> None:
    lp = torch.zeros(1, 2, requires_grad=True)
    loss, _ = grpo_loss(lp, lp.detach(), torch.tensor([1.0]), torch.ones(1, 2))
    loss.backward()
    assert lp.grad is not None and bool((lp.grad < 0).all())  # descending the loss raises lp


def test_grpo_loss_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="loss_type"):
        grpo_loss(LP, OLD, ADV, MASK, loss_type="mean")
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(LP, OLD, ADV, MASK, beta=0.1)
    with pytest.raises(ValueError, match="max_completion_length"):
        grpo_loss(LP, OLD, ADV, MASK, loss_type="dr_grpo")


def test_group_advantages_by_hand() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    group = group_advantages(rewards, 4, "group", eps=0.0 + 1e-12)
    # group 1: mean 0.25, unbiased std 0.5 -> (1 - 0.25) / 0.5 = 1.5 and -0.5; group 2: all equal -> 0.
    assert group.tolist()[:4] == pytest.approx([1.5, -0.5, -0.5, -0.5])
    assert group.tolist()[4:] == pytest.approx([0.0] * 4)
    none = group_advantages(rewards, 4, "none")
    assert none.tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0])
    batch = group_advantages(rewards, 4, "batch", eps=1e-12)
    assert batch.tolist()[0] == pytest.approx(0.75 / float(rewards.std()))
    with pytest.raises(ValueError, match="scale_rewards"):
        group_advantages(rewards, 4, "rank")


def test_gae_skips_environment_tokens_by_hand() -> None:
    # positions 0, 2, 3 are actions; position 1 is an env token; reward 1 at the end.
    rewards = torch.tensor([[0.0, 0.0, 0.5, 1.0]])
    values = torch.tensor([[0.2, 9.0, 0.4, 0.6]])
    mask = torch.tensor([[1, 0, 1, 1]])
    gamma, lam = 0.9, 0.8
    d3 = 1.0 - 0.6
    d2 = 0.5 + gamma * 0.6 - 0.4
    d0 = 0.0 + gamma * 0.4 - 0.2  # bootstraps across the env token to the next action's value
    a3 = d3
    a2 = d2 + gamma * lam * a3
    a0 = d0 + gamma * lam * a2
    adv, ret = gae(rewards, values, mask, gamma, lam)
    assert adv.tolist()[0] == pytest.approx([a0, 0.0, a2, a3])
    assert ret.tolist()[0] == pytest.approx([a0 + 0.2, 0.0, a2 + 0.4, a3 + 0.6])


def test_ppo_losses_by_hand() -> None:
    lp = torch.tensor([[-1.0, -1.0]])
    old = torch.tensor([[-1.5, -0.5]])
    adv = torch.tensor([[1.0, 1.0]])
    values = torch.tensor([[1.0, 0.0]])
    old_values = torch.tensor([[0.5, 0.0]])
    returns = torch.tensor([[0.0, 1.0]])
    mask = torch.ones(1, 2)
    pg, vf, stats = ppo_losses(
        lp, old, adv, values, old_values, returns, mask, clip_range=0.2, clip_range_value=0.2
    )
    r0, r1 = math.exp(0.5), math.exp(-0.5)
    pg_hand = (max(-r0, -1.2) + max(-r1, -max(min(r1, 1.2), 0.8))) / 2
    assert float(pg) == pytest.approx(pg_hand, rel=1e-5)
    # value 1.0 clipped to 0.5 + 0.2 = 0.7: max((1-0)^2, (0.7-0)^2) = 1; second: 1.
    assert float(vf) == pytest.approx(0.5 * (1.0 + 1.0) / 2)
    assert float(stats["clip"]) == 2.0


def test_whiten_and_k3() -> None:
    x = torch.tensor([[1.0, 3.0, 100.0]])
    m = torch.tensor([[1, 1, 0]])
    assert whiten(x, m, 2.0, 1.0).tolist()[0] == pytest.approx([-1.0, 1.0, 0.0])
    assert float(k3(torch.tensor(-1.0), torch.tensor(-2.0))) == pytest.approx(math.exp(-1) + 1 - 1)
    assert bool((k3(torch.randn(100), torch.randn(100)) >= 0).all())


def test_adaptive_kl_controller_moves_toward_target() -> None:
    ctl = AdaptiveKLController(0.1, target=1.0, horizon=10)
    ctl.update(current=10.0, n_steps=5)  # error clipped to +0.2
    assert ctl.value == pytest.approx(0.1 * (1 + 0.2 * 5 / 10))
    ctl.update(current=0.0, n_steps=5)
    assert ctl.value == pytest.approx(0.1 * 1.1 * 0.9)
    assert ctl.state_dict() == {"value": ctl.value}


def test_reference_model_refresh_and_mix() -> None:
    policy = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        policy.weight.fill_(1.0)
    ref = ReferenceModel(policy, mode="mix", update_every=2, alpha=0.5)
    with torch.no_grad():
        policy.weight.fill_(3.0)
    assert not ref.update(policy, step=1)
    assert ref.update(policy, step=2)
    assert ref.model.weight.tolist() == [[2.0, 2.0]]
    hard = ReferenceModel(policy, mode="refresh", update_every=1)
    with torch.no_grad():
        policy.weight.fill_(5.0)
    hard.update(policy, step=1)
    assert hard.model.weight.tolist() == [[5.0, 5.0]]
    fixed = ReferenceModel(policy)
    assert not fixed.update(policy, step=10)
    assert not fixed.model.weight.requires_grad
    with pytest.raises(Exception, match="update_every"):
        ReferenceModel(policy, mode="refresh")
