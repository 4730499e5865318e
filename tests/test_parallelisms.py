"""The parallelism records name what exists: contract fields with descriptions, network groups, searched
fields and launch options; and every parallel degree of the contract has a record."""

from dataclasses import fields

from botec.contract.training import TrainingStrategy as Strategy
from botec.launch.options import MEGATRON, TORCHTITAN
from botec.layout import GROUPS, ModelFacts, candidates
from botec.layout.parallelisms import PARALLELISMS, Parallelism

TOOLS = {"megatron": MEGATRON, "torchtitan": TORCHTITAN}


def test_every_record_states_every_field():
    for record in PARALLELISMS:
        for f in fields(Parallelism):
            value = getattr(record, f.name)
            assert f.name in ("group", "search") or value, (record.field, f.name)
        assert record.short.isupper() and record.words


def test_each_record_names_a_described_contract_field():
    strategy_fields = Strategy.model_fields
    for record in PARALLELISMS:
        assert record.field in strategy_fields, record.field
        assert strategy_fields[record.field].description, record.field


def test_every_parallel_degree_of_the_contract_has_a_record():
    named = {r.field for r in PARALLELISMS}
    degrees = {name for name in Strategy.model_fields if name.endswith("_parallel")}
    assert degrees <= named, degrees - named


def test_groups_search_keys_and_launch_options_exist():
    model = ModelFacts("m", layers=8, attention_heads=8, kv_heads=8, experts=8, sequence_length=4096)
    searched = candidates(model, 64)
    assert len({r.short for r in PARALLELISMS}) == len(PARALLELISMS)
    for record in PARALLELISMS:
        assert record.group is None or record.group in GROUPS, record.group
        assert record.search is None or record.search in searched, record.search
        for tool, option in record.launch.items():
            assert option in TOOLS[tool]["options"] | TOOLS[tool].get("flags", set()), (tool, option)
