"""Workers that race to create a new Optuna database's schema both open it (CI caught one).

Two ``tunelab tune`` workers started together on a fresh PostgreSQL database
both run Optuna's ``CREATE TABLE studies``; the loser got
``psycopg.errors.DuplicateTable`` (a ``ProgrammingError``), which tunelab did
not count as the race, so the worker ended with a crash report. Here the
loser's error is raised by the real SQLAlchemy exception classes in front of a
real SQLite storage (the race itself depends on timing; what tunelab does with
each database's error does not).
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import sqlalchemy.exc

from tuner.studies import optuna_store


class _Orig(Exception):
    pass


def _lost_race(kind: type[sqlalchemy.exc.DBAPIError], message: str) -> Exception:
    return kind("CREATE TABLE studies (...)", None, _Orig(message))


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (sqlalchemy.exc.ProgrammingError, 'relation "studies" already exists'),  # PostgreSQL
        (
            sqlalchemy.exc.IntegrityError,
            'duplicate key value violates unique constraint "pg_type_typname_nsp_index"',
        ),
        (sqlalchemy.exc.OperationalError, "table studies already exists"),  # SQLite
    ],
)
def test_the_loser_of_the_schema_race_retries_and_opens_the_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type, message: str
) -> None:
    real = optuna.storages.RDBStorage
    calls: list[str] = []

    def racing(url: str, **kwargs: object) -> optuna.storages.RDBStorage:
        calls.append(url)
        if len(calls) == 1:
            raise _lost_race(kind, message)
        return real(url, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    monkeypatch.setattr(optuna_store.time, "sleep", lambda s: None)
    storage = optuna_store.open_storage(f"sqlite:///{tmp_path / 'optuna.db'}")
    assert isinstance(storage, real) and len(calls) == 2


def test_a_programming_error_that_is_not_the_race_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(url: str, **kwargs: object) -> None:
        raise _lost_race(sqlalchemy.exc.ProgrammingError, "permission denied for schema public")

    monkeypatch.setattr(optuna.storages, "RDBStorage", broken)
    with pytest.raises(optuna_store.SearchError, match="permission denied for schema public"):
        optuna_store.open_storage(f"sqlite:///{tmp_path / 'optuna.db'}")
