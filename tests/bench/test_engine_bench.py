"""The engine benchmark: one JSON object, baseline first, tuple-hops counted from the run, input errors."""

import argparse
import json

import pytest

from bench import engine
from peers.local import run_local
from sharing import make_plan
from topologies import workload
from topologies.errors import InputError
from topologies.loader import load_scenario

FIGURE1 = "topologies/figure1.yaml"


def _args(**overrides) -> argparse.Namespace:
    values = {"scenario": FIGURE1, "strategy": ["ideal", "data-shipping"], "window": 1.0, "json": True}
    return argparse.Namespace(**(values | overrides))


def test_json_rows_start_with_the_baseline_and_count_tuple_hops(capsys):
    assert engine.main(_args()) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == {"scenario": FIGURE1, "window": 1.0, "baseline": "data-shipping"}
    assert [r["strategy"] for r in out["strategies"]] == ["data-shipping", "ideal"]
    assert out["strategies"][0]["ratio_to_baseline"] == 1.0
    scenario = load_scenario(FIGURE1)
    for row in out["strategies"]:
        run = run_local(scenario, make_plan(scenario, row["strategy"]))
        uploads = sum(workload.tuple_count(s, scenario.duration) for s in scenario.streams)
        assert row["tuple_hops"] == run.backbone_tuples + uploads + sum(len(v) for v in run.delivered.values())
        assert row["epochs"] == len(make_plan(scenario, row["strategy"]).epochs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"strategy": ["teleport"]}, "teleport"), ({"window": 0.0}, "--window")],
)
def test_bad_arguments_are_input_errors(overrides, message):
    with pytest.raises(InputError, match=message):
        engine.main(_args(**overrides))
