"""1,000 fuzzed Hugging Face ``config.json`` files through ``botec model CONFIG -f json`` and through ``botec
estimate`` of a contract naming the config (``workload.model.config``), in this process: every exit is 0 or 2,
every exit-2 message one line, no internal error, and no NaN or infinity in any JSON written (issue 28's "done
when"; reliability-3 D5 found 54 internal errors and 6 non-finite outputs in 400 such configs).

Each config is one of ``tests/data/hf/*/config.json`` (every supported family, an unsupported one and one with
missing keys) with one to three mutations (:func:`mutated_configs`, seeded): a key botec reads, or any other
key, set to a type swap or an edge value (:data:`HOSTILE_VALUES`: a string of a number, -1, 0, 0.5, 1e308,
10^30, 2^63, a 400- and a 5,000-digit integer, NaN, infinity, a bool, null, an object, a list), removed, or its
value scaled or turned into a fraction; the family swapped; now and then the whole file a list. The estimates
alternate between the lesson's training contract and the Llama 3.1 8B serving contract.

The figures printed: the commands run, their exits (0 and 2), the problems (none, or the first few), and the
CPU seconds of each half (``time.process_time``). ``tests/test_hf_config_validation.py`` runs a seeded few
hundred of the same; this script runs the whole thousand.

    .venv/bin/python benchmarks/fuzz_hf_config.py [--count 1000] [--seed 28]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "tests" / "data" / "hf").glob("*/config.json"))
CONTRACTS = (REPO / "examples" / "lesson-finetune-1b.yaml", REPO / "examples" / "serve-llama3.1-8b-h100.yaml")

# Every key botec reads of a config.json, of any family (botec.architecture.hf_config).
READ_KEYS = (
    "model_type", "_name_or_path", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "max_position_embeddings", "intermediate_size", "head_dim", "tie_word_embeddings",
    "attention_bias", "mlp_bias", "sliding_window", "use_sliding_window", "num_local_experts", "num_experts_per_tok",
    "n_layer", "n_embd", "n_head", "n_inner", "n_positions", "n_routed_experts", "moe_intermediate_size",
    "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "topk_method", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers", "is_encoder_decoder",
    "feed_forward_proj", "num_layers", "num_decoder_layers", "num_heads", "d_model", "d_kv", "d_ff",
    "relative_attention_num_buckets",
)
FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox", "deepseek_v3", "t5", "mt5", "mamba")

# Integers json.dumps cannot write (more than 4,300 digits) travel as a marker string, replaced in the text.
DIGITS_5000 = "@5000-digits@"
HOSTILE_VALUES = ("32", "abc", "", "1e3", -1, 0, 0.5, 1.5, 1e308, -1e308, math.nan, math.inf, -math.inf, 10**30,
                  2**63, 10**400, DIGITS_5000, True, False, None, {"a": 1}, {}, [1, 2], [], [[[]]])
DELETE = object()


def _mutate_value(value, rng: random.Random):
    """A value ``value`` could be turned into: hostile, derived from it, or removed (:data:`DELETE`)."""
    choice = rng.random()
    if choice < 0.55:
        return rng.choice(HOSTILE_VALUES)
    if choice < 0.65:
        return DELETE
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        derive = rng.choice([str, lambda v: v * 1000, lambda v: v * 10**6, lambda v: v + 0.5, lambda v: -v,
                             lambda v: v / 3, lambda v: v * 2 + 1])
        try:
            return derive(value)
        except (OverflowError, ValueError):   # 10^400 + 0.5, or a str() of more than 4,300 digits
            return value
    return rng.choice([str(value), [value], {"value": value}, 1])


def mutated_configs(count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (name, JSON text) pairs: a base config with one to three mutations each (see the module)."""
    rng = random.Random(seed)
    bases = [(path.parent.name, json.loads(path.read_text(encoding="utf-8"))) for path in CONFIGS]
    fuzzed = []
    for index in range(count):
        name, base = rng.choice(bases)
        config = dict(base)
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.06:
                config["model_type"] = rng.choice(FAMILIES)
                continue
            keys = [key for key in READ_KEYS if key in config] * 4 + list(config) + list(READ_KEYS)
            key = rng.choice(keys)
            value = _mutate_value(config.get(key), rng)
            if value is DELETE:
                config.pop(key, None)
            else:
                config[key] = value
        document = [config] if rng.random() < 0.01 else config
        text = json.dumps(document).replace(f'"{DIGITS_5000}"', "9" * 5000)
        fuzzed.append((f"{index:04d}-{name}", text))
    return fuzzed


