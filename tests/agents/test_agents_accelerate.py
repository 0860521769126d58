"""Multi-process training through ``accelerate launch --num_processes 2`` on CPU (gloo).

``--cpu`` with ``--num_processes 2`` starts one process in Accelerate 1.16 (it wants mpirun for
more), so the test launches the multi-process launcher with ``ACCELERATE_USE_CPU=true`` and checks
that two processes ran."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from agents_common import DIGITS_TASKS, launch_two_processes, write_length_spec

from llmgym.agents.runlog import read_metrics

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_grpo_on_two_cpu_processes_keeps_ranks_in_sync(tiny_dir: str, tmp_path: Path) -> None:
    spec = write_length_spec(tmp_path, "agents-test/LengthSpec-v0", DIGITS_TASKS, domain="length")
    config = tmp_path / "grpo.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "algo": "grpo",
                "model": tiny_dir,
                "env_id": "agents-test/LengthSpec-v0",
                "output_dir": str(tmp_path / "run"),
                "total_steps": 3,
                # 3 groups of 4 over 2 processes: group 1 has episodes on both, so its
                # advantages need the other process's rewards (gathered before normalising).
                "prompts_per_step": 3,
                "group_size": 4,
                "max_new_tokens": 6,
                "learning_rate": 1e-3,
                "check_weights_every": 1,
                "torch_threads": 1,
                "tensorboard": False,
                "progress": False,
                "micro_batch_size": 3,
            }
        )
    )
    proc = launch_two_processes("llmgym.agents.grpo", config, spec, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = read_metrics(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert (
            r["charts/weights_in_sync"] == 1.0
        )  # every process held bit-identical weights after the step
        assert r["charts/episodes"] == 12 * r["step"]  # rewards of both processes were gathered
        assert "rewards/length" in r and r["losses/policy"] == r["losses/policy"]
        assert r["charts/processes"] == 2.0  # two ranks really ran
    assert (tmp_path / "run" / "final" / "config.json").is_file()
