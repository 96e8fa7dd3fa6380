"""Markdown that draws text and links, never making the browser fetch anything; pure, no Streamlit.

Streamlit renders Markdown with raw HTML escaped (no ``<img>``, ``<script>``,
``javascript:``), so the one way left for a message, a reply or a summary to
make every reader's browser load a URL is an image: ``![alt](url)`` or the
reference form ``![alt][ref]`` with ``[ref]: url`` anywhere in the text.
Both need a ``!`` directly before a ``[`` that the parser reads as a bracket.
"""

from __future__ import annotations

import re

_IMAGE_OPENER = re.compile(r"!\[")


def inert_markdown(text: str) -> str:
    """``text`` with every image turned into plain text: ``![x](url)`` shows as ``![x](url)``.

    Escaping the bracket after each ``!`` (``!\\[``) leaves no image opener, in
    any form (inline, reference, collapsed, shortcut, nested in a link); the
    bracket pair no longer makes a link either, so the URL shows as text.
    Plain links and autolinks stay clickable: a click is a reader's choice,
    never an automatic fetch. Inside code spans and blocks the backslash shows,
    a small price for a rule with no exceptions; HTML entities such as
    ``&#33;`` decode to literal text and can never open an image.
    """
    return _IMAGE_OPENER.sub(r"!\\[", text)


def small(words: str) -> str:
    """``words`` as a caption reads, inside a larger Markdown element: small and grey.

    For the page's own words, which may hold colour directives of their own (``:orange[summary
    55]``): a ``[`` or ``]`` that is not paired would end the directive early.
    """
    return f":gray[:small[{words}]]"


_LINE_MARKS = re.compile(r"^(?:#{1,6} |> ?)", re.MULTILINE)


def plain_text(text: str) -> str:
    """``text`` without the Markdown a reply may carry: bold markers (``**``, ``__``), headings and
    quote marks.

    For the places that show a message as text, not Markdown (``/context``, the summary audit's
    folded messages), so the offline engine's ``**Offline mode…**`` reads as words. Lists, code and
    everything else stay as they are; ``a__b`` loses its underscores, as the terminal's own
    ``PlainText`` does.
    """
    return _LINE_MARKS.sub("", text).replace("**", "").replace("__", "")
