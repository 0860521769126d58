"""Find the final answer in a model response: boxed, "answer is" phrases, bare answers, fallbacks.

Every scan here is linear in the response (regexes without nested quantifiers, brace matching
bounded by :data:`MAX_BOX_CHARS`), so a megabyte of text costs milliseconds, not minutes.
Whether the answer is right is the verifier's question (:mod:`llmgym.rewards.math.verifier`).
"""

from __future__ import annotations

import re
from collections import deque

from llmgym.rewards.math.evaluate import Options
from llmgym.rewards.math.nodes import MAX_ANSWER_CHARS, ParseError
from llmgym.rewards.math.normalize import normalize, undouble_backslashes
from llmgym.rewards.math.parser import parse
from llmgym.rewards.math.values import to_value, values_eq
from llmgym.rewards.math.vocab import KNOWN_WORDS

MAX_BOX_CHARS = 2 * MAX_ANSWER_CHARS
"""A ``\\boxed{`` whose closing brace is further away than this is treated as unterminated."""
_LAST_BOXES = 12
_TRUNCATED = "\x00truncated"

_BOX_RE = re.compile(r"\\(?:boxed|fbox|framebox)(?![A-Za-z])\s*(?:\[[^\]\n]{0,20}\])?\s*")
_BRACE_RE = re.compile(r"\\.|[{}]", re.S)
_PREFIX_RE = re.compile(r"([A-Za-z](?:_\{?[0-9A-Za-z]{1,4}\}?)?)\s*=\s*(?:\$|\\\(|\\\[)?\s*$")
_GAP_CLEAN_RE = re.compile(
    r"\$|\\[()\[\]]|\\(?:quad|qquad|text|textbf|mathrm|mbox)\b|\\\\|&|\*\*|[{}]"
)
_GAP_WORD_RE = re.compile(r"[A-Za-z]+|[^\sA-Za-z.:]")
_OR_SPLIT_RE = re.compile(
    r"\\(?:text|mathrm|textrm|textbf|mbox)\s*\{\s*(?:,\s*)?or\s*\}"
    r"|\\lor(?![A-Za-z])|\\vee(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z])|\u2228"
)
_EITHER_RE = re.compile(
    r"\\(?:text|mathrm|textrm|mbox)\s*\{\s*either\s*\}|(?<![A-Za-z\\])either(?![A-Za-z])"
)
_RELATION_CHARS_RE = re.compile(r"=|<|>|\\(?:le|ge|leq|geq|ne|neq|in|lt|gt)(?![A-Za-z])|[≤≥≠∈]")
_MARKER_RE = re.compile(
    r"(?i)final\s+answer"
    r"|\banswers?\b(?=\s*(?:\*\*|__)?\s*(?:\bis\b|\bare\b|:|=|\bwould\s+be|\bshould\s+be|\bwill\s+be|\bequals))"
    r"|(?<![#])####(?!#)|\bthe\s+result\s+is|\bthe\s+solution\s+is|\bsolutions?\s+are"
)
_MARKER_LEAD_RE = re.compile(
    r"^(?:\s|\*\*|__|:|：|=|\bis\b|\bare\b|\bwould\s+be\b|\bshould\s+be\b|\bwill\s+be\b"
    r"|\bequals\b|\bof\b|\bas\s+follows\b|\btherefore\b|\bthus\b|\bhence\b|\bso\b"
    r"|\bthe\s+(?:final\s+)?answer\s+is\b|\bthat\b|\bwe\s+get\b|\bthen\b)+",
    re.I,
)
_SENTENCE_END_RE = re.compile(
    r"(?<!\d)\.(?!\d)|\.(?=\s|$)|\s(?:because|since|which|as|so|where|when|but|for|given)\s|[!?]"
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<!\d)\.(?!\d)|\.(?=\s)|[!?;]")
_THINK_END = "</think>"


def _box_content(text: str, start: int) -> tuple[str, int] | None:
    """The content of the box whose argument starts at ``start`` (just after ``\\boxed``)."""
    if start >= len(text):
        return None
    if text[start] != "{":
        # \boxed 5  /  \boxed5 : the argument is the next run of non-space characters
        m = re.compile(r"[^\s$]+").match(text, start)
        if not m:
            return None
        return m.group(0).rstrip(".,;"), m.end()
    depth = 0
    limit = start + MAX_BOX_CHARS
    for m in _BRACE_RE.finditer(text, start):
        if m.start() > limit:
            return None
        c = m.group(0)
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : m.start()], m.end()
    return None


