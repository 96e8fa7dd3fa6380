"""Every script in ``benchmarks/`` runs today: each answers ``python -m benchmarks.<name> --help``.

``--help`` runs a script's imports and builds its parser, so a script that names a module or a function that no
longer exists fails here, not on the day someone needs its figures. One-off experiments that compare against old
revisions live in ``benchmarks/experiments/``, with a line each in its README, and are not run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if path.name != "__init__.py")
MODULES = ("benchmarks.memory", "benchmarks.memory.real", "benchmarks.memory.real_table")


def test_the_scripts_are_the_ones_listed_here_and_experiments_have_a_line_each():
    assert [path.stem for path in SCRIPTS] == [
        "bookkeeping_split",
        "budget_by_server_count",
        "classroom_load",
        "conversation_save",
        "hostile_growth",
        "page_rerun",
        "reply_cpu",
        "screenshots",
        "shutdown",
        "token_gap",
        "tokenizer_table",
    ]
    readme = (BENCHMARKS / "experiments" / "README.md").read_text(encoding="utf-8")
    for experiment in sorted((BENCHMARKS / "experiments").glob("*.py")):
        assert f"- `{experiment.name}` (" in readme, experiment.name


@pytest.mark.parametrize("command", [*(f"-m benchmarks.{p.stem}" for p in SCRIPTS), *(f"-m {m}" for m in MODULES)])
def test_each_benchmark_answers_help(command):
    result = subprocess.run([sys.executable, *command.split(), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:"), result.stdout[:500]
