"""The ledger as pandas frames, for the page's tables and chart."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from memora.teaching.ledger import ledger_frame
from memora.teaching.replay import Replay
from memora.text.usage import UsageRecord


def usage_per_turn(records: Iterable[UsageRecord]) -> pd.DataFrame:
    """Tokens per user turn, for the usage chart.

    Columns: ``reply_input``, ``reply_output``, ``summary`` (all tokens the
    summary requests of that turn spent) and ``full_history`` (what the reply
    would have sent with the whole history), indexed by ``turn``. Turns with no
    reply (a failed request) keep their summary spend and show 0 for the reply.
    """
    frame = ledger_frame(records)
    columns = ["reply_input", "reply_output", "summary", "full_history"]
    if frame.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="turn"), dtype="int64")
    replies = frame[frame.kind == "reply"].groupby("turn")
    summaries = frame[frame.kind == "summary"].groupby("turn")
    per_turn = pd.DataFrame(
        {
            "reply_input": replies.input_tokens.sum(),
            "reply_output": replies.output_tokens.sum(),
            "summary": summaries.total_tokens.sum(),
            "full_history": replies.full_history_tokens.sum(),
        }
    )
    return per_turn.fillna(0).astype("int64").rename_axis("turn")


def replay_per_turn(run: Replay, reply_output: pd.Series) -> pd.Series:
    """What ``run`` would have spent on each turn of ``reply_output``'s index: its requests' input
    and summaries (``Replay.tokens_per_turn``) plus the turn's real reply output, the same under
    every strategy.

    A turn past the replay's last finished turn (a reply in progress) is NaN: the line has no point
    there.
    """
    replayed = pd.Series(
        run.tokens_per_turn(), index=pd.RangeIndex(1, run.turns + 1), dtype="float64"
    )
    return replayed.reindex(reply_output.index) + reply_output.astype("float64")
