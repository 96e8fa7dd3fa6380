"""Long lists a page at a time: the chat's earlier messages, the full history, the ledger.

A conversation at the size cap has thousands of messages and ledger rows; drawing them all on every
run cost seconds of the server's one core and megabytes to each browser. A panel draws one page,
newest first, with *Older* and *Newer* buttons and where it is ("page 2 of 41: 21–40 of 820"), so
every item stays reachable and a run costs the same at any length. ``page_of`` is pure;
``render_pager`` draws the controls and keeps the page number in the session state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from memora.app.page import render
from memora.app.page.i18n import t


@dataclass(frozen=True)
class Page:
    """Items ``start`` to ``stop`` (an index range, oldest first) of ``total``: page ``number`` of
    ``pages``, 1 the newest."""

    number: int
    pages: int
    start: int
    stop: int
    total: int

    @property
    def has_older(self) -> bool:
        return self.number < self.pages

    @property
    def has_newer(self) -> bool:
        return self.number > 1


def page_of(total: int, size: int, number: int) -> Page:
    """Page ``number`` (1: the newest ``size`` items) of ``total`` items, oldest first in the page.

    Pages are cut from the newest end, so every page but the oldest holds ``size`` items and an even
    ``size`` keeps a user message with its reply when ``total`` is even. A ``number`` past either
    end (the list shrank, or a stale click) is clamped to the nearest page; no items give one empty
    page. Raises ValueError when ``size`` is not positive or ``total`` is negative.
    """
    if size < 1 or total < 0:
        raise ValueError(
            f"a page needs a positive size and a total of at least 0, not {size} and {total}"
        )
    pages = max(1, -(-total // size))
    number = min(max(number, 1), pages)
    stop = total - (number - 1) * size
    return Page(number, pages, max(0, stop - size), stop, total)


def render_pager(lang: str, key: str, page: Page) -> None:
    """Where ``page`` is, and buttons to the older and newer pages (none when one page holds
    everything).

    ``key`` is the session state key of the page number; the buttons' callbacks change it, so the
    run they start draws the page they name.
    """
    if page.pages == 1:
        return
    older, where, newer = st.columns([1, 2, 1], vertical_alignment="center")
    _button(
        older, lang, "pager.older", key, page.number + 1, page.has_older, ":material/arrow_upward:"
    )
    with where:
        where_text = t(
            lang,
            "pager.where",
            number=page.number,
            pages=page.pages,
            first=page.start + 1,
            last=page.stop,
            total=page.total,
        )
        render.caption(where_text)
    _button(
        newer,
        lang,
        "pager.newer",
        key,
        page.number - 1,
        page.has_newer,
        ":material/arrow_downward:",
    )


def _button(
    column: Any, lang: str, label: str, key: str, number: int, enabled: bool, icon: str
) -> None:
    column.button(
        t(lang, label),
        key=f"{key}_{label}",
        disabled=not enabled,
        on_click=_turn,
        args=(key, number),
        icon=icon,
    )


def _turn(key: str, number: int) -> None:
    st.session_state[key] = number
