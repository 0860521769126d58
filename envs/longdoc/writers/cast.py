"""Helpers the writers share: a document's people, dates, money and identifiers."""

from __future__ import annotations

import datetime as dt
import random
import string

from llmgym.envs.longdoc.writers.vocab import FIRST_NAMES, MONTHS, SURNAMES


def people(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct full names.

    >>> len(set(people(random.Random(0), 30)))
    30
    """
    seen: set[str] = set()
    out = []
    surnames = rng.sample(SURNAMES, min(n, len(SURNAMES)))
    for i in range(n):
        name = f"{rng.choice(FIRST_NAMES)} {surnames[i % len(surnames)]}"
        while name in seen:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
        seen.add(name)
        out.append(name)
    return out


def long_date(day: dt.date) -> str:
    """``14 March 2023``.

    >>> long_date(dt.date(2023, 3, 14))
    '14 March 2023'
    """
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def money(symbol: str, thousands: int) -> str:
    """An amount given in thousands, written as a report would.

    >>> money("€", 425), money("$", 12_400), money("£", 1_250_000)
    ('€425,000', '$12.4 million', '£1.25 billion')
    """
    if thousands >= 1_000_000:
        return f"{symbol}{thousands / 1_000_000:.2f} billion"
    if thousands >= 10_000:
        return f"{symbol}{thousands / 1000:.1f} million"
    return f"{symbol}{thousands * 1000:,}"


def code(rng: random.Random, prefix: str = "") -> str:
    """A reference code such as ``RF-73412`` or ``4471-KQB``.

    >>> code(random.Random(1), "RF") != code(random.Random(2), "RF")
    True
    """
    digits = "".join(rng.choice(string.digits) for _ in range(rng.choice((4, 5))))
    letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(rng.choice((2, 3))))
    if prefix:
        return f"{prefix}-{digits}{'' if rng.random() < 0.5 else '-' + letters[:1]}"
    return f"{digits}-{letters}" if rng.random() < 0.5 else f"{letters}-{digits}"


def near_miss(rng: random.Random, value: str) -> str:
    """A value of the same shape as ``value`` that differs from it (a distractor needle).

    >>> v = "RF-7341"; w = near_miss(random.Random(0), v); w != v and len(w) == len(v)
    True
    """
    chars = list(value)
    spots = [i for i, c in enumerate(chars) if c.isalnum()]
    for _ in range(8):
        i = rng.choice(spots)
        pool = string.digits if chars[i].isdigit() else "ABCDEFGHJKLMNPQRSTUVWXYZ"
        c = rng.choice(pool)
        if c != chars[i]:
            chars[i] = c
            break
    out = "".join(chars)
    return out if out != value else value[::-1]
