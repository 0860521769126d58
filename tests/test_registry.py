"""The registry: built-ins, declarative envs from Python/YAML/TOML, and entry-point plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

import llmgym
from llmgym import error

TASKS = [
    {"id": "a", "prompt": "Reply with the word yes.", "answer": "yes"},
    {"id": "b", "prompt": "Reply with the word no.", "answer": "no"},
]


def test_register_task_env_from_python_and_make():
    env_id = llmgym.register_task_env(
        "testreg/YesNo-v0",
        tasks=TASKS,
        verifier="exact",
        prompt_template="Q: {prompt}\nA:",
        overwrite=True,
    )
    assert env_id in llmgym.list_envs() and env_id in llmgym.list_envs("testreg")
    env = gym.make(env_id)
    obs, info = env.reset(options={"task_id": "a"})
    assert obs == "Q: Reply with the word yes.\nA:"
    assert env.step("YES")[1] == 1.0
    llmgym.check_env(env)
    assert llmgym.list_families(env_id) == ["default"]


def test_register_task_env_validates_eagerly(tmp_path):
    with pytest.raises(error.UnknownVerifier, match="available"):
        llmgym.register_task_env("testreg/Bad-v0", tasks=TASKS, verifier="fuzzy")
    with pytest.raises(error.InvalidSpec, match="prompt_template uses \\{question\\}"):
        llmgym.register_task_env("testreg/Bad-v0", tasks=TASKS, prompt_template="{question}")
    with pytest.raises(error.InvalidSpec, match="Bad env id"):
        llmgym.register_task_env("not an id", tasks=TASKS)
    with pytest.raises(error.InvalidTask, match="No such JSONL"):
        llmgym.register_task_env("testreg/Bad-v0", tasks=tmp_path / "none.jsonl")
    with pytest.raises(error.InvalidSpec, match="extraction"):
        llmgym.register_task_env("testreg/Bad-v0", tasks=TASKS, extract="telepathy")
    llmgym.register_task_env("testreg/Once-v0", tasks=TASKS)
    with pytest.raises(error.InvalidSpec, match="already registered"):
        llmgym.register_task_env("testreg/Once-v0", tasks=TASKS)
    assert "testreg/Bad-v0" not in gym.registry


def score_length(response: str, gold: int) -> float:
    """A user verifier: 1 if the response has exactly `gold` words."""
    return float(len(response.split()) == gold)


def test_callable_verifier_and_extraction():
    sys.modules.setdefault("test_registry_mod", sys.modules[__name__])
    env_id = llmgym.register_task_env(
        "testreg/Words-v0",
        tasks=[
            {
                "id": "w",
                "prompt": "Say three words in <answer> tags.",
                "answer": 3,
                "metadata": {"reference": "<answer>one two three</answer>"},
            }
        ],
        verifier=score_length,
        extract="answer_tag",
        overwrite=True,
    )
    env = gym.make(env_id)
    env.reset(seed=0)
    assert env.step("thinking... <answer>a b c</answer>")[1] == 1.0
    env.reset(seed=0)
    _, reward, *_, info = env.step("a b c")
    assert reward == 0.0 and "no answer found" in info["feedback"]
    llmgym.check_env(env)


def test_load_spec_yaml_and_toml(tmp_path):
    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in TASKS))
    (tmp_path / "spec.yaml").write_text(
        textwrap.dedent("""
        envs:
          - id: testspec/YesNo-v0
            tasks: tasks.jsonl
            verifier: exact
            system_prompt: Answer with one word.
          - id: testspec/YesNoRegex-v0
            tasks: tasks.jsonl
            verifier: regex
            verifier_options: {ignore_case: true}
    """)
    )
    ids = llmgym.load_spec(tmp_path / "spec.yaml", overwrite=True)
    assert ids == ["testspec/YesNo-v0", "testspec/YesNoRegex-v0"]
    env = gym.make("testspec/YesNo-v0")
    _, info = env.reset(seed=0)
    assert info["messages"][0] == {"role": "system", "content": "Answer with one word."}
    (tmp_path / "spec.toml").write_text(
        textwrap.dedent("""
        id = "testspec/Toml-v0"
        tasks = "tasks.jsonl"
        verifier = "exact"
        prompt_template = "Question: {prompt}"
    """)
    )
    assert llmgym.load_spec(tmp_path / "spec.toml", overwrite=True) == ["testspec/Toml-v0"]
    assert (
        gym.make("testspec/Toml-v0").reset(options={"task_id": "b"})[0]
        == "Question: Reply with the word no."
    )


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("a.yaml", "id: [unclosed", "cannot parse"),
        ("a.yaml", "- 1\n- 2\n", "mapping at the top level"),
        ("a.yaml", "id: x/Y-v0\n", "missing 'tasks'"),
        ("a.yaml", "id: x/Y-v0\ntasks: t.jsonl\ncolour: red\n", "unknown key"),
        ("a.yaml", "envs: []\n", "non-empty list"),
        ("a.toml", "id = ", "cannot parse"),
        ("a.json", "{}", "Expects a .yaml"),
        ("a.yaml", "id: x/Y-v0\ntasks: t.jsonl\nmax_turns: many\n", "max_turns"),
    ],
)
def test_bad_specs_say_what_is_wrong(tmp_path, name, content, match):
    (tmp_path / "t.jsonl").write_text(json.dumps(TASKS[0]))
    (tmp_path / name).write_text(content)
    with pytest.raises(error.Error, match=match):
        llmgym.load_spec(tmp_path / name)


def _write_dist(site: Path, name: str, entry_points: str, module_source: str) -> None:
    pkg = name.replace("-", "_")
    (site / f"{pkg}.py").write_text(module_source)
    dist = site / f"{pkg}-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[llmgym.envs]\n{entry_points}\n")
    (dist / "RECORD").write_text("")


def test_plugins_from_installed_distributions(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _write_dist(
        site,
        "acme-envs",
        "acme/Tickets-v0 = acme_envs:TicketsEnv\nacme-extra = acme_envs:register_more",
        textwrap.dedent("""
            import llmgym
            from llmgym.declarative import DeclarativeEnv

            class TicketsEnv(DeclarativeEnv):
                def __init__(self, **kwargs):
                    super().__init__(tasks=[{"id": "t1", "prompt": "Priority of an outage?", "answer": "P1"}], **kwargs)

            def register_more():
                llmgym.register_task_env("acme/Faq-v0", tasks=[{"id": "f", "prompt": "Hi?", "answer": "hello"}])
        """),
    )
    _write_dist(
        site,
        "broken-envs",
        "broken/Env-v0 = broken_envs:Missing",
        "raise RuntimeError('boom at import')\n",
    )
    code = textwrap.dedent("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import llmgym, gymnasium as gym
        env = gym.make("acme/Tickets-v0")
        env.reset(seed=0)
        reward = env.step("p1")[1]
        print(json.dumps({
            "envs": llmgym.list_envs(),
            "reward": reward,
            "warnings": [str(w.message) for w in caught if "plugin" in str(w.message)],
        }))
    """)
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"acme/Tickets-v0", "acme/Faq-v0"} <= set(result["envs"])
    assert "broken/Env-v0" not in result["envs"]
    assert result["reward"] == 1.0
    assert (
        len(result["warnings"]) == 1
        and "broken" in result["warnings"][0]
        and "boom" in result["warnings"][0]
    )


def test_llmgym_specs_environment_variable(tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps(TASKS[0]))
    (tmp_path / "s.yaml").write_text("id: envvar/Yes-v0\ntasks: t.jsonl\n")
    code = "import llmgym; print('envvar/Yes-v0' in llmgym.list_envs())"
    env = dict(os.environ, LLMGYM_SPECS=str(tmp_path / "s.yaml"))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.stdout.strip() == "True", out.stderr


class TestDeclarativeContract(llmgym.EnvContractTests):
    """The mixin plugin authors inherit, used on a declarative env."""

    env_id = "testreg/Mixin-v0"

    @classmethod
    def setup_class(cls):
        llmgym.register_task_env(cls.env_id, tasks=TASKS, overwrite=True)
