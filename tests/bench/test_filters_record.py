"""The filters benchmark writes its record: results, parameters and machine facts, and a page beside them."""

import argparse
import json

from bench import filters


def test_record_holds_the_parameters_the_machine_and_every_workload(tmp_path, capsys):
    path = tmp_path / "results" / "filters.json"
    args = argparse.Namespace(
        tuples=4_096,
        batch=1_024,
        drift_every=1_000,
        period=1_000,
        threshold=0.0,
        seed=1,
        adaptive_tuples=8_192,
        repeats=1,
        workload=["cacq-20q", "agreedy"],
        record=str(path),
        json=True,
    )
    assert filters.main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    record = json.loads(path.read_text())
    assert record["benchmark"] == "filters" and record["parameters"]["adaptive_tuples"] == 8_192
    assert record["machine"]["cpus"] >= 1 and "load_average_before" in record["machine"]
    assert record["workloads"] == printed["workloads"] and record["agreedy"] == printed["agreedy"]
    page = path.with_suffix(".md").read_text()
    assert "| cacq-20q |" in page and "A-Greedy on correlated filters" in page
