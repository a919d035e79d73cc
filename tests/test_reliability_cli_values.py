"""Bad CLI values: a clear error, a non-zero exit code, and nothing written or started.

Every command runs in-process through Typer's runner on the real command
modules. Before and after each, the whole TUNELAB_HOME tree and the output
directory are snapshotted (names, sizes, mtimes) — all but the cache dir,
where introspection answers and the generated demo model may appear before
the bad value is seen: a refused command must leave the store, the trial
logs and every output directory exactly as they were, and must never get as
far as starting an engine (``Engine.start`` is replaced by a tripwire that
fails the test). The cases are in ``tests/support/fault_cli.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.support.fault_cli import _empty_store, bad_cases, snapshot
from tuner.cli.app import register_all


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return register_all(typer.Typer(pretty_exceptions_enable=False))


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One TUNELAB_HOME for the module: the demo model and introspection are cached once."""
    return tmp_path_factory.mktemp("cli-values-home")


@pytest.fixture
def home(shared_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TUNELAB_HOME", str(shared_home))
    return shared_home


CASE_NAMES = [name for name, _ in bad_cases(Path("/nonexistent-probe"), probe=True)]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_value_is_refused_cleanly(
    case: str, app: typer.Typer, tmp_path: Path, home: Path, no_engine: list[str]
) -> None:
    name, argv = next(c for c in bad_cases(tmp_path) if c[0] == case)
    before = snapshot(home, tmp_path)
    result = CliRunner().invoke(app, argv)
    after = snapshot(home, tmp_path)
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{name}: crashed with {type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code not in (0, None), f"{name}: exit 0\n{output}"
    assert "Traceback" not in output, f"{name}: {output}"
    assert output.strip(), f"{name}: no message at all"
    assert no_engine == [], f"{name}: an engine was started for {no_engine}"
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    changed -= _empty_store(home, changed)
    assert not changed, f"{name}: wrote {sorted(changed)}\n{output}"
