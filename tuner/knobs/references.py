"""Reference documents by title: what a user reads instead of a file name.

The rules and the catalogue cite ``/work/shared/reference/`` files by name in
code (``000_cadfc2653427814e.txt §Section``) so a maintainer can open them;
a user is shown the document's title. :func:`cite` rewrites any text that
names the files; every place that shows a source (``tunelab check``, the
findings the rules return, knob help) passes it through.
"""

from __future__ import annotations

import re

# File → title, from each document's own heading.
TITLES: dict[str, str] = {
    # 000_cadfc2653427814e.txt: "vLLM V1 performance optimization" (ROCm docs, rst).
    "000_cadfc2653427814e.txt": "AMD vLLM V1 optimization guide",
    # 001_0b441da10e6981c9.txt: the same guide's 2026-05-29 web edition.
    "001_0b441da10e6981c9.txt": "AMD vLLM V1 optimization guide (2026-05 edition)",
    # 002_61ffe81b0393820b.txt: Embedded LLM / Hot Aisle blog post.
    "002_61ffe81b0393820b.txt": "Serving LLMs on AMD MI300X: Best Practices",
    # 003_383fc7ac89897e18.txt: AMD's MI300X FP8 benchmark notes.
    "003_383fc7ac89897e18.txt": "AMD MI300X vLLM FP8 latency and throughput benchmarks",
    # 004_c4561cd56ddb4be5.txt: CPX/NPS4 workload how-to.
    "004_c4561cd56ddb4be5.txt": "Steps to Run a vLLM Workload (MI300X CPX/NPS4)",
}

_FILE = re.compile("|".join(re.escape(name) for name in TITLES))


def title(name: str) -> str:
    """The title of one reference file (the name itself when it is not a known file)."""
    return TITLES.get(name, name)


def cite(text: str) -> str:
    """``text`` with every reference file name replaced by its document's title."""
    return _FILE.sub(lambda m: TITLES[m.group(0)], text) if text else text
