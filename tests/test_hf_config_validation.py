"""Issue 28 item 3: every key botec reads from a Hugging Face ``config.json`` is checked (type, range, finiteness)
and the relations botec's formulas need hold, each refusal one line naming the key, through `botec model` and
through `botec estimate` of a contract naming the config; a contract's own architecture fields keep the same
bounds (``botec.architecture.bounds``: one table). Reliability-3 D5 and D10 are reproduced as they were found,
and a seeded few hundred of the fuzz of ``benchmarks/fuzz_hf_config.py`` (which runs the whole thousand)."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest
import yaml

from conftest import EXAMPLES, LESSON, REPO, run_cli

from botec.architecture import from_hf_config, model_catalog
from botec.architecture.bounds import EXPERTS, HEADS, LAYERS, POSITIONS, VOCABULARY, WIDTH, shape_problem, whole_number
from botec.contract import parse_contract
from botec.errors import ContractError

HF = REPO / "tests" / "data" / "hf"
SERVING = EXAMPLES / "serve-llama3.1-8b-h100.yaml"

_spec = importlib.util.spec_from_file_location("fuzz_hf_config", REPO / "benchmarks" / "fuzz_hf_config.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def config_of(name: str, **changes) -> dict:
    """The shipped ``tests/data/hf/NAME/config.json`` with ``changes`` (None: the key removed)."""
    config = json.loads((HF / name / "config.json").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def write_config(tmp_path, config: dict, raw: dict | None = None):
    """``config`` as ``tmp_path/config.json`` (``raw``: key -> JSON text json.dumps cannot write)."""
    text = json.dumps(config)
    for key, value in (raw or {}).items():
        text = text.replace(json.dumps(config[key]), value, 1) if key in config else text
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    return path


def estimate_with(tmp_path, config_path, capsys, contract=SERVING):
    data = yaml.safe_load(contract.read_text(encoding="utf-8"))
    data["workload"]["model"] = {"config": config_path.name}
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return run_cli(["estimate", str(path), "-f", "json"], capsys)


def one_line(code, out, err) -> str:
    """The one error line of an exit 2, without its ``botec: error: `` prefix."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, (code, out, err)
    assert "internal error" not in err and "Traceback" not in err
    return lines[0].removeprefix("botec: error: ")


# --- reliability-3 D5 and D10, as found -----------------------------------------------------------------------

D5_D10 = [
    ({"num_attention_heads": "32"}, "num_attention_heads: expected a whole number from 1 to 100,000, got '32'"),
    ({"num_hidden_layers": -1}, "num_hidden_layers: expected a whole number from 1 to 100,000, got -1"),
    ({"hidden_size": 1e308}, "hidden_size: expected a whole number from 1 to 10,000,000, got 1e+308"),
    ({"num_hidden_layers": 10**30}, f"num_hidden_layers: expected a whole number from 1 to 100,000, got {10**30}"),
    ({"intermediate_size": 0.5}, "intermediate_size: expected a whole number from 1 to 10,000,000, got 0.5"),
]


@pytest.mark.parametrize("changes, expected", D5_D10, ids=["D5-string-heads", "D10-negative-layers",
                                                           "D10-1e308-width", "D10-1e30-layers", "D10-half-ffn"])
def test_the_defects_are_one_line_in_model_and_in_estimate(changes, expected, tmp_path, capsys):
    path = write_config(tmp_path, config_of("llama-3.1-8b", **changes))
    assert one_line(*run_cli(["model", str(path), "-f", "json"], capsys)) == f"{path}: {expected}"
    assert one_line(*estimate_with(tmp_path, path, capsys)) == f"workload.model.config: {expected}"


def test_the_unchanged_config_gives_the_published_count_in_both(tmp_path, capsys):
    """The attacks above edit a config that works: Llama 3.1 8B, 8,030,261,248 parameters."""
    path = write_config(tmp_path, config_of("llama-3.1-8b"))
    code, out, err = run_cli(["model", str(path), "-f", "json"], capsys)
    assert code == 0 and json.loads(out)["total"] == 8_030_261_248, err
    code, out, err = estimate_with(tmp_path, path, capsys)
    assert code == 0, err
    parameters = next(q for q in json.loads(out)["quantities"] if q["name"] == "parameters")
    assert parameters["value"] == 8_030_261_248


# --- every key of every family ----------------------------------------------------------------------------------

COMMON = {"num_hidden_layers": LAYERS, "hidden_size": WIDTH, "num_attention_heads": HEADS,
          "num_key_value_heads": HEADS, "vocab_size": VOCABULARY, "max_position_embeddings": POSITIONS,
          "intermediate_size": WIDTH}