def find_boxes(text: str) -> list[tuple[int, int, str]]:
    """The last few complete ``\\boxed{}``/``\\fbox{}`` as (start, end, content), in order;
    boxes nested in another box are skipped.

    >>> [c for _, _, c in find_boxes(r"so \\boxed{\\frac{1}{2}} and \\fbox{3}")]
    ['\\\\frac{1}{2}', '3']
    """
    matches: deque[re.Match[str]] = deque(maxlen=_LAST_BOXES)
    for m in _BOX_RE.finditer(text):
        matches.append(m)
    boxes: list[tuple[int, int, str]] = []
    for m in matches:
        if boxes and m.start() < boxes[-1][1]:
            continue  # inside the previous box
        found = _box_content(text, m.end())
        if found is not None:
            content = found[0]
            while True:  # \boxed{\boxed{5}}
                inner = _BOX_RE.match(content.strip())
                if not inner:
                    break
                unwrapped = _box_content(content.strip(), inner.end())
                if unwrapped is None or unwrapped[1] != len(content.strip()):
                    break
                content = unwrapped[0]
            boxes.append((m.start(), found[1], content))
        elif m is matches[-1]:
            boxes.append((m.start(), len(text), _TRUNCATED))
    return boxes


_RETRACTIONS = {
    "no", "not", "wait", "actually", "instead", "rather", "wrong", "mistake", "incorrect",
    "correction", "oops", "sorry", "redo", "recheck", "hmm", "but", "maybe", "possibly",
    "perhaps", "either", "or", "alternatively", "otherwise",
}  # fmt: skip


def _gap_words(gap: str) -> list[str]:
    g = _GAP_CLEAN_RE.sub(" ", gap)
    g = _PREFIX_RE.sub("", g.strip())
    return _GAP_WORD_RE.findall(g.lower())


def _connective(gap: str) -> str | None:
    """How two answers separated by ``gap`` relate: "and", "or", "none" (juxtaposed) or None
    (the gap is prose: the answers are not one final group). A short label ending in "and"
    (``\\boxed{3} \\text{ for part (a) and } \\boxed{4}``) joins too, unless it takes the
    first answer back or hedges."""
    if len(gap) > 80:
        return None
    words = _gap_words(gap)
    if not words:
        return "none"
    if set(words) <= {",", ";", "and"}:
        return "and"
    if "or" in words and len(words) <= 6:  # "or", "or maybe", ", or possibly even"
        return "or"
    if words[-1] == "and" and len(words) <= 12 and not set(words) & _RETRACTIONS:
        return "and"
    return None


def _prefix_var(text: str, start: int) -> str | None:
    m = _PREFIX_RE.search(text, max(0, start - 30), start)
    return m.group(1) if m else None


def same_value(a: str, b: str) -> bool:
    """Whether two answer strings are the same value (``\frac{1}{2}`` and ``0.5``); strict,
    no sympy: used to tell a restated answer from a hedge."""
    na, nb = normalize(a), normalize(b)
    if na == nb:
        return True
    try:
        va, vb = to_value(parse(na)), to_value(parse(nb))
        return values_eq(va, vb, Options(timeout_s=0.0, deadline=0.0))
    except Exception:  # unparsable or odd: not provably the same
        return False


def _all_same(pieces: list[str]) -> bool:
    return all(same_value(pieces[0], p) for p in pieces[1:])


def _join_group(text: str, group: list[tuple[int, int, str]], links: list[str]) -> str | None:
    """One answer from a final group of boxes: identical ones collapse, "and"/"," joins into a
    list, "or" into a disjunction, juxtaposed different boxes are a hedge (None)."""
    contents = [c for _, _, c in group]
    if _all_same(contents):
        return contents[-1]
    if "none" in links:
        return None
    pieces = []
    for start, _, content in group:
        var = _prefix_var(text, start)
        pieces.append(f"{var} = {content}" if var and "=" not in content else content)
    sep = r" \text{ or } " if "or" in links else ", "
    return sep.join(pieces)


