"""Reads meaning out of vLLM's start-up log: the chosen backend and why it died.

vLLM's wording changes between versions ("Using FLASH_ATTN backend.",
"Using Triton Attention backend on V1 engine.", "Using ROCM_AITER_FA backend
out of potential backends: ..."), so the patterns here are deliberately loose
and tested against each form. A failure's reason is the last line that names
an error, stripped of vLLM's "(Worker pid=...) ERROR 11-22 ..." prefixes.
"""

from __future__ import annotations

import re

# "Using <NAME> backend", "Using <NAME> attention backend", "Using the <NAME> backend",
# "Using <NAME> backend (selected via --attention-backend)", and 0.32's ROCm
# override "Found incompatible backend(s) [A, B] with decoder. Overriding with
# <NAME> out of potential backends: [...]" (vllm/platforms/rocm.py ~840).
# Excludes the non-attention backends vLLM also announces (MoE, MLA prefill,
# compilation, ViT, ...).
_BACKEND_RE = re.compile(
    r"(?:Using (?:the )?(?P<name>[A-Za-z][A-Za-z0-9_ ]*?) backend\b(?! for vit)"
    r"|Overriding with (?P<override>[A-Z][A-Z0-9_]*) out of potential backends)",
    re.IGNORECASE,
)
_NOT_ATTENTION = re.compile(
    r"\b(MoE|MLA prefill|Mamba|SSU|ReplaySSM|W4A8|MxFp8|FP8|compilation|OOT|Transformers modeling|"
    r"MoRIIO|allreduce|KDA|ViT|vit|sampler|Unquantized|LoRA|structured|guided)\b",
    re.IGNORECASE,
)
# "Found incompatible backend(s) [FLASH_ATTN, ROCM_AITER_FA] with decoder." (0.32 rocm.py ~840).
_INCOMPATIBLE_RE = re.compile(r"Found incompatible backend\(s\) \[(?P<names>[^\]]*)\]")
# Human wordings of vLLM releases before the enum names were logged, normalised
# (spaces, underscores, hyphens and " on V1 engine" removed, lower case) to the
# AttentionBackendEnum names users pass to --attention-backend (0.32
# vllm/v1/attention/backends/registry.py; V0 names ROCM_FLASH, XFORMERS,
# PALLAS, IPEX from the 0.6-0.9 selector). Sources of the wordings:
# platforms/rocm.py of 0.10-0.18 ("Using Rocm Attention backend on V1 engine.",
# "Using AITER MLA backend on V1 engine.", "Using Aiter Unified Attention ..."),
# platforms/cuda.py 0.8-0.11 ("Using Flash Attention backend on V1 engine.",
# "Using FlashInfer MLA backend on V1 engine."), platforms/xpu.py 0.32
# ("Using Triton backend.", "Using Flash Attention MLA backend on XPU.").
_ALIASES = {
    "flashattention": "FLASH_ATTN",
    "flashattn": "FLASH_ATTN",
    "flashattentionmla": "FLASH_ATTN_MLA",
    "flashattnmla": "FLASH_ATTN_MLA",
    "tritonattention": "TRITON_ATTN",
    "triton": "TRITON_ATTN",
    "rocmattention": "ROCM_ATTN",
    "rocmflashattention": "ROCM_FLASH",
    "aiterflashattention": "ROCM_AITER_FA",
    "aiterunifiedattention": "ROCM_AITER_UNIFIED_ATTN",
    "aitermla": "ROCM_AITER_MLA",
    "aitertritonmla": "ROCM_AITER_TRITON_MLA",
    "sparsemla": "ROCM_AITER_MLA_SPARSE",
    "tritonmla": "TRITON_MLA",
    "flashmla": "FLASHMLA",
    "flashmlasparse": "FLASHMLA_SPARSE",
    "cutlassmla": "CUTLASS_MLA",
    "flashinfer": "FLASHINFER",
    "flashinfermla": "FLASHINFER_MLA",
    "flexattention": "FLEX_ATTENTION",
    "torchsdpa": "TORCH_SDPA",
    "cpuattention": "CPU_ATTN",
    "cpumla": "CPU_MLA",
    "xpumlasparse": "XPU_MLA_SPARSE",
    "treeattention": "TREE_ATTN",
    "xformers": "XFORMERS",
    "pallas": "PALLAS",
    "pallasv1": "PALLAS",
    "ipex": "IPEX",
    "ipexattention": "IPEX",
    "turboquant": "TURBOQUANT",
    "turboquantattention": "TURBOQUANT",
}
_ENUM_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
# "Cannot use AttentionBackendEnum.TORCH_SDPA backend on CPU." (0.32 platforms/cpu.py
# ~178; "_Backend.FLASH_ATTN" before the enum's rename).
_CANNOT_USE_RE = re.compile(r"Cannot use (?P<name>\S+?) backend on (?P<platform>\w+)")

_PREFIX_RE = re.compile(
    r"^(?:\([A-Za-z0-9_:\- ]+ pid=\d+\)\s*)?"  # "(APIServer pid=123) "
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d\s+\[[^\]]*\]\s*)?"
)
_ERROR_LINE_RE = re.compile(
    r"(\b[A-Z][A-Za-z]*(?:Error|Exception)\b:|\berror: |out of memory|OutOfMemory|"
    r"not supported|Address already in use|No space left)",
)
_NOISE_RE = re.compile(r"^(Traceback|During handling|The above exception|\s*File \"|\s*\^+\s*$)")


def strip_prefix(line: str) -> str:
    """Removes vLLM's process/level/timestamp prefix from a log line."""
    return _PREFIX_RE.sub("", line.rstrip("\n")).strip()


