"""One convention for every command (issue 14, "Commands that disagree"): -h, --set, -f, -o/-, did-you-mean,
units in findings, findings first, no hard wrap when piped, --uncertainty shows what varies."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES, LESSON

SEARCH = EXAMPLES / "gpt3-175b-search.yaml"


def _value(report: str, name: str) -> float:
    return next(q["value"] for q in json.loads(report)["quantities"] if q["name"] == name)


@pytest.mark.parametrize("command", ["estimate", "sweep", "search", "sensitivity", "explain", "report", "solve"])
def test_dash_h_is_help_on_every_command(cli, command):
    code, out, _ = cli(command, "-h")
    assert code == 0
    assert f" {command} [OPTIONS]" in out and "Show this message and exit." in out


def test_dash_h_is_help_on_the_app(cli):
    code, out, _ = cli("-h")
    assert code == 0 and "estimate" in out and "sweep" in out


def test_a_set_typo_is_blamed_on_set_not_the_file(cli):
    code, out, err = cli("estimate", str(LESSON), "--set", "strategy.micro_bach_size=4")
    assert code == 2 and out == ""
    assert err.strip() == ("botec: error: --set strategy.micro_bach_size=4: unknown field; "
                           "did you mean 'micro_batch_size'?")


def test_a_bad_unit_from_set_is_blamed_on_set(cli):
    code, _, err = cli("estimate", "--set", "supply.accelerator.memory=32 Gb")
    assert code == 2
    assert err.startswith("botec: error: --set supply.accelerator.memory=32 Gb: unknown unit 'Gb'")
    assert "reference workload" not in err
    assert "(Gb is gigabits; for bytes write GB)" in err


def test_a_file_typo_is_still_blamed_on_the_file(cli, tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(LESSON.read_text().replace("micro_batch_size", "micro_bach_size"))
    code, _, err = cli("estimate", str(path), "--set", "supply.count=8")
    assert code == 2 and f"{path}: strategy.micro_bach_size: unknown field" in err


def test_sensitivity_takes_set_quantity_format_and_output(cli, tmp_path):
    code, out, _ = cli("sensitivity", str(LESSON), "--set", "supply.count=8", "-q", "run_seconds", "-f", "json")
    assert code == 0
    data = json.loads(out)
    assert data["quantity"] == "run_seconds" and data["value"] == pytest.approx(15625.0)  # 4 → 8 accelerators
    target = tmp_path / "tornado.md"
    code, _, err = cli("sensitivity", str(LESSON), "-q", "planned_device_bytes", "-f", "markdown", "--units",
                       "binary", "-o", str(target))
    assert code == 0 and f"wrote {target}" in err
    text = target.read_text()
    assert text.startswith("`planned_device_bytes` = 23.5 GiB")
    assert "| assumption | low | high |" in text


def test_o_is_a_file_and_a_quantity_there_is_refused(cli):
    code, out, err = cli("sensitivity", str(LESSON), "-o", "run_seconds")
    assert code == 2 and out == ""
    assert "-o/--output: 'run_seconds' is a quantity; name quantities with -q/--quantity" in err


def test_sensitivity_suggests_a_quantity_by_its_unit_word(cli):
    code, _, err = cli("sensitivity", str(LESSON), "-q", "run_time")
    assert code == 2 and "--quantity: 'run_time' is not a quantity of this contract; did you mean 'run_seconds'?" in err


def test_search_markdown_prints_markdown(cli):
    pytest.importorskip("numpy")
    code, out, _ = cli("search", str(SEARCH), "--top", "2", "-f", "markdown")
    assert code == 0
    lines = out.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert table[0].startswith("| rank | layout | micro-batch |")
    assert table[1].startswith("|---|")
    assert len(table) == 4 and table[2].startswith("| 1 | TP ")
    assert "`botec estimate " in table[2]


def test_search_takes_set(cli):
    pytest.importorskip("numpy")
    code, _, err = cli("search", str(SEARCH), "--set", "strategy.micro_bach_size=2")
    assert code == 2 and "--set strategy.micro_bach_size=2: unknown field" in err


def test_solve_takes_set(cli):
    pytest.importorskip("numpy")
    code, out, _ = cli("solve", "--minimize", "supply.count", "--subject-to", "run_seconds <= 4 h",
                       "--set", "workload.tokens=2B")
    assert code == 0
    assert out.startswith("supply.count = 18 ")  # twice the tokens of the reference (9 at 1B)


def test_sweep_csv_dash_is_stdout(cli, tmp_path, monkeypatch):
    pytest.importorskip("numpy")
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("sweep", str(LESSON), "--set", "supply.count=4,8", "-q", "run_seconds", "--csv", "-")
    assert code == 0
    assert not (tmp_path / "-").exists()
    assert "supply.count,run_seconds,fits,fits_device\n4,31250,True,True\n8,15625,True,True" in out.replace("\r\n", "\n")


def test_sweep_format_csv_and_output_file(cli, tmp_path):
    pytest.importorskip("numpy")
    target = tmp_path / "sweep.csv"
    code, out, _ = cli("sweep", str(LESSON), "--set", "supply.count=4,8", "-q", "run_seconds", "-f", "csv",
                       "-o", str(target))
    assert code == 0 and out == ""
    assert target.read_text().splitlines() == ["supply.count,run_seconds,fits,fits_device",
                                               "4,31250,True,True", "8,15625,True,True"]


def test_estimate_output_dash_is_stdout(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("estimate", "-f", "json", "-o", "-")
    assert code == 0 and not (tmp_path / "-").exists()
    assert _value(out, "run_seconds") == 31250.0


def test_accelerator_did_you_mean_ignores_case_and_matches_prefixes(cli):
    code, _, err = cli("estimate", "--set", "supply.accelerator=H100")
    assert code == 2
    assert "unknown accelerator 'H100'; did you mean 'h100-sxm' or 'h100-pcie'?" in err
    code, _, err = cli("estimate", "--set", "supply.accelerator=H200")
    assert "did you mean 'h200'?" in err


def test_a_hugging_face_model_id_is_read_as_the_catalog_model(cli):
    example = EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml"
    code, out, err = cli("estimate", str(example), "-f", "json", "--set", "workload.model=meta-llama/Llama-3.1-8B")
    assert code == 0
    assert ("botec: note: workload.model: the Hugging Face id 'meta-llama/Llama-3.1-8B' read as the catalog model "
            "'llama-3.1-8b'") in err
    _, plain, _ = cli("estimate", str(example), "-f", "json")
    assert _value(out, "parameters") == _value(plain, "parameters") == pytest.approx(8.03e9, rel=0.01)


def test_explain_suggests_one_quantity_not_a_list(cli):
    code, _, err = cli("explain", "run_time")
    assert code == 2
    assert err.strip() == "botec: error: 'run_time' is not a quantity; did you mean 'run_seconds'?"
    code, _, err = cli("explain", "xyzzy")
    assert len(err) < 200 and "quantities here" in err


def test_units_lowercase_binary_prefix_and_bits_explained():
    from botec.units import UnitError, parse_quantity

    assert parse_quantity("32 gib", "bytes") == 32 * 2**30
    assert parse_quantity("32 GIB", "bytes") == 32 * 2**30
    with pytest.raises(UnitError, match=r"\(Gb is gigabits; for bytes write GB\)"):
        parse_quantity("32 Gb", "bytes")
    with pytest.raises(UnitError, match=r"\(Gib is gibibits; for bytes write GiB\)"):
        parse_quantity("32 Gib", "bytes")
    with pytest.raises(UnitError):
        parse_quantity("32 gb", "bytes")  # gigabits or gigabytes: refused, not guessed


def test_findings_follow_units_binary(cli):
    code, out, _ = cli("estimate", "--units", "binary")
    assert code == 0
    assert "✔ memory: fits: 23.5 GiB of 29.8 GiB planned, 6.35 GiB spare" in out
    code, out, _ = cli("estimate", "--units", "binary", "-f", "markdown")
    assert "fits: 23.5 GiB of 29.8 GiB planned" in out
    _, decimal, _ = cli("estimate")
    assert "fits: 25.2 GB of 32 GB planned" in decimal


def test_findings_come_before_the_tables(cli):
    _, out, _ = cli("estimate")
    assert out.index("Findings") < out.index("Inputs and assumptions")
    assert out.index("✔ memory: fits") < out.index("Inputs and assumptions")


def test_piped_estimate_wraps_each_finding_under_its_mark():
    """Piped, the report is at most 100 columns (issue 21): a finding's further lines hang 4 columns in."""
    env = dict(os.environ, COLUMNS="80")
    done = subprocess.run([sys.executable, "-m", "botec.cli", "estimate"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    start = lines.index("Findings")
    findings = lines[start + 1:lines.index("", start)]
    assert len(findings) >= 5 and max(map(len, findings)) <= 80
    assert all((line.startswith("  ") and line[2] in "·✔!✘") or line.startswith("      ") for line in findings)
    first = next(i for i, line in enumerate(findings) if "failures:" in line)
    failures = [findings[first]] + list(itertools.takewhile(lambda line: line.startswith("      "),
                                                            findings[first + 1:]))
    assert len(failures) > 1 and " ".join(" ".join(failures).split()).endswith("(34.9 accelerator-hours)")


def test_uncertainty_shows_only_what_varies(cli):
    pytest.importorskip("numpy")
    code, out, _ = cli("estimate", "--uncertainty", "--samples", "500")
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("  run_seconds: P10 ") for line in lines)
    assert not any(line.startswith("  parameters:") for line in lines)  # constant: left out
    left_out = next(line for line in lines if "quantities left out" in line)
    assert left_out.strip().endswith("quantities left out: the same at P10 and P90; -f json lists them)")
    assert int(left_out.strip()[1:].split()[0].replace(",", "")) > 100


@pytest.mark.parametrize("args, line", [
    (["sweep", "-x"], "botec: error: sweep: No such option: -x (`botec sweep -h` shows its usage)"),
    (["explain"], "botec: error: explain: Missing argument '[CONTRACT] QUANTITY'. (`botec explain -h` shows its usage)"),
    (["estimate", "--units", "gigs"], "botec: error: estimate: Invalid value for '--units': "),
    (["estimate", "--set"], "botec: error: estimate: Option '--set' requires an argument. "),
    (["estimat"], "botec: error: No such command 'estimat'. Did you mean 'estimate', 'simulate'? "
                  "(`botec -h` lists the commands)"),
])
def test_a_usage_error_is_one_line_not_a_box(cli, args, line):
    code, out, err = cli(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(line), err
    assert "╭" not in err and "Usage:" not in err


def test_help_is_still_the_full_help(cli):
    code, out, err = cli("explain", "--help")
    assert code == 0 and err == ""
    assert " explain [OPTIONS]" in out and "Show this message and exit." in out


def test_solve_prints_json_with_f(cli, tmp_path):
    code, out, _ = cli("solve", "--minimize", "supply.count", "--subject-to", "run_seconds <= 4 h", "-f", "json")
    assert code == 0
    solved = json.loads(out)
    assert solved["variable"] == "supply.count" and solved["value"] == 9  # a count, not 9.0
    assert solved["feasible"] == 1016 and solved["evaluated"] == 1024
    row = {r["name"]: r for r in solved["row"]}
    assert row["run_seconds"]["unit"] == "s" and row["run_seconds"]["value"] == pytest.approx(13888.89, rel=1e-4)
    path = tmp_path / "solved.json"
    code, _, _ = cli("solve", "--minimize", "supply.count", "--subject-to", "run_seconds <= 4 h", "-f", "json",
                     "-o", str(path))
    assert code == 0 and json.loads(path.read_text())["value"] == 9


def test_solve_back_solve_json(cli):
    code, out, _ = cli("solve", str(EXAMPLES / "llama2-70b-pretrain.yaml"), "--find", "assumptions.end_to_end_mfu",
                       "--given", "accelerator_hours=1.72M", "-f", "json")
    assert code == 0
    solved = json.loads(out)
    assert solved["find"] == "assumptions.end_to_end_mfu" and solved["value"] == pytest.approx(0.4348, abs=1e-4)
    assert solved["reached"] == pytest.approx(1.72e6) and solved["unit"] == "accelerator-hours"


def test_solve_refuses_markdown_in_one_line(cli):
    code, _, err = cli("solve", "--minimize", "supply.count", "-f", "markdown")
    assert code == 2 and err.startswith("botec: error: solve: Invalid value for '--format' / '-f'")


def test_report_format_by_f_or_by_the_file_name(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("report", "-f", "markdown", "-o", "-")
    assert code == 0 and out.startswith("# botec estimate: lesson-finetune-1b")
    code, _, _ = cli("report", "-f", "markdown")  # no -o: report.md, not Markdown in report.html
    assert code == 0 and (tmp_path / "report.md").read_text().startswith("# botec estimate: lesson-finetune-1b")
    assert not (tmp_path / "report.html").exists()
    code, _, _ = cli("report", "-f", "markdown", "-o", "notes.txt")
    assert code == 0 and (tmp_path / "notes.txt").read_text().startswith("# botec estimate")
    code, _, _ = cli("report", "-o", "by-name.md")
    assert code == 0 and (tmp_path / "by-name.md").read_text().startswith("# botec estimate")


def test_report_format_and_file_name_that_disagree_are_refused(cli, tmp_path):
    path = tmp_path / "review.html"
    code, out, err = cli("report", "-f", "markdown", "-o", str(path))
    assert code == 2 and out == "" and not path.exists()
    assert err.strip() == (f"botec: error: -f/--format markdown but -o/--output {str(path)!r} names html: "
                           "give the file a .md name, or leave -f out")


def test_calibrate_takes_set_and_keeps_it_in_the_calibrated_contract(cli, tmp_path):
    contract, bench = EXAMPLES / "serve-llama3.1-8b-h100.yaml", EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json"

    def tpot(*extra):
        code, out, _ = cli("calibrate", str(contract), str(bench), "-f", "json", *extra)
        assert code == 0
        return next(c for c in json.loads(out)["comparisons"] if c["name"] == "time_per_output_token_seconds")

    plain = tpot()
    path = tmp_path / "calibrated.yaml"
    slower = tpot("--set", "assumptions.step_overhead=500 us", "--set", "supply.pue=1.3", "-o", str(path))
    # vLLM's step overhead is 0.3 ms: stating 0.5 ms adds 0.2 ms to every decode step (one token per step), and the
    # longer steps hold more requests in flight, which lengthens the step a little more (the load's fixed point)
    assert 0.2e-3 <= slower["estimated"] - plain["estimated"] <= 0.3e-3
    text = path.read_text()
    assert "  pue: 1.3\n" in text and "  step_overhead: 500 us\n" in text


def test_calibrate_blames_a_bad_set(cli):
    code, _, err = cli("calibrate", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"),
                       str(EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json"), "--set", "supply.pue=hot")
    assert code == 2 and err.startswith("botec: error: --set supply.pue=hot: ")


def test_sweep_suggests_a_quantity(cli):
    code, out, err = cli("sweep", "--set", "supply.count=4,8", "-q", "run_time")
    assert code == 2 and out == ""
    assert err.strip() == "botec: error: --quantity: unknown quantity 'run_time'; did you mean 'run_seconds'?"


def test_a_training_misfit_follows_units_binary(cli):
    code, out, err = cli("estimate", "--set", "strategy.micro_batch_size=16", "--units", "binary")
    assert code == 2 and out == ""
    assert err.strip() == ("botec: error: strategy.micro_batch_size: 16 sequences per accelerator need 41 GiB planned "
                           "per accelerator, more than its 29.8 GiB; at most 7 fit; ZeRO-2 over 4 ranks frees 12.2 GiB "
                           "and fits (28.7 GiB planned)")
    _, _, decimal = cli("estimate", "--set", "strategy.micro_batch_size=16")
    assert "need 44 GB planned per accelerator, more than its 32 GB;" in decimal


def test_a_serving_misfit_follows_units_binary(cli):
    code, _, err = cli("estimate", str(EXAMPLES / "serve-llama3.1-8b-l4.yaml"), "--set", "workload.model=llama-3.1-70b",
                       "--units", "binary")
    assert code == 2
    assert err.strip() == ("botec: error: strategy.tensor_parallel: weights take 65.7 GiB per accelerator and the KV "
                           "cache of one request 120 MiB, beyond the 20.6 GiB usable (after the 1.4 GiB reserve): "
                           "raise tensor_parallel, quantize the weights or use a larger device")


def _piped(*args: str) -> str:
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-m", "botec.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_piped_tables_fit_100_columns_and_sources_are_details():
    lines = _piped("estimate").splitlines()
    assert max(map(len, lines)) <= 100                     # issue 21: no longer padded to the widest cell
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["failure_rate_per_accelerator_hour"])
    # the unit written once, beside the value (the range is in the value's unit), each number whole; no source line
    assert " ".join(" ".join(lines[row: row + 2]).split()) == (
        "failure_rate_per_accelerator_hour 2.7 × 10⁻⁵ 1.2 × 10⁻⁵ – assumed failures/accelerator-hour 0.00012")
    assert "Kokolis" not in "\n".join(lines)
    details = _piped("estimate", "--details").splitlines()
    assert max(map(len, details)) <= 100
    row = next(i for i, line in enumerate(details) if line.split()[:1] == ["failure_rate_per_accelerator_hour"])
    source = " ".join(" ".join(details[row + 1: row + 8]).split())
    assert "assumptions.failure_rate; default:" in source and "Kokolis et al. 2024" in source


def test_piped_sweep_headers_are_whole():
    out = _piped("sweep", "--set", "supply.count=4,8", "--set", "strategy.micro_batch_size=1,2")
    header = next(line for line in out.splitlines() if "count" in line).split()
    assert header == ["count", "micro_batch_size", "run_seconds", "planned_device_bytes", "step_seconds", "fits",
                      "fits_device"]


def test_a_range_writes_its_unit_once_and_leaves_room_for_the_names():
    """At 120 columns the inputs table kept 7 characters for the quantity names: both ends of the failure
    rate's range carried 'failures/accelerator-hour'. The unit is written once; an exponent stays with its
    number."""
    from botec.report import _shared_unit

    assert _shared_unit("1 × 10⁻⁵ failures/accelerator-hour", "6 × 10⁻⁵ failures/accelerator-hour") == \
        " failures/accelerator-hour"
    assert _shared_unit("1B parameters/s", "4.5B parameters/s") == " parameters/s"
    assert _shared_unit("900 MB", "1.2 GB") == "" and _shared_unit("0.2", "0.45") == ""
    env = {key: value for key, value in os.environ.items() if key != "LINES"} | {"COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "botec.cli", "estimate"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["quantity", "value"])
    assert lines[header].index("value") >= 30  # the names get their column, not 7 characters


def test_python_dash_m_botec_is_the_botec_command():
    """``python -m botec estimate`` prints what ``botec estimate`` prints (the lesson's 1B parameters on 4
    accelerators, its headline first), and a bad flag exits 2 with one line, as the command does."""
    run = subprocess.run([sys.executable, "-m", "botec", "estimate", str(LESSON), "-f", "json"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert _value(run.stdout, "parameters") == 1e9
    bad = subprocess.run([sys.executable, "-m", "botec", "estimate", "--no-such-flag"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--no-such-flag" in bad.stderr
