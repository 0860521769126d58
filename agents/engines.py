"""Generation engines for rollouts: the policy's own forward (``hf``, the default) or vLLM, in each
training process (colocated) or behind a server, with the policy's weights pushed to the engine
after every update.

An engine has one job, :meth:`GenerationEngine.sample`, with the contract of
:func:`llmgym.agents.modeling.sample_completions` (token ids in, :class:`~llmgym.agents.hf.Samples`
out), and, when it holds weights of its own, :meth:`GenerationEngine.load_weights`.
:class:`WeightSync` feeds it :func:`policy_weights` after each update: the full weights, or under
LoRA the merged ones (base plus each adapter's delta, computed without touching the model), named
as the plain Hugging Face model names them, which is what vLLM's ``load_weights`` takes. Under
FSDP or ZeRO-3 every process gathers the model for the read (:mod:`llmgym.agents.sharding`).

- ``HFEngine``: :func:`~llmgym.agents.modeling.sample_completions` on the training model (nothing
  to sync: it is the model).
- ``VLLMEngine``: a ``vllm.LLM`` in this process, sharing the GPU with training
  (``vllm_gpu_memory_utilization``), loaded from ``cfg.model`` and updated in place.
- ``VLLMServerEngine``: a ``trl vllm-serve`` server at ``vllm_server_url``, driven through TRL's
  ``VLLMClient`` (generation over HTTP, weights over its NCCL weight-transfer group); only the
  main process pushes weights.

What it is not: vLLM is not installed in the CPU test environment, so the two vLLM engines run
only on GPU machines (``benchmarks/vllm_generation.py``); the CPU tests cover the HF engine, the
weight stream and the sync with an engine that records what it receives. vLLM samples with its
own seed, not the trainer's torch generator.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from llmgym import error

ENGINES = ("hf", "vllm")
VLLM_EXTRA = "pip install 'llmgym[vllm]'  (or: pip install vllm; server mode also uses trl)"


class GenerationEngine(Protocol):
    """What the rollout loop samples from."""

    holds_weights: bool
    """True when the engine has its own copy of the weights (then it is synced after updates)."""

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        stop_ids: Sequence[int],
        pad_id: int,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        generator: Any = None,
    ) -> Any: ...

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> None: ...

    def close(self) -> None: ...


class HFEngine:
    """Samples with the training model itself (``generation_engine: hf``)."""

    holds_weights = False

    def __init__(self, model: Any):
        self.model = model

    def sample(self, prompts: Sequence[Sequence[int]], **kwargs: Any) -> Any:
        from llmgym.agents.modeling import sample_completions

        return sample_completions(self.model, prompts, **kwargs)

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> None:
        raise error.Error("HFEngine samples with the policy itself; it has no weights to load")

    def close(self) -> None:
        return None


def policy_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` for every weight of the model an engine serves, named as the plain
    model's ``state_dict`` names it. Under LoRA each adapted layer's weight is its base weight
    plus the active adapters' deltas (the merged model), and the adapters' own weights are left
    out; the model itself is not changed."""
    from llmgym.agents.peft_adapters import is_peft

    while hasattr(model, "module"):  # DDP and other wrappers
        model = model.module
    if not is_peft(model):
        for name, p in model.named_parameters():
            yield name, p.detach()
        return
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    layers = {name: m for name, m in base.named_modules() if isinstance(m, LoraLayer)}
    for name, p in base.named_parameters():
        if ".lora_" in name:
            continue
        owner, sep, leaf = name.partition(".base_layer.")
        if not sep:
            yield name, p.detach()
            continue
        value = p.detach()
        layer: Any = layers[owner]  # a LoRA Linear/Embedding/Conv (get_delta_weight)
        if leaf == "weight" and not layer.merged:
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    value = value + layer.get_delta_weight(adapter).detach().to(value.dtype)
        yield f"{owner}.{leaf}", value


class WeightSync:
    """Pushes the policy's weights into an engine that holds its own (after each update)."""

    def __init__(self, engine: Any, accelerator: Any, *, main_only: bool = False):
        self.engine = engine
        self.accelerator = accelerator
        self.main_only = main_only
        self.syncs = 0

    def __call__(self, prepared: Any) -> None:
        """Every process must call it (under sharding the read gathers the weights)."""
        from llmgym.agents.sharding import full_parameters

        if not self.engine.holds_weights:
            return
        acc = self.accelerator
        with full_parameters(acc, prepared):
            weights = policy_weights(acc.unwrap_model(prepared))
            if acc.is_main_process or not self.main_only:
                self.engine.load_weights(weights)
        self.syncs += 1


def _vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise error.DependencyNotInstalled(
            f"generation_engine: vllm needs the vllm library and a GPU: {VLLM_EXTRA}"
        ) from None
    return vllm


