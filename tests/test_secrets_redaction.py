"""Issue 26: no secret reaches a crash report, a stored study or a printed line.

Each case puts a canary secret where a user or a library really puts one
(a ``--header`` value, a URL query token, a database password with ``/``,
``?``, ``#`` or ``@`` in it, a libpq ``password=`` DSN) and checks that the
text tunelab writes — the crash report made from a real raised exception,
``redact_argv``'s command line, ``redact_url``/``redact_text`` — no longer
holds it, while what is not secret (the header name, the host, the user)
is kept so the report stays useful.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import pytest

from tuner.crash import crash_text
from tuner.redact import REDACTED, redact_argv, redact_text, redact_url

S = "CANARYs3cr3t"  # the secret every case hides

HOSTILE_PASSWORDS = [
    f"pa/ss?w#rd{S}",
    f"{S}/x",
    f"{S}?x=1",
    f"{S}#frag",
    f"p@ss{S}",
    f"a:b{S}",
    f"{S}@@",
    quote(f"pa/ss?w#rd@{S}", safe=""),  # percent-encoded form
    f"%2F{S}%40%3F",
]


def _crash(message: str, argv: Sequence[str]) -> str:
    """The crash report of a real exception raised with ``message``."""
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return crash_text(exc, argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--url", "http://h:8000", "--header", f"Authorization: Bearer {S}"],
        ["bench", "--url", "http://h:8000", f"--header=X-Api-Key: {S}"],
        ["bench", "--header", f"X-Custom: {S}", "--header", "Accept: text/plain"],
        ["bench", "--header", f"{S}"],  # no name: the whole value is hidden
        ["bench", "--url", f"http://h:8000/v1?api_key={S}&x=1"],
        ["bench", f"--url=http://h/v1?a=1&token={S}&sig={S}"],
        ["tune", "--storage", f"postgresql://u:pa/ss?w#rd{S}@db:5432/optuna"],
        ["tune", f"--storage=postgresql://u:{S}/x@db/optuna"],
        ["run", "--set", f"otlp-traces-endpoint=http://u:{S}@collector:4317"],
        ["run", "--set", f"endpoint=http://collector/v1?access_token={S}"],
        ["run", "--set", f"hf-token={S}"],
        ["run", "--set", f"HF_TOKEN={S}"],
    ],
)
def test_crash_report_command_line_hides_every_secret(argv: list[str]) -> None:
    text = _crash("boom", argv)
    assert S not in text
    assert "command: tunelab " + argv[0] in text


def test_crash_report_keeps_header_names_and_other_arguments() -> None:
    argv = ["bench", "--url", "http://h:8000", "--header", f"Authorization: Bearer {S}"]
    argv += [f"--header=X-Api-Key: {S}", "--num-prompts", "8"]
    text = _crash("boom", argv)
    assert f"--header Authorization: {REDACTED}" in text
    assert f"--header=X-Api-Key: {REDACTED}" in text
    assert "--url http://h:8000" in text and "--num-prompts 8" in text


@pytest.mark.parametrize(
    "message",
    [
        f"cannot reach http://host/v1?api_key={S}",
        f"GET http://host/v1/models?x=1&token={S} failed",
        f"blob https://acct.blob.example/c/b?sv=2020&sig={S}&se=1 denied",
        f"Could not parse SQLAlchemy URL from string 'postgresql://u:pa/ss?w#rd{S}@h:5432/db'",
        f'connection to "postgresql://u:p w{S}@h/db" refused',
        f"storage postgresql+psycopg://user:{S}/x?y@db:5432/optuna: refused",
        f"could not connect: host=db port=5432 password={S} dbname=optuna",
        f"could not connect: host=db password='pw {S}' dbname=optuna",
        f"headers were {{'Authorization': 'Bearer {S}'}}",
        f"request failed; Authorization: Bearer {S}",
    ],
)
def test_crash_report_traceback_hides_secrets_in_the_exception_message(message: str) -> None:
    text = _crash(message, ["doctor"])
    assert "RuntimeError: " in text
    assert S not in text


def test_crash_report_scrubs_argv_secrets_wherever_the_traceback_echoes_them() -> None:
    """A library that prints the bare header value or the decoded password still leaks nothing."""
    token = "tok_" + S
    argv = ["bench", "--header", f"Authorization: Bearer {token}"]
    argv += ["--storage", "postgresql://u:" + quote(f"pa/ss{S}", safe="") + "@db/x"]
    text = _crash(f"bad header value {token!r}; bad password pa/ss{S}", argv)
    assert S not in text


@pytest.mark.parametrize("password", HOSTILE_PASSWORDS)
@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg", "mysql", "http"])
def test_redact_url_removes_passwords_with_url_delimiters(scheme: str, password: str) -> None:
    url = f"{scheme}://user:{password}@db.example:5432/optuna"
    redacted = redact_url(url)
    assert S not in redacted
    assert redacted == f"{scheme}://user:{REDACTED}@db.example:5432/optuna"


@pytest.mark.parametrize("password", HOSTILE_PASSWORDS)
def test_redact_text_removes_passwords_with_url_delimiters(password: str) -> None:
    for text in (
        f"cannot open Optuna storage postgresql://user:{password}@db:5432/x: refused",
        f"cannot open 'postgresql://user:{password}@db:5432/x': refused",
        f'url="redis://:{password}@cache:6379/0"',
    ):
        out = redact_text(text)
        assert S not in out, out
        assert "refused" in out or "cache:6379" in out


def test_redact_url_keeps_what_is_not_secret() -> None:
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert redact_url("sqlite:////tmp/optuna.db") == "sqlite:////tmp/optuna.db"
    assert redact_url("http://h/v1?model=m&n=2") == "http://h/v1?model=m&n=2"
    # a token runs to the next '&': a raw '#' in it does not leave its tail behind
    assert redact_url(f"http://h/v1?n=2&api_key={S}#x&m=1") == (
        f"http://h/v1?n=2&api_key={REDACTED}&m=1"
    )
    assert redact_text("max-num-batched-tokens=8192 key=lambda") == (
        "max-num-batched-tokens=8192 key=lambda"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--header", f"Authorization: Bearer {S}"],
            ["--header", f"Authorization: {REDACTED}"],
        ),
        ([f"--header=X-Api-Key: {S}"], [f"--header=X-Api-Key: {REDACTED}"]),
        (["--header", f"X-Whatever:{S}"], ["--header", f"X-Whatever:{REDACTED}"]),
        (["--header", S], ["--header", REDACTED]),
        ([f"--header={S}"], [f"--header={REDACTED}"]),
        (["-H", f"Cookie: sid={S}"], ["-H", f"Cookie: {REDACTED}"]),
        (["--set", f"api_key={S}"], ["--set", f"api_key={REDACTED}"]),
        (
            ["--storage", f"postgresql://u:pa/ss?w#rd{S}@h/db"],
            ["--storage", f"postgresql://u:{REDACTED}@h/db"],
        ),
        (
            [f"--url=http://h/v1?token={S}"],
            [f"--url=http://h/v1?token={REDACTED}"],
        ),
        (["--header", "Accept: text/plain", "8"], ["--header", f"Accept: {REDACTED}", "8"]),
    ],
)
def test_redact_argv_hides_header_values_and_url_secrets(
    argv: list[str], expected: list[str]
) -> None:
    assert redact_argv(argv) == expected


def test_redact_argv_leaves_boolean_flags_and_their_neighbours_alone() -> None:
    argv = ["--allow-credentials", "model", "--api-key-env", "MY_KEY", "--num-prompts=8"]
    assert redact_argv(argv) == argv


@pytest.mark.parametrize(
    "text",
    [
        f"host=db port=5432 password={S} dbname=optuna",
        f"host=db password = {S} dbname=optuna",
        f"host=db password='quoted {S} \\' still' dbname=optuna",
        f"PGPASSWORD={S} psql -h db",
        f"postgresql://db/optuna?password={S}&sslmode=require",
        f"postgresql://db/optuna?sslpassword={S}",
        f'config {{"host": "db", "password": {S}, "port": 5432}}',
        f"yaml line: db_password: {S}",
    ],
)
def test_dsn_passwords_are_removed_from_free_text(text: str) -> None:
    out = redact_text(text)
    assert S not in out, out
    assert "db" in out


def test_a_real_sqlalchemy_error_with_a_dsn_loses_its_password() -> None:
    """SQLAlchemy wraps the driver's error; its text is what reaches messages and crash reports."""
    import sqlalchemy.exc

    orig = Exception(f"connection failed: host=db user=u password={S} dbname=optuna sslmode=x")
    exc = sqlalchemy.exc.OperationalError("connect", {"password": S}, orig)
    assert S not in redact_text(str(exc))
    try:
        raise exc
    except sqlalchemy.exc.OperationalError as raised:
        assert S not in crash_text(raised, ["tune"])