def _relation_var(piece: str) -> str | None:
    """The single variable a relation like ``x = 1`` or ``x > 2`` is about, else None."""
    if not _RELATION_CHARS_RE.search(piece):
        return None
    try:
        node = parse(normalize(piece))
    except (ParseError, RecursionError):
        return None
    if node[0] != "rel":
        return None
    names: set[str] = set()
    _symbols(node, names)
    return names.pop() if len(names) == 1 else None


def _symbols(node: tuple, out: set[str]) -> None:
    if node[0] == "sym":
        out.add(node[1])
        return
    for child in node[1:]:
        if isinstance(child, tuple):
            if child and isinstance(child[0], str):
                _symbols(child, out)
            else:
                for c in child:
                    if isinstance(c, tuple) and c and isinstance(c[0], str):
                        _symbols(c, out)


def unhedge(answer: str) -> str | None:
    """The answer with "or"-alternatives resolved: None for a hedge between different values
    ("1 or 2", "either 3 or 4"); kept when every alternative is a relation on the same variable
    (``x = 1 \\text{ or } x = 2``, ``x < 0 \\text{ or } x > 3``), which states a solution set.

    >>> unhedge("1 or 2") is None, unhedge("x = 1 or x = -1"), unhedge("5 or 5")
    (True, 'x = 1 or x = -1', '5')
    """
    if "or" not in answer and "\\vee" not in answer and "\u2228" not in answer:
        return answer
    pieces = [p.strip(" ,;") for p in _OR_SPLIT_RE.split(_EITHER_RE.sub(" ", answer))]
    pieces = [p for p in pieces if p]
    if len(pieces) <= 1:
        return pieces[0] if pieces else None
    if _all_same(pieces):
        return pieces[0]
    variables = {_relation_var(p) for p in pieces}
    if len(variables) == 1 and None not in variables:
        return answer
    return None


def _strip_markdown(s: str) -> str:
    return s.replace("**", " ").replace("__", " ").replace("`", " ").strip()


_SEG_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def _find_unescaped(s: str, token: str, start: int) -> int:
    j = s.find(token, start)
    while j > 0 and s[j - 1] == "\\" and token[0] == "$":
        j = s.find(token, j + 1)
    return j


def _math_segments(s: str) -> list[tuple[int, int, str]]:
    """The ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` segments of ``s`` as
    (start, end, content), in linear time (an opener without a closer ends the search for
    its kind, instead of rescanning the rest of the text for every later opener)."""
    out: list[tuple[int, int, str]] = []
    next_at = {left: -2 for left, _ in _SEG_DELIMS}
    i, n = 0, len(s)
    while i < n:
        best: tuple[int, str, str] | None = None
        for left, right in _SEG_DELIMS:
            if next_at[left] == -1:
                continue
            if next_at[left] < i:
                next_at[left] = _find_unescaped(s, left, i)
                if next_at[left] == -1:
                    continue
            j = next_at[left]
            if best is None or j < best[0]:
                best = (j, left, right)
        if best is None:
            break
        j, left, right = best
        k = _find_unescaped(s, right, j + len(left))
        if k == -1:
            next_at[left] = -1  # no closer anywhere after: no later opener of this kind closes
            if left == "$$":  # an unclosed "$$" may still be two single "$" delimiters
                next_at["$"] = _find_unescaped(s, "$", j)
            i = j if left == "$$" else j + len(left)
            continue
        content = s[j + len(left) : k]
        if content.strip():
            out.append((j, k + len(right), content))
        i = k + len(right)
    return out


def _math_group(s: str, last: bool = False) -> str | None:
    """The first (or ``last``) math segment of ``s`` together with its neighbours joined to
    it by "and"/","/"or": ``$x = 8$ or $x = -2$`` is one answer."""
    segs = _math_segments(s)
    if not segs:
        return None
    order = segs[::-1] if last else segs
    group = [order[0]]
    links: list[str] = []
    for seg in order[1:]:
        left, right = (seg, group[-1]) if last else (group[-1], seg)
        link = _connective(s[left[1] : right[0]])
        if link is None or link == "none":
            break
        group.append(seg)
        links.append(link)
    if last:
        group.reverse()
    if len(group) == 1:
        return group[0][2]
    sep = r" \text{ or } " if "or" in links else ", "
    return sep.join(c for _, _, c in group)


