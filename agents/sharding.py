"""Sharded training through Accelerate: what the trainers do differently when the weights are
split across processes (FSDP2, DeepSpeed ZeRO-3).

Sharded weights change three things. Generation runs many small forward passes whose number
differs between processes (each stops when its own episodes end), so a sharded forward, which
all-gathers its layer's weights from every process, would leave the processes waiting on one
another: :func:`full_parameters` gathers the whole model once on every process and keeps it
gathered while the block runs, so generation makes no collective call at all. Saving needs the
gathered weights (:func:`full_state_dict`). And every other sharded pass must run the same
number of times on every process, which the trainers ensure by padding with zero-weight passes.

On CPU, Accelerate 1.16 leaves ``distributed_type`` at ``MULTI_CPU`` even when ``accelerate
launch`` was given an FSDP config (its state turns FSDP on for accelerator devices only), while
PyTorch's FSDP2 (``fully_shard``) runs on CPU over gloo. :func:`enable_cpu_fsdp` marks such a run
FSDP, so ``accelerator.prepare`` takes Accelerate's own FSDP2 path, the one that runs on GPUs;
the CPU tests train through it. A CPU launch needs ``ACCELERATE_USE_CPU=true`` in the
environment (``accelerate launch --cpu`` with several processes starts only one).

What it is not: FSDP1 (``fsdp_version: 1``) is refused, since PyTorch refuses its CPU init and
generation under it would need the ranks kept in step token by token; DeepSpeed is not installed
in the CPU test environment, so the ZeRO-3 branch of :func:`full_parameters` is exercised only
on GPUs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from llmgym import error


def enable_cpu_fsdp(accelerator: Any) -> bool:
    """Turn a CPU run launched with an FSDP config into an FSDP run (see the module docstring);
    returns whether the run is FSDP now. Call it before ``accelerator.prepare``."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    wanted = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if accelerator.distributed_type == DistributedType.MULTI_CPU and wanted:
        plugin = FullyShardedDataParallelPlugin()  # read from the FSDP_* variables launch set
        if plugin.fsdp_version != 2:
            raise error.Error(
                "FSDP on CPU needs FSDP2: set fsdp_version: 2 in the accelerate config "
                "(configs/accelerate/fsdp.yaml does)"
            )
        # Both states hold the type: AcceleratorState copies PartialState's when re-created.
        accelerator.state.fsdp_plugin = plugin
        accelerator.state.distributed_type = DistributedType.FSDP
        PartialState().distributed_type = DistributedType.FSDP
    return is_sharded(accelerator)


def is_sharded(accelerator: Any) -> bool:
    """Whether each process holds only a shard of the weights (FSDP, DeepSpeed ZeRO-3)."""
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    if kind == DistributedType.FSDP:
        if not accelerator.is_fsdp2:
            raise error.Error(
                "The trainers support FSDP2 only: set fsdp_version: 2 in the accelerate config"
            )
        return True
    return kind == DistributedType.DEEPSPEED and _zero_stage(accelerator) == 3


def _zero_stage(accelerator: Any) -> int:
    plugin = accelerator.state.deepspeed_plugin
    return int(plugin.zero_stage) if plugin is not None else 0


@contextlib.contextmanager
def full_parameters(accelerator: Any, model: Any) -> Iterator[None]:
    """Every process holds every weight of ``model`` while the block runs, and forward passes
    make no collective call; outside a sharded run it does nothing. Every process must enter it
    (gathering is collective). Nothing written to the weights inside survives."""
    if not is_sharded(accelerator):
        yield
        return
    from accelerate.utils import DistributedType

    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(model.parameters())):
            yield
        return
    with _fsdp2_unsharded(accelerator, model):
        yield


@contextlib.contextmanager
def _fsdp2_unsharded(accelerator: Any, model: Any) -> Iterator[None]:
    from torch.distributed.fsdp import FSDPModule

    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for unit in units:  # keep what is gathered gathered after each forward
        unit.set_reshard_after_forward(False, recurse=False)
    for unit in units:
        unit.unshard()
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
        # Back to the configured value; the root keeps FSDP2's own default (False: its weights
        # are needed again right away by the backward pass).
        configured = bool(accelerator.state.fsdp_plugin.reshard_after_forward)
        for unit in units:
            unit.set_reshard_after_forward(configured and unit is not model, recurse=False)


def full_state_dict(accelerator: Any, model: Any) -> dict[str, Any]:
    """The whole model's weights (full tensors, on CPU) on the main process; an empty dict on
    the others. Every process must call it (it gathers)."""
    if not is_sharded(accelerator):
        if not accelerator.is_main_process:
            return {}
        sd = accelerator.unwrap_model(model).state_dict()
        return {k: v.detach().cpu() for k, v in sd.items()}
    state: dict[str, Any] = accelerator.get_state_dict(model)
    return state if accelerator.is_main_process else {}


def collective_passes(accelerator: Any, local: int) -> int:
    """How many passes every process must run so that each runs its ``local`` ones: the maximum
    over processes of a sharded run (the extra passes carry zero weight), else ``local``."""
    if accelerator.num_processes == 1 or not is_sharded(accelerator):
        return local
    import torch

    t = torch.tensor([local], device=accelerator.device)
    return int(accelerator.gather(t).max())


def plain_copy(accelerator: Any, model: Any, cfg: Any) -> Any:
    """On the main process, an unsharded model built from ``cfg`` as the trainer built it
    (:func:`~llmgym.agents.scale.build_trainable_model`, LoRA included) holding the gathered
    weights, for ``save_pretrained``; None on the other processes. Every process must call it."""
    from llmgym.agents.modeling import disable_dropout
    from llmgym.agents.scale import build_trainable_model

    state = full_state_dict(accelerator, model)
    if not accelerator.is_main_process:
        return None
    plain, _ = build_trainable_model(cfg, disable_dropout)
    plain.load_state_dict(state)
    return plain


def check_deepspeed_batches(accelerator: Any, rows_per_step: int, micro_batch_size: int) -> None:
    """Under DeepSpeed, refuse micro-batching within an optimizer step: Accelerate's DeepSpeed
    backward steps the engine after every backward (outside ``accelerator.accumulate``)."""
    from accelerate.utils import DistributedType

    if (
        accelerator.distributed_type == DistributedType.DEEPSPEED
        and micro_batch_size < rows_per_step
    ):
        raise error.Error(
            f"Under DeepSpeed each optimizer step must be one backward pass: set micro_batch_size "
            f">= {rows_per_step} (the episodes of one process's mini-batch), or use FSDP"
        )
