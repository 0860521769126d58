"""One GRPO update on fixed episodes, run alone or under ``accelerate launch`` with FSDP
(tests/agents/test_agents_fsdp.py compares the two); not a test module itself.

``python fsdp_step.py MODEL_DIR OUT_FILE`` writes ``{"stats", "state", "world", "sharded"}`` (the update's
statistics and the whole model's weights after it) with ``torch.save`` from the main process.
Each process trains on its slice of the same four episodes, then every process generates a
different number of tokens under ``full_parameters`` (which must not leave them waiting on one
another) and they meet at a barrier.
"""

from __future__ import annotations

import sys
import tempfile

import torch

from llmgym.agents.grpo import GRPOConfig, GRPOTrainer
from llmgym.agents.modeling import sample_completions
from llmgym.agents.rollout import Trajectory
from llmgym.agents.sharding import full_parameters, full_state_dict

ADVANTAGES = [1.0, -1.0, 0.5, -0.5]


def episodes(tokenizer: object) -> list[Trajectory]:
    """Two prompts, two episodes each, completions of different lengths."""
    out = []
    for i, text in enumerate(["What is 4 + 7?", "What is 12 + 30?"]):
        prompt = list(tokenizer(text).input_ids)  # type: ignore[operator]
        for j in range(2):
            completion = list(tokenizer(f"{11 + i * 31 + j} is it").input_ids)[: 3 + 2 * j]  # type: ignore[operator]
            out.append(
                Trajectory(
                    task_id=f"t{i}",
                    domain="math",
                    family="f",
                    difficulty=0.0,
                    token_ids=prompt + completion,
                    loss_mask=[0] * len(prompt) + [1] * len(completion),
                    logprobs=[0.0] * (len(prompt) + len(completion)),
                    prompt_length=len(prompt),
                )
            )
    return out


def main(model_dir: str, out_file: str) -> None:
    cfg = GRPOConfig(
        model=model_dir,
        env_id="llm/Math-v0",
        env_kwargs={"family": "arith.add_small", "difficulty": 0.0},
        output_dir=tempfile.mkdtemp(prefix="fsdp-step-"),
        prompts_per_step=2,
        group_size=2,
        micro_batch_size=1,  # two micro-batches per process: gradient accumulation under FSDP
        learning_rate=1e-2,
        tensorboard=False,
        progress=False,
        torch_threads=1,
    )
    trainer = GRPOTrainer(cfg)
    acc = trainer.accelerator
    world, rank = acc.num_processes, acc.process_index
    trajs = episodes(trainer.tokenizer)
    share = len(trajs) // world
    mine = slice(rank * share, (rank + 1) * share)
    stats = trainer._update(trajs[mine], ADVANTAGES[mine], {})
    with full_parameters(acc, trainer.model):
        pad = trainer.tokenizer.pad_token_id or 0
        sample_completions(
            trainer._unwrapped(),
            [trajs[0].token_ids[: trajs[0].prompt_length]],
            max_new_tokens=2 + 6 * rank,  # a different number of forward passes per process
            stop_ids=[],
            pad_id=pad,
            generator=torch.Generator().manual_seed(rank),
        )
    acc.wait_for_everyone()
    state = full_state_dict(acc, trainer.model)
    if acc.is_main_process:
        torch.save(
            {"stats": stats, "state": state, "world": world, "sharded": trainer.sharded}, out_file
        )
    trainer.close()
    acc.end_training()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
