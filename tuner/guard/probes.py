"""The built-in probe prompts: short, varied, fixed (so every trial of a study asks the same)."""

from __future__ import annotations

# Cost per trial is about len(BUILTIN_PROBES) * (DEFAULT_GUARD_TOKENS + 1 forced
# pass) tokens on an engine that is already warm: seconds, not minutes.
DEFAULT_GUARD_TOKENS = 16

# Varied on purpose: prose, code, arithmetic, a list, another language, a
# repetition-prone prompt — kernels that drift tend to drift on some, not all.
BUILTIN_PROBES: tuple[str, ...] = (
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Question: What is 17 times 23?\nAnswer:",
    "Three primary colours are red,",
    "Le petit chat dort sur",
    "Once upon a time, in a small village by the sea,",
    '{"name": "Alice", "age":',
    "1, 2, 3, 5, 8, 13,",
)