def _samples(completions: Sequence[Sequence[int]], logprobs: Sequence[Sequence[float]],
             stop_ids: Sequence[int], max_new_tokens: int) -> Any:  # fmt: skip
    """:class:`Samples` from an engine's token ids: finished means it ended on a stop id."""
    from llmgym.agents.hf import Samples

    ids = [list(c)[:max_new_tokens] for c in completions]
    stops = set(stop_ids)
    return Samples(
        token_ids=ids,
        logprobs=[list(lp)[: len(c)] for lp, c in zip(logprobs, ids, strict=True)],
        finished=[bool(c) and c[-1] in stops for c in ids],
    )


class VLLMEngine:
    """A colocated ``vllm.LLM`` (``generation_engine: vllm`` without a server URL)."""

    holds_weights = True

    def __init__(
        self, model: str, accelerator: Any, *, gpu_memory_utilization: float, max_model_len: int
    ):
        import os

        vllm = _vllm()
        # vLLM's in-process ("external_launcher") engine reads the launcher's variables; a run
        # started without accelerate launch has none.
        for key, value in {
            "RANK": accelerator.process_index,
            "LOCAL_RANK": accelerator.local_process_index,
            "WORLD_SIZE": accelerator.num_processes,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": 29500 + 37,
        }.items():
            os.environ.setdefault(key, str(value))
        # The settings TRL's colocated mode uses: the engine lives in this process (so its model
        # runner can load weights), logprobs of the temperature-scaled distribution (the
        # Samples contract), and a batch-token cap that keeps vLLM's memory profiler sane.
        self.llm = vllm.LLM(
            model=model,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            seed=accelerator.process_index,
            distributed_executor_backend="external_launcher",
            logprobs_mode="processed_logprobs",
            max_num_batched_tokens=4096,
            enable_prefix_caching=True,  # a group's G episodes share their prompt
        )

    def sample(self, prompts: Sequence[Sequence[int]], **kw: Any) -> Any:
        vllm = _vllm()
        from vllm.inputs import TokensPrompt

        params = vllm.SamplingParams(
            max_tokens=kw["max_new_tokens"],
            temperature=kw.get("temperature", 1.0),
            top_k=kw.get("top_k", 0),  # 0: no top-k (what TRL passes too)
            top_p=kw.get("top_p", 1.0),
            stop_token_ids=list(kw["stop_ids"]),
            logprobs=0,
        )
        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False
        )
        done = [o.outputs[0] for o in outs]
        ids = [list(c.token_ids) for c in done]
        lps = [
            [step[t].logprob for step, t in zip(c.logprobs or [], i, strict=False)]
            for c, i in zip(done, ids, strict=True)
        ]
        return _samples(ids, lps, kw["stop_ids"], kw["max_new_tokens"])

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> None:
        # TRL's colocated path into vLLM's model runner, then a cache reset (old KV is stale).
        runner = self.llm.llm_engine.model_executor.driver_worker.model_runner
        runner.model.load_weights(weights)
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        del self.llm


class VLLMServerEngine:
    """A ``trl vllm-serve`` server (``vllm_server_url``), driven with TRL's ``VLLMClient``."""

    holds_weights = True

    def __init__(self, url: str, *, device: Any, timeout_s: float = 240.0):
        _vllm()
        from trl.generation.vllm_client import VLLMClient

        self.client = VLLMClient(base_url=url, connection_timeout=timeout_s)
        self.device = device
        self._communicating = False

    def sample(self, prompts: Sequence[Sequence[int]], **kw: Any) -> Any:
        out: dict[str, Any] = self.client.generate(
            [list(p) for p in prompts],
            temperature=kw.get("temperature", 1.0),
            top_k=kw.get("top_k", 0),
            top_p=kw.get("top_p", 1.0),
            max_tokens=kw["max_new_tokens"],
            logprobs=0,
            generation_kwargs={"stop_token_ids": list(kw["stop_ids"])},
        )
        lps = [[step[0] for step in row] for row in out["logprobs"]]
        return _samples(out["completion_ids"], lps, kw["stop_ids"], kw["max_new_tokens"])

    def load_weights(self, weights: Iterator[tuple[str, Any]]) -> None:
        if not self._communicating:  # the weight-transfer group, opened at the first sync
            self.client.init_communicator(device=self.device)
            self._communicating = True
        named = [(name, t.to(self.device)) for name, t in weights]
        meta = [(n, str(t.dtype).removeprefix("torch."), list(t.shape)) for n, t in named]
        self.client.update_named_params(meta, iter(named))
        self.client.reset_prefix_cache()

    def close(self) -> None:
        if self._communicating:
            self.client.close_communicator()


def make_engine(cfg: Any, model: Any, accelerator: Any, max_model_len: int) -> Any:
    """The engine ``cfg.generation_engine`` names (``model``: the unwrapped training model)."""
    if cfg.generation_engine == "hf":
        return HFEngine(model)
    _vllm()  # a missing vLLM is named before any server is contacted or model loaded
    if cfg.vllm_server_url:
        return VLLMServerEngine(cfg.vllm_server_url, device=accelerator.device)
    return VLLMEngine(
        cfg.model,
        accelerator,
        gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        max_model_len=max_model_len,
    )
