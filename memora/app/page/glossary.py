"""The glossary: the lesson's few words, in the page's language, and the tooltips that point to it.

The glossary itself is a popover under the page's title (``render_glossary``). Where each term first
appears on the page (the Status panel, open by default, then the chat's fold mark and the ledger),
its widget or caption carries the term's entry as a tooltip (``explain``), ending with a pointer to
the glossary.
"""

from __future__ import annotations

import streamlit as st

from memora.app.page import render
from memora.app.page import state as keys
from memora.app.page.i18n import t

TERMS = ("fold", "summary", "recent_window", "budget", "token", "watermark", "ledger")
"""The glossary's terms in the order the lesson meets them; each has ``glossary.<term>.name`` and
``.text``."""


def entry(lang: str, term: str) -> str:
    """One term's entry as Markdown: its name in bold, then what it means (``glossary.entry`` sets
    the colon)."""
    return t(
        lang,
        "glossary.entry",
        name=t(lang, f"glossary.{term}.name"),
        text=t(lang, f"glossary.{term}.text"),
    )


def explain(lang: str, *terms: str) -> str:
    """A tooltip for the place where ``terms`` first appear: their entries, then where the whole
    glossary is."""
    return "\n\n".join([*(entry(lang, term) for term in terms), t(lang, "glossary.more")])


def render_glossary(lang: str) -> None:
    """The glossary's popover, under the page's caption: every term, in the lesson's order.

    Its words are drawn only while it is open (``keys.GLOSSARY_OPEN``): a popover's body is sent by
    every run, open or not, and the glossary was the longest text that every run of every student's
    page sent. Opening it reruns the page once; a reader waits a moment for the words, as for any
    closed panel."""
    popover = st.popover(
        t(lang, "glossary.title"),
        icon=":material/menu_book:",
        type="tertiary",
        key=keys.GLOSSARY_OPEN,
        on_change="rerun",
    )
    with popover:
        if popover.open:
            render.caption(t(lang, "glossary.intro"))
            render.markdown("\n".join(f"- {entry(lang, term)}" for term in TERMS))
