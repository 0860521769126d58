"""LongDoc-v0: reset time and peak memory for 128k-token documents, beside naive string building.

Run: ``python benchmarks/longdoc.py [--resets 20]``. Prints markdown tables:

1. per family (one of each document kind): median and best ``reset()`` time at
   difficulty 1.0 (131,072 tokens) against building the same document text by naive
   ``s += piece`` concatenation of its sentences and lines, and the tracemalloc peak of a
   reset as a multiple of the document's size;
2. the token estimate (4 characters per token) against a byte-level BPE trained here on
   local text (vim's manuals and the Python standard library; no downloads), per kind.

Timings on shared machines are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import glob
import re
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from llmgym.envs.longdoc import LongDocEnv

FAMILIES = (
    ("needle_single", "prose (random kind)"),
    ("table_lookup", "annual report"),
    ("contract_amendment", "contract"),
    ("conditional_policy", "policy"),
    ("aggregation_count", "incident log"),
    ("aggregation_sum", "meeting minutes"),
    ("manual_spec_lookup", "technical manual"),
    ("code_lookup", "code file"),
)
_PIECES = re.compile(r"[^\n.]*(?:\.|\n|$)")


def naive_build(pieces: list[str]) -> str:
    s = ""
    for piece in pieces:
        s += piece
    return s


def time_resets(env: LongDocEnv, family: str, n: int) -> tuple[list[float], list[float], int, int]:
    resets, naive = [], []
    size = tokens = 0
    for seed in range(n):
        start = time.perf_counter()
        env.reset(seed=seed, options={"family": family, "difficulty": 1.0})
        resets.append(time.perf_counter() - start)
        task = env.episode.task  # type: ignore[union-attr]
        doc = task.metadata["document"]
        pieces = _PIECES.findall(doc)
        start = time.perf_counter()
        built = naive_build(pieces)
        naive.append(time.perf_counter() - start)
        assert built == doc
        size, tokens = len(doc.encode()), task.metadata["tokens"]
    return resets, naive, size, tokens


def peak_memory(env: LongDocEnv, family: str) -> tuple[int, int]:
    env.reset(seed=999, options={"family": family, "difficulty": 0.0})
    tracemalloc.start()
    env.reset(seed=1000, options={"family": family, "difficulty": 1.0})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, len(env.episode.task.metadata["document"].encode())  # type: ignore[union-attr]


def reset_table(n: int) -> None:
    env = LongDocEnv()
    print(
        "| family | kind | tokens | reset median (ms) | reset best (ms) | naive `s += piece` (ms) | reset / naive | peak memory / document |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for family, kind in FAMILIES:
        env.reset(seed=10_000, options={"family": family, "difficulty": 1.0})  # warm caches
        resets, naive, _, tokens = time_resets(env, family, n)
        peak, size = peak_memory(env, family)
        med, best, nv = statistics.median(resets), min(resets), statistics.median(naive)
        print(
            f"| {family} | {kind} | {tokens:,} | {med * 1000:.1f} | {best * 1000:.1f} | {nv * 1000:.1f} "
            f"| {med / nv:.1f}x | {peak / size:.1f}x ({peak / 2**20:.1f} MiB / {size / 2**20:.2f} MiB) |"
        )


def corpus_files() -> list[str]:
    files = sorted(glob.glob("/usr/share/vim/vim*/doc/*.txt"))
    stdlib = Path(re.__file__).parent
    files += sorted(str(p) for p in stdlib.glob("*.py"))
    return files


def estimate_table() -> None:
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        print("\n(tokenizers is not installed: no BPE comparison)")
        return
    files = corpus_files()
    if not files:
        print("\n(no local corpus to train a BPE on)")
        return
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=32_000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    start = time.perf_counter()
    tok.train(files, trainer)
    mb = sum(Path(f).stat().st_size for f in files) / 2**20
    print(
        f"\nByte-level BPE, 32k vocabulary, trained on {len(files)} local files ({mb:.0f} MiB) in {time.perf_counter() - start:.0f} s.\n"
    )
    print("| kind | BPE tokens | chars/4 estimate | error | words x 1.3 | error |")
    print("|---|---|---|---|---|---|")
    env = LongDocEnv()
    for family, kind in FAMILIES[1:]:
        env.reset(seed=3, options={"family": family, "difficulty": 0.7})
        doc = env.episode.task.metadata["document"]  # type: ignore[union-attr]
        bpe = len(tok.encode(doc).ids)
        est = -(-len(doc) // 4)
        words = round(len(doc.split()) * 1.3)
        print(
            f"| {kind} | {bpe:,} | {est:,} | {100 * (est - bpe) / bpe:+.1f}% | {words:,} | {100 * (words - bpe) / bpe:+.1f}% |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resets", type=int, default=15)
    parser.add_argument("--no-bpe", action="store_true", help="skip the tokenizer comparison")
    args = parser.parse_args()
    print(f"# LongDoc-v0 benchmark (python {sys.version.split()[0]})\n")
    reset_table(args.resets)
    if not args.no_bpe:
        estimate_table()


if __name__ == "__main__":
    main()
