"""Which browser a conversation belongs to: a secret the browser keeps, and its hash the store
keeps.

The page gives each browser a random secret (a cookie, ``memora.app.page.conversation``) and binds
every conversation it saves to ``owner_of(secret)``. The store holds only that hash, so someone who
reads the database learns no cookie. A conversation is opened and written only under its owner's
hash: the ``?c=`` id in a URL locates a conversation, it no longer grants access to it.
"""

from __future__ import annotations

import hashlib
import re
import secrets

SECRET_PATTERN = re.compile(r"[A-Za-z0-9_-]{43}")
"""``secrets.token_urlsafe(32)``: 32 random bytes, 43 URL-safe characters (safe in a cookie as it
is)."""


def new_browser_secret() -> str:
    """A new browser's secret: as strong as a session token, since it is the key to that browser's
    conversations."""
    return secrets.token_urlsafe(32)


def is_browser_secret(text: object) -> bool:
    """Whether ``text`` is a string with the shape of a secret this module makes (a cookie may carry
    anything)."""
    return isinstance(text, str) and SECRET_PATTERN.fullmatch(text) is not None


def owner_of(secret: str) -> str:
    """The owner hash the store keeps for ``secret``: 64 hex characters of SHA-256 (the secret has
    256 random bits)."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def new_owner() -> str:
    """The owner hash of a browser of its own, whose secret nobody keeps (a keeper made with no
    browser)."""
    return owner_of(new_browser_secret())
