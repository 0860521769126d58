"""FSDP2 through Accelerate on two CPU processes (gloo), against one process.

``accelerate launch --cpu`` with two processes starts only one (Accelerate 1.16's CPU launcher
needs mpirun), so these launch with ``ACCELERATE_USE_CPU=true`` and the FSDP config itself:
torchrun starts two processes and :func:`llmgym.agents.sharding.enable_cpu_fsdp` sends the model
through Accelerate's own FSDP2 preparation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from agents_common import DIGITS_TASKS, free_port

from llmgym.agents.runlog import read_metrics

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FSDP_CONFIG = ROOT / "configs" / "accelerate" / "fsdp.yaml"


def _env() -> dict[str, str]:
    return dict(
        os.environ,
        ACCELERATE_USE_CPU="true",
        PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )


def _launch_fsdp(
    args: list[str], timeout: int = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(FSDP_CONFIG),
        "--num_processes",
        "2",
        "--mixed_precision",
        "no",
        "--main_process_port",
        str(free_port()),
        *args,
    ]
    return subprocess.run(
        cmd, env={**_env(), **(env or {})}, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_fsdp_update_equals_one_process_and_generation_keeps_ranks_in_step(
    tiny_dir: str, tmp_path: Path
) -> None:
    import torch

    script = str(HERE / "fsdp_step.py")
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    alone = subprocess.run(
        [sys.executable, script, tiny_dir, str(one)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    # The two processes generate 2 and 8 tokens: a sharded forward in generation would leave
    # one process waiting on the other's all-gathers until the timeout.
    proc = _launch_fsdp([script, tiny_dir, str(two)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = torch.load(one, weights_only=False), torch.load(two, weights_only=False)
    assert (a["world"], a["sharded"]) == (1, False)
    assert (b["world"], b["sharded"]) == (2, True)
    for key in ("losses/policy", "entropy", "kl", "charts/grad_norm", "charts/trained_tokens"):
        assert b["stats"][key] == pytest.approx(a["stats"][key], rel=1e-5, abs=1e-6), key
    assert sorted(a["state"]) == sorted(b["state"])
    for name, weight in a["state"].items():
        # lr 1e-2: Adam's first step moves every weight by about lr, so 1e-4 is 1% of a step
        # (elements whose gradient is ~0 turn reduction-order noise into a visible difference).
        assert torch.allclose(weight, b["state"][name], atol=1e-4), name


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("lora_r", [0, 4])
def test_fsdp_grpo_run_evaluates_checkpoints_and_saves_the_trained_model(
    tiny_dir: str, tmp_path: Path, lora_r: int
) -> None:
    import torch

    from llmgym.agents.tiny import load_model_and_tokenizer

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in DIGITS_TASKS))
    spec = tmp_path / "spec.yaml"  # rewards graded by length: every update moves the weights
    spec.write_text(
        yaml.safe_dump(
            {
                "id": "agents-test/LengthSpec-v0",
                "tasks": str(tasks),
                "verifier": "agents_testing_verifiers:length_reward",
                "domain": "length",
            }
        )
    )
    config = tmp_path / "grpo.yaml"
    settings: dict[str, object] = {
        "algo": "grpo",
        "model": tiny_dir,
        "env_id": "agents-test/LengthSpec-v0",
        "output_dir": str(tmp_path / "run"),
        "total_steps": 2,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_new_tokens": 6,
        "learning_rate": 1e-2,
        "micro_batch_size": 1,
        "save_every": 1,
        "eval_every": 2,
        "eval_episodes": 2,
        "check_weights_every": 1,
        "torch_threads": 1,
        "tensorboard": False,
        "progress": False,
    }
    if lora_r:  # KL to the adapter-disabled base: the reference costs no second sharded copy
        settings.update({"lora_r": lora_r, "lora_alpha": 8, "beta": 0.04})
    config.write_text(yaml.safe_dump(settings))
    proc = _launch_fsdp(
        ["-m", "llmgym.agents.grpo", "--config", str(config)], env={"LLMGYM_SPECS": str(spec)}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["charts/episodes"] == 4 * r["step"] for r in records)
    assert "eval/success_rate" in records[-1]
    assert all("charts/weights_in_sync" not in r for r in records)  # no replicas under FSDP
    assert all(("kl" in r) for r in records)
    ckpt = tmp_path / "run" / "checkpoints" / "step-0000002"
    assert (ckpt / "pytorch_model_fsdp_0").is_dir() and (ckpt / "trainer_state.json").is_file()
    final = tmp_path / "run" / "final"
    assert (final / "adapter" / "adapter_config.json").is_file() == bool(lora_r)
    trained, tokenizer = load_model_and_tokenizer(str(final))
    start, _ = load_model_and_tokenizer(tiny_dir)
    moved = [
        n for n, p in trained.state_dict().items() if not torch.equal(p, start.state_dict()[n])
    ]
    assert moved  # the gathered, trained weights were saved (not shards, not the start)
    ids = tokenizer("What is 4 + 7?", return_tensors="pt").input_ids
    assert trained(input_ids=ids).logits.isfinite().all()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_two_processes_that_accelerate_did_not_join_are_refused(tiny_dir: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("with GPUs Accelerate joins the processes")
    # `accelerate launch --multi_gpu` on a machine without GPUs starts two processes that each
    # believe they train alone (DistributedType.NO): two unsynchronised runs in one directory.
    env = {k: v for k, v in _env().items() if k != "ACCELERATE_USE_CPU"}
    code = "from llmgym.agents.precision import make_accelerator; make_accelerator('no')"
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        "--no_python",
        sys.executable,
        "-c",
        code,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode != 0
    assert "ACCELERATE_USE_CPU=true" in proc.stderr
