"""The README's TUI key table is the TUI's (issue 28).

Every key of the TUI's key table is bound in the TUI, to an action whose name
or title the row's text uses; every app action has a row; keys a row names
for a view (``o``, ``s``) are bound somewhere in the TUI.

Each failure names the README's claim.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from functools import cache
from typing import Any

import pytest

from tests.support.readme_claims import (
    Mutation,
    check_fails_on_false_readme,
    key_rows,
    mutation_ids,
)

KEY_NAMES = {"/": "slash", "?": "question_mark", "esc": "escape", "enter": "enter"}


def key_name(written: str) -> str:
    """The Textual key for a key as the README writes it (`?` -> question_mark, Esc -> escape)."""
    return KEY_NAMES.get(written.lower(), written if len(written) == 1 else written.lower())


def _bindings(cls: type) -> list[tuple[str, str, str]]:
    """(key, action, title) for each of a class's own BINDINGS."""
    from textual.binding import Binding

    out = []
    for b in getattr(cls, "BINDINGS", []):
        binding = b if isinstance(b, Binding) else Binding(*b)
        out += [(k.strip(), binding.action, binding.description) for k in binding.key.split(",")]
    return out


@cache
def app_bindings() -> dict[str, tuple[str, str]]:
    """Keys that work on the main screen: the app's, the main screen's, the palette's."""
    from tui.app import TunelabApp
    from tui.screens.main import MainScreen

    keys = {TunelabApp.COMMAND_PALETTE_BINDING: ("command_palette", "Command palette")}
    for cls in (MainScreen, TunelabApp):
        keys.update({k: (action, title) for k, action, title in _bindings(cls)})
    return keys


@cache
def view_keys() -> set[str]:
    """Every key bound anywhere in the TUI: app, screens, widgets."""
    import textual.dom

    import tui
    import tui.screens
    import tui.widgets

    keys = set(app_bindings())
    for package in (tui, tui.screens, tui.widgets):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name in ("tui.__main__",):
                continue
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, textual.dom.DOMNode) and cls.__module__ == module.__name__:
                    keys.update(k for k, _, _ in _bindings(cls))
    return keys


def _words(action: str, title: str) -> set[str]:
    words = {title.lower(), action.replace("_", " ")}
    words |= {w for w in re.split(r"[\s_]+", f"{action} {title}".lower()) if len(w) >= 3}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if len(w) >= 3}


def test_every_key_in_the_readme_is_bound_to_that_action() -> None:
    problems = []
    for keys, text in key_rows():
        for written in keys:
            found = app_bindings().get(key_name(written))
            if found is None:
                problems.append(f"key `{written}` ({text[:50]}...): not bound in the TUI")
            elif not any(w in text.lower() for w in _words(*found)):
                problems.append(
                    f"key `{written}` is {found[0]!r} ({found[1]!r}) in the TUI, "
                    f"the README says: {text[:60]}..."
                )
    assert not problems, "\n".join(problems)


def test_every_app_action_has_a_row() -> None:
    from tui.commands import ACTIONS

    listed = {key_name(k) for keys, _ in key_rows() for k in keys}
    missing = [f"{s.key} ({s.title})" for s in ACTIONS if s.key.split(",")[0] not in listed]
    assert not missing, f"README's key table lacks: {', '.join(missing)}"


def test_keys_named_inside_the_rows_exist_in_some_view() -> None:
    """`o` sorts the results, `s` stops a job: single keys a row's text names."""
    problems, seen = [], 0
    for keys, text in key_rows():
        for written in re.findall(r"`([^`]+)`", text):
            if len(written) == 1 or written.lower() in ("esc", "enter"):
                seen += 1
                if key_name(written) not in view_keys():
                    problems.append(f"key `{written}` (row {keys[0]}): bound in no view")
    assert seen, "no key inside the rows (parse broken?)"
    assert not problems, "\n".join(problems)


def test_the_key_check_can_fail() -> None:
    assert app_bindings().get(key_name("ctrl+z")) is None
    action, title = app_bindings()["r"]
    assert not any(w in "export a trial" for w in _words(action, title))


# ---- each check fails on a false README -------------------------------------------------------

MUTATIONS: list[Mutation] = [
    (test_every_key_in_the_readme_is_bound_to_that_action, "| `d` |", "| `x` |", "`x`"),
    (
        test_every_key_in_the_readme_is_bound_to_that_action,
        "| `m` | pick a model |",
        "| `m` | switch the theme |",
        "`m`",
    ),
    (test_every_app_action_has_a_row, "| `d` | light/dark theme |\n", "", "Light/dark"),
    (test_keys_named_inside_the_rows_exist_in_some_view, "sortable (`o`,", "sortable (`z`,", "`z`"),
]


@pytest.mark.parametrize(
    ("check", "true", "false", "named"), MUTATIONS, ids=mutation_ids(MUTATIONS)
)
def test_each_check_fails_on_a_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    check_fails_on_false_readme(monkeypatch, check, true, false, named)
