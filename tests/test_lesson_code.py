"""The code reads as written (issues 38 and 45): unpacked, formatted as the formatter writes it.

``memora/`` is what a student reads line by line, in the browser and on paper, so it is formatted at 100 columns by
one setting (``memora/ruff.toml``), one statement to a line; nothing in it tells the formatter to look away.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memora"


def test_nothing_in_memora_tells_the_formatter_to_look_away():
    pragmas = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert pragmas == []


def test_memora_is_formatted_at_100_columns_by_one_setting():
    setting = tomllib.loads((PACKAGE / "ruff.toml").read_text(encoding="utf-8"))
    assert (setting["extend"], setting["line-length"]) == ("../pyproject.toml", 100)
    others = [path for path in PACKAGE.rglob("ruff.toml") if path != PACKAGE / "ruff.toml"]
    assert others == [], "one setting for all of memora/"
    code = [str(path) for path in sorted(PACKAGE.rglob("*.py"))]
    check = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *code],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    long_lines = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "E501,E701,E702", *code],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert long_lines.returncode == 0, long_lines.stdout


def test_memora_assigns_one_name_a_statement():
    """``a, b = x, y`` packs two assignments into one line; unpacking a call's result (``a, b = f()``) is one."""
    packed = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Tuple)
        and any(isinstance(target, ast.Tuple) for target in node.targets)
    ]
    assert packed == []
