"""The English words left in a zh-TW label: what the catalog test and the browser test both look for.

``ALLOWED`` is the repository's allowlist (``memora/app/page/locales/zh-TW.allowlist``). Code is never a word:
text in backticks, ``{placeholders}``, snake_case names, ``/commands`` and dotted names are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

ALLOWLIST = Path(__file__).resolve().parents[2] / "memora" / "app" / "page" / "locales" / "zh-TW.allowlist"
ALLOWED = frozenset(
    line.strip() for line in ALLOWLIST.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")
)
_CODE = re.compile(r"`[^`]*`|\{[^}]*\}|\b\w*_\w*\b|(?<![\w/])/\w+|\w+(?:\.\w+)+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*")


def english_words(text: str) -> set[str]:
    """The words of ``text`` written in Latin letters that are not code and not on the allowlist."""
    return {word for word in _WORD.findall(_CODE.sub(" ", text)) if word not in ALLOWED}
