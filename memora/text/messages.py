"""The message value shared by history, context and model requests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

Role = Literal["user", "assistant", "developer", "system"]

_KEYS = ("role", "content")


@dataclass(frozen=True, eq=False)
class Message(Mapping[str, str]):
    """One chat message, immutable.

    It is also a read-only mapping with the keys ``role`` and ``content``, so the
    article's code (``message["role"]``) and the OpenAI SDK (which accepts any
    mapping as an input item) both take it as they would a plain dict.
    It compares equal to a dict with the same two keys.
    """

    role: Role
    content: str

    def __getitem__(self, key: str) -> str:
        if key not in _KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_KEYS)

    def __len__(self) -> int:
        return len(_KEYS)

    def __hash__(self) -> int:
        return hash((self.role, self.content))

    def copy(self) -> dict[str, str]:
        """A plain dict of this message, as ``dict.copy`` would give."""
        return dict(self)


def user(content: str) -> Message:
    return Message("user", content)


def assistant(content: str) -> Message:
    return Message("assistant", content)
