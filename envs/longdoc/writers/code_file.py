"""Long code files: one Python module of service helpers, valid syntax throughout.

Sections are groups of functions under a ``# [S3] ...`` banner comment; every block is a
function or a group of constants (never prose, so planted facts arrive as whole blocks).
"""

from __future__ import annotations

import random
from typing import Any

from llmgym.envs.longdoc.writers.document import Budget, Section, Writer, picker
from llmgym.envs.longdoc.writers.vocab import (
    CODE_NOUNS,
    CODE_PARAMS,
    CODE_VERBS,
    COMPANY_STEMS,
    TEAMS,
)

SUFFIXES = (
    "",
    "",
    "_batch",
    "_for_period",
    "_safe",
    "_cached",
    "_summary",
    "_by_region",
    "_pending",
)
FIRST_ARGS = ("records", "entries", "batch", "payload", "rows", "items")
DOC_LINES = (
    "Returns ``None`` when no {noun} in ``{arg}`` needs doing.",
    "The caller owns the transaction; ``{callee}`` does not commit either.",
    "Kept small on purpose: the per-{noun} rules live in ``{callee}``.",
    "Safe to call twice with the same ``{arg}``; see ``{callee}`` for why.",
    "Ask the {team} team before changing how ``{callee}`` is called here.",
    "Raises ``ValueError`` on a malformed {noun} instead of guessing.",
)


class CodeFile(Writer):
    """A long Python module of business helpers for one service."""

    kind = "code_file"
    heading = "# [{sid}] {title}"

    def __init__(self, seed: int):
        super().__init__(seed)
        rng = random.Random(seed)
        self.service = f"{rng.choice(COMPANY_STEMS).lower()}_{rng.choice(('billing', 'ledger', 'payments', 'settlement', 'invoicing'))}"
        self.team = rng.choice(TEAMS)
        self.reserved: set[str] = set()
        self.names: set[str] = set()
        self.defined: list[str] = []

    def begin(self) -> None:
        self.names = set(self.reserved)
        self.defined = []

    def header(self) -> str:
        return (
            f'"""{self.service}: helpers for the {self.service.split("_")[1]} service.\n\n'
            f'Maintained by the {self.team} team. Functions are grouped by the record type they handle.\n"""\n\n'
            "from __future__ import annotations\n\nimport logging\nimport math\n\n"
            "logger = logging.getLogger(__name__)"
        )

    def new_name(self, rng: random.Random, noun: str | None = None) -> str:
        pick = picker(rng)
        for _ in range(50):
            name = f"{pick(CODE_VERBS)}_{noun or pick(CODE_NOUNS)}{pick(SUFFIXES)}"
            if name not in self.names and not self.avoid(("name", name)):
                break
        else:
            name = f"{name}_{len(self.names)}"
        self.names.add(name)
        return name

    def function(
        self,
        rng: random.Random,
        name: str,
        params: list[tuple[str, str, str]],
        calls: list[str],
        noun: str,
        body: list[str] | None = None,
    ) -> str:
        """A function definition; ``params`` are ``(name, type, default)`` keyword parameters."""
        pick = picker(rng)
        arg = pick(FIRST_ARGS)
        sig = ", ".join([f"{arg}: list"] + [f"{p}: {t} = {d}" for p, t, d in params])
        verb = name.split("_")[0]
        doc = [
            f'    """{verb.capitalize()} the {noun.replace("_", " ")} {arg} for the {self.service} service.',
            "",
        ]
        if params:
            doc.append("    Args:")
            for p, _, d in params:
                doc.append(f"        {p}: defaults to {d}.")
            doc.append("")
        doc.append(
            f"    {pick(DOC_LINES).format(noun=noun.replace('_', ' '), arg=arg, callee=calls[0] if calls else 'len', team=self.team)}"
        )
        doc.append('    """')
        if body is None:
            callee = calls[0] if calls else "len"
            other = calls[1] if len(calls) > 1 else "sorted"
            shape = int(rng.random() * 4)
            if shape == 0:
                body = [
                    "    total = 0",
                    f"    for item in {arg}:",
                    f"        total += {callee}(item)",
                ]
                body += [f'    logger.debug("{name}: %d {noun}", total)', "    return total"]
            elif shape == 1:
                body = [
                    f"    if not {arg}:",
                    f'        raise ValueError("{name} needs at least one {noun}")',
                ]
                body += [
                    f"    cleaned = [{callee}(x) for x in {arg}]",
                    f"    return {other}(cleaned)",
                ]
            elif shape == 2:
                body = [f'    summary = {{"count": len({arg}), "kind": "{noun}"}}']
                body += [
                    f'    summary["value"] = {callee}({arg})',
                    f'    summary["extra"] = {other}({arg})',
                    "    return summary",
                ]
            else:
                body = [
                    f"    pending = [x for x in {arg} if x is not None]",
                    "    if not pending:",
                    "        return None",
                ]
                body += [
                    f"    result = {callee}(pending)",
                    f'    logger.info("{name} handled %d items", len(pending))',
                ]
                body += [f"    return {other}(result) if result else result"]
            for c in calls[2:]:
                body.insert(-1, f"    {c}({arg})")
        return "\n".join([f"def {name}({sig}):", *doc, *body])

    def random_params(self, rng: random.Random) -> list[tuple[str, str, str]]:
        chosen = rng.sample(CODE_PARAMS, 1 + int(rng.random() * 3))
        return [(p, t, rng.choice(defaults)) for p, t, defaults in chosen]

    def body(self, rng: random.Random, budget: Budget) -> Section:
        pick = picker(rng)
        noun = pick(CODE_NOUNS)
        blocks: list[str] = []
        for _ in range(2 + int(rng.random() * 4)):
            if budget.left <= 0 and blocks:
                break
            name = self.new_name(rng, noun)
            pool = [c for c in self.defined[-40:] if not self.avoid(("call", c))]
            calls = rng.sample(pool, min(len(pool), 1 + int(rng.random() * 3)))
            block = self.function(rng, name, self.random_params(rng), calls, noun)
            self.defined.append(name)
            budget.spend(len(block) + 2)
            blocks.append(block)
        title = f"{noun.replace('_', ' ')} helpers"
        budget.spend(len(title) + 10)
        return Section(title, blocks, [False] * len(blocks))

    def constants(self, pairs: list[tuple[str, Any]]) -> str:
        return "\n".join(f"{k} = {v!r}" for k, v in pairs)
