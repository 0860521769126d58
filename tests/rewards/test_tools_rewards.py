"""Tool-call parsing, specs from Python functions, argument validation and the BFCL-style AST match."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgym.rewards.tools import (
    MAX_CALLS,
    MAX_DEPTH,
    ToolCall,
    ast_match,
    ast_match_result,
    format_tool_calls,
    function_spec,
    normalize_string,
    parse_tool_calls,
    tool_call_match,
    validate_arguments,
)

# --- parsing -------------------------------------------------------------------------------------


def test_hermes_several_calls_and_string_arguments() -> None:
    text = (
        'Let me check.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": [1, 2]}"}</tool_call>'
    )
    calls = parse_tool_calls(text, "hermes")
    assert [(c.name, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {"y": [1, 2]})]


def test_hermes_bad_body_is_an_error_call_not_an_exception() -> None:
    calls = parse_tool_calls("<tool_call>{not json}</tool_call>", "hermes")
    assert len(calls) == 1 and calls[0].error and "JSON" in calls[0].error
    calls = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>', "hermes")
    assert calls[0].error and calls[0].name == ""


def test_hermes_unterminated_last_call_still_read() -> None:
    calls = parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}', "hermes")
    assert calls == [ToolCall("f", {})]


def test_json_object_list_fence_and_parameters_alias() -> None:
    assert parse_tool_calls('{"name": "f", "arguments": {"a": 1}}', "json") == [
        ToolCall("f", {"a": 1})
    ]
    two = parse_tool_calls(
        '[{"name": "f", "arguments": {}}, {"name": "g", "parameters": {"b": 2}}]', "json"
    )
    assert [(c.name, c.arguments) for c in two] == [("f", {}), ("g", {"b": 2})]
    fenced = parse_tool_calls('Sure:\n```json\n{"name": "f", "arguments": {"q": "x"}}\n```', "json")
    assert fenced == [ToolCall("f", {"q": "x"})]


def test_json_that_is_not_call_shaped_is_a_final_answer() -> None:
    assert parse_tool_calls('{"answer": 42}', "json") == []
    assert parse_tool_calls("The total is 42.", "json") == []
    assert parse_tool_calls("[1, 2, 3]", "json") == []


def test_python_calls_literals_only() -> None:
    calls = parse_tool_calls('f(a=1, b=-2.5, c=[True, None], d={"k": "v"}, e=(1, 2))', "python")
    assert calls[0].arguments == {
        "a": 1,
        "b": -2.5,
        "c": [True, None],
        "d": {"k": "v"},
        "e": [1, 2],
    }
    assert parse_tool_calls("[f(x=1), math.sqrt(x=4)]", "python")[1].name == "math.sqrt"


@pytest.mark.parametrize(
    "code",
    [
        "f(x=__import__('os').system('echo hacked'))",
        "f(x=open('/etc/passwd').read())",
        "f(x=1 + 1)",
        "f(x=[i for i in range(10)])",
        "f(x=lambda: 1)",
        "f(**{'x': 1})",
        "f(1)",
        "(lambda: 1)()",
        "f(x=y)",
    ],
)
def test_python_refuses_everything_but_literals(code: str) -> None:
    calls = parse_tool_calls(code, "python")
    assert len(calls) == 1 and calls[0].error, calls


def test_python_prose_lines_and_final_answers() -> None:
    text = 'I\'ll look it up.\nlookup(name="Ada")\nThanks!'
    assert parse_tool_calls(text, "python") == [ToolCall("lookup", {"name": "Ada"})]
    assert parse_tool_calls("The answer is f(x) = 3 for x.", "python") == []
    assert parse_tool_calls("Done. Ticket 1042 closed.", "python") == []


def test_openai_dict_calls() -> None:
    msg = {
        "content": "",
        "tool_calls": [
            {"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "function": {"name": "g", "arguments": {"b": 2}}},
            {"id": "c3", "function": {"name": "h", "arguments": "[1]"}},
            {"type": "function"},
        ],
    }
    calls = parse_tool_calls(msg, "openai")
    assert [(c.id, c.name, c.arguments, c.error is None) for c in calls[:3]] == [
        ("c1", "f", {"a": 1}, True),
        ("c2", "g", {"b": 2}, True),
        ("c3", "h", {}, False),
    ]
    assert calls[3].error
    assert parse_tool_calls("plain text", "openai") == []


def test_auto_prefers_openai_then_hermes() -> None:
    msg = {
        "content": '<tool_call>{"name": "x", "arguments": {}}</tool_call>',
        "tool_calls": [{"function": {"name": "y", "arguments": "{}"}}],
    }
    assert parse_tool_calls(msg, "auto")[0].name == "y"
    assert parse_tool_calls(msg["content"], "auto")[0].name == "x"
    assert parse_tool_calls("f(a=1)", "auto")[0].name == "f"


def test_unknown_format_is_a_programmer_error() -> None:
    with pytest.raises(ValueError, match="fmt"):
        parse_tool_calls("x", "xml")


@pytest.mark.parametrize("fmt", ["hermes", "json", "python", "auto"])
def test_huge_and_deep_inputs_are_bounded_and_fast(fmt: str) -> None:
    hostile = [
        "x" * 10_000_000,
        "<tool_call>" * 500_000,
        "{" * 1_000_000,
        "[" * 100_000 + "]" * 100_000,
        "f(a=" + "[" * 5000 + "]" * 5000 + ")",
        '<tool_call>{"name": "f", "arguments": ' + "[" * 50_000 + "]" * 50_000 + "}</tool_call>",
        '{"name": "f", "arguments": {"a": ' + "[" * 40 + "]" * 40 + "}}",
        "\x00\ud800" * 1000,
    ]
    for text in hostile:
        start = time.perf_counter()
        calls = parse_tool_calls(text, fmt)
        assert time.perf_counter() - start < 1.0
        assert all(isinstance(c, ToolCall) for c in calls)
        for c in calls:
            assert c.error is not None or len(json.dumps(c.arguments)) < 100_000


def test_depth_limit_is_enforced_in_every_format() -> None:
    deep = {"a": json.loads("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2))}
    for fmt in ("hermes", "json", "python"):
        text = format_tool_calls([("f", deep)], fmt)
        calls = parse_tool_calls(text, fmt)
        assert calls and calls[0].error and "nested" in calls[0].error, (fmt, calls)


def test_too_many_calls_become_an_error_call() -> None:
    text = "\n".join(f"f(i={i})" for i in range(MAX_CALLS + 5))
    calls = parse_tool_calls(text, "python")
    assert len(calls) == MAX_CALLS + 1 and calls[-1].error and "too many" in calls[-1].error


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**9), 10**9)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n not in ("true", "false", "none", "null") and not n.startswith("__")
)
_args = st.dictionaries(_names, _values, max_size=4)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(_names, _args), min_size=1, max_size=4),
    st.sampled_from(["hermes", "json", "python", "openai"]),
)
def test_format_then_parse_round_trips(calls: list[tuple[str, dict[str, Any]]], fmt: str) -> None:
    parsed = parse_tool_calls(format_tool_calls(calls, fmt), fmt)
    assert [(c.name, c.arguments) for c in parsed] == calls


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["hermes", "json", "python", "openai", "auto"]))
def test_parse_never_raises_on_text(text: str, fmt: str) -> None:
    calls = parse_tool_calls(text, fmt)
    assert isinstance(calls, list)


# --- specs and validation -------------------------------------------------------------------------


def _book(
    db: Any,
    hotel: str,
    nights: int,
    guests: list[str],
    budget: float | None = None,
    view: Literal["sea", "city"] = "city",
    extras: dict[str, int] | None = None,
    note: Annotated[str, "Shown to the front desk."] = "",
) -> dict[str, Any]:
    """Book a hotel room.

    More prose that is not the summary.

    Args:
        hotel: Hotel id, e.g. "H001".
        nights: How many nights,
            at least one.
        guests: Guest names.
        budget: Most to pay per night.
        view: Room view.
        extras: Extra items and their counts.
    """
    return {}


def test_function_spec_from_hints_and_docstring() -> None:
    spec = function_spec(_book)
    fn = spec["function"]
    assert spec["type"] == "function" and fn["name"] == "_book"
    assert fn["description"] == "Book a hotel room."
    params = fn["parameters"]
    assert "db" not in params["properties"]
    assert params["required"] == ["hotel", "nights", "guests"]
    assert params["properties"]["nights"] == {
        "type": "integer",
        "description": "How many nights, at least one.",
    }
    assert params["properties"]["guests"]["items"] == {"type": "string"}
    assert params["properties"]["budget"]["type"] == "number"
    assert (
        params["properties"]["view"]["enum"] == ["sea", "city"]
        and params["properties"]["view"]["default"] == "city"
    )
    assert params["properties"]["extras"]["additionalProperties"] == {"type": "integer"}
    assert params["properties"]["note"]["description"] == "Shown to the front desk."
    assert params["additionalProperties"] is False


def test_function_spec_rest_docstrings_and_bad_hints() -> None:
    def f(a: int, b: str = "x") -> None:
        """Do it.

        :param a: the first
        :param b: the second
        """

    props = function_spec(f)["function"]["parameters"]["properties"]
    assert props["a"]["description"] == "the first" and props["b"]["description"] == "the second"

    def g(a: complex) -> None:
        """Nope."""

    with pytest.raises(TypeError, match="JSON schema"):
        function_spec(g)


def test_validate_arguments_reports_each_problem() -> None:
    spec = function_spec(_book)
    assert validate_arguments(spec, {"hotel": "H1", "nights": 2, "guests": ["a"]}) == []
    assert (
        validate_arguments(spec, {"hotel": "H1", "nights": 2, "guests": ["a"], "budget": 90}) == []
    )  # int for float
    errors = validate_arguments(
        spec, {"hotel": 5, "nights": True, "guests": ["a", 3], "view": "moon", "x": 1}
    )
    text = " | ".join(errors)
    for expected in (
        "'hotel' must be string",
        "'nights' must be integer",
        "'guests[1]' must be string",
        "'view' must be one of",
        "unknown argument 'x'",
    ):
        assert expected in text, text
    assert validate_arguments(spec, {}) == [
        "missing required argument 'hotel'",
        "missing required argument 'nights'",
        "missing required argument 'guests'",
    ]
    assert validate_arguments(spec, "not a dict")[0].startswith("arguments must be an object")
    assert validate_arguments(spec, {"hotel": "H", "nights": float("nan"), "guests": []}) == [
        "argument 'nights' must be integer, got number"
    ]
    deep: Any = []
    for _ in range(MAX_DEPTH + 3):
        deep = [deep]
    assert "nested" in validate_arguments(spec, {"guests": deep})[0]


# --- AST match -------------------------------------------------------------------------------------

TRIANGLE = [
    {
        "name": "area",
        "parameters": {
            "type": "dict",
            "properties": {
                "base": {"type": "integer"},
                "height": {"type": "float"},
                "unit": {"type": "string"},
            },
            "required": ["base", "height"],
        },
    }
]
GOLD = [{"area": {"base": [10], "height": [5.0, 5.5], "unit": ["cm", ""]}}]


@pytest.mark.parametrize(
    ("calls", "ok", "reason"),
    [
        (
            [{"area": {"base": 10, "height": 5}}],
            True,
            None,
        ),  # int accepted for float, optional omitted
        ([{"area": {"base": 10, "height": 5.5, "unit": " CM "}}], True, None),  # normalised string
        (
            [{"area": {"base": 10.0, "height": 5}}],
            False,
            "must be integer",
        ),  # float not accepted for int
        ([{"area": {"base": 10, "height": 5, "unit": "m"}}], False, "not an acceptable value"),
        (
            [{"area": {"base": 10, "height": 5, "unit": ""}}],
            True,
            None,
        ),  # "" for an optional = omitted
        ([{"area": {"base": 10}}], False, "missing required parameter 'height'"),
        (
            [{"area": {"base": 10, "height": 5, "color": "red"}}],
            False,
            "unexpected parameter 'color'",
        ),
        ([{"Area": {"base": 10, "height": 5}}], False, "expected 'area'"),
        ([{"area": {"base": "10", "height": 5}}], False, "must be integer"),
        ([{"area": {"base": True, "height": 5}}], False, "must be integer"),
        ([], False, "expected 1 call(s), got 0"),
        ([{"area": {"base": 10, "height": 5}}] * 2, False, "expected 1 call(s), got 2"),
    ],
)
def test_ast_match_hand_computed(calls: Any, ok: bool, reason: str | None) -> None:
    result = ast_match_result(calls, GOLD, TRIANGLE)
    assert result.matched is ok and ast_match(calls, GOLD, TRIANGLE) is ok
    if reason:
        assert any(reason in r for r in result.reasons), result.reasons


def test_ast_match_without_tools_uses_gold_for_required() -> None:
    assert ast_match([{"area": {"base": 10, "height": 5}}], GOLD)
    assert not ast_match([{"area": {"base": 10}}], GOLD)


def test_ast_match_unknown_function_when_tools_given() -> None:
    gold = [{"other": {"a": [1]}}]
    result = ast_match_result([{"other": {"a": 1}}], gold, TRIANGLE)
    assert not result.matched and "not one of the offered functions" in result.reasons[0]


def test_ast_match_nested_lists_and_dicts() -> None:
    tools = [
        {
            "name": "f",
            "parameters": {
                "type": "dict",
                "properties": {
                    "xs": {"type": "array", "items": {"type": "float"}},
                    "opts": {
                        "type": "dict",
                        "properties": {"mode": {"type": "string"}, "level": {"type": "integer"}},
                    },
                },
                "required": ["xs"],
            },
        }
    ]
    gold = [{"f": {"xs": [[1, 2.5]], "opts": ["", {"mode": ["Fast"], "level": [1, ""]}]}}]
    assert ast_match([{"f": {"xs": [1.0, 2.5]}}], gold, tools)
    assert ast_match([{"f": {"xs": [1, 2.5], "opts": {"mode": "fast"}}}], gold, tools)
    assert ast_match([{"f": {"xs": [1, 2.5], "opts": {"mode": "fast", "level": 1}}}], gold, tools)
    assert not ast_match([{"f": {"xs": [2.5, 1]}}], gold, tools)  # order matters inside a list
    assert not ast_match([{"f": {"xs": [1, 2.5, 3]}}], gold, tools)
    assert not ast_match([{"f": {"xs": [1, 2.5], "opts": {"mode": "slow"}}}], gold, tools)
    assert not ast_match(
        [{"f": {"xs": [1, 2.5], "opts": {"mode": "fast", "extra": 1}}}], gold, tools
    )
    assert not ast_match([{"f": {"xs": [1, "2.5"]}}], gold, tools)


def test_ast_match_parallel_any_order_and_one_to_one() -> None:
    gold = [{"price": {"t": ["AAPL"]}}, {"price": {"t": ["MSFT"]}}]
    assert ast_match([{"price": {"t": "msft"}}, {"price": {"t": "aapl"}}], gold)
    assert not ast_match([{"price": {"t": "AAPL"}}, {"price": {"t": "AAPL"}}], gold)
    # Kuhn's matching: the greedy first choice would block the second call.
    gold2 = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    assert ast_match([{"f": {"x": 1}}, {"f": {"x": 2}}], gold2)


def test_ast_match_accepts_every_call_shape() -> None:
    gold = [{"f": {"a": [1]}}]
    shapes: list[Any] = [
        [ToolCall("f", {"a": 1})],
        [{"name": "f", "arguments": {"a": 1}}],
        [{"name": "f", "arguments": '{"a": 1}'}],
        [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        [{"f": {"a": 1}}],
        {"f": {"a": 1}},
    ]
    for calls in shapes:
        assert ast_match(calls, gold), calls


@pytest.mark.parametrize(
    "junk", [None, 3, "text", [None], [{"a": 1, "b": 2}], [{"f": "notargs"}], [[1]]]
)
def test_ast_match_hostile_inputs_do_not_raise(junk: Any) -> None:
    assert ast_match(junk, GOLD, TRIANGLE) is False
    assert ast_match([{"area": {"base": 10, "height": 5}}], junk) is False


def test_normalize_string_is_bfcls_standardisation() -> None:
    assert normalize_string("New York, NY") == normalize_string("new-york ny") == "newyorkny"
    assert normalize_string("it's") == normalize_string('it"s')  # single quotes read as double
    assert normalize_string("a\tb") != normalize_string("ab")  # only spaces go, as in BFCL
    assert normalize_string("Ｆｕｌｌ") != "full"  # no Unicode folding: BFCL's verdicts


def test_tool_call_match_verifier() -> None:
    assert tool_call_match("area(base=10, height=5)", GOLD, tools=TRIANGLE).success
    result = tool_call_match("I think the area is 25.", GOLD)
    assert not result.success and result.score == 0.0
    assert tool_call_match(
        "area(base=10, height=5)", {"ground_truth": GOLD, "tools": TRIANGLE}
    ).success


# --- properties -----------------------------------------------------------------------------------

_scalar = st.one_of(
    st.integers(-1000, 1000), st.text(alphabet="abcxyz", min_size=1, max_size=6), st.booleans()
)


@st.composite
def _gold_and_calls(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    n = draw(st.integers(1, 4))
    gold, calls = [], []
    for i in range(n):
        name = draw(st.sampled_from(["f", "g", "h"]))
        params: dict[str, list[Any]] = {}
        args: dict[str, Any] = {}
        for j in range(draw(st.integers(0, 3))):
            value = draw(_scalar)
            optional = draw(st.booleans())
            params[f"p{j}"] = [value, ""] if optional else [value]
            if not optional or draw(st.booleans()):
                args[f"p{j}"] = value
        params["idx"] = [i]
        args["idx"] = i
        gold.append({name: params})
        calls.append({name: args})
    return gold, calls


@settings(max_examples=200, deadline=None)
@given(_gold_and_calls(), st.randoms())
def test_property_permutation_invariance(case: Any, rnd: Any) -> None:
    gold, calls = case
    assert ast_match(calls, gold)
    shuffled = list(calls)
    rnd.shuffle(shuffled)
    gold_shuffled = list(gold)
    rnd.shuffle(gold_shuffled)
    assert ast_match(shuffled, gold) and ast_match(calls, gold_shuffled)


@settings(max_examples=200, deadline=None)
@given(_gold_and_calls(), st.data())
def test_property_any_corruption_fails(case: Any, data: Any) -> None:
    gold, calls = case
    i = data.draw(st.integers(0, len(calls) - 1))
    ((name, args),) = calls[i].items()
    broken = [dict(c) for c in calls]
    how = data.draw(
        st.sampled_from(["drop_required", "extra_param", "rename", "extra_call", "wrong_idx"])
    )
    if how == "drop_required":
        broken[i] = {name: {k: v for k, v in args.items() if k != "idx"}}
    elif how == "extra_param":
        broken[i] = {name: {**args, "zz_unknown": 1}}
    elif how == "rename":
        broken[i] = {name + "_x": args}
    elif how == "extra_call":
        broken.append(calls[i])
    else:
        broken[i] = {name: {**args, "idx": 99}}
    assert not ast_match(broken, gold)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("as()", [("as", {})]),
        ("api.import(from=2)", [("api.import", {"from": 2})]),
        ("[class(a=1), f(b=2)]", [("class", {"a": 1}), ("f", {"b": 2})]),
    ],
)
def test_python_calls_may_name_functions_by_python_keywords(text: str, expected: list) -> None:
    """A tool named ``class`` or ``import`` is a tool like any other in the python format."""
    assert [(c.name, c.arguments) for c in parse_tool_calls(text, "python")] == expected
