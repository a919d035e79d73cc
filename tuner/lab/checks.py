"""What the rules say about a config, invalid knob text included: one call for both faces.

:func:`rules_findings` is the one way a face asks the rules (``tunelab check``,
``tunelab presets check`` and the TUI's findings panel), so the CLI and the TUI
cannot give different findings for the same config, target and workload.

A knob whose typed text is not a value (``abc`` in ``max-num-seqs``) used to
be dropped silently, so the run went ahead without it; here it is an ERROR
finding like any rule's, so it blocks Run and is listed until corrected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.knobs import Knob
from tuner.knobs.value_sets import backend_platforms
from tuner.model import ModelInfo
from tuner.rules import Finding, Severity, Target, WorkloadShape, check, has_errors
from tuner.vllm_tables import exact

INVALID_RULE = "invalid-value"
INVALID_SOURCE = "tunelab knob catalogue (the knob's type and range: `tunelab knobs`)"


def invalid_value(key: str, error: str) -> Finding:
    """The error finding for text typed into ``key`` that is not one of its values."""
    return Finding(
        Severity.ERROR,
        (key,),
        f"{key}: {error} — Run is blocked until the field holds a valid value or is cleared",
        INVALID_SOURCE,
        None,
        INVALID_RULE,
    )


def rules_findings(
    config: EngineConfig,
    model: ModelInfo | None,
    target: Target,
    workload: WorkloadShape | None = None,
) -> list[Finding]:
    """The rules' findings on ``config`` for ``target`` (errors first; never raises): the
    one call the TUI, ``check`` and ``presets`` make (:func:`tuner.rules.check` judges)."""
    return check(config, model, target, workload)


def findings(
    config: EngineConfig,
    model: ModelInfo | None,
    target: Target,
    workload: Workload | None,
    invalid: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Invalid knob text first, then the rules' findings on ``config`` (errors first)."""
    shape = WorkloadShape.from_workload(workload) if workload is not None else None
    typed = [invalid_value(k, e) for k, e in sorted((invalid or {}).items())]
    return typed + rules_findings(config, model, target, shape)


@dataclass(frozen=True)
class VllmVerdict:
    """What the installed vLLM said of one config (``check --validate``, the TUI's ``v``).

    Attributes:
        config: The config asked about: the findings hold for it only.
        findings: vLLM's refusals as errors (a warning when it could not answer).
        note: One line saying who answered and what, for the face to show.
    """

    config: EngineConfig
    findings: list[Finding]
    note: str


def ask_vllm(config: EngineConfig) -> VllmVerdict:
    """The installed vLLM's own validation of ``config`` (a subprocess, cached; no engine).

    The one call both faces make. Validating is the installed release's answer,
    whatever target the rules judge against; the caller has checked the policy
    first (the probe builds the config: nothing it runs may load code).
    """
    # A subprocess that imports vLLM: loaded only when asked.
    from tuner.vllm_validate import validate

    answer = validate(config)
    who = f"the installed vLLM {answer.vllm_version or '?'}"
    if answer.error:
        note = f"{who} did not answer ({answer.error})"
    elif answer.ok:
        note = f"validated by {who}: it builds this config"
    else:
        note = f"{who} refuses this config: {len(answer.refusals)} refusal(s) in the findings"
    return VllmVerdict(config, answer.findings(), note)


def with_verdict(
    found: Sequence[Finding], verdict: VllmVerdict | None, config: EngineConfig
) -> list[Finding]:
    """``found`` plus vLLM's findings when ``verdict`` is about ``config`` (errors first)."""
    if verdict is None or verdict.config != config:
        return list(found)
    return sorted([*found, *verdict.findings], key=lambda f: f.severity.rank)


def blocks_run(found: Sequence[Finding]) -> bool:
    """True when any finding is an error (tuner.rules.has_errors decides)."""
    return has_errors(found)


def fixable(found: Sequence[Finding]) -> list[Finding]:
    """The findings that carry a fix, in the order shown (errors first)."""
    return [f for f in found if f.fix]


def describe_fix(finding: Finding) -> str:
    """The knob values of ``finding``'s fix in one line, ``max-num-seqs=64 ...``.

    Spelled as tables and logs spell values (:func:`tuner.studies.common.describe_values`);
    ``(base config)`` for a finding without a fix.
    """
    # Deferred: the study layer loads when a fix is applied, not at the TUI's first paint.
    from tuner.studies.common import describe_values

    return describe_values(finding.fix or {})


def no_findings_text(model: ModelInfo | None, target: Target) -> str:
    """What an empty list of findings means, said the same by the TUI and ``tunelab check``.

    No finding is "nothing wrong" only when the rules could judge: without the
    target's vLLM version and platform (introspection still running, or not given)
    the backend, cudagraph and flag rules cannot speak, and without an analysed
    model the fit and model rules stay silent. The sentence names what is missing.
    """
    missing = []
    if target.vllm_version is None and target.platform is None:
        missing.append("the vLLM version and platform")
    if model is None:
        missing.append("the model's analysis")
    if not missing:
        return "No findings: the rules see nothing wrong with this config."
    return f"No findings, but without {' and '.join(missing)} the rules that need them stay silent."


def value_marks(
    knob: Knob, choices: Sequence[str], version: str | None, platform: str | None
) -> dict[str, str]:
    """The values of ``knob`` that will not run as named on ``platform``, each with why.

    Two kinds, both offered still (a preset may be meant for another node) but marked
    before any engine starts: a backend that exists only on other platforms (the
    catalogue), and a value the platform's vLLM replaces with its own (the release's
    platform classes: tuner.vllm_tables ``platform_override``; CPU runs CPU_ATTN and
    cudagraph NONE whatever is asked).
    """
    marks: dict[str, str] = {}
    if not platform:
        return marks
    if knob.extra.get("value_set") == "attention_backends":
        for choice in choices:
            where = backend_platforms(choice)
            if where is not None and platform not in where:
                marks[choice] = f"{choice} exists only on {', '.join(sorted(where))}"
    release = exact(version)
    if release is not None:
        for choice in choices:
            why = release.platform_override(knob.key, choice, platform)
            if why and choice not in marks:
                marks[choice] = why
    return marks


def grouped_marks(marks: Mapping[str, str]) -> list[str]:
    """``⊘ FLASH_ATTN, FLASHINFER: exists only on cuda``: the values that share a reason, once.

    46 backends with a sentence each made a 5,000-character help line; grouped
    by reason it is a few lines, and every ⊘ value is still named.
    """
    groups: dict[str, list[str]] = {}
    for value, why in marks.items():
        # The value's own name in its reason ("Cannot use TORCH_SDPA backend") becomes "…".
        named = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", "…", why)
        groups.setdefault(named.removeprefix("… ").strip(), []).append(value)
    return [f"⊘ {', '.join(values)}: {reason}" for reason, values in groups.items()]


def default_text(knob: Knob, version: str | None, platform: str | None) -> str:
    """What "default" means for ``knob`` on the target: the value vLLM resolves there when the
    platform decides it (``default (NONE)`` on CPU), else the catalogue's default."""
    release = exact(version)
    resolved = release.platform_default(knob.key, platform) if release is not None else None
    if resolved is not None:
        return f"default ({resolved})"
    return f"default{'' if knob.default is None else f' ({knob.default})'}"
