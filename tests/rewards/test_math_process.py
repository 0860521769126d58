"""The math step checker (rules, anti-gaming, hostile input) and reward models as rewards."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.rewards.math.process import (
    MAX_EQUATIONS,
    WRONG_ANSWER_CAP,
    Milestone,
    check_steps,
    evaluate_arithmetic,
    find_equations,
    process_verifier,
    reasoning_part,
    split_steps,
)

CHAIN = [Milestone("s1", "12"), Milestone("s2", "17", ("s1",)), Milestone("s3", "51", ("s2",))]
GOOD = (
    "Apples cost $3 \\times 4 = 12$ dollars. Adding the $5 bread: 12 + 5 = 17.\n"
    "Three such baskets: 17 \\cdot 3 = 51. Then 51 + 9 = 60, so the answer is \\boxed{60}."
)


# --- arithmetic and equations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 + 3 \\times 4", Fraction(14)),
        ("(2 + 3) \\times 4", Fraction(20)),
        ("\\frac{3}{4} + \\dfrac{1}{4}", Fraction(1)),
        ("2(3 + 4)", Fraction(14)),
        ("-3^2", Fraction(-9)),
        ("(-3)^2", Fraction(9)),
        ("2^{-2}", Fraction(1, 4)),
        ("1,250 - 1,180", Fraction(70)),
        ("12.5 \\div 0.5", Fraction(25)),
        ("15\\% \\times 240", Fraction(36)),
        ("\\sqrt{49} − 2", Fraction(5)),
        ("7 ÷ 2 × 4", Fraction(14)),
        ("\\left(\\frac{5}{6}\\right)^2", Fraction(25, 36)),
    ],
)
def test_evaluate_arithmetic_is_exact(text, value):
    assert evaluate_arithmetic(text) == value


@pytest.mark.parametrize(
    "text",
    ["2x + 1", "\\sqrt{2}", "\\pi", "1/0", "2^{1000000}", "10^{10^{10}}", "(" * 500 + "1" + ")" * 500,
     "import os", "__import__('os').system('true')", "2 ** 3", "", "3 +", "f(3)", "30^\\circ"],
)  # fmt: skip
def test_evaluate_arithmetic_refuses_anything_else_promptly(text):
    start = time.perf_counter()
    assert evaluate_arithmetic(text) is None
    assert time.perf_counter() - start < 0.5


def test_find_equations_reads_chains_latex_and_sentences():
    eqs = find_equations("So $a = 3 \\times 4 = 12$ apples, and b = 12 + 5 = 17.\nx = 2")
    assert [(e.lhs, e.rhs) for e in eqs] == [
        ("a", "3 \\times 4"),
        ("3 \\times 4", "12"),
        ("b", "12 + 5"),
        ("12 + 5", "17"),
        ("x", "2"),
    ]
    assert [e.checkable for e in eqs] == [False, True, False, True, False]
    assert all(e.holds for e in eqs if e.checkable)


def test_find_equations_ignores_comparisons_and_does_not_misread_of():
    eqs = find_equations("Since 3 <= 4 and 5 >= 2 and 1 != 2, we get 20% of 50 = 10.")
    assert [(e.lhs, e.rhs, e.checkable) for e in eqs] == [("50", "10", False)]


# --- the step checker ------------------------------------------------------------------------------


def test_full_credit_for_every_intermediate_result_in_order():
    check = check_steps(GOOD, CHAIN, final_correct=True)
    assert check.score == 1.0 and check.matched == ("s1", "s2", "s3") and check.invalid == 0


def test_partial_credit_and_the_cap_for_a_wrong_final_answer():
    partial = "Apples: 3 \\times 4 = 12. Then I guess \\boxed{40}."
    assert check_steps(partial, CHAIN, final_correct=True).score == pytest.approx(1 / 3)
    wrong_final = GOOD.replace("\\boxed{60}", "\\boxed{61}")
    assert check_steps(wrong_final, CHAIN, final_correct=False).score == WRONG_ANSWER_CAP


def test_results_must_be_stated_as_equations():
    prose = "The apples cost 12, the total is 17 and three baskets make 51. \\boxed{60}"
    assert check_steps(prose, CHAIN, final_correct=True).score == 0.0
    bare = "12 17 51 \\boxed{60}"
    assert check_steps(bare, CHAIN, final_correct=True).score == 0.0


def test_dependent_results_must_come_after_what_they_use():
    backwards = "t = 51\nu = 17\nv = 12\n\\boxed{60}"
    check = check_steps(backwards, CHAIN, final_correct=True)
    assert check.matched == ("s1",)
    independent = [Milestone("a", "51"), Milestone("b", "17"), Milestone("c", "12")]
    assert check_steps(backwards, independent, final_correct=True).score == 1.0


def test_listing_many_values_earns_almost_nothing():
    listing = "\n".join(f"v_{i} = {i}" for i in range(1, 201)) + "\n\\boxed{60}"
    check = check_steps(listing, [Milestone("s1", "12"), Milestone("s2", "17")], final_correct=True)
    assert check.score < 0.1
    ordered = "\n".join(f"a_{i} = {i}" for i in range(1, 61)) + "\n\\boxed{60}"
    check = check_steps(ordered, CHAIN, final_correct=True)
    assert check.matched == ("s1", "s2", "s3") and check.score < 0.1  # all found, all diluted
    chain = "= " + " = ".join(str(i) for i in range(1, 80)) + " \\boxed{60}"
    assert check_steps(chain, CHAIN, final_correct=True).score == 0.0
    flood = "x = 1\n" * (MAX_EQUATIONS + 5)
    assert check_steps(flood, [Milestone("s1", "1")], final_correct=True).score == 0.0


def test_wrong_arithmetic_costs_credit():
    sloppy = GOOD.replace("17 \\cdot 3 = 51", "17 \\cdot 3 = 51. Also 2 + 2 = 5")
    check = check_steps(sloppy, CHAIN, final_correct=True)
    assert check.invalid == 1 and 0 < check.score < 1
    guessed = "3 \\times 4 = 12, 12 + 5 = 18, 18 \\times 3 = 17 = 51 \\boxed{60}"
    assert check_steps(guessed, CHAIN, final_correct=True).score < 0.5


def test_symbolic_milestones_use_the_math_verifier():
    milestones = [Milestone("s1", "6x^2 - 4"), Milestone("s2", "20", ("s1",))]
    text = "Differentiate: $f'(x) = 6x^{2} - 4$, so $f'(2) = 6 \\cdot 4 - 4 = 20$. \\boxed{20}"
    assert check_steps(text, milestones, final_correct=True).score == 1.0
    assert (
        check_steps(text.replace("6x^{2}", "6x^{3}"), milestones, final_correct=True).score == 0.5
    )


def test_tasks_without_milestones_get_the_outcome():
    assert check_steps("\\boxed{3}", [], final_correct=True).score == 1.0
    assert check_steps("\\boxed{3}", [], final_correct=False).score == 0.0


def test_the_reasoning_stops_at_the_final_answer():
    assert reasoning_part("a = 1\nThe final answer is 12 = 12") == "a = 1\n"
    text = "x = 3 \\boxed{12} and later 12 = 12"
    assert check_steps(text, [Milestone("s1", "12")], final_correct=True).score == 0.0


def test_process_verifier_accepts_dicts_values_and_refuses_junk():
    gold = [{"id": "a", "value": "12"}, {"id": "b", "value": "17", "after": ["a"]}]
    assert process_verifier(GOOD, gold).score == 1.0
    assert process_verifier(GOOD, ["17", "12"]).components == {"process": 1.0}
    assert process_verifier(GOOD, [{"nope": 1}]).score == 0.0
    assert process_verifier(None, ["1"]).score == 0.0  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("0123456789 +-*/^=()[]{}.,\\fracx$\n%")), max_size=300
    ),
    final=st.sampled_from([True, False, None]),
)
def test_step_checker_never_raises_and_stays_in_range(text, final):
    check = check_steps(text, CHAIN, final_correct=final)
    assert 0.0 <= check.score <= 1.0 and math.isfinite(check.score)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=500))
def test_step_checker_survives_arbitrary_unicode(text):
    assert 0.0 <= check_steps(text, CHAIN, final_correct=True).score <= 1.0


def test_huge_responses_are_checked_quickly():
    for text in ("x = 1\n" * 1_700_000, "1+" * 5_000_000, "{" * 1_000_000, "= 12 " * 2_000_000):
        start = time.perf_counter()
        score = check_steps(text, CHAIN, final_correct=True).score
        assert 0.0 <= score <= 1.0
        assert time.perf_counter() - start < 2.0


def test_split_steps():
    assert split_steps("one\n\ntwo\n\n\nthree") == ["one", "two", "three"]
    assert split_steps("a\nb") == ["a", "b"]
    assert len(split_steps("\n\n".join(map(str, range(100))), max_steps=8)) == 8
    assert split_steps("") == [""]


# --- reward models ------------------------------------------------------------------------------


def tiny_classifier(num_labels: int = 1):
    """A 2-layer BERT classifier and a word-level tokenizer built locally (no downloads)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    words = [
        "what",
        "is",
        "2",
        "+",
        "3",
        "=",
        "5",
        "so",
        "the",
        "answer",
        "boxed",
        "4",
        "6",
        "7",
        "step",
        "one",
        "two",
    ]
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    return model, tokenizer


