"""How long a SIGTERM takes to stop `streamlit run` with N replies being written, and what it keeps.

Run from the repository root: ``python benchmarks/shutdown.py [--students 0 1 5] [--grace 5]``.
For each N, twice: replies that end within a long grace (30 s; ``--fast-drip`` s between events) and
replies that cannot end within ``--grace`` (``--slow-drip``). Each time a fresh `streamlit run` on a fresh data folder, with the server
budget on, is pointed at a local Responses server (benchmarks/harness/servers.py); N Chromium contexts (students)
each send one message; once every reply is streaming the server gets SIGTERM. Printed per run: the
seconds from SIGTERM to exit and the drain's own share of them (from its log line; the rest is
Streamlit stopping), the replies saved, the unanswered messages kept as pending, and the
estimated spend rows in the server ledger. Needs Debian's Chromium and Playwright.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import processes  # noqa: E402
from benchmarks.harness.browser import CHROMIUM, CHROMIUM_ARGS, wait_idle  # noqa: E402
from benchmarks.harness.servers import ResponsesServer, drip  # noqa: E402
from memora.classroom.store.saved import parse_saved  # noqa: E402

DELTAS = tuple(f" word{i}" for i in range(10))
LOG = ROOT / "test-output" / "bench-shutdown.log"


def drain_seconds(log_from: int) -> float | None:
    """The drain's own seconds, from its closing line in the server log (none when nothing was running)."""
    lines = LOG.read_bytes()[log_from:].decode(errors="replace").splitlines()
    found = [re.search(r"; ([0-9.]+) s\.$", line) for line in lines if line.startswith("Memora: ")]
    return float(found[-1].group(1)) if found and found[-1] else None


def run_once(playwright, students: int, grace_s: float, drip_s: float) -> dict[str, float | None]:
    log_from = LOG.stat().st_size if LOG.exists() else 0
    with tempfile.TemporaryDirectory() as home, ResponsesServer(deltas=DELTAS) as model:
        data = Path(home) / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORA_", "OPENAI_"))}
        env.update(
            HOME=home,
            MEMORA_DATA_DIR=str(data),
            OPENAI_API_KEY="sk-bench-shutdown",
            OPENAI_BASE_URL=model.url,
            MEMORA_MAX_RETRIES="0",
            MEMORA_MAX_SERVER_TOKENS="10000000",
            MEMORA_SHUTDOWN_GRACE_S=str(grace_s),
        )
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            with processes.streamlit_process(env, LOG, "--server.fileWatcherType", "none") as (url, process):
                pages = []
                for _ in range(students):
                    model.queue_for("reply", drip(drip_s))
                    page = browser.new_context().new_page()
                    page.set_default_timeout(120_000)
                    page.goto(url)
                    page.get_by_test_id("stChatInputTextArea").wait_for()
                    wait_idle(page)
                    pages.append(page)
                for index, page in enumerate(pages):  # every page is ready first, so that the replies overlap
                    box = page.get_by_test_id("stChatInputTextArea")
                    box.fill(f"Student {index}'s question.")
                    box.press("Enter")
                for page in pages:
                    page.get_by_role("button", name="Stop").wait_for()
                    page.get_by_text("word0").wait_for()
                began = time.monotonic()
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=600)
                exit_s = time.monotonic() - began
        finally:
            browser.close()
        saved = kept = estimated = 0
        if (data / "conversations.sqlite3").exists():
            with sqlite3.connect(data / "conversations.sqlite3") as connection:
                for (payload,) in connection.execute("SELECT payload FROM conversations"):
                    conversation = parse_saved(payload)
                    saved += len(conversation.transcript.history) // 2
                    kept += conversation.pending_message is not None
        if (data / "usage.sqlite3").exists():
            with sqlite3.connect(data / "usage.sqlite3") as connection:
                estimated = connection.execute("SELECT COUNT(*) FROM requests WHERE kind = 'reply' AND estimated = 1").fetchone()[0]
        return {"exit_s": exit_s, "drain_s": drain_seconds(log_from), "saved": saved, "kept": kept, "estimated": estimated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[0, 1, 5])
    parser.add_argument("--grace", type=float, default=5.0, help="the grace for replies that cannot end within it (the default's)")
    parser.add_argument("--fast-drip", type=float, default=0.5, help="seconds between events of a reply that ends within 30 s")
    parser.add_argument("--slow-drip", type=float, default=2.0, help="seconds between events of a reply that cannot")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    LOG.parent.mkdir(exist_ok=True)
    print(f"{len(DELTAS)} deltas per reply")
    print(f"{'students':>8} {'replies':>8} {'grace s':>7} {'exit s':>7} {'drain s':>7} {'saved':>6} {'kept':>5} {'estimated':>9}")
    with sync_playwright() as playwright:
        for students in args.students:
            for label, grace_s, drip_s in (("within", 30.0, args.fast_drip), ("past", args.grace, args.slow_drip)):
                row = run_once(playwright, students, grace_s, drip_s)
                drain = "-" if row["drain_s"] is None else f"{row['drain_s']:.1f}"
                figures = f"{row['exit_s']:>7.1f} {drain:>7} {row['saved']:>6} {row['kept']:>5} {row['estimated']:>9}"
                print(f"{students:>8} {label:>8} {grace_s:>7g} {figures}", flush=True)


if __name__ == "__main__":
    main()
