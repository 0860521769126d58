"""pass@k against hand-computed values, bootstrap intervals on known distributions, tests, summaries."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.evaluation.metrics import (
    bootstrap_ci,
    difficulty_bins,
    exec_stats,
    group_stats,
    holm,
    paired_permutation_test,
    pass_at_k,
    pass_at_k_table,
    permutation_test,
    summarize,
    two_proportion_test,
)

# --- pass@k --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        # 1 - C(n-c, k) / C(n, k), worked out by hand
        (10, 3, 1, Fraction(3, 10)),
        (5, 2, 2, Fraction(7, 10)),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (4, 1, 2, Fraction(1, 2)),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (6, 2, 3, Fraction(4, 5)),  # 1 - C(4,3)/C(6,3) = 1 - 4/20
        (10, 1, 5, Fraction(1, 2)),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
        (20, 5, 10, Fraction(1 - Fraction(3003, 184756))),  # C(15,10)=3003, C(20,10)=184756
        (3, 0, 3, Fraction(0)),
        (3, 3, 1, Fraction(1)),
        (7, 5, 3, Fraction(1)),  # n - c < k: every draw of 3 holds a correct one
        (1, 1, 1, Fraction(1)),
    ],
)
def test_pass_at_k_hand_computed(n: int, c: int, k: int, expected: Fraction) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(float(expected), abs=1e-15)


def test_pass_at_1_is_the_success_fraction() -> None:
    for n in range(1, 30):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-15)


def test_pass_at_k_large_n_stays_accurate() -> None:
    # A naive float ratio of huge binomials overflows; the estimator must not.
    value = pass_at_k(5000, 1, 2500)
    assert value == pytest.approx(0.5, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_matches_combinatorics_and_is_monotone(args: tuple[int, int, int]) -> None:
    n, c, k = args
    value = pass_at_k(n, c, k)
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert value == pytest.approx(float(exact), abs=1e-12)
    assert 0.0 <= value <= 1.0
    if k < n:
        assert pass_at_k(n, c, k + 1) >= value - 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= value - 1e-12


@pytest.mark.parametrize(
    ("n", "c", "k", "exc"),
    [
        (3, 1, 4, ValueError),  # more draws than samples
        (0, 0, 1, ValueError),
        (3, 4, 1, ValueError),
        (3, -1, 1, ValueError),
        (3, 1, 0, ValueError),
        (3.0, 1, 1, TypeError),
        (3, True, 1, TypeError),
        ("3", 1, 1, TypeError),
    ],
)
def test_pass_at_k_rejects_bad_input(n: object, c: object, k: object, exc: type) -> None:
    with pytest.raises(exc):
        pass_at_k(n, c, k)  # type: ignore[arg-type]


def test_pass_at_k_table_averages_tasks_and_skips_unestimable_k() -> None:
    records = []
    # task a: 4 samples, 1 correct; task b: 4 samples, 4 correct; task c: 3 samples, 0 correct
    for task, n, c in (("a", 4, 1), ("b", 4, 4), ("c", 3, 0)):
        records += [{"env": "e", "task_id": task, "success": i < c} for i in range(n)]
    table = pass_at_k_table(records, [1, 2, 3, 4])
    assert set(table) == {"1", "2", "3"}  # pass@4 needs 4 samples of every task
    assert table["1"]["value"] == pytest.approx((1 / 4 + 1 + 0) / 3)
    assert table["2"]["value"] == pytest.approx((1 / 2 + 1 + 0) / 3)  # 1 - C(3,2)/C(4,2) = 1/2
    assert table["3"]["value"] == pytest.approx((3 / 4 + 1 + 0) / 3)
    lo, hi = table["1"]["ci"]
    assert lo <= table["1"]["value"] <= hi


# --- bootstrap intervals -------------------------------------------------------------------------


def test_bootstrap_ci_covers_a_bernoulli_mean_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(123)
    p, n, trials = 0.3, 200, 200
    covered = 0
    widths = []
    for t in range(trials):
        x = (rng.random(n) < p).astype(float)
        lo, hi = bootstrap_ci(x, seed=t, n_resamples=600)
        covered += lo <= p <= hi
        widths.append(hi - lo)
    assert 0.89 <= covered / trials <= 0.99
    expected_width = 2 * 1.96 * math.sqrt(p * (1 - p) / n)
    assert np.mean(widths) == pytest.approx(expected_width, rel=0.1)


def test_bootstrap_ci_covers_a_normal_mean_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for t in range(200):
        x = rng.normal(5.0, 2.0, 100)
        lo, hi = bootstrap_ci(x, seed=t, n_resamples=600)
        covered += lo <= 5.0 <= hi
    assert 0.88 <= covered / 200 <= 0.99
    small = bootstrap_ci(rng.normal(0, 1, 50), seed=0)
    large = bootstrap_ci(rng.normal(0, 1, 5000), seed=0)
    assert (large[1] - large[0]) < (small[1] - small[0]) / 5


def test_cluster_bootstrap_is_wider_when_samples_of_a_task_agree() -> None:
    # 40 tasks, each solved always or never, 10 samples each: really 40 observations, not 400.
    rng = np.random.default_rng(0)
    solved = rng.random(40) < 0.5
    values = np.repeat(solved.astype(float), 10)
    groups = np.repeat(np.arange(40), 10)
    naive = bootstrap_ci(values, seed=0)
    clustered = bootstrap_ci(values, groups=list(groups), seed=0)
    assert (clustered[1] - clustered[0]) > 2.5 * (naive[1] - naive[0])
    p = solved.mean()
    expected = 2 * 1.96 * math.sqrt(p * (1 - p) / 40)
    assert clustered[1] - clustered[0] == pytest.approx(expected, rel=0.2)


def test_bootstrap_ci_is_seeded_and_handles_edges() -> None:
    x = np.random.default_rng(1).random(50)
    assert bootstrap_ci(x, seed=3) == bootstrap_ci(x, seed=3)
    assert bootstrap_ci([2.0] * 10) == (2.0, 2.0)
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    median = bootstrap_ci(x, statistic=np.median, seed=0, n_resamples=300)
    assert median[0] <= float(np.median(x)) <= median[1]
    for bad in ([1.0, math.nan], [math.inf]):
        with pytest.raises(ValueError):
            bootstrap_ci(bad)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], confidence=1.5)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], groups=["a"])


# --- significance tests -------------------------------------------------------------------


def test_paired_permutation_test_exact_small_case() -> None:
    # d = (1, 1, 1): of the 8 sign patterns only +++ and --- reach |mean| = 1.
    assert paired_permutation_test([1.0, 1.0, 1.0]) == pytest.approx(2 / 8)
    assert paired_permutation_test([1.0, -1.0]) == pytest.approx(1.0)


def test_permutation_tests_are_calibrated_under_the_null() -> None:
    rng = np.random.default_rng(5)
    paired = [
        paired_permutation_test(rng.normal(0, 1, 40), n_resamples=400, seed=i) for i in range(150)
    ]
    unpaired = [
        permutation_test(rng.normal(0, 1, 30), rng.normal(0, 1, 30), n_resamples=400, seed=i)
        for i in range(150)
    ]
    for ps in (paired, unpaired):
        assert 0.0 <= np.mean(np.array(ps) < 0.05) <= 0.12  # about 5% false positives
        assert 0.35 <= np.mean(ps) <= 0.65  # p-values roughly uniform
    assert paired_permutation_test(rng.normal(0.8, 1, 40), seed=0) < 0.01
    assert permutation_test(rng.normal(1, 1, 40), rng.normal(0, 1, 40), seed=0) < 0.01


def test_two_proportion_test_hand_computed() -> None:
    # pooled p = 0.5, se = sqrt(0.25 * 2/100) = 0.0707; z = 0.2/0.0707 = 2.828
    assert two_proportion_test(60, 100, 40, 100) == pytest.approx(
        math.erfc(2.8284271 / math.sqrt(2))
    )
    assert two_proportion_test(0, 10, 0, 10) == 1.0
    assert two_proportion_test(10, 10, 0, 10) == pytest.approx(
        math.erfc(math.sqrt(20) / math.sqrt(2))
    )
    assert math.isnan(two_proportion_test(0, 0, 1, 1))


def test_holm_adjustment() -> None:
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04 -> made monotone: 0.06
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    adjusted = holm([0.5, math.nan])
    assert adjusted[0] == 0.5 and math.isnan(adjusted[1])  # NaNs are not counted
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1
    assert holm([0.001, 0.2]) == [0.002, 0.2]


# --- summaries --------------------------------------------------------------------------------


def _record(env: str, task: str, success: bool, **extra: object) -> dict[str, object]:
    return {
        "env": env,
        "task_id": task,
        "domain": extra.pop("domain", "d"),
        "family": extra.pop("family", "f"),
        "difficulty": extra.pop("difficulty", 0.5),
        "success": success,
        "reward": float(success),
        "status": "ok",
        "turns": 1,
        **extra,
    }


def test_group_stats_components_tokens_and_statuses() -> None:
    records = [
        _record(
            "e", "t1", True, components={"correctness": 1.0, "format": 0.5}, completion_tokens=10
        ),
        _record("e", "t2", False, components={"correctness": 0.0}, completion_tokens=30, turns=3),
        _record("e", "t3", False, status="policy_error", error="boom"),
    ]
    s = group_stats(records)
    assert s["episodes"] == 3 and s["tasks"] == 3
    assert s["success_rate"] == pytest.approx(1 / 3)
    assert s["components"] == {
        "correctness": pytest.approx(1 / 3),
        "format": pytest.approx(0.5 / 3),
    }
    assert s["completion_tokens_mean"] == pytest.approx(40 / 3)
    assert s["turns_mean"] == pytest.approx(5 / 3)
    assert s["status"] == {"ok": 2, "policy_error": 1}
    assert s["error_rate"] == pytest.approx(1 / 3)
    assert s["exec"] is None


def test_exec_stats_counts_sandbox_anomalies() -> None:
    records = [
        _record("c", "a", False, exec=[{"status": "timeout"}, {"status": "ok"}]),
        _record("c", "b", False, exec=[{"status": "memory_limit"}]),
        _record("c", "c", True, exec=[{"status": "runtime_error", "signal": 11}]),  # segfault
        _record("c", "d", True, exec=[{"status": "runtime_error", "signal": None}]),  # an exception
        _record("c", "e", True, exec={"status": "sandbox_error"}),  # a bare dict is one fact
        _record("c", "f", True),  # no code ran
        _record("c", "g", True, exec=[{"no": "status"}, "junk"]),  # unusable facts are ignored
        # the coding env's verdict shape: a status plus per-test categories
        _record(
            "c", "h", False, exec=[{"status": "runtime_error", "tests": [{"category": "crashed"}]}]
        ),
        _record("c", "i", True, exec=[{"status": "passed", "tests": [{"category": "passed"}]}]),
    ]
    s = exec_stats(records)
    assert s is not None
    assert s["executions"] == 8
    assert s["timeout_rate"] == pytest.approx(1 / 8)
    assert s["memory_rate"] == pytest.approx(1 / 8)
    assert s["crash_rate"] == pytest.approx(3 / 8)  # the segfault, the sandbox error, "crashed"
    assert s["episode_anomaly_rate"] == pytest.approx(5 / 9)
    assert s["status_rates"]["runtime_error"] == pytest.approx(3 / 8)
    assert s["status_rates"]["passed"] == pytest.approx(1 / 8)


def test_summarize_breaks_down_by_env_domain_family_and_difficulty() -> None:
    records = [
        _record("m", "t1", True, domain="math", family="add", difficulty=0.1),
        _record("m", "t2", False, domain="math", family="mul", difficulty=0.9),
        _record("c", "t1", True, domain="code", family="io", difficulty=0.5),
    ]
    s = summarize(records)
    assert set(s["by_env"]) == {"m", "c"}
    assert set(s["by_domain"]) == {"math", "code"}
    assert set(s["by_family"]) == {"math/add", "math/mul", "code/io"}
    assert set(s["by_difficulty"]["m"]) == {"0.10", "0.90"}
    assert s["by_env"]["m"]["success_rate"] == 0.5
    assert s["overall"]["tasks"] == 3  # (env, task id) pairs


def test_difficulty_bins() -> None:
    few = difficulty_bins([0.25, 0.5])
    assert few(0.25) == "0.25"
    many = difficulty_bins([i / 100 for i in range(101)])
    assert many(0.0) == "0.0-0.2" and many(1.0) == "0.8-1.0" and many(0.55) == "0.4-0.6"
