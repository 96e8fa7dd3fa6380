"""What is saved for a conversation, and how it is read back: the transcript export, plus the page's
choices.

The payload is the transcript that *Export* downloads (``memora.classroom.transcript.format``:
history, summary versions, ledger, last context, the memory's settings), with the page's language
and fold policy around it. Like the export it reads only the memory's own state, so it never holds
an API key, a base URL or any other part of the backend.

A stored payload is read back as untrusted, since whoever can write the database (or a bug in an
older version) could have put anything there: it goes through the same format checks as an imported
file (``transcript_from_data``), and a payload that fails is refused with a
``SavedConversationError`` and nothing is changed. It is not held to an import's caps
(``check_caps``), though: the page saved it as it was built, turn by turn under the session's caps,
and such a conversation must always come back, even one whose last turn ended a little over
``MEMORA_MAX_SESSION_TOKENS`` or whose reply is longer than ``MEMORA_MAX_MESSAGE_CHARS`` (the cap on
what a student types). A file imported from outside passed those caps before it was first saved.
Under ``MEMORA_LOCK_SETTINGS`` the restored conversation keeps the server's budget and window, as an
import does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from memora.classroom.transcript import untrusted
from memora.classroom.transcript.format import (
    MAX_MESSAGE_CHARS,
    Transcript,
    TranscriptError,
    continue_in_session,
    export_transcript,
    transcript_from_data,
)
from memora.classroom.transcript.untrusted import StrictModel
from memora.memory import FoldPolicy, ShortTermMemory, policies
from memora.memory.values import PreparedContext

SAVED_FORMAT = "memora-conversation"
SAVED_VERSION = 1
MAX_SAVED_BYTES = 8 * 1024 * 1024
"""Above an import's 2 MiB: a conversation may grow past what anyone would upload, and must still
come back."""


class SavedConversationError(TranscriptError):
    """A stored payload is malformed or hostile; ``code`` and ``path`` as for an imported
    transcript."""


class SavedFile(StrictModel):
    format: Literal["memora-conversation"]
    version: Literal[1]
    language: Annotated[str, Field(min_length=1, max_length=16)]
    fold_policy: Annotated[
        FoldPolicy, AfterValidator(lambda name: policies.policy(name).name), Field(max_length=64)
    ]
    """A registered policy's name (``memora.memory.policies``): an unknown one is refused, naming
    the choices."""
    transcript: dict[str, Any]
    # The page accepted it under MEMORA_MAX_MESSAGE_CHARS, whose bound this is: only a hostile
    # payload is longer.
    pending_message: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | None = None


@dataclass(frozen=True)
class SavedConversation:
    """A stored payload, validated: the conversation and the page's language and fold policy.

    ``pending_message``: a message the server stopped before answering
    (``memora.classroom.shutdown``); it is not part of the history, and the restored page puts it
    back in the input box.
    """

    transcript: Transcript
    language: str
    fold_policy: FoldPolicy
    pending_message: str | None = None


def dumps_saved(
    memory: ShortTermMemory,
    language: str,
    *,
    now: datetime | None = None,
    pending_message: str | None = None,
    last_request: PreparedContext | None = None,
) -> str:
    """The payload to store for ``memory``: compact JSON text (a pending user message is left out,
    as in an export).

    ``pending_message``, when given, is kept beside the transcript, for the next visit's input box.
    ``last_request`` is the last finished turn's request as the keeper kept it
    (``committed_request``), for a save made mid-turn.
    """
    document: dict[str, Any] = {
        "format": SAVED_FORMAT,
        "version": SAVED_VERSION,
        "language": language,
        "fold_policy": memory.limits.fold_policy,
        "transcript": export_transcript(memory, now=now, last_request=last_request),
    }
    if pending_message is not None:
        document["pending_message"] = pending_message
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def with_pending(payload: str, pending_message: str) -> str:
    """A stored ``payload`` with ``pending_message`` set, the rest as it was; raises
    SavedConversationError when the payload is not a saved conversation."""
    parse_saved(payload)  # refuses anything that is not a saved conversation
    document = json.loads(payload)
    document["pending_message"] = pending_message
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def parse_saved(raw: str | bytes) -> SavedConversation:
    """Validates a stored payload; raises SavedConversationError with the transcript's codes
    (``too_large``, ...)."""
    data = untrusted.parse_json(raw, SavedConversationError, max_bytes=MAX_SAVED_BYTES)
    untrusted.check_header(
        data,
        SavedConversationError,
        format=SAVED_FORMAT,
        version=SAVED_VERSION,
        what="a saved Memora conversation",
    )
    file = untrusted.validate(SavedFile, data, SavedConversationError)
    try:
        transcript = transcript_from_data(file.transcript)
    except TranscriptError as error:
        raise SavedConversationError(
            error.code, str(error), f"transcript.{error.path}".rstrip("."), **error.details
        ) from None
    return SavedConversation(transcript, file.language, file.fold_policy, file.pending_message)


def restore_saved(
    saved: SavedConversation, session: ShortTermMemory, *, locked: bool
) -> ShortTermMemory:
    """The saved conversation as a memory continuing ``session`` (its backend, model and caps);
    sends no request.

    The import caps are not checked (see the module docstring); the session's caps apply to its next
    turn. Raises SavedConversationError when it cannot continue here at all (``bad_settings``).
    """
    try:
        return continue_in_session(
            saved.transcript,
            session,
            locked=locked,
            fold_policy=saved.fold_policy,
            from_outside=False,
        )
    except TranscriptError as error:
        raise SavedConversationError(error.code, str(error), error.path, **error.details) from None