LLAMA = COMMON | {"head_dim": WIDTH, "sliding_window": POSITIONS}
FLAGS_LLAMA = ("tie_word_embeddings", "attention_bias", "mlp_bias")
# family config -> (whole-number keys and their bounds, true/false keys, string keys): what botec reads of it
READ = {
    "llama-3.1-8b": (LLAMA, FLAGS_LLAMA, ("_name_or_path",)),
    "mistral-7b": (LLAMA, FLAGS_LLAMA, ()),
    "qwen2.5-7b": (LLAMA, ("tie_word_embeddings", "use_sliding_window", "mlp_bias"), ()),
    "mixtral-8x7b": (LLAMA | {"num_local_experts": EXPERTS, "num_experts_per_tok": EXPERTS}, FLAGS_LLAMA, ()),
    "pythia-160m": (COMMON, ("tie_word_embeddings", "attention_bias"), ()),
    "gpt2": ({"n_layer": LAYERS, "n_embd": WIDTH, "n_head": HEADS, "n_positions": POSITIONS, "n_inner": WIDTH,
              "vocab_size": VOCABULARY}, ("tie_word_embeddings",), ()),
    "deepseek-v3": (COMMON | {"n_routed_experts": EXPERTS, "num_experts_per_tok": EXPERTS,
                              "moe_intermediate_size": WIDTH, "n_shared_experts": EXPERTS.from_zero,
                              "first_k_dense_replace": LAYERS.from_zero, "moe_layer_freq": LAYERS,
                              "q_lora_rank": WIDTH, "kv_lora_rank": WIDTH, "qk_nope_head_dim": WIDTH,
                              "qk_rope_head_dim": WIDTH, "v_head_dim": WIDTH,
                              "num_nextn_predict_layers": LAYERS.from_zero},
                    ("tie_word_embeddings",), ("topk_method",)),
    "t5-v1_1-base": ({"num_layers": LAYERS, "num_decoder_layers": LAYERS, "num_heads": HEADS, "d_model": WIDTH,
                      "d_kv": WIDTH, "d_ff": WIDTH, "vocab_size": VOCABULARY,
                      "relative_attention_num_buckets": POSITIONS},
                     ("is_encoder_decoder", "tie_word_embeddings"), ("feed_forward_proj",)),
    "mt5-base": ({"num_layers": LAYERS, "d_model": WIDTH, "vocab_size": VOCABULARY}, (), ()),
}
WHOLE = [(name, key, bound) for name, (keys, _, _) in READ.items() for key, bound in keys.items()]


def refusal(config: dict) -> tuple[str | None, str]:
    with pytest.raises(ContractError) as caught:
        from_hf_config(config)
    return caught.value.field, caught.value.detail


@pytest.mark.parametrize("name, key, bound", WHOLE, ids=[f"{name}-{key}" for name, key, _ in WHOLE])
def test_every_whole_number_key_is_checked_against_its_bound(name, key, bound):
    """Past either end of its bound, a string of a number, a bool, a fraction, infinity: each refused naming the
    key and the bound; at both ends, the config is read (a bound that refused its own ends would fail here)."""
    for bad in (bound.least - 1, bound.most + 1, "32", True, 2.5, float("inf"), [8]):
        assert refusal(config_of(name, **{key: bad})) == (key, f"expected {bound.expected}, got {bad!r}")
    for edge in (bound.least, bound.most):   # within the bound: only a relation may refuse an end (8 heads of 1)
        try:
            from_hf_config(config_of(name, **{key: edge}))
        except ContractError as error:
            assert "expected a whole number" not in error.detail, error


def test_the_keys_the_fuzz_mutates_are_the_keys_botec_reads():
    read = {key for keys, flags, texts in READ.values() for key in (*keys, *flags, *texts)} | {"model_type"}
    assert set(fuzz.READ_KEYS) == read


@pytest.mark.parametrize("name, key", [(name, key) for name, (_, flags, _) in READ.items() for key in flags])
def test_every_flag_is_true_or_false(name, key):
    assert refusal(config_of(name, **{key: "false"})) == (key, "expected true or false, got 'false'")
    assert refusal(config_of(name, **{key: 0})) == (key, "expected true or false, got 0")


@pytest.mark.parametrize("name, key", [(name, key) for name, (_, _, texts) in READ.items() for key in texts])
def test_every_string_key_is_a_string(name, key):
    assert refusal(config_of(name, **{key: 5})) == (key, "expected a string, got 5")


