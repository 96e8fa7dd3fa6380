"""Reading a Markdown table the page drew (``memora.app.page.views.markdown_table``) back into its cells."""

from __future__ import annotations

import re

_CELL_BORDER = re.compile(r"(?<!\\)\|")
_ESCAPE = re.compile(r"\\(.)")


def markdown_tables(elements) -> list[dict[str, dict[str, str]]]:
    """Every Markdown table among AppTest's markdown ``elements``, each as {row word: {column heading: cell}}, in the
    order drawn; cells unescaped, as a reader sees them. Markdown that is not a table is skipped."""
    tables = []
    for element in elements:
        lines = element.value.splitlines()
        if len(lines) < 2 or not lines[1].startswith("|---"):
            continue
        header, *rows = (_cells(line) for position, line in enumerate(lines) if position != 1)
        tables.append({row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows})
    return tables


def headings(table: dict[str, dict[str, str]]) -> list[str]:
    """The column headings of a table read by ``markdown_tables``, the row words' column left out."""
    return list(next(iter(table.values())))


def _cells(line: str) -> list[str]:
    return [_ESCAPE.sub(r"\1", cell).strip() for cell in _CELL_BORDER.split(line)[1:-1]]
