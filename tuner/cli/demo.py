"""`tunelab demo-model`: build (if missing) and print the embedded tiny model's path."""

from __future__ import annotations

import typer

from tuner.demo_model import ensure_demo_model


def register(app: typer.Typer) -> None:
    @app.command("demo-model")
    def demo_model() -> None:
        """Create the tiny Llama model for the embedded CPU engine (if missing) and print its path."""
        typer.echo(str(ensure_demo_model()))
