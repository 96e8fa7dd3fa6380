"""The one way the page draws text: keys redacted in any form, then Markdown made inert.

Every panel, message, reply, summary, notice and warning goes through these
functions (a test checks that no other page module calls ``st.markdown``,
``st.caption``, the alerts or ``st.write_stream`` itself). ``shown`` is the
text as drawn: ``memora.backends.redaction.redact`` with the session's
keys, then ``memora.app.page.markup.inert_markdown``, so no text can show a key or make
the browser fetch an image.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import streamlit as st

from memora.app.page import state as keys
from memora.app.page.i18n import t
from memora.app.page.markup import inert_markdown
from memora.backends.redaction import redact

Level = Literal["info", "success", "warning", "error"]


def session_secrets() -> tuple[str | None, ...]:
    """The session's secrets: both keys, and the passwords of the store's and the server's URLs, in
    every form."""
    settings = st.session_state.get(keys.SETTINGS)
    return () if settings is None else settings.redacted_secrets


def shown(text: str) -> str:
    """``text`` as the page draws it: no key, in any form, and no image that could load."""
    return inert_markdown(redact(text, session_secrets()))


def markdown(text: str, **options: Any) -> None:
    st.markdown(shown(text), **options)


def caption(text: str, **options: Any) -> None:
    st.caption(shown(text), **options)


def plain(text: str) -> None:
    """Text without Markdown (``st.text``), keys still redacted."""
    st.text(redact(text, session_secrets()))


def alert(level: Level, text: str, **options: Any) -> None:
    """``st.info``, ``st.success``, ``st.warning`` or ``st.error``, by ``level``."""
    getattr(st, level)(shown(text), **options)


def code(text: str, **options: Any) -> None:
    """``st.code``: no Markdown applies inside, but keys are still redacted."""
    st.code(redact(text, session_secrets()), **options)


def chart(spec: dict[str, Any]) -> None:
    """``st.vega_lite_chart`` of a layered ``spec`` whose rows are inlined at its top
    (``data.values``), drawn without converting them to Arrow.

    Streamlit 1.67 pulls a top-level ``data.values`` out of the spec and converts it to an Arrow
    table on every run (about 1.4 ms a chart here, 8x the rest of the call), though the rows are a
    handful. Vega-Lite's layers inherit the top-level data, so each layer is given the rows itself,
    and Streamlit sends them inside the spec, as JSON. A layer with data of its own keeps it; a spec
    without layers, or with data that is not inline rows, is drawn as it is."""
    data = spec.get("data")
    layers = spec.get("layer")
    if isinstance(data, dict) and set(data) == {"values"} and isinstance(layers, list):
        spec = {key: value for key, value in spec.items() if key != "data"}
        spec["layer"] = [layer if "data" in layer else {**layer, "data": data} for layer in layers]
    st.vega_lite_chart(spec=spec, width="stretch")


@contextmanager
def lazy_expander(label: str, open_key: str, icon: str) -> Iterator[bool]:
    """An expander that tracks whether it is open (``open_key``) and yields it: the caller draws its
    body only while open. Streamlit runs a collapsed expander's body on every run, hidden or not;
    this one's stays empty.

    Opening or closing it reruns the page, or only the fragment it is drawn in (``st.fragment``).
    The open state is a widget's: ``label`` is part of its identity, so a renamed expander starts
    closed, and its key is dropped by any run that does not draw it."""
    expander = st.expander(label, key=open_key, on_change="rerun", icon=icon)
    with expander:
        yield bool(expander.open)


@contextmanager
def lazy_panel(lang: str, title: str, open_key: str, icon: str) -> Iterator[bool]:
    """A ``lazy_expander`` titled ``t(lang, title)``: a panel that grows with the conversation costs
    nothing closed.

    Closed, it draws nothing at all, not even a word on why it is empty: a collapsed panel's body is
    never seen, and the page's seven panels are drawn by every run of every student's page."""
    with lazy_expander(t(lang, title), open_key, icon) as is_open:
        yield is_open
