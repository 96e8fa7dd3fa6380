"""The one way the page draws text: keys redacted in any form, then Markdown made inert.

Every panel, message, reply, summary, notice and warning goes through these
functions (a test checks that no other page module calls ``st.markdown``,
``st.caption``, the alerts or ``st.write_stream`` itself). ``shown`` is the
text as drawn: ``memora.backends.openai_errors.redact`` with the session's
keys, then ``memora.markup.inert_markdown``, so no text can show a key or make
the browser fetch an image.
"""

from __future__ import annotations

from typing import Any, Literal

import streamlit as st

from memora.backends.openai_errors import redact
from memora.markup import inert_markdown
from memora.ui import state as keys

Level = Literal["info", "success", "warning", "error"]


def session_secrets() -> tuple[str | None, ...]:
    """The keys this session's backend may use: the OpenAI key and the OpenAI-compatible server's."""
    settings = st.session_state.get(keys.SETTINGS)
    return () if settings is None else (settings.api_key, settings.chat_api_key)


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
