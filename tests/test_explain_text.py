"""`botec explain` reads as text (issue 14): worded formulas carry a legend of their symbols, a worded formula is
not printed twice, and choices show as the words the contract uses, not their numeric encodings."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, LESSON

SERVING = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
FULL_RECOMPUTE = EXAMPLES / "gpt3-175b-search.yaml"


@pytest.fixture(scope="module")
def serving():
    from botec.estimation import estimate_file

    return estimate_file(SERVING)


def _chain(result, name: str) -> list[str]:
    return result.explain(name).splitlines()


def test_a_worded_serving_formula_has_a_legend_of_its_symbols_under_it(serving):
    lines = _chain(serving, "time_to_first_token_seconds")
    assert lines[0].startswith("time_to_first_token_seconds = ρ·S·(1 + c²) / (2(1 − ρ)) + (1 − e^(−B))·t₀/2 + S + o:")
    assert lines[0].endswith(f" = {serving.quantities['time_to_first_token_seconds'].formatted()}")   # its value
    assert lines[1] == ("    where ρ = the prompt queue's utilization (requests_per_s_on_a_replica × S), "
                        "S = a prompt's prefill, its chunks through the pipeline_parallel stages, "
                        "c² = prompt_length_variation, B = decode_batch_size, "
                        "t₀ = the decode step in progress (B requests, no chunk), o = request_overhead_seconds")
    assert lines.count(lines[1]) == 1  # once, under its own formula


def test_every_legend_names_quantities_of_the_formula_or_says_what_it_is():
    """A legend entry is a name the formula reads or a few words; never a name the graph does not know."""
    import importlib
    import re

    from botec.graph.engine import Formulas

    from botec.serving import SERVING
    from botec.training import TRAINING

    known = set(SERVING.definitions()) | set(TRAINING.definitions())
    seen = 0
    for module in ("botec.serving.latency", "botec.training.goodput", "botec.training.memory", "botec.training.ops",
                   "botec.training.network", "botec.training.adapters"):
        for part in vars(importlib.import_module(module)).values():
            if not isinstance(part, Formulas):
                continue
            for definition in part.definitions:
                for symbol, meaning in definition.symbols:
                    seen += 1
                    assert symbol.split(",")[0].split("·")[0] in definition.expression, (definition.name, symbol)
                    if re.fullmatch(r"[a-z_]+", meaning):  # a bare name: a quantity of the graph
                        assert meaning in known, (definition.name, meaning)
    assert seen >= 60


def test_training_worded_formulas_say_what_their_letters_are():
    from botec.estimation import estimate_file

    lines = estimate_file(FULL_RECOMPUTE).explain("step_seconds").splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("attention_projection_seconds = "))
    assert lines[at + 1].strip() == ("where T = microbatch_tokens, h = hidden_size, "
                                     "qkv weights = attention_projection_parameters_per_layer, "
                                     "a·d_v = attention_output_parameters_per_layer / hidden_size, t = tensor_parallel, "
                                     "e_mm = matmul_efficiency, peak = peak_flops_per_s, "
                                     "e_mem = memory_bandwidth_efficiency, BW = memory_bandwidth_bytes_per_s, "
                                     "t0 = kernel_overhead_seconds")


def test_a_worded_formula_is_printed_once_then_its_value(serving):
    line = _chain(serving, "time_per_output_token_seconds")[0]
    assert line == ("time_per_output_token_seconds = pipeline_parallel × ((1 − ρ) × step without a prefill chunk + "
                    "ρ × step with one) / tokens_per_step, ρ the share of steps carrying a chunk = "
                    f"{serving.quantities['time_per_output_token_seconds'].formatted()}")
    assert line.count("step without a prefill chunk") == 1


def test_a_formula_with_few_words_still_shows_its_values(serving):
    line = _chain(serving, "fixed_seconds_per_step")[0]
    # the H100's measured tables price the 4 weight GEMMs and the decode-attention kernel with their kernels' time
    # in: (4 × 32 + 2) × 3 µs + 300 µs = 690 µs (9 kernels a layer on the roofline gave 1.17 ms); n_table = 5 is
    # named in the symbols
    assert " × 32 + 2) × 3 µs + 300 µs = 690 µs" in line and "((9 − n_table) × " in line   # TP 1: no all-reduce


def test_recompute_shows_as_its_word_in_substitutions_and_inputs():
    from botec.estimation import estimate_file

    lines = estimate_file(FULL_RECOMPUTE).explain("layer_recompute_seconds").splitlines()
    assert " = 100 % × 4.21 ms if full = full (per layer, averaged over the 96);" in lines[0]
    assert "if 2 = full" not in lines[0]
    assert lines[1] == "  recompute = full  [assumed, strategy.recompute]"


def test_a_zero_by_a_choice_says_the_choice_by_name():
    from botec.estimation import estimate_file

    result = estimate_file(LESSON)
    text = result.explain("full_recompute_share")
    assert text.splitlines()[0] == "full_recompute_share = 0 %  [as recompute = none]"
    assert "recompute < 2" not in result.explain("rematerialized_layer_bytes")


def test_a_branch_condition_on_a_choice_reads_as_its_word():
    from botec.graph.engine import Definition, Quantity
    from botec.graph.explain import taken_branch

    recompute = Quantity(Definition("recompute", "compute", "1", "recomputation", labels=("none", "selective", "full")),
                         1.0, "assumed")
    conditions: list[str] = []
    assert taken_branch("a if recompute ≥ 1 else b", {"recompute": recompute}, conditions) == "a"
    assert conditions == ["recompute = selective"]
