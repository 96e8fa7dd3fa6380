"""Server CPU-seconds per chat turn: one `streamlit run` per checkout, one student in Chromium.

Run from the repository root: ``python benchmarks/reply_cpu.py [--compare /path/to/other/checkout]``.
Each checkout's page is served by its own `streamlit run` (its own .streamlit/config.toml),
pointed at a local Responses server (benchmarks/harness/servers.py) that streams a reply of
``--words`` events, ``--drip`` seconds apart. Chromium sends ``--turns`` messages, each
once the last reply has been committed and the page has settled. Printed per checkout:
the server process's CPU-seconds (user + system, from /proc) over the turns, per turn,
and the ratio to the first checkout's. The first page load is not counted. The file
watcher is off (a watcher over a tree with a .venv inside would dwarf the page's work);
``--option runner.postScriptGC=false`` passes a `streamlit run` option to every checkout.
Needs Debian's Chromium and Playwright (benchmarks/harness/browser.py); Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from benchmarks.harness.processes import free_port, stop  # noqa: E402
from benchmarks.harness.servers import ResponsesServer, drip  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far (its threads included), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_health(url: str, process: subprocess.Popen) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"streamlit did not start for {url}")


def settle(page) -> None:
    """Waits until no Stop button is left (the reply is committed) and the script is idle twice in a row."""
    page.get_by_role("button", name="Stop").wait_for(state="detached", timeout=120_000)
    idle = '() => document.querySelector(\'[data-testid="stApp"]\')?.dataset.testScriptState === "notRunning"'
    for _ in range(2):
        page.wait_for_timeout(300)
        page.wait_for_function(idle, timeout=120_000)


def measure(checkout: Path, args: argparse.Namespace, browser) -> float:
    """CPU-seconds the checkout's server spends on ``args.turns`` turns."""
    deltas = tuple(f"word{n} " for n in range(args.words))
    with ResponsesServer(deltas=deltas) as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORA_"))}
        env.update(OPENAI_API_KEY="sk-bench-cpu-0000", OPENAI_BASE_URL=model.url, MEMORA_MAX_RETRIES="0")
        port = free_port()
        log = open(ROOT / "test-output" / f"bench-reply-cpu-{checkout.name}.log", "wb")  # noqa: SIM115 - closed below
        command = [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.headless", "true"]
        command += ["--browser.gatherUsageStats", "false", "--server.port", str(port), "--server.address", "127.0.0.1"]
        command += ["--server.fileWatcherType", "none", *(f"--{option}" for option in args.option)]
        process = subprocess.Popen(command, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_health(url, process)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(url)
            box = page.get_by_test_id("stChatInputTextArea")
            box.wait_for()
            settle(page)
            before = cpu_seconds(process.pid)
            for turn in range(1, args.turns + 1):
                model.queue_for("reply", drip(args.drip))
                box.fill(f"Question {turn}: how do I ask for a later check-out politely?")
                box.press("Enter")
                page.get_by_text(f"word{args.words - 1}").nth(turn - 1).wait_for()
                settle(page)
            spent = cpu_seconds(process.pid) - before
            page.close()
            return spent
        finally:
            stop(process)
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", type=Path, action="append", default=[], help="another checkout to measure beside this one")
    parser.add_argument(
        "--option", action="append", default=[], help="a `streamlit run` option for every checkout, as runner.postScriptGC=false"
    )
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--words", type=int, default=40)
    parser.add_argument("--drip", type=float, default=0.05, help="seconds between streamed events (40 x 0.05 = a 2 s reply)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    (ROOT / "test-output").mkdir(exist_ok=True)
    checkouts = [*args.compare, ROOT]
    results: list[tuple[Path, float]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for checkout in checkouts:
                results.append((checkout, measure(checkout.resolve(), args, browser)))
        finally:
            browser.close()
    print(
        f"{args.turns} turns, replies of {args.words} events {args.drip} s apart, one student in Chromium; options: {args.option or 'none'}"
    )
    print(f"{'checkout':<40} {'CPU s':>8} {'CPU s/turn':>11} {'ratio':>7}")
    first = results[0][1] / args.turns
    for checkout, spent in results:
        per_turn = spent / args.turns
        print(f"{checkout!s:<40} {spent:>8.2f} {per_turn:>11.3f} {per_turn / first:>6.2f}x")


if __name__ == "__main__":
    main()
