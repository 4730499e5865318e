"""strategy.framework / elementwise / loss are checked against catalog/stacks.yaml, not a restated list."""

from __future__ import annotations

from importlib import resources

import pytest

from botec.catalog import training_stacks
from botec.contract import parse_contract, read_contract_data
from botec.contract.training import TrainingStrategy
from botec.errors import ContractError


def _training_contract(**strategy) -> dict:
    data = read_contract_data(resources.files("botec.contracts").joinpath("lesson-finetune-1b.yaml"))
    data.setdefault("strategy", {}).update(strategy)
    return data


@pytest.mark.parametrize("field, table", [("framework", "stacks"), ("elementwise", "elementwise"), ("loss", "loss")])
def test_every_stacks_yaml_key_is_accepted_and_an_unknown_one_is_a_one_line_error(field, table):
    keys = list(getattr(training_stacks(), table))
    for key in keys:
        assert getattr(parse_contract(_training_contract(**{field: key})).strategy, field) == key
    with pytest.raises(ContractError) as caught:
        parse_contract(_training_contract(**{field: "no-such-key"}))
    message = str(caught.value)
    assert "\n" not in message and f"strategy.{field}" in message and ", ".join(keys) in message


def test_the_schema_lists_the_stacks_yaml_keys_as_an_enum():
    schema = TrainingStrategy.model_json_schema()["properties"]["framework"]
    assert schema["enum"] == [*training_stacks().stacks, None]