_CHOICE_RE = re.compile(r"\(?[A-J]\)?[.:)]?")
_LONG_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}(?![A-Za-z])")
_STOP_WORD_RE = re.compile(
    r"(?i)(?<![\\A-Za-z])(?:so|the|is|we|it|get|are|of|to|be|has|was|for|if|not|an|then|thus)"
    r"(?![A-Za-z])"
)
_NON_PROSE_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox|begin|end)\s*\{[^{}]*\}|\\[A-Za-z]+")


def _parses(candidate: str) -> bool:
    if _CHOICE_RE.fullmatch(candidate.strip()):
        return True
    try:
        node = parse(normalize(candidate))
    except (ParseError, RecursionError, ValueError):
        return False
    return node[0] != "text" or len(candidate) <= 40


def _trim_prose(s: str, from_start: bool = True, after_verbs: bool = True) -> str | None:
    """A math answer from a line of prose after an answer marker: cut at the end of the
    sentence, then drop trailing words until what is left parses. Unless ``from_start``, the
    answer must follow a verb or "=" ("... is 12 units", "(x, y) = (4, -1)")."""
    s = _strip_markdown(s)
    m = _SENTENCE_END_RE.search(s)
    if m:
        s = s[: m.start()]
    s = s.strip(" ,;:")
    words = s.split()[:40]
    # "The perimeter is 12 units": the answer may start after a verb, and end before prose
    starts = [i + 1 for i, w in enumerate(words) if w.lower() in _ANSWER_VERBS and after_verbs]
    if from_start:
        starts.insert(0, 0)
    for start in starts:
        for cut in range(len(words), max(start, len(words) - 8), -1):
            candidate = " ".join(words[start:cut])
            if candidate and not _is_prose(candidate) and _parses(candidate):
                dropped = {w.strip(",;:.()").lower() for w in words[cut:]}
                if dropped & _HEDGE_WORDS:
                    # "34, or possibly 35": the words dropped hedge; all of it is the answer
                    # (which unhedge then refuses)
                    return " ".join(words[start:])
                return candidate
    return None


_HEDGE_WORDS = {"or", "either", "maybe", "possibly", "perhaps", "alternatively"}
_ANSWER_VERBS = {"is", "are", "was", "were", "be", "equals", "equal", "=", "of", "gives", "get"}


def _is_prose(s: str) -> bool:
    """Whether ``s`` reads as English rather than a math answer: a stop word, two unknown
    words, or one unknown word next to other letters ("no idea"); "Devon", "12 eggs" and
    "5 square units" are not prose."""
    plain = _NON_PROSE_RE.sub(" ", normalize(s))
    words = [w for w in _LONG_WORD_RE.findall(plain) if w.lower() not in KNOWN_WORDS]
    if _STOP_WORD_RE.search(plain) or len(words) > 1:
        return True
    return bool(words and re.search(r"[A-Za-z]", plain.replace(words[0], " ")))


# Prose final answers: "The largest $n$ is 34.", "Jane started growing Sphere 3 hours ago.",
# "so the number is 10 which is 1,000.99". A sentence states its answer after its last verb
# ("which is" restates: the later value is the final one), or holds a single number; what
# follows "because", "since", "where"... is a reason, not the answer.
_CLAUSE_END_RE = re.compile(
    r"[,;]?\s(?:because|since|as|where|when|but|for|given|if|although|while|who|and\s+then)"
    r"(?![A-Za-z])",
    re.I,
)
_VERB_RE = re.compile(
    r"(?<![A-Za-z\\])(?:is|are|was|were|equals?|be|becomes?|gives?|yields?|totals?|get|got)"
    r"(?![A-Za-z])",
    re.I,
)
_NUMBER_RE = re.compile(
    r"(?<![\w.,\\])-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][+-]?\d+)?(?:/\d+)?(?:\.\.\.|…)?"
    r"(?:\s*(?:\\?%|percent\b))?(?![\d/]|[.,]\d)"
)
_UNIT_WORDS = KNOWN_WORDS | {"m", "g", "s", "h", "l", "k"}  # what may stick to a number: 5m
_TRAILING_NOISE_RE = re.compile(
    r"(?:\s*(?:<\|[A-Za-z_]+\|>\s*(?:user|assistant|system)?|</s>|\[/?INST\]"
    r"|I\s+hope\s+(?:it|this)\s+is\s+correct\.?))+\s*$",
    re.I,
)


