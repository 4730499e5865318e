"""Every default efficiency figure comes from a measurement of its own kind, and reproduces it.

For each family with an operator table (catalog/measurements/, copied from NVIDIA AIConfigurator's measured
tables), the catalog's e_mm, t0 and e_mem are re-derived here from the shipped points with the same fit
(botec.formulas.kernel_fit) and must equal the stated defaults to their printed digits; the curve
t = max(F / (e_mm · peak), B / (e_mem · BW)) + t0 must then reproduce the measured GEMM latencies (median
|error| within 7 %, nine in ten within 20 %: a two-parameter line through kernels of 1 to 10⁴ µs). No default may be a fit to the end-to-end rows `botec validate`
grades: such figures live only in named calibration sets.
"""

from __future__ import annotations

import statistics

import pytest

from botec.catalog import accelerators
from botec.catalog.efficiency import (attention_efficiency_for, efficiency_sets, families, family_efficiency,
                                      operator_measurements)
from botec.formulas.kernel_fit import attention_forward_efficiency, gemm_curve, relative_line_fit
from botec.training.ops import gemm_seconds
from botec.validate import cases

GEMM_FIGURES = ("matmul_efficiency", "kernel_overhead", "memory_bandwidth_efficiency")


def _cited(kind: str):
    """(family, figure name, figure, measurement) for every catalog figure citing a measurement of ``kind``."""
    table = operator_measurements()
    for family, figures in families().items():
        for name, figure in figures.figures.items():
            if figure.measurement is not None and table[figure.measurement].kind == kind:
                yield family, name, figure, table[figure.measurement]


def _device_rates(key):
    device = accelerators()[key]
    return device.peak_flops_per_s["bf16"], device.memory_bandwidth_bytes_per_s


def test_relative_line_fit_recovers_a_known_line_by_hand():
    # t = 2e-12 · x + 5e-6 exactly: the fit returns the line itself
    work = [1e9, 4e9, 1.6e10, 6.4e10]
    seconds = [2e-12 * x + 5e-6 for x in work]
    slope, intercept = relative_line_fit(work, seconds)
    assert slope == pytest.approx(2e-12, rel=1e-9)
    assert intercept == pytest.approx(5e-6, rel=1e-6)


def test_the_measured_families_are_the_four_with_operator_tables():
    measured = {(family, name) for family, name, _, _ in _cited("gemm")}
    for family in ("ampere", "hopper", "blackwell"):
        for name in GEMM_FIGURES:
            assert (family, name) in measured, f"{family}.{name} should cite its GEMM table"
    assert {m.device for m in operator_measurements().values()} == {"a100-sxm-80gb", "h100-sxm", "h200", "b200"}


@pytest.mark.parametrize("family,name,figure,measurement", list(_cited("gemm")),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_each_gemm_default_is_the_fit_of_its_cited_points(family, name, figure, measurement):
    peak, bandwidth = _device_rates(measurement.device)
    fitted = gemm_curve(measurement.points, peak, bandwidth)[name]
    printed = 0.5e-6 if name == "kernel_overhead" else 0.005      # the catalog prints 3.5 us, 0.78
    assert figure.value == pytest.approx(fitted, abs=printed), (family, name, fitted)
    assert figure.basis == "measured"
    assert figure.low <= fitted <= figure.high


@pytest.mark.parametrize("key", ["a100-sxm-80gb", "h100-sxm", "h200", "b200"])
def test_the_family_curve_reproduces_its_measured_gemm_latencies(key):
    """The op model's own GEMM time, with the family's defaults, against every shipped point of the device (the
    H200's points against the Hopper figures derived from the H100's)."""
    device = accelerators()[key]
    figures = family_efficiency(device.family)
    peak, bandwidth = _device_rates(key)
    e_mm, t0 = figures["matmul_efficiency"].value, figures["kernel_overhead"].value
    e_mem = figures["memory_bandwidth_efficiency"].value
    errors = []
    for m, n, k, measured_seconds in operator_measurements()[f"gemm-bf16-{key}"].points:
        modelled = gemm_seconds(m, k, n, 2, peak, e_mm, bandwidth, e_mem, t0)
        errors.append(abs(modelled / measured_seconds - 1))
    errors.sort()
    assert statistics.median(errors) <= 0.07, statistics.median(errors)
    assert errors[int(0.9 * len(errors))] <= 0.20


@pytest.mark.parametrize("family,name,figure,measurement", list(_cited("context_attention")),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_serving_attention_default_is_the_median_of_its_measured_kernels(family, name, figure, measurement):
    peak, _ = _device_rates(measurement.device)
    shape = measurement.shape
    median = attention_forward_efficiency(measurement.points, shape["query_heads"], shape["head_dim"], peak)
    assert figure.value == pytest.approx(median, abs=0.005)


def test_training_attention_is_forward_plus_backward_and_apart_from_serving():
    hopper = families()["hopper"]
    # FA2 on an H100: forward 0.30, backward 0.32 of the peak -> 3.5 / (1/0.30 + 2.5/0.32) = 0.31
    assert 3.5 / (1 / 0.30 + 2.5 / 0.32) == pytest.approx(hopper.training_attention["flash2"].value, abs=0.005)
    # cuDNN / FA3: forward 0.60, backward 0.50 -> 0.525
    assert 3.5 / (1 / 0.60 + 2.5 / 0.50) == pytest.approx(hopper.training_attention["cudnn"].value, abs=0.01)
    assert attention_efficiency_for(hopper, training=False) is hopper["attention_efficiency"]
    assert attention_efficiency_for(hopper, training=True, kernel="flash2").value == 0.31
    # a family without a training figure lends its serving forward, marked assumed
    lent = attention_efficiency_for(families()["turing"], training=True)
    assert lent.basis == "assumed" and lent.value == families()["turing"]["attention_efficiency"].value


def test_no_default_is_a_fit_and_the_fit_lives_in_a_named_set():
    for family, figures in families().items():
        for name, figure in figures.figures.items():
            assert figure.basis in ("measured", "assumed"), (family, name)
            assert "Ampere fit" not in figure.source, (family, name)
    fit = efficiency_sets()["megatron-2022-fit"]
    assert {f.basis for f in fit.families["ampere"].values()} == {"fit"}
    assert fit.families["ampere"]["matmul_efficiency"].value == 0.75
    assert fit.families["ampere"]["kernel_overhead"].value == pytest.approx(12e-6)
    # the set names the validation cases it was fitted to, and those cases say so
    by_id = {case.id: case for case in cases()}
    for case_id in fit.fitted_to:
        assert "megatron-2022-fit" in by_id[case_id].fitted_by
    calibrated = family_efficiency("ampere", "megatron-2022-fit")
    assert calibrated["matmul_efficiency"].value == 0.75 and calibrated.calibration == "megatron-2022-fit"
    assert family_efficiency("hopper", "megatron-2022-fit")["matmul_efficiency"].value == 0.78   # not fitted there
