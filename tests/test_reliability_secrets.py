"""No secret in what tunelab prints: a storage URL's password is never in a message.

The real-engine half (a trial and its export with the user's shell secrets set to
a canary: loopback-only sockets, no file under TUNELAB_HOME or the export holding
it) runs on the end-to-end trial's engine start, in
tests/test_trials_engine.py::test_one_trial_end_to_end_on_the_cpu_engine.
"""

from __future__ import annotations


def test_storage_url_password_never_in_messages() -> None:
    """``tune --storage postgresql://u:PASSWORD@...``: errors name the URL without its password."""
    from tuner.studies.search import SearchError, open_storage

    canary = "CANARYpw42"
    for url in (f"postgresql://u:{canary}@127.0.0.1:1/db", f"nosuch://u:{canary}@h/db"):
        try:
            open_storage(url)
        except SearchError as exc:
            assert canary not in str(exc)
            assert "u:***@" in str(exc)
        else:  # pragma: no cover - nothing listens on port 1
            raise AssertionError("opening a storage on port 1 succeeded")