def _mask_math(s: str) -> str:
    """``s`` with its math segments blanked (same length): prose analysis must not see them."""
    pieces, at = [], 0
    for start, end, _ in _math_segments(s):
        pieces += [s[at:start], "\x01" * (end - start)]
        at = end
    return "".join(pieces) + s[at:]


def _clause(sentence: str) -> str:
    """The main clause of a sentence: cut before a reason or a condition."""
    m = _CLAUSE_END_RE.search(_mask_math(sentence))
    return sentence[: m.start()] if m else sentence


def _numbers(s: str) -> list[str]:
    """The numbers written in ``s`` as words of their own (``2`` in ``AZYUK2A`` is none;
    ``1,000.99`` in ``1,000.99m²`` is one, a unit glued to it)."""
    out = []
    for m in _NUMBER_RE.finditer(s):
        tail = re.match(r"[A-Za-z]+", s[m.end() :])
        if tail and tail.group(0).lower() not in _UNIT_WORDS:
            continue  # 2A, 3x: not a number standing alone
        out.append(m.group(0))
    return out


def _value_after(rest: str, allow_text: bool) -> str | None:
    """The answer at the start of ``rest`` (what follows a verb): a math group or a number."""
    rest = rest.strip(" :,")
    if rest.startswith(("$", "\\(", "\\[")):
        return _math_group(rest)
    candidate = _trim_prose(rest)
    if candidate is None:
        return None
    return candidate if allow_text or _math_value(candidate) else None


def _math_value(candidate: str) -> bool:
    """Whether a candidate answer parses as math (not as words)."""
    if _CHOICE_RE.fullmatch(candidate.strip()):
        return True
    try:
        return parse(normalize(candidate))[0] != "text"
    except (ParseError, RecursionError, ValueError):
        return False


def _stated(sentence: str) -> str | None:
    """The value a prose sentence states: after its last verb that is followed by a value
    (``The largest $n$ is 34``), else its only number (``... Sphere 3 hours ago``)."""
    clause = _clause(sentence.strip())
    masked = _mask_math(clause)
    verbs = list(_VERB_RE.finditer(masked))
    for verb in reversed(verbs):
        value = _value_after(clause[verb.end() :], allow_text=False)
        if value is not None:
            return value
    numbers = _numbers(masked)
    if len(numbers) == 1 and not any(c.isdigit() for _, _, c in _math_segments(clause)):
        return numbers[0]
    return None


def _after_marker(text: str, pos: int) -> str | None:
    rest = text[pos : pos + 2000]
    lead = _MARKER_LEAD_RE.match(rest)
    if lead:
        rest = rest[lead.end() :]
    rest_l = rest.lstrip()
    if rest_l.startswith(("$$", "\\[")):
        seg = _math_segments(
            rest_l[: rest_l.find("$$", 2) + 2 if rest_l.startswith("$$") else None]
        )
        if seg:
            return seg[0][2]
    line = rest_l.split("\n", 1)[0].strip()
    if not line:
        return None
    segs = _math_segments(line)
    if not (segs and segs[0][0] == 0):
        value = _trim_prose(line, after_verbs=False)  # "6.02E23.", "(E) 42": opens the line
        if value is not None and _math_value(value):
            return value
    else:
        # "$3$, or maybe $4$": the prose decides hedging; "$x$ is $5$": $x$ is the subject
        after = _clause(line[segs[0][1] :])
        verb = _VERB_RE.match(after.lstrip())
        if verb:
            value = _value_after(after.lstrip()[verb.end() :], allow_text=False)
            if value is not None:
                return value
        return _math_group(line)
    sentence = line[: m.start()] if (m := _SENTENCE_END_RE.search(_mask_math(line))) else line
    stated = _stated(sentence)
    if stated is not None:
        return stated
    math = _math_group(line)
    if math is not None:
        # "The answer is either $3$ or $4$": the prose decides hedging
        return math
    return _trim_prose(line)