def test_a_t5_projection_is_an_activation():
    assert refusal(config_of("t5-v1_1-base", feed_forward_proj="gated-gelu; rm"))[0] == "feed_forward_proj"


@pytest.mark.parametrize("name, changes, key, expected", [
    ("llama-3.1-8b", {"num_key_value_heads": 3}, "num_key_value_heads",
     "expected key/value heads that divide the 32 attention heads (each serves a whole group of query heads), got 3"),
    ("llama-3.1-8b", {"num_key_value_heads": 64}, "num_key_value_heads",
     "expected key/value heads that divide the 32 attention heads (each serves a whole group of query heads), got 64"),
    ("llama-2-7b", {"num_attention_heads": 3, "num_key_value_heads": 3}, "num_attention_heads",
     "expected heads that divide the hidden size 4,096 (no head width is stated: d = h / a), got 3"),
    ("gpt2", {"n_head": 7}, "n_head", "expected heads that divide the hidden size 768 (no head width is stated: "
                                      "d = h / a), got 7"),
    ("mixtral-8x7b", {"num_experts_per_tok": 9}, "num_experts_per_tok", "expected at most the 8 experts, got 9"),
    ("deepseek-v3", {"first_k_dense_replace": 62}, "first_k_dense_replace", "expected at most the 61 layers, got 62"),
])
def test_the_relations_the_formulas_need(name, changes, key, expected):
    assert refusal(config_of(name, **changes)) == (key, expected)


def test_a_stated_head_width_frees_the_heads_from_dividing_the_hidden_size():
    """Gemma-style: 3 heads of 128 on a hidden size of 4,096 is a shape (Q is 4,096 × 384)."""
    arch = from_hf_config(config_of("llama-2-7b", num_attention_heads=3, num_key_value_heads=1, head_dim=128))
    assert (arch.attention_heads, arch.kv_heads, arch.resolved_head_dim) == (3, 1, 128)


def test_null_is_absent_and_takes_the_default():
    arch = from_hf_config(config_of("llama-2-7b", num_key_value_heads=None) | {"sliding_window": None,
                                                                               "tie_word_embeddings": None})
    assert (arch.kv_heads, arch.sliding_window, arch.tied_embeddings) == (32, None, False)
    with pytest.raises(ContractError, match="config.json has no 'hidden_size', which a llama model needs"):
        from_hf_config(config_of("llama-2-7b") | {"hidden_size": None})


def test_a_config_that_is_no_object_and_a_family_that_is_a_list(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]", encoding="utf-8")
    assert one_line(*run_cli(["model", str(path)], capsys)) == f"{path}: a config.json is a JSON object"
    assert refusal(config_of("llama-2-7b", model_type=["llama"]))[0] == "model_type"


# --- one table: a contract's architecture fields have the config's bounds and relations -------------------------

ARCHITECTURE = {"layers": 4, "hidden_size": 512, "attention_heads": 8, "kv_heads": 8, "ffn_size": 1024,
                "vocab_size": 1000, "moe": {"experts": 8, "experts_per_token": 2, "expert_ffn_size": 256}}
SAME_THING = [   # (contract field, config key of the same thing, the bound both use)
    ("attention_heads", "num_attention_heads", HEADS), ("ffn_size", "intermediate_size", WIDTH),
    ("vocab_size", "vocab_size", VOCABULARY), ("moe.experts", "num_local_experts", EXPERTS),
    ("moe.expert_ffn_size", "intermediate_size", WIDTH),
]


def contract_refusal(**fields) -> tuple[str, str]:
    data = yaml.safe_load(LESSON.read_text(encoding="utf-8"))
    model = copy.deepcopy(ARCHITECTURE)
    for path, value in fields.items():
        *parents, leaf = path.split("__")
        section = model
        for part in parents:
            section = section[part]
        section[leaf] = value
    data["workload"]["model"] = model
    with pytest.raises(ContractError) as caught:
        parse_contract(data)
    return caught.value.field, caught.value.detail


@pytest.mark.parametrize("field, key, bound", SAME_THING, ids=[field for field, _, _ in SAME_THING])
def test_a_contract_field_and_its_config_key_refuse_the_same_values_in_the_same_words(field, key, bound):
    too_many = bound.most + 1
    expected = f"expected {bound.expected}, got {too_many}"
    assert contract_refusal(**{field.replace(".", "__"): too_many}) == (f"workload.model.{field}", expected)
    assert refusal(config_of("mixtral-8x7b", **{key: too_many})) == (key, expected)