def backend_from_line(line: str) -> str | None:
    """The attention backend a log line announces, as vLLM's AttentionBackendEnum name, or None.

    A human wording that is not in the alias table gives None rather than an
    invented name: the engine's platform then implies the backend, and a
    made-up name would not compare equal to the requested one.
    """
    text = strip_prefix(line)
    match = _BACKEND_RE.search(text)
    if not match:
        return None
    if match.group("override"):
        return match.group("override").upper()
    name = match.group("name").strip()
    if _NOT_ATTENTION.search(name) or _NOT_ATTENTION.search(text.split(" out of ")[0]):
        return None
    if name.lower() in {"v1", "the", "a"}:
        return None
    # "TRITON_ATTN attention backend": the enum name followed by a plain word.
    head, _, tail = name.rpartition(" ")
    if head and tail.lower() == "attention" and "_" in head:
        name = head
    # "Using AITER MLA backend on V1 engine." / "... MLA backend on XPU."
    key = re.sub(r"[\s_-]+", "", name).lower()
    alias = _ALIASES.get(key)
    if alias:
        return alias
    if _ENUM_NAME_RE.match(name):
        return name
    return None


def rejected_backend(line: str) -> str | None:
    """The backend vLLM said it cannot use ("Cannot use X backend on CPU."), if any."""
    match = _CANNOT_USE_RE.search(strip_prefix(line))
    return match.group("name").split(".")[-1].upper() if match else None


def incompatible_backends(line: str) -> list[str]:
    """Backends vLLM's ROCm selector found incompatible before overriding (0.32 rocm.py ~840)."""
    match = _INCOMPATIBLE_RE.search(strip_prefix(line))
    if not match:
        return []
    return [n.strip().strip("'\"") for n in match.group("names").split(",") if n.strip()]


def port_in_use(lines: list[str]) -> bool:
    """Whether a failed start was a bind race on the port (worth a retry elsewhere)."""
    return any("Address already in use" in line or "Errno 98" in line for line in lines)


_PYDANTIC_HEAD_RE = re.compile(r"(?P<n>\d+) validation errors? for (?P<cls>\w+)\s*$")
_PYDANTIC_TAIL_RE = re.compile(r"\s*\[type=[^\]]*\]\s*$")


def last_error(lines: list[str]) -> str | None:
    """The last line that names an error (prefixes stripped), or None.

    A pydantic ``ValidationError`` (how vLLM's config classes refuse a value) is only a header
    on its own ("1 validation error for SchedulerConfig"); the sentence that says what is
    wrong is on the lines after it, and is what the user gets (:func:`pydantic_refusal`).
    """
    cleaned = [strip_prefix(line) for line in lines if line.strip()]
    for index in range(len(cleaned) - 1, -1, -1):
        text = cleaned[index]
        if _NOISE_RE.match(text):
            continue
        if _ERROR_LINE_RE.search(text) or _PYDANTIC_HEAD_RE.search(text):
            return (pydantic_refusal(cleaned, index) or text)[:500]
    return None


def pydantic_refusal(cleaned: list[str], index: int) -> str | None:
    """The refusal in vLLM's words when ``cleaned[index]`` or the line before it heads a
    pydantic validation error ("vLLM refused the config (SchedulerConfig): ..."), else None."""
    for start in (index, index - 1):
        head = _PYDANTIC_HEAD_RE.search(cleaned[start]) if start >= 0 else None
        if head is None:
            continue
        said: list[str] = []
        field: str | None = None  # pydantic names the field on its own line, then the problem
        for text in cleaned[start + 1 : start + 1 + 4 * int(head["n"])]:
            if text.startswith("For further information") or _NOISE_RE.match(text):
                continue
            if _PYDANTIC_HEAD_RE.search(text) or _ERROR_LINE_RE.search(text.split(",")[0]):
                break
            if re.fullmatch(r"[\w.\[\]-]+", text):
                field = text
                continue
            sentence = _PYDANTIC_TAIL_RE.sub("", text).removeprefix("Value error, ").strip()
            if sentence:
                said.append(f"{field}: {sentence}" if field else sentence)
                field = None
        if said:
            return f"vLLM refused the config ({head['cls']}): {'; '.join(said)}"
    return None


# torch's inductor loads a compiled kernel (.so) from its cache; an engine killed while it
# wrote one leaves a truncated file that every later start loads and dies on (seen here:
# a 0-byte .so after a SIGKILL of a test run mid-compile failed 14 engine starts in a row).
_TRUNCATED_SO_RE = re.compile(r"ImportError: (?P<path>/\S+\.so): file too short")


def known_cause(lines: list[str]) -> str | None:
    """A failed start whose cause tunelab recognises, said with its fix; None otherwise."""
    for line in reversed(lines):
        found = _TRUNCATED_SO_RE.search(line)
        if found:
            path = found["path"]
            return (
                f"torch's compile cache holds a truncated kernel, {path} (an engine killed "
                "while compiling leaves half a file, and every start loads it); delete it "
                f"(rm {path}) or the whole cache directory, and start again"
            )
    return None


def failure_reason(lines: list[str], returncode: int | None = None) -> str:
    """The most telling error line of a failed start, in one line a user can act on."""
    found = known_cause(lines) or last_error(lines)
    if found:
        return found
    cleaned = [strip_prefix(line) for line in lines if line.strip()]
    if returncode is not None and returncode < 0:
        return f"vLLM was killed by signal {-returncode} (no error in its log)"
    if cleaned:
        return f"vLLM exited with code {returncode}; last log line: {cleaned[-1][:300]}"
    return f"vLLM exited with code {returncode} before writing any log"


def meaningful_tail(lines: list[str], limit: int = 25) -> list[str]:
    """The last lines that carry information (no blank lines, prefixes stripped)."""
    cleaned = [strip_prefix(line) for line in lines if line.strip()]
    return cleaned[-limit:]
