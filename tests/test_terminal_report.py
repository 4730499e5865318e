"""The terminal report of `botec estimate`: at most 100 columns, into a pipe or on any terminal; the inputs'
sources behind --details; a description the --set overrides may have made stale says so."""

from __future__ import annotations

import io

import pytest

from botec.estimation import estimate_file
from botec.report.terminal import REPORT_WIDTH, render

from conftest import EXAMPLES, LESSON, run_cli

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def _report(result, width: int | None = None, details: bool = False) -> list[str]:
    """The report as a pipe gets it (botec.report.tables.console: not a terminal), or at a terminal's ``width``."""
    from rich.console import Console

    from botec.report.tables import console

    buffer = io.StringIO()
    if width is None:
        target = console(buffer)
    else:
        target = Console(file=buffer, width=width, highlight=False, soft_wrap=False, force_terminal=True,
                         color_system=None)
    render(result, target, details=details)
    return buffer.getvalue().splitlines()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_every_example_fits_100_columns_when_piped(path):
    """The default report of every example into a pipe: no line over 100 characters (it once padded its tables to
    1,426), the findings whole once their wrapped lines are joined, and no source notes (they are --details')."""
    from botec.estimation import check_fit

    result = estimate_file(path)
    try:
        check_fit(result)
    except Exception:      # a contract that does not fit is reported with --allow-misfit: the same report
        pass
    lines = _report(result)
    assert REPORT_WIDTH == 100
    too_long = [line for line in lines if len(line) > 100]
    assert too_long == [], too_long[:3]
    assert "Inputs and assumptions" in lines and lines[0].startswith("botec estimate: ")
    joined = " ".join(" ".join(lines).split())
    for finding in result.findings_in("decimal"):
        assert " ".join(finding.message.split()) in joined, finding.message


def test_a_wide_terminal_gets_100_columns_a_narrow_one_its_own():
    result = estimate_file(EXAMPLES / "llama3.1-70b-pretrain.yaml")
    wide, narrow = _report(result, width=220), _report(result, width=72)
    assert max(map(len, wide)) == 100                         # the tables and the wrapped sentences fill 100
    assert max(map(len, narrow)) <= 72
    assert wide[0] == "botec estimate: llama3.1-70b-pretrain"
    # a wrapped sentence keeps its words and hangs 4 columns further in than its first line
    finding = next(i for i, line in enumerate(narrow) if line.startswith("  ! network: communication takes"))
    assert narrow[finding + 1].startswith("      ") and not narrow[finding + 1].startswith("       ")


def test_sources_move_to_details():
    """The summary shows value, range and provenance; --details adds each input's contract field and source note
    (and each quantity's formula), still within 100 columns."""
    result = estimate_file(LESSON)
    summary, details = "\n".join(_report(result)), _report(result, details=True)
    header = next(line for line in summary.splitlines() if line.lstrip().startswith("quantity"))
    assert header.split() == ["quantity", "value", "range", "provenance"]
    assert "workload.tokens" not in summary and "lesson 000" not in summary.split("Inputs and assumptions")[1]
    text = " ".join(" ".join(details).split())   # a formula wraps within its column: read it as one line
    assert "workload.tokens" in text and "training_flops / useful_flops_per_s" in text   # run_seconds: the formula
    assert max(map(len, details)) <= 100


def test_the_description_says_when_set_changed_the_contract(capsys):
    """The llama3.1-70b example's description names 1,024 H100s; after --set supply.count=512 the header says the
    description is as written and which --set changed it, in every report form."""
    code, out, err = run_cli(["estimate", str(EXAMPLES / "llama3.1-70b-pretrain.yaml"), "--set", "supply.count=512"],
                             capsys)
    assert code == 0, err
    header = " ".join(out.split("Findings")[0].split())
    assert ("Llama 3.1-70B on 15T tokens, 1,024 H100 (128 DGX H100 nodes), TP 8 × PP 4 × DP 32. (as written; "
            "overridden: supply.count=512)") in header
    assert "h100-sxm) × 512;" in header
    code, out, err = run_cli(["estimate", str(EXAMPLES / "llama3.1-70b-pretrain.yaml"), "-f", "markdown",
                              "--set", "supply.count=512", "--set", "strategy.micro_batch_size=1"], capsys)
    assert code == 0 and "(as written; overridden: supply.count=512, strategy.micro_batch_size=1)" in out
    code, out, err = run_cli(["estimate", str(EXAMPLES / "llama3.1-70b-pretrain.yaml")], capsys)
    assert code == 0 and "as written" not in out and "overridden" not in out     # no --set, no mark


def test_the_description_of_a_contract_without_one_names_the_overrides():
    from botec.report import described

    result = estimate_file(LESSON, ["supply.count=8"])
    assert result.contract.overrides == ("supply.count=8",)
    assert described(result.contract.model_copy(update={"description": None})) == "overridden: supply.count=8"
    assert estimate_file(LESSON).contract.overrides == ()


