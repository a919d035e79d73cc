"""The target dialog (``g``): preview another node's findings, or judge this node again.

The text is read by :func:`tuner.lab.target.parse_preview` — a GPU, a platform
and a vLLM version in any order (``MI300X``, ``8xH100 0.32.0``, ``cuda``), the
same names ``tunelab check --gpu`` and ``tunelab tui --gpu`` take; ``this node``
ends the preview.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from tui.screens.line_dialog import LineDialog
from tuner.rules import Target


class TargetDialog(LineDialog):
    """Asks which node the rules judge the config for."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="target.cancel")
    ]
    HEADING = "Judge the config for another node (a preview: runs still run here)"
    HINT = "GPU [platform] [vLLM version], e.g. MI300X, 8xH100 0.32.0; `this node` to return."
    PLACEHOLDER = "MI300X"
    FIELD_ID = "target-spec"

    @staticmethod
    def text_of(preview: Target | None) -> str:
        """The dialog's starting text: the current preview, spelled as the dialog reads it."""
        if preview is None:
            return ""
        gpu = f"{preview.gpus}x{preview.gpu_name}" if preview.gpu_name else preview.platform or ""
        if preview.gpu_name and preview.partition:
            gpu = f"{gpu}-{preview.partition}"
        return f"{gpu} {preview.vllm_version}".strip()