def run_botec(args: list[str]) -> tuple[int, str, str]:
    """``botec ARGS`` through the real entry point, in this process: (exit code, stdout, stderr). The streams
    are UTF-8 and strict, as a terminal's are: a string that cannot be encoded fails here as it would there."""
    from botec.cli import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True) for _ in "oe")
    old_argv, sys.argv = sys.argv, ["botec", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = old_argv
    return code, out.buffer.getvalue().decode("utf-8"), err.buffer.getvalue().decode("utf-8")


def _numbers(value):
    """Every number in a parsed JSON value."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def _json_problem(text: str, counts: bool) -> str | None:
    """What is wrong with a command's JSON: not JSON, NaN or ±Infinity in it, or (``counts``: a model's shape and
    parameters, every one a count) a negative number; None when nothing is."""
    def refuse(constant):
        raise ValueError(constant)

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError as error:
        return f"exit 0 with {'NaN or infinity' if str(error) in ('NaN', 'Infinity', '-Infinity') else 'no JSON'}"
    if counts and any(number < 0 for number in _numbers(value)):
        return "exit 0 with a negative count (reliability-3 D10)"
    return None


def problem_of(code: int, out: str, err: str, counts: bool = False) -> str | None:
    """What is wrong with one command's result, or None: exit 0 with finite JSON (and no negative count, for
    ``counts``), or exit 2 with one line."""
    if code == 0:
        return _json_problem(out, counts)
    lines = [line for line in err.splitlines() if line.strip()]
    if code != 2:
        return f"exit {code}: {(lines or [''])[-1][:200]}"
    if len(lines) != 1 or "internal error" in err or "Traceback" in err:
        return f"exit 2 in {len(lines)} lines: {err[:200]!r}"
    return None


def contract_text(contract: Path, config: Path) -> str:
    """``contract``'s YAML with its model replaced by ``{config: CONFIG}`` (the only model line it has)."""
    import yaml

    data = yaml.safe_load(contract.read_text(encoding="utf-8"))
    data["workload"]["model"] = {"config": str(config)}
    return yaml.safe_dump(data, sort_keys=False)


def fuzz(count: int, seed: int, folder: Path) -> dict:
    """Run the fuzz in ``folder``: the results of each half (model, estimate): exits, problems, CPU seconds."""
    configs = mutated_configs(count, seed)
    paths = []
    for name, text in configs:
        path = folder / name / "config.json"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    results = {}
    for half in ("model", "estimate"):
        exits, problems = {}, []
        start = time.process_time()
        for index, path in enumerate(paths):
            if half == "model":
                args = ["model", str(path), "-f", "json"]
            else:
                contract = path.parent / "contract.yaml"
                contract.write_text(contract_text(CONTRACTS[index % 2], path), encoding="utf-8")
                args = ["estimate", str(contract), "-f", "json"]
            code, out, err = run_botec(args)
            exits[code] = exits.get(code, 0) + 1
            problem = problem_of(code, out, err, counts=half == "model")
            if problem is not None:
                problems.append(f"{path.parent.name}: {half}: {problem}")
        results[half] = {"exits": exits, "problems": problems, "cpu_seconds": time.process_time() - start}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="fuzzed configs (default 1,000)")
    parser.add_argument("--seed", type=int, default=28, help="the mutations' seed (default 28)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = fuzz(options.count, options.seed, Path(folder))
    failed = False
    for half, result in results.items():
        exits = ", ".join(f"{count:,} × exit {code}" for code, count in sorted(result["exits"].items()))
        print(f"{half:>8}: {options.count:,} configs, {exits}; {len(result['problems'])} problems; "
              f"{result['cpu_seconds']:.1f} CPU s ({1000 * result['cpu_seconds'] / options.count:.1f} ms each)")
        for problem in result["problems"][:10]:
            print(f"          {problem}")
        failed = failed or bool(result["problems"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
