"""The page's words in every language Memora speaks; no Streamlit here.

The catalogs are data, one TOML file per language in ``memora/app/page/locales/``
(``en.toml``, ``zh-TW.toml``): a translator edits one file, and adding a
language is adding a file. They are read once per process, at import, with the
standard library's ``tomllib``; a missing, malformed or mis-shaped file stops
the import with a CatalogError that names the file, so the app fails at its
start, not on the page that needed the message.

``t(lang, key, **fmt)`` looks a message up and fills its ``{placeholders}``.
Every catalog must hold exactly the same keys and the same placeholders per
key as English (a test checks this), so a switch of language never drops a label.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from memora.classroom.limits import LimitReached
from memora.classroom.server_budget import ServerBudgetUnavailable
from memora.classroom.store import StoreError
from memora.memory import ContextBudgetError, SummaryError
from memora.memory.backend import BackendError

LOCALES = Path(__file__).with_name("locales")
DEFAULT_LANGUAGE = "en"
# The key each catalog names its own language with, for the language selector.
LANGUAGE_NAME_KEY = "language.name"


class CatalogError(RuntimeError):
    """A catalog file is missing, unreadable, not TOML, or holds something other than "key" =
    "text"."""


def read_catalog(path: Path) -> Mapping[str, str]:
    """One language's messages from its TOML file, read-only.

    Every entry must be a quoted key with a text value. An unquoted dotted key
    (``page.title = ...``) makes a TOML table, not a message, so it is refused
    with the other non-text values, by name, rather than silently missing.
    """
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        raise CatalogError(
            f"{path}: the catalog file is missing (installed without its package data?)"
        ) from None
    except OSError as error:
        raise CatalogError(f"{path}: the catalog file cannot be read ({error.strerror})") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise CatalogError(f"{path}: the catalog file is not valid TOML ({error})") from error
    not_text = [key for key, value in data.items() if not isinstance(value, str)]
    if not_text:
        not_text_keys = ", ".join(not_text)
        raise CatalogError(
            f'{path}: every entry must be "key" = "text" with the key in quotes; '
            f"not text: {not_text_keys}"
        )
    if LANGUAGE_NAME_KEY not in data:
        raise CatalogError(
            f'{path}: the catalog does not name its language ("{LANGUAGE_NAME_KEY}" = ...)'
        )
    return MappingProxyType(data)


def read_catalogs(folder: Path) -> Mapping[str, Mapping[str, str]]:
    """Every ``<language>.toml`` in ``folder``, keyed by language, the default language first.

    The default language's file must exist: it is the fallback for every other.
    """
    paths = {path.stem: path for path in sorted(folder.glob("*.toml"))}
    default = paths.pop(DEFAULT_LANGUAGE, folder / f"{DEFAULT_LANGUAGE}.toml")
    catalogs = {DEFAULT_LANGUAGE: read_catalog(default)}
    catalogs.update((lang, read_catalog(path)) for lang, path in paths.items())
    return MappingProxyType(catalogs)


CATALOG: Mapping[str, Mapping[str, str]] = read_catalogs(LOCALES)
# Language code -> its own name ("繁體中文"), in the order the selector lists them.
LANGUAGES: Mapping[str, str] = MappingProxyType(
    {lang: messages[LANGUAGE_NAME_KEY] for lang, messages in CATALOG.items()}
)


def t(lang: str, key: str, **fmt: object) -> str:
    """The message ``key`` in ``lang``, with ``fmt`` filled in.

    An unknown language falls back to English. An unknown key raises KeyError,
    so a typo fails in tests rather than showing a raw key on the page.
    """
    catalog = CATALOG.get(lang, CATALOG[DEFAULT_LANGUAGE])
    text = catalog[key]
    return text.format(**fmt) if fmt else text


def backend_label(lang: str, name: str) -> str:
    """A backend's display name; backends added later without a label show their own name."""
    key = f"backend.{name}"
    return t(lang, key) if key in CATALOG.get(lang, CATALOG[DEFAULT_LANGUAGE]) else name


def role_name(lang: str, role: str) -> str:
    """A message's role as the page shows it (``user`` is 使用者 in zh-TW); a role no catalog names
    shows as it is."""
    key = f"role.{role}"
    return t(lang, key) if key in CATALOG.get(lang, CATALOG[DEFAULT_LANGUAGE]) else role


def error_message(lang: str, error: BaseException) -> str:
    """A user-safe, translated sentence for a failed turn.

    Core errors get their own message; a BackendError's text is already
    user-safe (no secrets), so it is shown as detail. Anything else shows only
    its type, because its text could carry a request's internals.
    """
    if isinstance(error, ContextBudgetError):
        return t(
            lang,
            "error.budget",
            input_tokens=error.input_tokens,
            max_input_tokens=error.max_input_tokens,
        )
    if isinstance(error, LimitReached):
        return t(
            lang, f"error.limit.{error.code}", value=f"{error.value:,}", limit=f"{error.limit:,}"
        )
    if isinstance(error, SummaryError):
        return t(lang, "error.summary")
    if isinstance(error, BackendError):
        return t(lang, "error.backend", detail=str(error))
    if isinstance(error, ServerBudgetUnavailable):
        return t(lang, "error.server_budget_unavailable")
    if isinstance(error, StoreError):
        return t(lang, "error.store", detail=str(error))
    if isinstance(error, ValueError):
        return t(lang, "error.value", detail=str(error))
    return t(lang, "error.unexpected", kind=type(error).__name__)
