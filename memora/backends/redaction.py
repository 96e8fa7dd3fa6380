"""Secrets out of every text a page, an error or the server log shows: keys, and passwords in URLs.

``redact`` removes the secrets it is given in any form (any letter case, cut, re-prefixed), then
anything shaped like a key, a bearer token, the credentials of a URL of any scheme
(``postgresql://``, ``postgres://``, ``postgresql+psycopg://``, ``https://``...) or a ``password=``
setting. ``url_secrets`` gives the password of a configured URL in every form it may be quoted in
(as written, percent-decoded, percent-encoded again), because libpq quotes a malformed URL's
password as written ("invalid percent-encoded token") while other messages may show it decoded.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, unquote_plus

MIN_SECRET_RUN = 12
"""Any run of this many consecutive characters of a secret is redacted, in any letter case."""
_MIN_SECRET = 4
_REDACTED = "[redacted]"
_KEY = re.compile(r"(sk-|Bearer\s+)[\w\-*.]+")
# scheme://user:password@ in any scheme; the password stops at whitespace, so one URL never swallows
# a sentence.
_URL_CREDENTIALS = re.compile(
    r"\b([a-z][a-z0-9+.\-]*://)[^\s/@:\"'<>]*:[^\s@\"'<>]*@", re.IGNORECASE
)
# libpq's key=value form: password=secret or password='a secret'.
_PASSWORD_SETTING = re.compile(r"\b(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` removed in any form, and anything shaped like a key, a
    bearer token or URL credentials.

    A secret is found in any letter case, with or without its prefix
    (``sk-``, ``sk-proj-``...): every run of ``MIN_SECRET_RUN`` or more
    consecutive characters of it is replaced, so an upper-cased, cut or
    re-prefixed key leaks none of its runs. A secret shorter than that is
    matched whole, in any case. Secrets shorter than 4 characters are not
    searched for; they would blank ordinary words (a URL's credentials are
    still removed by their shape).
    """
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET:
            pattern, width = _secret_pattern(secret)
            spans.extend((m.start(), m.start() + width) for m in pattern.finditer(text))
    if spans:
        pieces = []
        position = 0
        for start, end in _merged(spans):
            pieces += [text[position:start], _REDACTED]
            position = end
        text = "".join(pieces) + text[position:]
    text = _URL_CREDENTIALS.sub(r"\1" + _REDACTED + "@", text)
    text = _PASSWORD_SETTING.sub(r"\1" + _REDACTED, text)
    return _KEY.sub(r"\1" + _REDACTED, text)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The password of ``url`` (``scheme://user:password@host/...``) in each form it may be shown
    in; () without one.

    The password is everything between the first ``:`` after the scheme's ``//`` and the last ``@``,
    so one holding ``@``, ``/``, ``%``, a space or any unicode is still found whole.
    """
    if not url or "://" not in url:
        return ()
    userinfo, at, _ = url.partition("://")[2].rpartition("@")
    _, colon, password = userinfo.partition(":")
    if not (at and colon and password):
        return ()
    decoded = unquote(password)
    forms = {
        password,
        decoded,
        unquote_plus(password),
        quote(decoded, safe=""),
        quote_plus(decoded),
        quote(decoded),
    }
    return tuple(sorted(form for form in forms if form))


@functools.lru_cache(maxsize=16)
def _secret_pattern(secret: str) -> tuple[re.Pattern[str], int]:
    """A pattern whose zero-width matches start every window of the secret, and the window's
    width."""
    width = min(MIN_SECRET_RUN, len(secret))
    windows = sorted({secret[i : i + width].lower() for i in range(len(secret) - width + 1)})
    # A lookahead finds overlapping windows, so a run of any length is covered window by window.
    return re.compile("(?=(?:" + "|".join(map(re.escape, windows)) + "))", re.IGNORECASE), width


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
