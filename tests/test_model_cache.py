"""The model picker's list of cached models, and its sentence when there is none (issue 32).

The picker showed ``CacheNotFound: Cache directory not found: ...`` on a fresh node.
tuner.model.cache.cached_models says where the cache would be and how a model gets
there; the picker shows exactly its note (the TUI pilot test in test_tui_actions).
"""

from __future__ import annotations

from pathlib import Path

from tuner.model.cache import cached_models


def _cached(root: Path, repo: str, size: int) -> None:
    """A repo as huggingface_hub lays it out: a blob, a snapshot link to it, the main ref."""
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "blobs").mkdir(parents=True)
    (folder / "blobs" / "abc123").write_bytes(b"x" * size)
    snap = folder / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to(folder / "blobs" / "abc123")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123456789abcdef0123456789abcdef01234567")


def test_no_cache_yet_is_a_sentence_not_an_exception(tmp_path: Path) -> None:
    listed = cached_models(str(tmp_path / "nowhere"))
    assert listed.models == []
    assert listed.note.startswith("no Hugging Face cache yet")
    assert str(tmp_path / "nowhere") in listed.note and "hf download" in listed.note
    assert "CacheNotFound" not in listed.note and "Error" not in listed.note


def test_cached_models_are_listed_by_id_with_their_size(tmp_path: Path) -> None:
    _cached(tmp_path, "Org/Zeta", 300)
    _cached(tmp_path, "org/alpha", 100)
    listed = cached_models(str(tmp_path))
    assert listed.models == [("org/alpha", 100), ("Org/Zeta", 300)]
    assert listed.note == "2 model(s) in the Hugging Face cache"