def _bare(text: str) -> str | None:
    s = text.strip()
    if len(s) > MAX_ANSWER_CHARS and "\n" not in s:
        # one line too long to parse: compared as written unless it is prose (its last number
        # is no answer: "x^{1000} + ... + 1" does not state 1). Prose is looked for in its two
        # ends, so a 10 MB line costs what a 200k one does: past the parser's bound only an
        # answer written exactly as the gold can match, and no gold is prose
        half = MAX_ANSWER_CHARS // 2
        ends = s if len(s) <= 2 * half else f"{s[:half]} {s[-half:]}"
        return None if _is_prose(ends) else s
    if len(s) > 400 and "\n" not in s:
        return s if _long_math(s) else None
    if not s or len(s) > 400 or s.count("\n") > 3:
        return None
    s = _strip_markdown(s)
    if _EITHER_RE.search(s) or _OR_SPLIT_RE.search(s):
        return s  # let unhedge judge it
    if _is_prose(s):
        return None
    if _parses(s):
        return s
    # not math we parse, but no prose either (a hostile or exotic answer): compared as text
    plain = _NON_PROSE_RE.sub(" ", normalize(s))
    if len(s) <= 200 and "\n" not in s and not _LONG_WORD_RE.search(plain):
        return s
    return None


def _long_math(s: str) -> bool:
    """Whether a long one-line response is all math (a polynomial written out, a long list of
    values): no prose, no hedge, and it parses as math."""
    if _EITHER_RE.search(s) or _OR_SPLIT_RE.search(s) or _is_prose(s):
        return False
    try:
        return parse(normalize(_strip_markdown(s)))[0] != "text"
    except (ParseError, RecursionError, ValueError):
        return False


_CONCLUSION_RE = re.compile(
    r"(?<=\s)(?:Therefore|Thus|Hence|So|Finally|In conclusion)(?![A-Za-z])"
    r"|(?<=,\s)(?:so|thus|therefore|hence)(?=\s)"
)


def _last_sentence(line: str) -> str:
    """The last sentence of a line (math segments never split; a display ends a sentence, and
    "Therefore"/"Thus"/"So" start one even after a missing full stop)."""
    masked = _mask_math(line.replace("...", "\u2026"))  # 0.1666... repeats; it ends no sentence
    ends = [m.end() for m in _SENTENCE_SPLIT_RE.finditer(masked)]
    ends += [m.start() for m in _CONCLUSION_RE.finditer(masked)]
    ends += [e for _, e, c in _math_segments(line) if line[e - 2 : e] in ("$$", "\\]")]
    ends = [e for e in ends if masked[e:].strip(" .!?\n")]
    return line[max(ends) :] if ends else line


def _fallback(text: str) -> str | None:
    s = text.rstrip()
    if s.endswith(("$", "\\]", "\\)")):
        # the response ends with math, maybe spread over lines: "Answer \\( \n 9 \n \\)"
        tail = s[-4000:]
        segs = _math_segments(tail)
        if segs and (s.endswith(("$$", "\\]")) or segs[-1][1] == len(tail)):
            return segs[-1][2]
    core = s.rstrip(" .")
    if len(core) > 4000 and core.endswith(("$", "\\]", "\\)")):
        # ... in a math segment too long for that window (a polynomial written out): its last
        # number is no answer ("x^{500} + ... + 1" does not state 1)
        tail = core[-(MAX_ANSWER_CHARS + 4000) :]
        segs = _math_segments(tail)
        if segs and segs[-1][1] == len(tail) and len(segs[-1][2]) > 3000:
            return segs[-1][2]
    lines = [ln for ln in s.split("\n") if ln.strip()]
    if not lines:
        return None
    last = lines[-1][-4000:].replace("...", "\u2026")  # 0.1666... repeats; it ends no sentence
    # the last sentence, if it states the answer: "Therefore, (x, y) = (4, -1).", "there are
    # 12 distinct sequences.", "We get $x = 7$."
    sentence = _last_sentence(last).strip()
    if _math_segments(sentence):
        return _math_group(sentence, last=True)
    # a concluding sentence in prose outranks the math before it ("... $d = \\frac{90}{n}$ ...
    # Therefore, there are 12 sequences."); any other sentence (a check, a remark) does not
    stated = _stated(sentence.rstrip(" .!?"))
    if stated is not None and _CONCLUSION_RE.match(" " + sentence, 1):
        return stated
    group = _math_group(last, last=True)
    if group is not None:
        return group
    if stated is not None:
        return stated
    sentences = [p for p in _SENTENCE_SPLIT_RE.split(last) if p.strip()]
    if sentences:
        stated = _trim_prose(sentences[-1], from_start=False)
        if stated is not None:
            return stated
    numbers = _numbers(last)
    return numbers[-1] if numbers else None


