"""Where Optuna studies live: the storage URL and opening it safely.

The default is ``sqlite:///<data_dir>/optuna.db``; any SQLAlchemy URL works,
and a ``postgresql://`` URL lets several GPU nodes share one study. Opened
with heartbeats (a killed worker's point is detectable) and retries for
workers that race to create the schema. Split from :mod:`tuner.studies.search`
to keep that module small; ``search`` re-exports these names.

The URL may hold a database password: every message shows it through
:func:`tuner.redact.redact_url`, and a driver's error text is redacted and
scrubbed of the password before it is shown (a driver that misparses a URL
echoes pieces of it, a DSN echoes ``password=``).
"""

from __future__ import annotations

import importlib.util
import random
import time
import warnings
from typing import TYPE_CHECKING, Any

from tuner import paths
from tuner.errors import TunelabError
from tuner.redact import argv_secrets, redact_text, redact_url, scrub

if TYPE_CHECKING:
    import optuna

HEARTBEAT_S = 10
GRACE_S = 60
OPTUNA_DB = "optuna.db"


class SearchError(TunelabError, ValueError):
    """A search that cannot run as asked; says what to change."""


def default_storage() -> str:
    """``sqlite:///<data_dir>/optuna.db`` (moved by TUNELAB_HOME)."""
    return f"sqlite:///{paths.data_dir() / OPTUNA_DB}"


def sqlalchemy_url(url: str) -> str:
    """``postgresql://`` as SQLAlchemy reads it with the driver that is installed.

    SQLAlchemy maps a bare ``postgresql://`` to psycopg2; tunelab's ``postgres``
    extra installs psycopg 3, so the URL names it when psycopg2 is absent.
    """
    bare = url.startswith(("postgresql://", "postgres://"))
    if bare and not importlib.util.find_spec("psycopg2") and importlib.util.find_spec("psycopg"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def open_storage(url: str) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats; SQLite waits for its lock instead of failing.

    Raises:
        SearchError: The URL is not a database URL Optuna can open.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    # Deferred: heavy (sqlalchemy): loaded only on the path that needs it.
    import sqlalchemy.exc

    # Heartbeats are what make a killed worker's point detectable; Optuna marks
    # them experimental and expects Study.optimize, but ask/tell with our own
    # heartbeat thread is the documented way to drive them by hand.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
    check_storage_url(url)
    url = sqlalchemy_url(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 60}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    # Workers started together race to create the schema of a new database
    # ("table studies already exists", alembic's version row); the loser
    # retries and finds it made. SQLite says so with an OperationalError,
    # PostgreSQL with a ProgrammingError (DuplicateTable) or an IntegrityError.
    for attempt in range(6):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
            )
        except (
            sqlalchemy.exc.OperationalError,
            sqlalchemy.exc.IntegrityError,
            sqlalchemy.exc.ProgrammingError,
        ) as exc:
            racing = ("already exists", "locked", "UNIQUE constraint", "duplicate key")
            if attempt == 5 or not any(word in str(exc) for word in racing):
                # orig: the driver's exception (None only for an error SQLAlchemy raised itself)
                raise _cannot_open(url, exc.orig if exc.orig is not None else exc) from None
            time.sleep(0.2 + random.random() * 0.5)
        except (sqlalchemy.exc.ArgumentError, ImportError, ValueError) as exc:
            # ValueError: SQLAlchemy's URL parser on a bad port ("h:notaport").
            raise _cannot_open(url, exc) from None
    raise AssertionError("unreachable")


def check_storage_url(url: str) -> None:
    """Refuse a storage URL that is not a database URL or whose password SQLAlchemy would split.

    SQLAlchemy ends the password at the FIRST ``@`` (``sqlalchemy.engine.url``
    ``_parse_url``: ``password [^@]*``), so ``postgresql://u:p@ss@host/db``
    would send ``p`` as the password to the host ``ss@host`` (a DNS lookup of
    a piece of the password). ``/``, ``?`` and ``#`` in a password are read
    right and pass.

    Raises:
        SearchError: Not a URL, or a raw ``@`` in the password; says how to fix it.
    """
    if "://" not in url:
        raise SearchError(
            f"storage {redact_url(url)!r} is not a database URL; use sqlite:///PATH or "
            "postgresql://USER@HOST/DB"
        )
    rest = url.split("://", 1)[1]
    userinfo = rest.rpartition("@")[0]
    user, colon, password = userinfo.partition(":")
    if colon and "@" in password and not any(c in user for c in "/?#"):
        raise SearchError(
            f"the password in the storage URL {redact_url(url)} contains '@', which "
            "SQLAlchemy reads as the end of the password",
            fix="percent-encode each '@' in the password as %40 (and '%' as %25)",
        )


def _cannot_open(url: str, exc: BaseException) -> SearchError:
    """The error for a storage the driver refused, with no piece of the URL's password."""
    detail = redact_text(scrub(str(exc), argv_secrets([url])))
    return SearchError(f"cannot open Optuna storage {redact_url(url)}: {detail}")
