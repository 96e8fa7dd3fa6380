"""The retention probe: does each reply request still carry the latest value of the user's planted facts?

A fact counts at a reply request when it was last stated ``FACT_AGE`` or more
turns before that request's turn, so it has to survive outside a 3-turn window
(in the summary, a memory block, or a longer verbatim window). For each such
fact the request is one of:

- **recalled**: some spelling of the latest value is in the request;
- **stale**: the latest value is not, but an earlier value of the same fact is
  (the request carries a superseded value: "B1" after "Actually I'm B2, not B1");
- **missing**: no value of the fact is in the request.

The probe reads only what was sent (``Message`` contents), so it works the same
for Memora, the article and every peer library. It reads the request without the
user's current message, wherever that text sits (its own message, or folded into a
summary as langmem#77 does): a fact the current message itself states again was
not remembered by the memory. It is deterministic: the script
says which facts each user message stated (``script.Statement``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from benchmarks.memory.script import FACTS, Script
from memora.text.messages import Message

FACT_AGE = 4
"""A fact is probed at turn t when it was last stated at turn t - FACT_AGE or earlier (outside a 3-turn window)."""


@dataclass(frozen=True)
class Probed:
    """One fact due at one reply request: its latest value and the values it had before."""

    fact: str
    latest: str
    earlier: tuple[str, ...]


@dataclass(frozen=True)
class Recall:
    """The facts one reply request was probed for, by outcome."""

    recalled: int = 0
    stale: int = 0
    missing: int = 0

    @property
    def probed(self) -> int:
        return self.recalled + self.stale + self.missing


@cache
def _spelling(text: str) -> re.Pattern[str]:
    # Latin spellings must stand alone ("Ben" is not in "Benefit"); Chinese ones have no word boundaries.
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(text)}(?![A-Za-z0-9])")


def carries(text: str, fact: str, value: str) -> bool:
    """Whether ``text`` holds any spelling of ``value`` of ``fact`` (``script.FACTS``)."""
    return any(_spelling(spelled).search(text) for spelled in FACTS[fact][value])


def due_facts(script: Script) -> list[tuple[Probed, ...]]:
    """Per turn (0-based), the facts probed at its reply request: last stated ``FACT_AGE`` or more turns before."""
    history: dict[str, list[tuple[int, str]]] = {}
    out = []
    for turn, stated in enumerate(script.statements):
        due = []
        for fact, said in history.items():
            last_turn, latest = said[-1]
            if turn - last_turn >= FACT_AGE:
                earlier = tuple(dict.fromkeys(v for _, v in said[:-1] if v != latest))
                due.append(Probed(fact, latest, earlier))
        out.append(tuple(due))
        for statement in stated:
            history.setdefault(statement.fact, []).append((turn, statement.value))
    return out


def probe(messages: Sequence[Message], due: Sequence[Probed], current: str = "") -> Recall:
    """How many of the ``due`` facts the request's ``messages`` recall, carry stale, or miss.

    Every copy of ``current`` (the user's current message) is left out first, so a fact it restates counts
    only if the memory carried it too. An empty ``current`` leaves nothing out.
    """
    text = "\n".join(m.content for m in messages)
    if current:
        text = text.replace(current, "\n")
    recalled = stale = missing = 0
    for fact in due:
        if carries(text, fact.fact, fact.latest):
            recalled += 1
        elif any(carries(text, fact.fact, value) for value in fact.earlier):
            stale += 1
        else:
            missing += 1
    return Recall(recalled, stale, missing)


def has_current_message(messages: Sequence[Message], current: str) -> bool:
    """Whether the user's current message is in the request whole, as a user message.

    langmem 0.0.30 sometimes folds it into the summary (langchain-ai/langmem#77): the
    reply request then answers a question it was never sent.
    """
    return any(m.role == "user" and m.content == current for m in messages)
