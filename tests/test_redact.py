"""tuner.redact: URL passwords, token-like query values and secret engine arguments are hidden."""

from __future__ import annotations

import pytest

from tuner.redact import (
    REDACTED,
    is_secret_engine_arg,
    redact_argv,
    redact_engine_args,
    redact_text,
    redact_url,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:PASSWORD@h/db", f"postgresql://u:{REDACTED}@h/db"),
        ("http://user:pw@127.0.0.1:8000/v1", f"http://user:{REDACTED}@127.0.0.1:8000/v1"),
        ("http://h/v1?api_key=abc&x=1", f"http://h/v1?api_key={REDACTED}&x=1"),
        ("http://h/v1?access-token=abc", f"http://h/v1?access-token={REDACTED}"),
        ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("sqlite:////tmp/optuna.db", "sqlite:////tmp/optuna.db"),
        ("http://onlyuser@h/", "http://onlyuser@h/"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_url_never_returns_the_secret() -> None:
    canary = "CANARY-s3cr3t"
    for url in (
        f"postgresql+psycopg://u:{canary}@h:5432/db",
        f"https://u:{canary}@h/x?token={canary}",
        f"not a url but has http://u:{canary}@h inside",
    ):
        assert canary not in redact_url(url)


def test_redact_text_inside_a_message() -> None:
    text = "cannot open Optuna storage mysql://root:hunter2@db/x: refused"
    assert "hunter2" not in redact_text(text)
    assert "mysql://root:" in redact_text(text)


def test_secret_engine_args() -> None:
    assert is_secret_engine_arg("hf-token")
    assert is_secret_engine_arg("--api-key")
    assert is_secret_engine_arg("api_key")
    assert not is_secret_engine_arg("max-num-batched-tokens")
    assert redact_argv(["--api-key", "K", "--hf-token=T", "--max-num-seqs=8"]) == [
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--max-num-seqs=8",
    ]
    assert redact_engine_args({"hf-token": "T", "max-num-seqs": 8}) == {
        "hf-token": REDACTED,
        "max-num-seqs": 8,
    }
