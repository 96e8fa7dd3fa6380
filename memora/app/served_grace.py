"""The shutdown grace of a process that ``memora.serve`` is about to start, read as that process's
page will read it.

The page reads ``MEMORA_SHUTDOWN_GRACE_S`` from Streamlit's secrets first, then from the environment
(``memora.app.settings``). A supervisor that kills a stopping process sooner than that grace (and
the unwind after it) loses the replies the grace promised to keep, so ``memora.serve`` reads the
same value, from the same places, just before it starts each process: a rolling restart after the
teacher changed ``.streamlit/secrets.toml`` gives each successor the grace it will have.

The secrets are read as Streamlit reads them (the paths of its ``secrets.files`` option: a TOML
file, or a folder with one sub-folder per secret), without Streamlit's runtime, which would watch
the files from threads and copy every secret into this process's environment. Edge case: when the
value cannot be known (a secrets file that does not parse, a malformed value, a path of another
kind), the answer is the bound, ``MAX_SHUTDOWN_GRACE_S``, which honours whatever grace the process
ends up with; such a page shows its error at its first run anyway.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memora.app.settings import GRACE, SettingsError, shutdown_grace_s
from memora.classroom.grace import MAX_SHUTDOWN_GRACE_S


class _Unreadable(Exception):
    """A secrets path that Streamlit would fail on, or whose value cannot be told."""


def grace_of_next_process(environ: Mapping[str, str]) -> float:
    """The ``MEMORA_SHUTDOWN_GRACE_S`` a Streamlit process started now with ``environ`` (in this
    working folder) will have: from the secrets files, else ``environ``, else the default;
    ``MAX_SHUTDOWN_GRACE_S`` when it cannot be told."""
    try:
        return shutdown_grace_s(_secret_grace(), environ)
    except (_Unreadable, SettingsError):
        return float(MAX_SHUTDOWN_GRACE_S)


def _secret_grace() -> dict[str, Any]:
    """``{GRACE: value}`` from the last of Streamlit's secrets paths that gives it (a later file
    wins, as in Streamlit's merge), or ``{}``."""
    from streamlit import config

    found: dict[str, Any] = {}
    for path in map(Path, config.get_option("secrets.files")):
        if path.suffix == ".toml":
            found.update(_from_toml(path))
        elif path.is_dir():
            found.update(_from_folder(path))
        else:
            raise _Unreadable(str(path))
    return found


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        secrets = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeError, tomllib.TOMLDecodeError) as error:
        raise _Unreadable(str(path)) from error
    return {GRACE: secrets[GRACE]} if GRACE in secrets else {}


def _from_folder(path: Path) -> dict[str, Any]:
    """Streamlit's folder form: ``path/<name>/<one file>`` holds the secret ``name`` as the file's
    stripped text."""
    folder = path / GRACE
    if not folder.is_dir():
        return {}
    files = [entry for entry in folder.iterdir() if not entry.is_dir()]
    if len(files) != 1:
        raise _Unreadable(str(folder))  # several files make a table, which the setting refuses
    try:
        return {GRACE: files[0].read_text(encoding="utf-8").strip()}
    except (OSError, UnicodeError) as error:
        raise _Unreadable(str(files[0])) from error
