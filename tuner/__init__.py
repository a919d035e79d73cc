"""tunelab's core: everything the TUI and the CLI do goes through this package.

It never imports Textual (an import-linter contract checks that), and it never
imports torch or vllm in-process: introspection and engines run in
subprocesses so that `tunelab` starts fast.
"""

__version__ = "0.1.0"