def test_the_serving_search_says_its_latencies_are_means(capsys):
    """`botec search` on a P99 contract printed mean latencies unlabelled: each is now called a mean, under a line
    naming the percentile the targets hold at."""
    pytest.importorskip("numpy")
    from botec.report.explore import serving_search_markdown

    contract = str(EXAMPLES / "serve-llama3.1-8b-h100.yaml")
    code, out, err = run_cli(["search", contract, "--set", "workload.latency.percentile=99", "--set",
                              "supply.candidates=null", "--top", "2"], capsys)     # the H100 alone: TP 1, 2, ...
    assert code == 0, err
    lines = out.replace("\n    ", " ").splitlines()   # a row wrapped at 100 columns, its further lines hanging
    assert lines[0] == ("TPOT and TTFT: means at the fleet's load (each row meets the contract's targets, which hold "
                        "at P99):")
    assert len(lines) == 3 and all(", mean TPOT " in line and ", mean TTFT " in line for line in lines[1:])
    assert max(map(len, out.splitlines())) <= 100
    row = {"accelerator": "h100-sxm", "tensor_parallel": 1, "replicas": 1.0, "accelerators": 1.0, "batch": 86.0,
           "tpot_seconds": 0.0168, "ttft_seconds": 0.0526, "cost_per_day_usd": 60.0}
    assert serving_search_markdown([row], percentile=95) == [
        "TPOT and TTFT: means at the fleet's load (each row meets the contract's targets, which hold at P95).", "",
        "| rank | accelerator | TP | replicas | accelerators | batch | TPOT (mean) | TTFT (mean) | cost per day |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 1 | h100-sxm | 1 | 1 | 1 | 86 | 16.8 ms | 52.6 ms | $60.00 |"]


def test_explain_depth_keeps_that_many_levels_and_marks_what_it_leaves_out(capsys):
    """`botec explain --depth N`: the quantity and N levels of its inputs, one `...` a level deeper under each
    quantity whose inputs are left out; without it, the whole chain down to the assumptions, with no `...`."""
    code, whole, err = run_cli(["explain", "planned_device_bytes"], capsys)
    assert code == 0, err
    assert "..." not in [line.strip() for line in whole.splitlines()]
    code, zero, err = run_cli(["explain", "planned_device_bytes", "--depth", "0"], capsys)
    assert code == 0 and zero.splitlines()[-1] == "  ..." and zero.startswith("planned_device_bytes = ")
    code, one, err = run_cli(["explain", "planned_device_bytes", "--depth", "1"], capsys)
    starts: list[str] = []   # each line's first line: a wrapped line's further lines hang 4 deeper than it
    for line in one.splitlines():
        indent = len(line) - len(line.lstrip())
        if not starts or indent < len(starts[-1]) - len(starts[-1].lstrip()) + 4:
            starts.append(line)
    assert [line.split(" = ")[0] for line in starts] == [
        "planned_device_bytes", "  allocated_device_bytes", "    ...", "  allocator_reserve_bytes", "    ...",
        "  runtime_buffer_bytes", "  paged_optimizer_spill_bytes", "    ...", "  headroom"]
    assert starts[-1] == "  headroom = 0.25  [assumed, assumptions.headroom: lesson 000]"   # an input: nothing below
    assert max(map(len, one.splitlines())) <= 100 and len(whole.splitlines()) > 3 * len(one.splitlines())
    code, out, err = run_cli(["explain", "planned_device_bytes", "--depth", "-1"], capsys)
    assert code == 2 and "--depth" in err and len(err.strip().splitlines()) == 1


def test_sweep_csv_to_stdout_is_the_csv_alone(capsys):
    """`botec sweep --csv -` wrote the CSV with CRLF line ends, then two blank lines and the whole table, and counts
    as `4.0`: now stdout is the CSV alone, LF line ends, whole numbers as integers (the summary goes to stderr)."""
    pytest.importorskip("numpy")
    import csv
    import io

    code, out, err = run_cli(["sweep", "--set", "supply.count=4,8", "--csv", "-"], capsys)
    assert code == 0, err
    assert "\r" not in out and out.endswith("\n") and not out.endswith("\n\n")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0][:4] == ["supply.count", "run_seconds", "planned_device_bytes", "step_seconds"]
    assert [row[:3] for row in rows[1:]] == [["4", "31250", "25184354560"], ["8", "15625", "25184354560"]]
    assert len(rows) == 3 and float(rows[1][3]) == pytest.approx(0.512, rel=1e-3)   # a step time keeps its decimals
    assert "2 configurations" in err
    code, out, err = run_cli(["sweep", "--set", "supply.count=4,8"], capsys)   # without --csv: the table
    assert code == 0 and "supply.count,run_seconds" not in out and "run_seconds" in out
    assert max(map(len, out.splitlines())) <= 100
