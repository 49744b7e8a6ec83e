"""String (categorical) attributes: declared with their values or read from a replayed CSV's text column,
queried with =, != and IN on quoted texts, carried as 8-byte codes; every strategy's deliveries equal a
plain evaluation over the texts themselves."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

import streamglobe as sg
from matcher import QueryError
from matcher.parser import parse_query
from topologies.errors import ScenarioError
from topologies.loader import load_scenario
from topologies.schema import json_schema
from topologies.workload import columns, tuple_count

QUERIES = {
    "Q1": ("SELECT proto, bytes FROM flows WHERE proto = 'dns'", lambda r: r["proto"] == "dns"),
    "Q2": (
        "SELECT * FROM flows WHERE proto IN ('http', 'https') AND bytes > 500",
        lambda r: r["proto"] in ("http", "https") and r["bytes"] > 500,
    ),
    "Q3": (
        "SELECT bytes FROM flows WHERE proto != 'ssh' AND NOT site IN ('it''s', 'Zürich')",
        lambda r: r["proto"] != "ssh" and r["site"] not in ("it's", "Zürich"),
    ),
    "Q4": ("SELECT site FROM flows WHERE proto = 'gopher' OR site <> 'Paris'", lambda r: r["site"] != "Paris"),
}


def doc(tmp_path) -> dict:
    (tmp_path / "sites.csv").write_text("site,load\nParis,3\nit's,4\nZürich,5\nParis,6\nBern,1\n")
    return {
        "name": "texts",
        "seed": 4,
        "duration": 10,
        "network": {"super_peers": ["A", "B", "C"], "links": [["A", "B", {"latency": "1ms"}], ["B", "C"]]},
        "thin_peers": [{"id": f"P{k}", "attach": sp} for k, sp in enumerate("ABCC")],
        "streams": [
            {
                "id": "flows",
                "source": "P0",
                "rate": 50,
                "schema": {
                    "proto": {
                        "type": "string",
                        "distribution": {"choice": {"values": ["http", "https", "dns", "ssh"], "weights": [4, 3, 2, 1]}},  # noqa: E501
                    },
                    "bytes": {"type": "int", "distribution": {"uniform": [40, 1500]}},
                    "site": {"type": "string", "distribution": {"choice": ["Paris", "it's", "Zürich"]}},
                },
            },
            {"id": "sites", "source": "P1", "rate": 0.5, "replay": "sites.csv"},
        ],
        "subscriptions": [
            {"id": sub, "peer": f"P{1 + k % 3}", "at": k, "query": text}
            for k, (sub, (text, _)) in enumerate(QUERIES.items())
        ] + [{"id": "Q5", "peer": "P2", "at": 0, "query": "SELECT load FROM sites WHERE site IN ('Paris', 'Bern')"}],
    }  # fmt: skip


@pytest.fixture
def scenario(tmp_path):
    document = doc(tmp_path)
    jsonschema.Draft202012Validator(json_schema()).validate(document)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))
    return load_scenario(str(tmp_path / "s.yaml"))


def texts_of(scenario, stream_id: str) -> list[dict]:
    """Every tuple of the stream with its texts decoded: what a plain evaluation reads."""
    stream = scenario.stream(stream_id)
    values = columns(scenario, stream_id, 0, tuple_count(stream, scenario.duration))
    rows = []
    for k in range(len(next(iter(values.values())))):
        row = {}
        for a in stream.attributes:
            row[a.name] = a.values[int(values[a.name][k])] if a.type == "string" else float(values[a.name][k])
        rows.append(row)
    return rows


def test_declared_and_replayed_texts_become_codes(scenario):
    flows, sites = scenario.stream("flows"), scenario.stream("sites")
    assert flows.texts == {"proto": ("http", "https", "dns", "ssh"), "site": ("Paris", "it's", "Zürich")}
    assert sites.texts == {"site": ("Bern", "Paris", "Zürich", "it's")}  # a replayed column's: sorted
    assert columns(scenario, "sites", 0, 5)["site"].tolist() == [1.0, 3.0, 2.0, 1.0, 0.0]
    assert scenario.tuple_bytes(3) == 16 + 3 * 8  # a text travels as its 8-byte code, like a number
    assert scenario.subscription("Q1").query.where.to_text() == "proto = 2"  # plans keep the codes
    assert scenario.warnings == ()


@pytest.mark.parametrize("strategy", ["data-shipping", "query-shipping", "multicast", "ideal", "sharing-em"])
def test_every_strategy_delivers_what_a_plain_evaluation_of_the_texts_selects(scenario, strategy):
    run = sg.simulate(scenario, sg.plan(scenario, strategy))
    assert sg.check(scenario, run).exact
    rows = texts_of(scenario, "flows")
    times = [k / scenario.stream("flows").rate for k in range(len(rows))]
    for sub_id, (_, wanted) in QUERIES.items():
        sub = scenario.subscription(sub_id)
        plain = [k for k, r in enumerate(rows) if wanted(r) and times[k] >= sub.at]
        assert sorted(run.delivered[sub_id].tolist()) == plain and plain
    assert sorted(run.delivered["Q5"].tolist()) == [0, 3, 4]  # Paris, Paris, Bern


def test_a_query_comparing_text_wrongly_is_one_line(tmp_path):
    texts = {"proto": ("http", "dns")}
    for text, message in [
        ("SELECT * FROM s WHERE proto > 'a'", "text attribute 'proto' compares only with =, != and IN"),
        ("SELECT * FROM s WHERE proto BETWEEN 'a' AND 'b'", "text attribute 'proto' compares only with"),
        ("SELECT * FROM s WHERE proto = 3", "'proto' holds text: compare it with a quoted value such as 'abc'"),
        ("SELECT * FROM s WHERE n = 'dns'", "a quoted text compares only with a text attribute"),
        ("SELECT * FROM s WHERE proto = 'dns", "unterminated quoted text"),
    ]:
        with pytest.raises(QueryError, match=message):
            parse_query(text, lambda stream: texts)
    document = doc(tmp_path)
    document["subscriptions"] = [{"id": "Q", "peer": "P1", "at": 0, "query": "SELECT * FROM flows WHERE proto = 'ftp'"}]
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))
    warned = load_scenario(str(tmp_path / "w.yaml"))  # a text not among the values: nothing matches
    assert [w.split(": ", 2)[2] for w in warned.warnings] == ["WHERE is always false; Q receives nothing"]
    document["streams"][0]["schema"]["proto"]["distribution"] = {"uniform": [0, 1]}
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))
    with pytest.raises(ScenarioError, match=r"proto\.distribution: a string attribute takes \{choice:"):
        load_scenario(str(tmp_path / "e.yaml"))


def test_generated_subscriptions_name_texts_and_parse(tmp_path):
    document = doc(tmp_path)
    document["subscriptions"] = [
        {"generate": {"count": 30, "streams": ["flows"], "predicate": {"attributes": ["proto", "bytes"], "cut": 1}}}
    ]
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(document, allow_unicode=True))
    scenario = load_scenario(str(tmp_path / "g.yaml"))
    assert all("proto IN ('" in s.query.text for s in scenario.subscriptions)
    assert any("site IN ('" in s.query.text for s in scenario.subscriptions)  # the cut on the other text
    assert sg.check(scenario, sg.simulate(scenario, sg.plan(scenario, "sharing-em"))).exact
