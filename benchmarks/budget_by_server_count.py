"""Requests over the budget by the server's own count, in English, Traditional Chinese and Japanese.

Plays the conversations of ``benchmarks/harness/server_count.py`` (``tests/test_real_server.py`` asserts on
them) through the chat backend against a running llama-cpp-python server, then replays every reply and
summary request Memora sent without streaming and with ``max_tokens=1``, so that the server reports the
prompt tokens its chat template rendered.
Prints one row per conversation: requests, how many were over the budget, the fullest, and which
count the budget used.

    .venv-llama/bin/python -m llama_cpp.server --model .models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --port 8811 --n_ctx 2048 --chat_format chatml &
    .venv/bin/python benchmarks/budget_by_server_count.py --base-url http://127.0.0.1:8811/v1 --budget 1000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness.llama_server import LlamaServer
from benchmarks.harness.server_count import CONVERSATIONS, backend_for, replayed
from memora.app.repl import counting_words
from memora.memory import ShortTermMemory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument(
        "--margin-only", action="store_true", help="ignore the server's tokenizer: plan with the per-kind margins, as for Ollama"
    )
    args = parser.parse_args()
    server = LlamaServer(args.base_url, None)
    print("| conversation | reply requests | over | fullest | summary requests | over | fullest | budget counted by |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for language, texts in CONVERSATIONS.items():
        recorder = backend_for(server, probe=not args.margin_only)
        memory = ShortTermMemory(recorder, model="smollm2", max_input_tokens=args.budget, max_reply_tokens=24)
        for text in texts:
            with memory.turn(text) as turn:
                turn.run()
        replies, summaries = replayed(server, recorder)
        over = [sum(count > args.budget for count in counts) for counts in (replies, summaries)]
        print(
            f"| {language} | {len(replies)} | {over[0]} | {max(replies, default=0)} | {len(summaries)} | {over[1]} "
            f"| {max(summaries, default=0)} | {counting_words(memory.server)} |"
        )


if __name__ == "__main__":
    main()