@pytest.mark.slow
def test_outcome_reward_model_scores_follow_the_model(tmp_path):
    import torch

    from llmgym.rewards.math.process import RewardModel

    model, tokenizer = tiny_classifier()
    rm = RewardModel(model, tokenizer)
    a = rm.score("what is 2 + 3", "2 + 3 = 5 so the answer boxed 5")
    assert 0.0 < a < 1.0 and rm.score("what is 2 + 3", "2 + 3 = 5 so the answer boxed 5") == a
    with torch.no_grad():
        model.classifier.bias.fill_(30.0)
    assert rm.score("what is 2 + 3", "7") > 0.999
    with torch.no_grad():
        model.classifier.bias.fill_(-30.0)
    assert rm.score("what is 2 + 3", "7") < 0.001

    with torch.no_grad():
        model.classifier.bias.fill_(0.0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    again = RewardModel.from_pretrained(str(tmp_path))
    assert again.score("what is 2 + 3", "2 + 3 = 5 so the answer boxed 5") == pytest.approx(
        rm.score("what is 2 + 3", "2 + 3 = 5 so the answer boxed 5"), abs=1e-6
    )


@pytest.mark.slow
def test_process_reward_model_scores_every_step_prefix():
    from llmgym.rewards.math.process import RewardModel

    model, tokenizer = tiny_classifier(num_labels=2)
    response = "step one 2 + 3 = 5\n\nstep two 5 + 2 = 7\n\nso the answer boxed 7"
    prm = RewardModel(model, tokenizer, kind="prm", batch_size=2)
    steps = prm.step_scores("what is 2 + 3 + 2", response)
    assert len(steps) == 3 and all(0.0 < s < 1.0 for s in steps)
    assert prm.score("what is 2 + 3 + 2", response) == min(steps)
    mean = RewardModel(model, tokenizer, kind="prm", aggregate="mean")
    assert mean.score("what is 2 + 3 + 2", response) == pytest.approx(sum(steps) / 3)
    orm = RewardModel(model, tokenizer)
    assert orm.score("what is 2 + 3 + 2", response) == pytest.approx(steps[-1], abs=1e-6)
    with pytest.raises(ValueError, match="kind"):
        RewardModel(model, tokenizer, kind="xrm")
    with pytest.raises(ValueError, match="tokenizer"):
        RewardModel(model, None)


@pytest.mark.slow
def test_reward_models_plug_into_math_env(tmp_path):
    import gymnasium as gym
    import torch

    from llmgym import error

    model, tokenizer = tiny_classifier()
    with torch.no_grad():
        model.classifier.bias.fill_(30.0)  # a model that likes everything
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    for spec, extra in ((str(tmp_path), {}), (model, {"reward_tokenizer": tokenizer})):
        env = gym.make(
            "llm/Math-v0",
            family="arith.add_small",
            reward_model=spec,
            reward_model_weight=0.5,
            **extra,
        )
        assert env.unwrapped.reward_range == (0.0, 1.5)
        env.reset(seed=0)
        _, reward, _, _, info = env.step(env.unwrapped.oracle_action())
        assert info["reward_components"]["reward_model"] == pytest.approx(0.5, abs=1e-3)
        assert reward == pytest.approx(1.5, abs=1e-3) and info["is_success"]
        env.reset(seed=0)
        _, reward, _, _, info = env.step("no idea")
        assert reward == pytest.approx(0.5, abs=1e-3) and not info["is_success"]
    with pytest.raises(error.Error, match="tokenizer"):
        gym.make("llm/Math-v0", reward_model=model)


def test_a_callable_reward_model_is_clipped_to_the_unit_interval():
    import gymnasium as gym

    for value, want in ((0.25, 0.25), (7.0, 1.0), (-2.0, 0.0), (float("nan"), 0.0), ("x", 0.0)):
        env = gym.make(
            "llm/Math-v0", family="arith.add_small", reward_model=lambda p, r, v=value: v,
            reward_model_weight=2.0,
        )  # fmt: skip
        env.reset(seed=1)
        _, reward, _, _, info = env.step("\\boxed{0}")
        assert info["reward_components"]["reward_model"] == 2.0 * want
        assert reward == 2.0 * want