def extract(response: str) -> tuple[str | None, str]:
    """The final answer and how it was found: ``boxed``, ``marker``, ``bare``, ``fallback``,
    ``hedge`` (several different answers: no credit) or ``none``."""
    text = undouble_backslashes(response)
    if _THINK_END in text:
        after = text.rsplit(_THINK_END, 1)[1]
        if after.strip():
            text = after
    if len(text) > 20:
        noise = _TRAILING_NOISE_RE.search(text[-300:])
        if noise:  # "I hope it is correct. <|im_start|>user": no part of the answer
            text = text[: len(text) - len(text[-300:]) + noise.start()]
    boxes = find_boxes(text)
    if boxes and boxes[-1][2] == _TRUNCATED:
        return None, "truncated"  # the response stops inside its final \boxed{
    if boxes:
        # "... \\boxed{255} ... Final Answer: The final answer is $10,455$.": boxes of steps,
        # then the final answer stated after them
        tail = text[boxes[-1][1] :]
        late = [m for m in _MARKER_RE.finditer(tail) if m.group(0).lower().startswith("final")]
        if late:
            stated = _after_marker(tail, late[-1].end())
            if stated and _math_value(stated):
                resolved = unhedge(stated)
                return (resolved, "marker") if resolved is not None else (None, "hedge")
        group = [boxes[-1]]
        links: list[str] = []
        for box in reversed(boxes[:-1]):
            link = _connective(text[box[1] : group[0][0]])
            if link is None:
                break
            group.insert(0, box)
            links.insert(0, link)
        answer = _join_group(text, group, links)
        if answer is None:
            return None, "hedge"
        if not answer.strip():
            return None, "none"
        resolved = unhedge(answer)
        return (resolved, "boxed") if resolved is not None else (None, "hedge")
    for how, finder in (("marker", None), ("bare", _bare), ("fallback", _fallback)):
        if finder is None:
            answer = None
            for m in reversed(list(_MARKER_RE.finditer(text[-20000:]))):
                answer = _after_marker(text[-20000:], m.end())
                if answer:
                    break
        else:
            answer = finder(text)
        if answer:
            resolved = unhedge(answer)
            return (resolved, how) if resolved is not None else (None, "hedge")
    return None, "none"


def extract_gold(gold: str) -> str | None:
    """The answer a gold text states, read more generously than a response: its last boxes
    together (``\\boxed{1} papers and \\boxed{2} bins`` is the list ``1, 2``: a gold never
    hedges), unless a box is taken back or stands far before the next; an unterminated last box
    runs to the end; a gold written as prose (a whole solution) is read like a response. None
    when the gold is itself a bare answer.

    >>> extract_gold(r"so \\boxed{1} papers and \\boxed{2} bins"), extract_gold("12")
    ('1, 2', None)
    """
    text = undouble_backslashes(gold)
    boxes = find_boxes(text) if "box" in text else []
    if boxes and boxes[-1][2] == _TRUNCATED:
        start = boxes[-1][0]
        opened = _BOX_RE.match(text, start)
        rest = text[opened.end() if opened else start :].lstrip("{").strip().rstrip("$.")
        boxes[-1] = (start, len(text), rest) if rest else boxes[-1]
        boxes = [b for b in boxes if b[2] != _TRUNCATED]
    if boxes:
        group, links = [boxes[0]], list[str]()
        for box in boxes[1:]:
            gap = text[group[-1][1] : box[0]]
            if len(gap) > 80 or set(_gap_words(gap)) & (_RETRACTIONS - {"or", "either"}):
                # "\\boxed{1} no, \\boxed{2}", or a box of a step long before: the later box
                group, links = [box], []
                continue
            group.append(box)
            links.append("or" if _connective(gap) == "or" else "and")
        joined = _join_group(text, group, links)
        return joined if joined and joined.strip() else None
    if "####" in text:
        return text.rsplit("####", 1)[1].strip() or None
    if _bare(text) is not None:
        return None
    answer, _ = extract(text)
    # a prose gold stating a word ("Yes, it is possible") stays as written
    return answer if answer is not None and _math_value(answer) else None
