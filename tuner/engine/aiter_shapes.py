"""Kernel shapes that ran on AITER's default kernels, read from an engine's log (issue 29).

AITER looks every GEMM and fused-MoE call up in a tuned table (a CSV per
kernel family) and, for a shape the table lacks, logs one INFO line and runs
a default kernel: ``[aiter] shape is M:8192, N:1024, K:3072, not found tuned
config in /tmp/aiter_configs/a8w8_blockscale_tuned_gemm.csv, will use default
config!`` or ``[aiter] [fused_moe] using 2stage default for (256, 16384, 4096,
640, ...)``. It writes nothing else (ROCm/aiter#5267; only bf16 has
``AITER_TUNE_GEMM=1``), so an engineer scrapes the log by hand. This module is
that scrape, once: every family's line forms (from AITER's ``ops/gemm_op_*.py``,
``tuned_gemm.py`` and ``fused_moe.py``, old and new wordings), the worker
prefixes vLLM puts before them (``(Worker_TP4_EP4 pid=892)``), and one entry
per family and shape however many TP ranks logged it. The family's table
(:data:`FAMILIES`) also holds what a tuner needs: AITER's untuned-CSV columns,
the tuner script and the environment variable that points AITER at a table
(:mod:`tuner.export.aiter_untuned` writes them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Family:
    """One AITER kernel family: how its log names it and how its tuner takes shapes.

    Attributes:
        name: The family's name (AITER's file stem without ``_tuned_gemm``).
        table: Stem of AITER's tuned CSV, as the log names it (``a8w8_tuned_gemm``).
        untuned: AITER's untuned CSV name; its tuner reads this schema.
        columns: The untuned CSV's header, in AITER's order.
        tuner: The tuner script, relative to AITER's source tree.
        env: The variable that points AITER at a tuned table of this family.
        moe: A fused-MoE family (not a GEMM).
        tune_env: An AITER switch that handles this family's missed shapes itself,
            with what it does (``tune_note``).
        tuner_args: Extra arguments the tuner needs for this family.
    """

    name: str
    table: str
    untuned: str
    columns: tuple[str, ...]
    tuner: str
    env: str
    moe: bool = False
    tune_env: str | None = None
    tune_note: str = ""
    tuner_args: str = ""


_MNK = ("M", "N", "K")
# From AITER's aiter/configs/*_untuned_*.csv headers, csrc/*/..._tune.py and
# aiter/jit/core.py (ROCm/aiter main, 2026-08).
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "bf16",
            "bf16_tuned_gemm",
            "bf16_untuned_gemm.csv",
            (*_MNK, "bias", "dtype", "outdtype", "scaleAB", "bpreshuffle"),
            "csrc/gemm_a16w16/gemm_a16w16_tune.py",
            "AITER_CONFIG_GEMM_BF16",
            tune_env="AITER_TUNE_GEMM",
            tune_note="appends each missed shape to AITER's bf16_untuned_gemm.csv",
        ),
        Family(
            "a8w8",
            "a8w8_tuned_gemm",
            "a8w8_untuned_gemm.csv",
            (*_MNK, "q_dtype_w"),
            "csrc/ck_gemm_a8w8/gemm_a8w8_tune.py",
            "AITER_CONFIG_GEMM_A8W8",
        ),
        Family(
            "a8w8_bpreshuffle",
            "a8w8_bpreshuffle_tuned_gemm",
            "a8w8_bpreshuffle_untuned_gemm.csv",
            (*_MNK, "q_dtype_w"),
            "csrc/ck_gemm_a8w8_bpreshuffle/gemm_a8w8_bpreshuffle_tune.py",
            "AITER_CONFIG_GEMM_A8W8_BPRESHUFFLE",
        ),
        Family(
            "a8w8_blockscale",
            "a8w8_blockscale_tuned_gemm",
            "a8w8_blockscale_untuned_gemm.csv",
            _MNK,
            "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py",
            "AITER_CONFIG_GEMM_A8W8_BLOCKSCALE",
        ),
        Family(
            "a8w8_blockscale_bpreshuffle",
            "a8w8_blockscale_bpreshuffle_tuned_gemm",
            "a8w8_blockscale_bpreshuffle_untuned_gemm.csv",
            _MNK,
            "csrc/ck_gemm_a8w8_blockscale/gemm_a8w8_blockscale_tune.py",
            "AITER_CONFIG_GEMM_A8W8_BLOCKSCALE_BPRESHUFFLE",
            tuner_args="--preshuffle",
        ),
        Family(
            "a4w4_blockscale",
            "a4w4_blockscale_tuned_gemm",
            "a4w4_blockscale_untuned_gemm.csv",
            _MNK,
            "csrc/ck_gemm_a4w4_blockscale/gemm_a4w4_blockscale_tune.py",
            "AITER_CONFIG_GEMM_A4W4",
        ),
        Family(
            "a8w8_batched",
            "a8w8_tuned_batched_gemm",
            "a8w8_untuned_batched_gemm.csv",
            ("B", *_MNK),
            "csrc/ck_batched_gemm_a8w8/batched_gemm_a8w8_tune.py",
            "AITER_CONFIG_A8W8_BATCHED_GEMM",
        ),
        Family(
            "bf16_batched",
            "bf16_tuned_batched_gemm",
            "bf16_untuned_batched_gemm.csv",
            ("B", *_MNK),
            "csrc/ck_batched_gemm_bf16/batched_gemm_bf16_tune.py",
            "AITER_CONFIG_BF16_BATCHED_GEMM",
        ),
        Family(
            "fmoe",
            "tuned_fmoe",
            "untuned_fmoe.csv",
            (
                "token",
                "model_dim",
                "inter_dim",
                "expert",
                "topk",
                "act_type",
                "dtype",
                "q_dtype_a",
                "q_dtype_w",
                "q_type",
                "use_g1u1",
                "doweight_stage1",
            ),
            "csrc/ck_gemm_moe_2stages_codegen/gemm_moe_tune.py",
            "AITER_CONFIG_FMOE",
            moe=True,
            tune_env="AITER_ONLINE_TUNE",
            tune_note="tunes each missed shape when it first runs (a slow first launch)",
        ),
    )
}
# A table the log names but tunelab cannot place (a CK GEMM of an older AITER that
# logged "in CKGEMM" for several families, or a table under an unrecognised name).
UNKNOWN = "unknown"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The process that logged a line: vLLM's "(Worker_TP4_EP4 pid=892)", "(VllmWorker TP1
# pid=21407)"; SGLang's "[2026-02-17 23:52:11 TP6]" (which copies AITER's lines untagged).
_PREFIX = re.compile(r"\((?P<who>[^()]*?)\s*pid=\d+\)|\[\d{4}-\d\d-\d\d [\d:.]+ (?P<rank>[^\]]+)\]")
_GEMM = re.compile(
    r"shape is (?:B:\s*(?P<B>\d+),\s*)?M:\s*(?P<M>\d+),\s*N:\s*(?P<N>\d+),\s*K:\s*(?P<K>\d+)"
    r"(?P<rest>.*?)not found tuned config in (?P<table>.+?), will use default config"
)
_MOE = re.compile(
    r"\[fused_moe\] using (?P<stages>[12]stage)(?: xbf16)? default for \((?P<key>.*)\)"
)
# key=value and key:value pairs of the GEMM line's middle part:
# "dtype='torch.float32' otype='torch.float32' bias=False", "q_dtype_w:torch.float8_e4m3fnuz".
_PAIR = re.compile(r"(?P<k>\w+)\s*[=:]\s*'?(?P<v>[\w.]+)'?")
# A fused-MoE key tuple's items: "<ActivationType.Silu: 0>", "'torch.bfloat16'", "True", 304.
_ITEM = re.compile(r"<[^>]*>|'[^']*'|\"[^\"]*\"|[^,\s][^,]*")
_MOE_DIMS = ("token", "model_dim", "inter_dim", "expert", "topk")
_MOE_TAIL = ("dtype", "q_dtype_a", "q_dtype_w", "q_type", "use_g1u1", "doweight_stage1")


@dataclass(frozen=True)
class UntunedShape:
    """One shape of one family that ran on a default kernel.

    Attributes:
        family: A :data:`FAMILIES` name, or :data:`UNKNOWN`.
        values: The shape in the family's untuned-CSV columns (text, AITER's spelling).
        table: The tuned table the log named (None for fused MoE, which names none).
        lines: How many log lines named it (one per rank and call site).
        ranks: How many distinct processes (TP/EP ranks) logged it.
    """

    family: str
    values: tuple[tuple[str, str], ...]
    table: str | None = None
    lines: int = 1
    ranks: int = 1

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return (self.family, self.values)

    @property
    def moe(self) -> bool:
        fam = FAMILIES.get(self.family)
        return fam is not None and fam.moe

    def describe(self) -> str:
        """``a8w8_blockscale M=8192 N=1024 K=3072``."""
        return f"{self.family} " + " ".join(f"{k}={v}" for k, v in self.values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "values": dict(self.values),
            "table": self.table,
            "lines": self.lines,
            "ranks": self.ranks,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UntunedShape:
        values = data.get("values") or {}
        return cls(
            family=str(data.get("family") or UNKNOWN),
            values=tuple((str(k), str(v)) for k, v in dict(values).items()),
            table=str(data["table"]) if data.get("table") else None,
            lines=int(data.get("lines") or 1),
            ranks=int(data.get("ranks") or 1),
        )


@dataclass(frozen=True)
class UntunedShapes:
    """Every shape one engine launch ran on AITER's default kernels, once per family and shape."""

    shapes: tuple[UntunedShape, ...] = ()
    lines: int = 0

    def __bool__(self) -> bool:
        return bool(self.shapes)

    @property
    def gemm(self) -> list[UntunedShape]:
        return [s for s in self.shapes if not s.moe]

    @property
    def moe(self) -> list[UntunedShape]:
        return [s for s in self.shapes if s.moe]

    def by_family(self) -> dict[str, int]:
        """Distinct shapes per family, most first."""
        counts: dict[str, int] = {}
        for s in self.shapes:
            counts[s.family] = counts.get(s.family, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> str:
        """``12 GEMM shapes and 2 fused-MoE shapes ran on AITER's default kernels
        (a8w8_blockscale 9, bf16 3, fmoe 2)``; "" when none did."""
        if not self.shapes:
            return ""
        parts = []
        if self.gemm:
            parts.append(_count(len(self.gemm), "GEMM shape"))
        if self.moe:
            parts.append(_count(len(self.moe), "fused-MoE shape"))
        families = ", ".join(f"{name} {n}" for name, n in self.by_family().items())
        return f"{' and '.join(parts)} ran on AITER's default kernels ({families})"

    def to_dict(self) -> dict[str, Any]:
        return {"shapes": [s.to_dict() for s in self.shapes], "lines": self.lines}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> UntunedShapes:
        if not data:
            return cls()
        shapes = tuple(UntunedShape.from_dict(s) for s in data.get("shapes") or ())
        return cls(shapes, int(data.get("lines") or 0))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def family_of_table(table: str, env: Mapping[str, str] | None = None) -> str:
    """The family whose tuned table ``table`` (a path, as the log names it) is.

    A table the config points AITER at (``AITER_CONFIG_GEMM_A8W8_BLOCKSCALE=/x/mine.csv``)
    is that variable's family; otherwise the file's stem names it (AITER merges
    model tables into ``/tmp/aiter_configs/<stem>.csv``; model tables carry the stem
    inside their names), the longest stem first so ``a8w8_blockscale_bpreshuffle``
    is not taken for ``a8w8_blockscale``.
    """
    table = table.strip()
    for fam in FAMILIES.values():
        chosen = (env or {}).get(fam.env)
        if chosen and table in {p.strip() for p in chosen.split(":")}:
            return fam.name
    stem = Path(table).name.removesuffix(".csv")
    for fam in sorted(FAMILIES.values(), key=lambda f: -len(f.table)):
        if fam.table in stem:
            return fam.name
    return UNKNOWN


def _gemm_shape(match: re.Match[str], env: Mapping[str, str] | None) -> UntunedShape:
    table = match["table"].strip()
    rest = match["rest"]
    pairs = {m["k"]: m["v"] for m in _PAIR.finditer(rest)}
    if table.startswith("CKGEMM"):
        # Older AITER named no table: "in CKGEMM" (batched, or a CK GEMM of several
        # families), "in CKGEMM or asmGEMM" (a4w4, before April 2026).
        if match["B"] is not None:
            family = "bf16_batched" if "bf16" in rest else "a8w8_batched"
        else:
            family = "a4w4_blockscale" if "asmGEMM" in table else UNKNOWN
    else:
        family = family_of_table(table, env)
    dims = {"B": match["B"], "M": match["M"], "N": match["N"], "K": match["K"]}
    known = {k: v for k, v in dims.items() if v is not None}
    if "otype" in pairs:
        pairs["outdtype"] = pairs.pop("otype")
    fam = FAMILIES.get(family)
    columns = fam.columns if fam else (*known, *pairs)
    values = {**known, **pairs}
    shape = tuple((c, values[c]) for c in columns if c in values)
    return UntunedShape(family, shape, table=None if table.startswith("CKGEMM") else table)


def _moe_shape(match: re.Match[str]) -> UntunedShape | None:
    items = [i.strip() for i in _ITEM.findall(match["key"])]
    act = next((i for i, item in enumerate(items) if "ActivationType" in item), None)
    if act is None or act < len(_MOE_DIMS) or len(items) < act + 1 + len(_MOE_TAIL):
        return None  # a key this scan does not know: never a half-read shape
    dims = dict(zip(_MOE_DIMS, items[act - len(_MOE_DIMS) : act], strict=True))
    tail = dict(zip(_MOE_TAIL, items[act + 1 : act + 1 + len(_MOE_TAIL)], strict=True))
    values = {**dims, "act_type": _moe_activation(items[act]), **tail}
    values = {k: _moe_value(v) for k, v in values.items()}
    columns = FAMILIES["fmoe"].columns
    return UntunedShape("fmoe", tuple((c, values[c]) for c in columns))


def _moe_activation(item: str) -> str:
    """``<ActivationType.Silu: 0>`` and ``'ActivationType.Silu'`` as AITER's CSV writes it."""
    found = re.search(r"ActivationType\.\w+", item)
    return found.group(0) if found else item


def _moe_value(value: str) -> str:
    value = value.strip("'\"")
    return {"True": "1", "False": "0"}.get(value, value)


def parse_line(line: str, env: Mapping[str, str] | None = None) -> tuple[str, UntunedShape] | None:
    """``(process, shape)`` for one untuned-shape line of AITER's, None for any other line.

    ``process`` is vLLM's prefix without the pid (``Worker_TP4_EP4``), "" when the
    line has none: ranks are counted by it.
    """
    if "default" not in line:
        return None
    line = _ANSI.sub("", line)
    prefix = _PREFIX.search(line)
    who = ""
    if prefix and prefix.start() < line.find("default"):
        who = (prefix["who"] or prefix["rank"] or "").strip()
    gemm = _GEMM.search(line)
    if gemm is not None:
        return who, _gemm_shape(gemm, env)
    moe = _MOE.search(line)
    if moe is not None and (shape := _moe_shape(moe)) is not None:
        return who, shape
    return None


def scan(lines: Iterable[str], env: Mapping[str, str] | None = None) -> UntunedShapes:
    """Every untuned shape in ``lines``, once per family and shape, in first-seen order.

    Args:
        lines: An engine's log lines (one launch: ``tuner.engine.effective.start_lines``).
        env: The config's environment, so a table the user chose is placed in its family.
    """
    seen: dict[Any, tuple[UntunedShape, set[str], int]] = {}
    total = 0
    for line in lines:
        found = parse_line(line, env)
        if found is None:
            continue
        who, shape = found
        total += 1
        first, ranks, count = seen.get(shape.key, (shape, set(), 0))
        ranks.add(who)
        seen[shape.key] = (first, ranks, count + 1)
    shapes = tuple(
        UntunedShape(s.family, s.values, s.table, lines=n, ranks=len(r))
        for s, r, n in seen.values()
    )
    return UntunedShapes(shapes, total)


def merge(groups: Sequence[UntunedShapes]) -> UntunedShapes:
    """The union of several launches' shapes (an arm's repeats): one entry per shape."""
    seen: dict[Any, UntunedShape] = {}
    for group in groups:
        for s in group.shapes:
            old = seen.get(s.key)
            lines = s.lines + (old.lines if old else 0)
            ranks = max(s.ranks, old.ranks if old else 0)
            table = s.table or (old.table if old else None)
            seen[s.key] = UntunedShape(s.family, s.values, table, lines, ranks)
    return UntunedShapes(tuple(seen.values()), sum(g.lines for g in groups))


@dataclass(frozen=True)
class ArmsShapes:
    """The untuned shapes of an A/B's two arms, for its notes."""

    a: UntunedShapes = field(default_factory=UntunedShapes)
    b: UntunedShapes = field(default_factory=UntunedShapes)

    def note(self) -> str | None:
        """What the A/B's reader should know, None when neither arm ran a default kernel.

        When the arms differ it says by how much, since a table that covers one arm's
        shapes and not the other's is a cause of the difference of its own.
        """
        if not self.a and not self.b:
            return None
        a_keys = {s.key for s in self.a.shapes}
        b_keys = {s.key for s in self.b.shapes}
        hint = "export them: tunelab export TRIAL --aiter-untuned"
        if a_keys == b_keys:
            return f"AITER: both arms: {self.a.summary()}; {hint}"
        only_a, only_b = len(a_keys - b_keys), len(b_keys - a_keys)
        return (
            f"AITER: the arms differ in untuned kernel shapes: A {len(a_keys)}, B {len(b_keys)} "
            f"({only_a} only in A, {only_b} only in B): A: {self.a.summary() or 'none'}; "
            f"B: {self.b.summary() or 'none'}; {hint}"
        )


def arms_note(
    a: Iterable[Mapping[str, Any] | None], b: Iterable[Mapping[str, Any] | None]
) -> str | None:
    """The A/B note on the two arms' stored untuned shapes (``Trial.untuned`` per trial)."""
    return ArmsShapes(
        merge([UntunedShapes.from_dict(r) for r in a]),
        merge([UntunedShapes.from_dict(r) for r in b]),
    ).note()
