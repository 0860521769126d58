"""Code families: a parameter default, every caller of a function, a getter traced to its constant."""

from __future__ import annotations

import random

from llmgym.envs.longdoc.families.common import Ctx, LongDocFamily, make_task
from llmgym.envs.longdoc.writers.code_file import CodeFile
from llmgym.envs.longdoc.writers.document import Plant
from llmgym.envs.longdoc.writers.vocab import CODE_NOUNS, CODE_PARAMS
from llmgym.tasks import Task


def _code_names(rng: random.Random, writer: CodeFile, n: int, noun: str) -> list[str]:
    names = []
    for _ in range(n):
        name = writer.new_name(rng, noun)
        writer.reserved.add(name)
        names.append(name)
    return names


def code_lookup(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    param, ptype, defaults = rng.choice([p for p in CODE_PARAMS if len(p[2]) >= 3])
    n = min(ctx.level(2, 4), len(defaults))
    values = rng.sample(defaults, n)
    noun = rng.choice(CODE_NOUNS)
    names = _code_names(rng, writer, n, noun)
    blocks = [
        writer.function(rng, name, [(param, ptype, v)], [], noun)
        for name, v in zip(names, values, strict=True)
    ]
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(n), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = (
        f"In the function `{names[0]}`, what is the default value of the parameter `{param}`?"
    )
    spec = {"type": "exact", "gold": values[0], "distractors": values[1:], "max_words": 10}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[:1],
        oracle=values[0],
        keep=[(plants[0], [names[0], values[0]])],
    )


def code_callers(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    noun = rng.choice(CODE_NOUNS)
    k = ctx.level(2, 5)
    target, similar, *callers = _code_names(rng, writer, 2 + k + 2, noun)
    decoys = callers[k:]
    callers = callers[:k]
    writer.avoid = lambda key: key in (("call", target), ("call", similar))
    blocks = [
        writer.function(rng, target, writer.random_params(rng), [], noun),
        writer.function(rng, similar, [], [], noun),
    ]
    blocks += [writer.function(rng, c, writer.random_params(rng), [target], noun) for c in callers]
    blocks += [writer.function(rng, d, [], [similar], noun) for d in decoys]
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(len(blocks)), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = f"Which functions in this module call `{target}` directly? List every one."
    spec = {"type": "set", "gold": callers, "distractors": [decoys], "max_words": 10 * k}
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=plants[2 : 2 + k],
        oracle=callers,
        keep=[(p, [c]) for p, c in zip(plants[2:], callers, strict=False)],
        primary=plants[2],
    )


def code_trace(ctx: Ctx) -> Task:
    rng = ctx.rng
    writer = CodeFile(ctx.seed())
    noun = rng.choice(CODE_NOUNS)
    const = (
        f"{noun.upper()}_{rng.choice(('BATCH_LIMIT', 'GRACE_DAYS', 'MAX_RETRIES', 'PAGE_SIZE'))}"
    )
    legacy = f"{const}_{rng.choice(('LEGACY', 'V1', 'DRAFT'))}"
    value, old = rng.sample((8, 12, 16, 25, 30, 45, 64, 90, 128, 256, 500, 512, 1000), 2)
    getter, old_getter = _code_names(rng, writer, 2, noun)
    blocks = [
        writer.constants([(const, value)]),
        writer.function(rng, getter, [], [], noun, body=[f"    return {const}"]),
        writer.constants([(legacy, old)]),
        writer.function(rng, old_getter, [], [], noun, body=[f"    return {legacy}"]),
    ]
    hops = ctx.level(1, 2)
    if hops == 2:  # one more indirection: the getter returns a helper's result
        (mid,) = _code_names(rng, writer, 1, noun)
        blocks[1] = writer.function(rng, getter, [], [], noun, body=[f"    return {mid}()"])
        blocks.append(writer.function(rng, mid, [], [], noun, body=[f"    return {const}"]))
    plants = [Plant(d, block=b) for d, b in zip(ctx.depths(len(blocks)), blocks, strict=True)]
    doc = ctx.assemble(writer, plants)
    question = f"What value does calling `{getter}(...)` return? (Follow the names it uses to their definitions.)"
    spec = {"type": "number", "gold": value, "distractors": [str(old)], "max_words": 10}
    support = [plants[0], plants[1]] + ([plants[4]] if hops == 2 else [])
    return make_task(
        ctx,
        doc,
        question,
        spec,
        support=support,
        oracle=str(value),
        keep=[(plants[0], [str(value)])],
        primary=plants[1],
    )


FAMILIES = [
    LongDocFamily("code_lookup", code_lookup, "a parameter default of one function"),
    LongDocFamily("code_callers", code_callers, "every direct caller of a function"),
    LongDocFamily("code_trace", code_trace, "follow a getter to the constant it returns"),
]
