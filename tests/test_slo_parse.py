"""The SLO in vLLM's spelling: what parses, what is refused (with a fix), and how it judges."""

from __future__ import annotations

import pytest

from tuner.errors import TunelabError
from tuner.studies.slo import SLO, SLOError, parse_slo


def test_vllm_spelling_parses_in_order_and_prints_back() -> None:
    slo = parse_slo("p99_ttft_ms<=500, p99_itl_ms<=50,p95_e2el_ms<2000")
    assert isinstance(slo, SLO)
    assert slo.keys == ("p99_ttft_ms", "p99_itl_ms", "p95_e2el_ms")
    assert str(slo) == "p99_ttft_ms<=500,p99_itl_ms<=50,p95_e2el_ms<2000"
    assert parse_slo(str(slo)) == slo
    assert slo.to_record() == {"p99_ttft_ms": "<=500", "p99_itl_ms": "<=50", "p95_e2el_ms": "<2000"}


def test_vllm_sla_params_record_form() -> None:
    assert parse_slo('{"p99_e2el_ms": "<=500"}') == parse_slo("p99_e2el_ms<=500")
    assert str(parse_slo('{"output_throughput": ">=100"}')) == "output_throughput>=100"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        (" , ", "empty"),
        ("ttft:500", "goodput syntax"),
        ("p99_ttft<=500", "not a result key"),
        ("p98_ttft_ms<=500", "percentiles"),
        ("p99_foo_ms<=5", "not measured"),
        ("p99_ttft_ms=500", "METRIC<=VALUE"),
        ("p99_ttft_ms<=abc", "METRIC<=VALUE"),
        ("p99_ttft_ms<=0", "> 0 ms"),
        ("p99_ttft_ms<=1e999", "finite"),
        ("p99_ttft_ms<=5,p99_ttft_ms<=6", "twice"),
        ('{"p99_ttft_ms": ', "not"),
        ("{}", "one object"),
    ],
)
def test_bad_slo_is_a_user_error_with_a_fix(text: str, words: str) -> None:
    with pytest.raises(SLOError) as info:
        parse_slo(text)
    assert isinstance(info.value, TunelabError) and info.value.exit_code == 2
    assert words in str(info.value)
    assert info.value.fix


def test_met_and_margin_follow_every_bound() -> None:
    slo = parse_slo("p99_ttft_ms<=500,p99_itl_ms<=50")
    assert slo.met({"p99_ttft_ms": 500.0, "p99_itl_ms": 10.0})
    assert not slo.met({"p99_ttft_ms": 501.0, "p99_itl_ms": 10.0})
    assert not slo.met({"p99_ttft_ms": 100.0})  # a missing key cannot prove the SLO
    # The worst relative violation decides: 10% over on ITL beats 2% over on TTFT.
    assert slo.margin({"p99_ttft_ms": 510.0, "p99_itl_ms": 55.0}) == pytest.approx(0.1)
    assert slo.margin({"p99_ttft_ms": 250.0, "p99_itl_ms": 25.0}) == pytest.approx(-0.5)


def test_mean_over_runs_is_vllms_rule() -> None:
    slo = parse_slo("p99_ttft_ms<=500")
    assert slo.met_by_mean([{"p99_ttft_ms": 450.0}, {"p99_ttft_ms": 540.0}])
    assert not slo.met_by_mean([{"p99_ttft_ms": 450.0}, {"p99_ttft_ms": 600.0}])
    assert not slo.met_by_mean([])


def test_goodput_is_derived_from_upper_latency_bounds_only() -> None:
    slo = parse_slo("p99_ttft_ms<=500,p90_ttft_ms<=300,mean_itl_ms<=40,output_throughput>=10")
    assert slo.goodput() == {"ttft": 300.0, "itl": 40.0}