def test_open_storage_error_never_shows_a_password_with_url_delimiters() -> None:
    """``tune --storage`` with a password holding '/', '?', '#': the error names no password."""
    from tuner.studies.search import SearchError, open_storage

    for url in (
        f"postgresql://u:pa/ss?w#rd{S}@127.0.0.1:1/db",
        f"postgresql://u:{S}/x@127.0.0.1:1/db",
        f"nosuch://u:{S}?x@h/db",
    ):
        with pytest.raises(SearchError) as info:
            open_storage(url)
        assert S not in str(info.value)
        assert f"u:{REDACTED}@" in str(info.value)


def test_open_storage_refuses_a_raw_at_sign_in_the_password_before_connecting() -> None:
    """SQLAlchemy would send the part before the first '@' to the host 'rest@host'."""
    from tuner.studies.search import SearchError, open_storage

    with pytest.raises(SearchError) as info:
        open_storage(f"postgresql://u:p@ss{S}@127.0.0.1:1/db")
    assert S not in str(info.value) and "ss" + S not in str(info.value)
    assert "%40" in (info.value.fix or "")
    assert "failed to resolve" not in str(info.value)  # refused before any connection


def test_open_storage_bad_port_is_a_user_error_without_the_password() -> None:
    from tuner.studies.search import SearchError, open_storage

    with pytest.raises(SearchError) as info:
        open_storage(f"postgresql://u:{S}/x@db:notaport/optuna")
    assert S not in str(info.value)


def test_crash_report_scrubs_secret_environment_values_but_not_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token of the environment quoted by a library is removed; the working directory is not."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + S)
    monkeypatch.setenv("PWD", "/tmp")
    text = _crash(f"hub said: token hf_{S} is invalid", ["doctor"])
    assert S not in text
    assert "File " in text and ".py" in text  # frames keep their file names
