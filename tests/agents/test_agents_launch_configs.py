"""The shipped launch files and recipes: Accelerate reads every ``configs/accelerate`` file and
builds the DeepSpeed plugins from them (DeepSpeed itself needs GPUs: training under it is not
run here), and every GRPO recipe is a valid config."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from llmgym import error
from llmgym.agents.grpo import GRPOConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
LAUNCH_FILES = sorted((CONFIGS / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_accelerate_reads_every_launch_file(path: Path) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.num_processes >= 2 and config.compute_environment.value == "LOCAL_MACHINE"


@pytest.mark.parametrize(
    ("name", "stage"), [("deepspeed_zero2.yaml", 2), ("deepspeed_zero3.yaml", 3)]
)
def test_deepspeed_files_build_accelerates_plugin(name: str, stage: int) -> None:
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DeepSpeedPlugin

    settings = load_config_from_file(str(CONFIGS / "accelerate" / name)).deepspeed_config
    plugin = DeepSpeedPlugin(**settings)  # unknown or mistyped keys raise here
    zero = plugin.deepspeed_config["zero_optimization"]
    assert zero["stage"] == stage
    if stage == 3:  # saving must gather whole 16-bit weights, not per-rank shards
        assert zero["stage3_gather_16bit_weights_on_model_save"] is True


def test_fsdp_file_asks_for_fsdp2() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(CONFIGS / "accelerate" / "fsdp.yaml"))
    assert config.distributed_type.value == "FSDP" and config.fsdp_config["fsdp_version"] == 2


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("grpo*.yaml")), ids=lambda p: p.name)
def test_every_grpo_recipe_is_a_valid_config(path: Path) -> None:
    cfg = GRPOConfig.load(path)
    assert cfg.generation_engine in ("hf", "vllm")


def test_deepspeed_refuses_micro_batches_within_an_optimizer_step() -> None:
    from accelerate.utils import DistributedType

    from llmgym.agents.sharding import check_deepspeed_batches

    # An object with the one attribute the check reads: a DeepSpeed Accelerator needs GPUs.
    deepspeed = SimpleNamespace(distributed_type=DistributedType.DEEPSPEED)
    with pytest.raises(error.Error, match="micro_batch_size >= 8"):
        check_deepspeed_batches(deepspeed, rows_per_step=8, micro_batch_size=4)
    check_deepspeed_batches(deepspeed, rows_per_step=8, micro_batch_size=8)
    check_deepspeed_batches(SimpleNamespace(distributed_type=DistributedType.FSDP), 8, 1)
