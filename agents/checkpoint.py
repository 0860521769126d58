"""Resumable checkpoints: Accelerate's state (model, optimizer, LR schedule, every RNG) plus the trainer's.

A checkpoint is ``<output_dir>/checkpoints/step-<N>/``: what ``accelerator.save_state`` writes
(weights, optimizer, LR scheduler, Python/NumPy/torch RNG states of each process, and every
object registered with ``accelerator.register_for_checkpointing``: the trainer's own sampling
generators, the task scheduler, the KL controller, the reference model) and
``trainer_state.json`` (the step). Resuming restores all of it, so a run stopped at step k and
resumed ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

_STEP_DIR = re.compile(r"^step-(\d+)$")


class Generators:
    """The trainer's own random streams, checkpointed with the run.

    ``tasks`` (NumPy) draws tasks and env seeds and is identical on every process; ``sampling``
    (torch) draws tokens and is seeded per process.
    """

    def __init__(self, seed: int, rank: int, device: Any = "cpu"):
        import numpy as np
        import torch

        self.tasks = np.random.default_rng(seed)
        self.sampling = torch.Generator(device=device).manual_seed(seed * 1000 + rank + 1)

    def state_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks.bit_generator.state, "sampling": self.sampling.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tasks.bit_generator.state = state["tasks"]
        self.sampling.set_state(state["sampling"])


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step-{step:07d}"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run (one with ``trainer_state.json``), or None."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return None
    done = [
        p
        for p in root.iterdir()
        if _STEP_DIR.match(p.name) and (p / "trainer_state.json").is_file()
    ]
    return max(done, key=lambda p: int(p.name.split("-")[1]), default=None)


def save_checkpoint(
    accelerator: Any,
    output_dir: str | Path,
    step: int,
    *,
    keep: int = 2,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Save everything needed to resume at ``step``; keeps the ``keep`` newest checkpoints."""
    path = checkpoint_dir(output_dir, step)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(path))
    if accelerator.is_main_process:
        state = {"step": step, **(extra or {})}
        (path / "trainer_state.json").write_text(json.dumps(state, indent=2))
        root = path.parent
        old = sorted(
            (p for p in root.iterdir() if _STEP_DIR.match(p.name)),
            key=lambda p: int(p.name.split("-")[1]),
        )
        for stale in old[:-keep]:
            shutil.rmtree(stale, ignore_errors=True)
    accelerator.wait_for_everyone()
    return path


def load_checkpoint(accelerator: Any, path: str | Path) -> dict[str, Any]:
    """Restore a checkpoint into the prepared objects; returns its ``trainer_state.json``."""
    path = Path(path)
    accelerator.load_state(str(path))
    state: dict[str, Any] = json.loads((path / "trainer_state.json").read_text())
    return state


def resume_point(output_dir: str | Path, resume: bool) -> Path | None:
    """The checkpoint to resume from, or None for a fresh run; refuses to mix two runs in one directory."""
    from llmgym.agents.config import ConfigError
    from llmgym.agents.runlog import METRICS_FILE

    latest = latest_checkpoint(output_dir)
    if resume:
        return latest
    if latest is not None or (Path(output_dir) / METRICS_FILE).exists():
        raise ConfigError(
            f"{output_dir} already holds a run (checkpoints or {METRICS_FILE}); pass resume: true "
            "(--resume) to continue it, or choose another output_dir"
        )
    return None
