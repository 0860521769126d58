"""Reward models as an extra reward for any env: the hacks first (length and repetition probes, a
wrong answer the model loves), then a tiny classifier trained here that must rank a held-out pair,
PRM step scores, batching, normalization, and the core's ``reward_model=`` hook."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest

from llmgym import error
from llmgym.declarative import DeclarativeEnv
from llmgym.rewards.mixing import ExtraReward, build_extra_rewards, repetition_factor

GOOD = "here is the correct and clear answer to the question"
BAD = "here is the wrong and rude answer to the question"
TASKS = [{"id": "q1", "prompt": "Capital of France?", "answer": "Paris"}]


def loves_length(prompt: str, response: str) -> float:
    """A reward model with the classic bias: longer is better."""
    return min(1.0, len(response.split()) / 200)


# --- the mixing rule under attack ----------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 20, 100])
def test_length_probe_padding_cannot_raise_the_bonus_past_the_rules_bound(k):
    term = ExtraReward("reward_model", loves_length, weight=0.5, length_budget=40)
    padded = " ".join(f"w{i}" for i in range(10 * k))  # distinct words: no repetition discount
    bonus, _ = term("q", padded, success=True)
    words = 10 * k
    assert bonus <= 0.5 * min(1.0, 40 / words) + 1e-12
    assert bonus <= 0.5 * 40 / 200 + 1e-12  # never more than at the budget itself


@pytest.mark.parametrize("k", [2, 4, 8, 32])
def test_repetition_probe_repeating_a_good_paragraph_does_not_pay(k):
    term = ExtraReward("reward_model", lambda p, r: 1.0, weight=0.5)
    once, _ = term("q", GOOD, success=True)
    again, details = term("q", " ".join([GOOD] * k), success=True)
    assert again < once and again <= 0.5 * repetition_factor(" ".join([GOOD] * k)) + 1e-12
    assert details["factor"] < 1.0


def test_a_wrong_answer_is_never_rescued_past_the_fail_cap():
    for fail_cap in (0.0, 0.2):
        term = ExtraReward("reward_model", lambda p, r: 1.0, weight=2.0, fail_cap=fail_cap)
        bonus, _ = term("q", BAD * 50, success=False)
        assert bonus <= 2.0 * fail_cap + 1e-12
    calls = []
    gated = ExtraReward("reward_model", lambda p, r: calls.append(r) or 1.0)
    assert gated("q", BAD, success=False) == (0.0, {"gated": True}) and calls == []


def test_in_an_env_a_long_wrong_answer_never_beats_a_short_right_one():
    env = DeclarativeEnv(tasks=TASKS, reward_model={"model": loves_length, "weight": 1.0})
    assert env.reward_range == (0.0, 2.0)
    env.reset(seed=0)
    _, wrong, *_ = env.step("Lyon " * 400)
    env.reset(seed=0)
    _, right, _, _, info = env.step("Paris")
    assert wrong == 0.0 and right >= 1.0
    assert info["reward_components"]["reward_model"] == pytest.approx(right - 1.0)
    assert info["extra_rewards"]["reward_model"]["gate"] == 1.0


def test_the_hook_scores_only_the_answer_that_ends_the_episode():
    seen = []
    env = DeclarativeEnv(tasks=TASKS, max_turns=2, reward_model=lambda p, r: seen.append(r) or 1.0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("Lyon")
    assert not terminated and "reward_model" not in info["reward_components"] and seen == []
    _, reward, terminated, _, info = env.step("Paris")
    assert terminated and reward == 1.5 and seen == ["Paris"]


def test_reward_model_works_for_other_envs_through_gym_make():
    env = gym.make("llm/ToolCalling-v0", reward_model={"model": lambda p, r: 0.5, "weight": 0.4})
    lo, hi = env.unwrapped.reward_range
    plain = gym.make("llm/ToolCalling-v0").unwrapped.reward_range
    assert (lo, hi) == (plain[0], pytest.approx(plain[1] + 0.4))
    env.close()


def test_a_failing_reward_model_scores_zero_and_says_why():
    def broken(prompt, response):
        raise RuntimeError("CUDA out of memory")

    env = DeclarativeEnv(tasks=TASKS, reward_model=broken)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("Paris")
    assert reward == 1.0 and "out of memory" in info["extra_rewards"]["reward_model"]["error"]


@pytest.mark.parametrize(
    "spec,match",
    [
        (42, "reward_model"),
        ({"kind": "orm"}, "model"),
        ({"model": loves_length, "weight": float("nan")}, "weight"),
        ({"model": loves_length, "fail_cap": 2}, "fail_cap"),
        ({"model": loves_length, "length_budget": 0}, "length_budget"),
    ],
)
def test_bad_reward_model_specs_fail_at_construction(spec, match):
    with pytest.raises(error.Error, match=match):
        build_extra_rewards(reward_model=spec)


# --- a tiny classifier trained here ------------------------------------------------------------

WORDS = [
    "here",
    "is",
    "the",
    "correct",
    "clear",
    "helpful",
    "wrong",
    "rude",
    "vague",
    "and",
    "answer",
    "to",
    "question",
    "a",
    "an",
    "my",
]


def tiny_tokenizer():
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


def pair(rng: random.Random) -> tuple[str, str]:
    """A (chosen, rejected) pair: the same filler around good or bad words."""
    filler = rng.sample(["here", "is", "the", "answer", "to", "question", "a", "my"], 4)
    good = rng.sample(["correct", "clear", "helpful"], 2)
    bad = rng.sample(["wrong", "rude", "vague"], 2)
    at = rng.randrange(5)
    return " ".join(filler[:at] + good + filler[at:]), " ".join(filler[:at] + bad + filler[at:])


@pytest.fixture(scope="module")
def trained():
    """A one-layer BERT reward model trained with the Bradley-Terry loss on 64 pairs (30 steps)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=len(WORDS) + 4,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=1,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on shared cores: threads only contend
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    tokenizer = tiny_tokenizer()
    rng = random.Random(0)
    pairs = [pair(rng) for _ in range(64)]
    prompt = ["answer my question"] * len(pairs)
    chosen = tokenizer(prompt, [c for c, _ in pairs], padding=True, return_tensors="pt")
    rejected = tokenizer(prompt, [r for _, r in pairs], padding=True, return_tensors="pt")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(30):
        margin = model(**chosen).logits[:, 0] - model(**rejected).logits[:, 0]
        loss = -torch.nn.functional.logsigmoid(margin).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    yield model, tokenizer
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_classifier_trained_here_ranks_a_held_out_pair(trained, tmp_path):
    from llmgym.rewards.reward_model import RewardModel

    model, tokenizer = trained
    rm = RewardModel(model, tokenizer, batch_size=3)
    held_out = ("here is my clear and helpful answer", "here is my vague and rude answer")
    assert held_out[0] not in [c for c, _ in (pair(random.Random(0)) for _ in range(64))]
    good, bad = rm.score_batch(["answer my question"] * 2, list(held_out))
    assert good > bad
    many = [pair(random.Random(i)) for i in range(100, 120)]
    flat = [x for p in many for x in p]
    batched = rm.score_batch(["answer my question"] * len(flat), flat)
    one_by_one = [rm.score("answer my question", x) for x in flat]
    assert batched == pytest.approx(one_by_one, abs=1e-5)  # padding and order do not matter
    assert sum(batched[0::2][i] > batched[1::2][i] for i in range(20)) >= 18
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again = RewardModel.from_pretrained(str(tmp_path), device="auto")
    assert again.score_batch(["answer my question"] * 2, list(held_out)) == pytest.approx(
        [good, bad], abs=1e-5
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_trained_model_under_the_probes_and_in_an_env(trained):
    from llmgym.rewards.reward_model import RewardModel

    model, tokenizer = trained
    rm = RewardModel(model, tokenizer)
    term = ExtraReward("reward_model", rm.score, weight=0.5, length_budget=12)
    original, _ = term("answer my question", "here is my clear and helpful answer", success=True)
    for k in (2, 4, 8):
        repeated = " ".join(["here is my clear and helpful answer"] * k)
        assert term("answer my question", repeated, success=True)[0] < original
    env = DeclarativeEnv(
        tasks=[{"id": "t", "prompt": "answer my question", "answer": "x"}],
        verifier="regex",
        verifier_options={"fullmatch": False},
        reward_model={"model": model, "tokenizer": tokenizer, "weight": 0.5},
    )
    env.reset(seed=0)
    _, reward, _, _, info = env.step("x here is my clear and helpful answer")
    assert 1.0 < reward <= 1.5 and info["reward_components"]["reward_model"] > 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_prm_steps_and_calibrated_normalization(trained):
    from llmgym.rewards.reward_model import RewardModel

    model, tokenizer = trained
    prm = RewardModel(model, tokenizer, kind="prm")
    response = "here is my clear answer\n\nhere is my wrong answer\n\nthe answer"
    steps = prm.step_scores("answer my question", response)
    assert len(steps) == 3 and prm.score("answer my question", response) == pytest.approx(
        min(steps)
    )
    assert prm.score_batch(["q", "q"], [response, "clear"]) == pytest.approx(
        [prm.score("q", response), prm.score("q", "clear")]
    )
    rm = RewardModel(model, tokenizer)
    refs = [x for i in range(10) for x in pair(random.Random(i))]
    rm.calibrate(["answer my question"] * len(refs), refs)
    scores = rm.score_batch(["answer my question"] * len(refs), refs)
    assert min(scores) < 0.3 and max(scores) > 0.7  # the spread uses the range
    assert all(scores[i] > scores[i + 1] for i in range(0, len(refs), 2))  # order kept
    with pytest.raises(ValueError, match="tokenizer"):
        RewardModel(model, None)
    with pytest.raises(error.InvalidSpec, match="tokenizer"):
        build_extra_rewards(reward_model={"model": model})
