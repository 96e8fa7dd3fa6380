"""Writes the variables' list in ``memora/app/settings.py``'s docstring and their table in
docs/configuration.md, both from the one declaration of each variable: a field of ``Settings``.

``python -m memora.app.settings_docs`` writes both files; ``--check`` writes nothing, prints each
file that differs from what it would write, and exits 1 if one does (tests/test_settings_docs.py
runs the same check in CI). Only the generated parts are replaced: the list is the docstring's end,
after ``LIST_STARTS``; the table sits between ``TABLE_STARTS`` and ``TABLE_ENDS``. A file without
those marks is an error, never rewritten whole.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from memora.app.settings import VARIABLES, accepts, default_in_words, description

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_PY = ROOT / "memora" / "app" / "settings.py"
CONFIGURATION_MD = ROOT / "docs" / "configuration.md"
LIST_STARTS = "Variables (each may also be a key in ``.streamlit/secrets.toml``):\n"
TABLE_STARTS = (
    "<!-- The table is generated from memora/app/settings.py:"
    " python -m memora.app.settings_docs -->\n"
)
TABLE_ENDS = "<!-- end of the generated table -->\n"
WIDTH = 100


def _rst(text: str) -> str:
    """Markdown's `code` as the docstrings write it, ``code``."""
    return re.sub(r"`([^`]+)`", r"``\1``", text)


def docstring_list() -> str:
    """One item a variable, in the order ``Settings`` declares them: its name, what it accepts and
    its default, wrapped at ``WIDTH`` columns; what each means is the field's description, next to
    it."""
    items = []
    for name, field in VARIABLES.items():
        item = f"- ``{name}``: {accepts(field).text}; default {_rst(default_in_words(field))}."
        items.append(textwrap.fill(item, WIDTH, subsequent_indent="  ", break_on_hyphens=False))
    return "\n" + "\n".join(items) + "\n"


def table() -> str:
    """docs/configuration.md's table: each variable, its default, what it accepts and what it
    means."""
    rows = ["| variable | default | accepts | meaning |", "|---|---|---|---|"]
    for name, field in VARIABLES.items():
        # A table cell is Markdown: "<path>" would be read as an HTML tag, and "|" would end the
        # cell.
        words = accepts(field).text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
        rows.append(f"| `{name}` | {default_in_words(field)} | {words} | {description(name)} |")
    return "\n".join(rows) + "\n"


def with_list(source: str) -> str:
    """``source``, the text of settings.py, with the docstring's list as ``docstring_list`` writes
    it."""
    head, found, rest = source.partition(LIST_STARTS)
    if not found:
        raise ValueError(f"settings.py has no line {LIST_STARTS.strip()!r} to put the list after")
    closing = rest.index('"""')
    return head + LIST_STARTS + docstring_list() + rest[closing:]


def with_table(page: str) -> str:
    """``page``, the text of docs/configuration.md, with the table as ``table`` writes it."""
    head, found, rest = page.partition(TABLE_STARTS)
    if not found or TABLE_ENDS not in rest:
        raise ValueError("docs/configuration.md has no marks around the generated table")
    return head + TABLE_STARTS + table() + TABLE_ENDS + rest.partition(TABLE_ENDS)[2]


def stale() -> list[Path]:
    """The files whose generated part differs from what the declaration says now."""
    written = [(SETTINGS_PY, with_list), (CONFIGURATION_MD, with_table)]
    return [
        path
        for path, write in written
        if write(path.read_text(encoding="utf-8")) != path.read_text(encoding="utf-8")
    ]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        differ = stale()
        for path in differ:
            shown = path.relative_to(ROOT)
            print(f"{shown} differs from the settings: run python -m memora.app.settings_docs")
        return 1 if differ else 0
    if argv:
        print("usage: python -m memora.app.settings_docs [--check]", file=sys.stderr)
        return 2
    SETTINGS_PY.write_text(with_list(SETTINGS_PY.read_text(encoding="utf-8")), encoding="utf-8")
    CONFIGURATION_MD.write_text(
        with_table(CONFIGURATION_MD.read_text(encoding="utf-8")), encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
