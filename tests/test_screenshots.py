"""The screenshot script, run as the README says: four PNGs of the page, at the two sizes, in both languages."""

from __future__ import annotations

import struct

from benchmarks import screenshots
from benchmarks.harness.browser import require_browser


def png_size(data: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header (the IHDR chunk that every PNG starts with)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_the_script_writes_both_languages_at_both_sizes(tmp_path, capsys):
    require_browser()
    assert screenshots.main(["--out", str(tmp_path)]) == 0
    expected = {f"screenshot-{lang}-{w}x{h}.png": (w, h) for lang in ("en", "zh-TW") for w, h in (screenshots.DESKTOP, screenshots.PHONE)}
    assert {path.name: png_size(path.read_bytes()) for path in tmp_path.iterdir()} == expected
    assert capsys.readouterr().out.split() == [str(tmp_path / name) for name in expected]
