"""The models already in the Hugging Face cache, and what to say when there are none.

The TUI's model picker lists them (``huggingface_hub.scan_cache_dir`` walks the
disk, so the picker calls this in a thread). No cache yet is the common case on a
fresh node: that is a sentence saying where the cache would be and how a model gets
there, never a library's exception name (``CacheNotFound: ...``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class CachedModels:
    """The cache's models, by repo id, with their size on disk; ``note`` says what was found.

    Attributes:
        models: ``(repo id, bytes on disk)``, sorted by id, case-insensitively.
        note: One line for the picker: how many, or why none could be listed.
    """

    models: list[tuple[str, int]]
    note: str


def cached_models(cache_dir: str | None = None) -> CachedModels:
    """Lists the model repos in the Hugging Face cache (``cache_dir``, else ``HF_HUB_CACHE``
    as set now, else huggingface_hub's default); never raises."""
    # Deferred: huggingface_hub is heavy; only the picker needs it.
    from huggingface_hub import CacheNotFound, constants, scan_cache_dir

    where = cache_dir or os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
    try:
        info = scan_cache_dir(where)
    except CacheNotFound as exc:
        return CachedModels(
            [],
            f"no Hugging Face cache yet ({exc.cache_dir}): a model appears here once "
            "downloaded (`hf download ORG/NAME`), or start with `tunelab tui --model PATH`",
        )
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return CachedModels([], f"cannot read the Hugging Face cache ({where}): {reason}")
    repos = sorted(
        (r for r in info.repos if r.repo_type == "model"), key=lambda r: r.repo_id.lower()
    )
    found = [(r.repo_id, r.size_on_disk) for r in repos]
    return CachedModels(found, f"{len(found)} model(s) in the Hugging Face cache")