@pytest.mark.parametrize("fields, field, expected", [
    ({"kv_heads": 3}, "kv_heads", "expected key/value heads that divide the 8 attention heads (each serves a whole "
                                  "group of query heads), got 3"),
    ({"hidden_size": 500}, "attention_heads", "expected heads that divide the hidden size 500 (no head width is "
                                              "stated: d = h / a), got 8"),
    ({"moe__experts_per_token": 9}, "moe.experts_per_token", "expected at most the 8 experts, got 9"),
    ({"moe__first_dense_layers": 5}, "moe.first_dense_layers", "expected at most the 4 layers, got 5"),
    ({"attention_heads": True}, "attention_heads", "expected a whole number from 1 to 100,000, got True"),
    ({"layers": 10**17}, "layers", "value must be a whole number at least 1 and at most 100000, got "
                                   "100000000000000000"),
])
def test_a_contract_architecture_is_held_to_the_same_relations(fields, field, expected):
    """Each was accepted before (10^17 MoE layers then listed its layers one by one, without end)."""
    assert contract_refusal(**fields) == (f"workload.model.{field}", expected)


def test_a_contract_count_may_still_be_quoted():
    data = yaml.safe_load(LESSON.read_text(encoding="utf-8"))
    data["workload"]["model"] = ARCHITECTURE | {"attention_heads": "8", "vocab_size": 1000.0}
    model = parse_contract(data).workload.model
    assert (model.attention_heads, model.vocab_size) == (8, 1000)


@pytest.mark.parametrize("key", sorted(model_catalog()))
def test_every_catalog_model_keeps_the_bounds_and_relations(key):
    """The catalog's shapes are shapes a contract and a config.json may write."""
    arch = model_catalog()[key]
    for value, bound in ((arch.layers, LAYERS), (arch.hidden_size, WIDTH), (arch.attention_heads, HEADS),
                         (arch.kv_heads, HEADS), (arch.ffn_size, WIDTH), (arch.vocab_size, VOCABULARY)):
        assert whole_number(value, bound) == value
    moe = arch.moe
    assert shape_problem(arch.hidden_size, arch.attention_heads, arch.kv_heads, arch.head_dim, arch.layers,
                         moe and moe.experts, moe and moe.experts_per_token, moe.first_dense_layers if moe else 0,
                         arch.mla is not None) is None


@pytest.mark.parametrize("layers, dense, every, expected", [(61, 3, 1, 58), (10, 1, 2, 5), (10, 0, 3, 4),
                                                            (4, 4, 1, 0), (100_000, 0, 1, 100_000)])
def test_moe_layers_are_counted_not_listed(layers, dense, every, expected):
    """⌈(L − k) / n⌉: DeepSeek-V3's 61 layers less 3 dense are 58; 10 layers after 1 dense, every 2nd: 1, 3, 5, 7,
    9; 10 layers every 3rd: 0, 3, 6, 9."""
    from botec.architecture import Architecture, MoE

    arch = Architecture("x", "custom", layers, 64, 1, 1, 64, 8, moe=MoE(2, 1, 8, first_dense_layers=dense,
                                                                         layer_frequency=every))
    assert arch.moe_layers == expected


# --- the fuzz: a seeded few hundred in the test, the thousand in benchmarks/fuzz_hf_config.py -----------------

def test_the_problem_finder_finds_each_problem():
    """The fuzz's check can fail: an internal error, two lines, NaN, infinity and a negative count."""
    assert fuzz.problem_of(1, "", "botec: internal error: TypeError: x\n").startswith("exit 1")
    assert fuzz.problem_of(2, "", "botec: error: a\nb\n").startswith("exit 2 in 2 lines")
    assert fuzz.problem_of(0, '{"total": NaN}', "") == "exit 0 with NaN or infinity"
    assert fuzz.problem_of(0, '{"a": [1, -Infinity]}', "") == "exit 0 with NaN or infinity"
    assert fuzz.problem_of(0, '{"parameters": {"attention": -41943040}}', "", counts=True).endswith("D10)")
    assert fuzz.problem_of(0, '{"headroom": -1.5}', "") is None and fuzz.problem_of(2, "", "botec: error: x\n") is None


def test_200_fuzzed_configs_give_no_internal_error_and_no_non_finite_output(tmp_path):
    results = fuzz.fuzz(200, seed=2028, folder=tmp_path)
    for half in ("model", "estimate"):
        assert results[half]["problems"] == [], results[half]["problems"][:5]
        exits = results[half]["exits"]
        assert set(exits) == {0, 2} and sum(exits.values()) == 200 and exits[0] >= 10, exits
