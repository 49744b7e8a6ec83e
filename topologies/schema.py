"""JSON Schema (draft 2020-12) of scenario files, for editors (``python run.py schema``).

It mirrors :mod:`topologies.loader`: the same keys, types, units and ranges.  Checks that need the
whole document (ids that must exist, duplicates, a connected backbone, queries that parse, CSV files)
are the loader's alone.
"""

from __future__ import annotations

from dataclasses import fields

from matcher.text import KEYWORDS
from topologies import events_loader, generators, stream_generator, workload_generators
from topologies.loader import (
    LONGEST_RUN_S,
    MAX_CAPACITY,
    MAX_CPU,
    MAX_CPU_COST,
    MAX_HEADER_BYTES,
    MAX_ID_LENGTH,
    MAX_LENGTH_KM,
)
from topologies.model import CpuCosts
from topologies.units import MAX_BUFFER, NUMBER_PATTERN

_NUMBER_TEXT = NUMBER_PATTERN.replace("(?P<number>", "(?:")
BANDWIDTH = {
    "description": "bit/s, or a string with Kbit, Mbit or Gbit",
    "oneOf": [
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "string", "pattern": rf"^\s*{_NUMBER_TEXT}\s*[KkMmGg]?[Bb][Ii][Tt](/s)?\s*$"},
    ],
}
LATENCY = {
    "description": "seconds, or a string with s, ms or us",
    "oneOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": rf"^\s*{_NUMBER_TEXT}\s*(s|ms|us)\s*$"},
    ],
}
SIZE = {
    "description": "bytes, or a string with B, KB, MB, GB, KiB, MiB or GiB",
    "oneOf": [
        {"type": "number", "minimum": 1, "maximum": MAX_BUFFER},
        {"type": "string", "pattern": rf"^\s*{_NUMBER_TEXT}\s*([KkMmGg][Ii]?)?[Bb]\s*$"},
    ],
}
CAPACITY = {"description": "tuples per second", "type": "number", "exclusiveMinimum": 0, "maximum": MAX_CAPACITY}
CPU = {
    "description": "operations per second the super-peer's processor runs (default unlimited)",
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": MAX_CPU,
}
INPUT_BUFFER = {
    **SIZE,
    "description": f"bytes of tuples waiting for the processor (default unlimited); {SIZE['description']}",
}
_CPU_COST_MEANINGS = {
    "box": "operations per tuple tested per box of a reader's predicate",
    "projection": "operations per tuple a reader projects to fewer attributes than it receives",
    "aggregate": "operations per tuple folded into an aggregate's partial states",
    "record": "operations per record emitted",
}
CPU_COSTS = {
    "description": "operations a super-peer spends per step of its operators",
    "type": "object",
    "properties": {
        cost.name: {
            "description": f"{_CPU_COST_MEANINGS[cost.name]} (default {cost.default})",
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_CPU_COST,
        }
        for cost in fields(CpuCosts)
    },
    "additionalProperties": False,
}
PEER_ID = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": MAX_ID_LENGTH}
SUPER_PEER_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "maxLength": MAX_ID_LENGTH}
POSITION = {
    "description": "[longitude, latitude] in degrees",
    "type": "array",
    "prefixItems": [
        {"type": "number", "minimum": -180, "maximum": 180},
        {"type": "number", "minimum": -90, "maximum": 90},
    ],
    "minItems": 2,
    "maxItems": 2,
}
LENGTH = {"description": "km", "type": "number", "minimum": 0, "maximum": MAX_LENGTH_KM}
_ANY_CASE_KEYWORD = "|".join("".join(f"[{c}{c.lower()}]" for c in word) for word in sorted(KEYWORDS))
NAME = {
    "type": "string",
    "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
    "maxLength": MAX_ID_LENGTH,
    "not": {"pattern": f"^({_ANY_CASE_KEYWORD})$"},  # a reserved word of the query language, in any case
}
NUMBER = {"type": "number"}
LINK_OPTIONS = {
    "type": "object",
    "properties": {"bandwidth": BANDWIDTH, "latency": LATENCY, "buffer": SIZE, "length": LENGTH},
    "additionalProperties": False,
}
DEFAULTS = {
    "type": "object",
    "properties": {
        "bandwidth": BANDWIDTH,
        "latency": LATENCY,
        "buffer": SIZE,
        "capacity": CAPACITY,
        "cpu": CPU,
        "input_buffer": INPUT_BUFFER,
    },
    "additionalProperties": False,
}
SUPER_PEER = {
    "oneOf": [
        SUPER_PEER_ID,
        {
            "type": "object",
            "properties": {
                "id": SUPER_PEER_ID,
                "capacity": CAPACITY,
                "cpu": CPU,
                "input_buffer": INPUT_BUFFER,
                "pos": POSITION,
            },
            "required": ["id"],
            "additionalProperties": False,
        },
    ]
}
PARAMETER_KINDS = {
    "size": {"type": "integer", "minimum": 0},
    "seed": {"type": "integer", "minimum": 0},
    "probability": {"type": "number", "minimum": 0, "maximum": 1},
    "bandwidth": BANDWIDTH,
    "latency": LATENCY,
    "buffer": SIZE,
}


def _pair(minimum_second: float | None = None) -> dict:
    second = dict(NUMBER) if minimum_second is None else {"type": "number", "exclusiveMinimum": minimum_second}
    return {"type": "array", "prefixItems": [NUMBER, second], "minItems": 2, "maxItems": 2}


def _generate() -> dict:
    """One alternative per generator model, with exactly its parameters."""
    alternatives = []
    for model in sorted(generators.MODELS):
        params = generators.parameters(model)
        properties = {"model": {"const": model}}
        properties |= {name: PARAMETER_KINDS[generators.PARAMETER_KINDS[name]] for name in params}
        alternatives.append(
            {
                "type": "object",
                "properties": properties,
                "required": ["model", *(name for name, required in params.items() if required)],
                "additionalProperties": False,
            }
        )
    return {"oneOf": alternatives}


def _distribution() -> dict:
    # numbers, or a string attribute's texts
    choice_values = {"type": "array", "items": {"type": ["number", "string"]}, "minItems": 1}
    forms = {
        "uniform": _pair(),
        "normal": _pair(minimum_second=0),
        "choice": {
            "oneOf": [
                choice_values,
                {
                    "type": "object",
                    "properties": {"values": choice_values, "weights": {"type": "array", "items": NUMBER}},
                    "required": ["values"],
                    "additionalProperties": False,
                },
            ]
        },
    }
    return {
        "oneOf": [
            {"type": "object", "properties": {kind: form}, "required": [kind], "additionalProperties": False}
            for kind, form in forms.items()
        ]
    }


PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
COUNT = {"type": "integer", "minimum": 1, "maximum": workload_generators.MAX_GENERATED}
PREFIX = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "maxLength": MAX_ID_LENGTH - 7}


def _range(minimum: float, kind: str = "number") -> dict:
    """A number, or ``[lo, hi]``."""
    one = {"type": kind, "minimum": minimum}
    return {"oneOf": [one, {"type": "array", "items": one, "minItems": 2, "maxItems": 2}]}


def _object(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _generator(parameters: dict) -> dict:
    """A list entry ``{generate: {...}}`` with ``parameters``."""
    return _object({"generate": _object(parameters, ("count",))}, ("generate",))


WEIGHT = _object({"weight": {"type": "string", "minLength": 1}}, ("weight",))  # a node weight, by name


def _thin_peer_generator() -> dict:
    rules = {"enum": list(workload_generators.ATTACH_RULES)}
    return _generator(
        {
            "count": COUNT,
            "prefix": PREFIX,
            "attach": {"oneOf": [rules, WEIGHT, {"type": "array", "items": SUPER_PEER_ID, "minItems": 1}]},
            "seed": {"type": "integer", "minimum": 0},
            "bandwidth": BANDWIDTH,
            "latency": LATENCY,
        }
    )


def _stream_generator(stream: dict) -> dict:
    rules = {"enum": list(stream_generator.SOURCE_RULES)}
    parameters = {
        "count": COUNT,
        "prefix": {**NAME, "maxLength": MAX_ID_LENGTH - 7},
        "seed": {"type": "integer", "minimum": 0},
        "sources": {"oneOf": [rules, WEIGHT, {"type": "array", "items": PEER_ID, "minItems": 1}]},
        "rate": {"oneOf": [{"type": "number", "exclusiveMinimum": 0}, _range(0)["oneOf"][1]]},
        "schema": stream["properties"]["schema"],
        "replay": stream["properties"]["replay"],
    }
    inner = {**_object(parameters, ("count", "rate")), "oneOf": [{"required": ["schema"]}, {"required": ["replay"]}]}
    return _object({"generate": inner}, ("generate",))


def _subscription_generator() -> dict:
    models = {
        "hot-spots": {
            "spots": {"type": "integer", "minimum": 1},
            "spread": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "uniform": {},
        "zipf": {
            "regions": {"type": "integer", "minimum": 1},
            "exponent": {"type": "number", "minimum": 0, "maximum": 10},
        },
    }
    over = {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": 2, "maxItems": 2}
    processes = {
        "poisson": {"over": over},
        "waves": {"over": over, "waves": {"type": "integer", "minimum": 1}, "spread": {"type": "number", "minimum": 0}},
    }
    holding = {
        "leave": PROBABILITY,
        "exponential": {"type": "number", "exclusiveMinimum": 0},
        "uniform": _range(0),
        "fixed": {"type": "number", "exclusiveMinimum": 0},
    }
    return _generator(
        {
            "count": COUNT,
            "prefix": PREFIX,
            "seed": {"type": "integer", "minimum": 0},
            "peers": {"type": "array", "items": PEER_ID, "minItems": 1},
            "streams": {"type": "array", "items": NAME, "minItems": 1},
            "interests": {
                "oneOf": [_object({"model": {"const": m}, **p}, ("model",)) for m, p in models.items()],
            },
            "overlap": PROBABILITY,
            "predicate": _object(
                {
                    "attributes": {"type": "array", "items": NAME, "minItems": 1, "uniqueItems": True},
                    "width": _range(0),
                    "cut": PROBABILITY,
                    "disjunction": PROBABILITY,
                }
            ),
            "select": _range(1, "integer"),
            "arrivals": {
                "oneOf": [_object({"process": {"const": p}, **q}, ("process",)) for p, q in processes.items()],
            },
            "popularity": {
                "oneOf": [
                    {"enum": list(workload_generators.POPULARITY_RULES)},
                    _object({"zipf": {"type": "number", "minimum": 0}}, ("zipf",)),
                    WEIGHT,
                ]
            },
            "holding": {
                **_object(holding),
                "oneOf": [{"required": [form]} for form in workload_generators.HOLDING_FORMS],
            },
        }
    )


def _events() -> dict:
    """An ``events`` entry: one failure or recovery of a link or a super-peer, or a generator."""
    at = {"type": "number", "minimum": 0, "description": "seconds, in [0, duration)"}
    targets = {
        "link": {"type": "array", "items": SUPER_PEER_ID, "minItems": 2, "maxItems": 2},
        "super_peer": SUPER_PEER_ID,
    }
    written = [
        _object({"at": at, action: {"const": element}, key: targets[element]}, ("at", action, key))
        for action in events_loader.ACTIONS
        for element, key in events_loader.TARGET_KEY.items()
    ]
    seconds = {"type": "number", "exclusiveMinimum": 0, "description": "seconds"}
    element_class = _object({"mtbf": seconds, "mttr": seconds}, ("mtbf", "mttr"))
    generator = _object(
        {
            "generate": {
                **_object(
                    {"seed": {"type": "integer", "minimum": 0}} | dict.fromkeys(events_loader.CLASSES, element_class)
                ),
                "anyOf": [{"required": [name]} for name in events_loader.CLASSES],
            }
        },
        ("generate",),
    )
    return {"oneOf": [*written, generator]}


def json_schema() -> dict:
    """The schema as a plain dict (JSON-serialisable)."""
    attribute = {
        "type": "object",
        "properties": {"type": {"enum": ["float", "int", "string"]}, "distribution": _distribution()},
        "required": ["distribution"],
        "additionalProperties": False,
    }
    stream = {
        "type": "object",
        "properties": {
            "id": NAME,
            "source": PEER_ID,
            "rate": {"type": "number", "exclusiveMinimum": 0},
            "schema": {
                "type": "object",
                "propertyNames": NAME,
                "additionalProperties": attribute,
                "minProperties": 1,
            },
            "replay": {"type": "string", "minLength": 1, "description": "CSV path relative to this file"},
            "time": {"type": "string", "minLength": 1, "description": "the CSV column whose timestamps drive emission"},
            "time_start": {"type": ["number", "string"], "description": "the timestamp emission time 0 stands for"},
        },
        "required": ["id", "source"],
        "allOf": [
            {"oneOf": [{"required": ["schema"]}, {"required": ["replay"]}]},
            {"oneOf": [{"required": ["rate"]}, {"required": ["time", "replay"]}]},
        ],
        "additionalProperties": False,
    }
    link = {
        "type": "array",
        "prefixItems": [SUPER_PEER_ID, SUPER_PEER_ID, LINK_OPTIONS],
        "minItems": 2,
        "maxItems": 3,
    }
    network = {
        "type": "object",
        "properties": {
            "defaults": DEFAULTS,
            "super_peers": {"type": "array", "items": SUPER_PEER, "minItems": 1, "uniqueItems": True},
            "links": {"type": "array", "items": link},
            "generate": _generate(),
            "import": {
                "description": "a real network: a topology topohub ships, or a GraphML, GML or node-link JSON file",
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"topohub": {"type": "string", "pattern": "^[A-Za-z0-9_-]+(/[A-Za-z0-9_.-]+)*$"}},
                        "required": ["topohub"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "file": {
                                "type": "string",
                                "pattern": "[.]([Gg][Rr][Aa][Pp][Hh][Mm][Ll]|[Gg][Mm][Ll]|[Jj][Ss][Oo][Nn])$",
                            }
                        },
                        "required": ["file"],
                        "additionalProperties": False,
                    },
                ],
            },
            "propagation_km_per_s": {"type": "number", "exclusiveMinimum": 0},
            "min_latency": LATENCY,
        },
        "oneOf": [
            {"required": ["super_peers"], "not": {"anyOf": [{"required": ["generate"]}, {"required": ["import"]}]}},
            {
                "required": ["generate"],
                "not": {"anyOf": [{"required": ["super_peers"]}, {"required": ["links"]}, {"required": ["import"]}]},
            },
            {"required": ["import"], "not": {"anyOf": [{"required": ["super_peers"]}, {"required": ["generate"]}]}},
        ],
        "additionalProperties": False,
    }
    thin_peer = {
        "type": "object",
        "properties": {"id": PEER_ID, "attach": SUPER_PEER_ID, "bandwidth": BANDWIDTH, "latency": LATENCY},
        "required": ["id", "attach"],
        "additionalProperties": False,
    }
    subscription = {
        "type": "object",
        "properties": {
            "id": PEER_ID,
            "peer": PEER_ID,
            "at": {"type": "number", "minimum": 0},
            "until": {"type": ["number", "null"]},
            "query": {"type": "string", "description": "SELECT attrs FROM stream [WHERE condition]"},
        },
        "required": ["id", "peer", "at", "query"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://streamglobe-emulator.invalid/scenario.schema.json",
        "title": "Stream-sharing emulator scenario",
        "type": "object",
        "properties": {
            "name": PEER_ID,
            "seed": {"type": "integer", "minimum": 0},
            "duration": {"type": "number", "exclusiveMinimum": 0, "maximum": LONGEST_RUN_S},
            "header_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_HEADER_BYTES},
            "network": network,
            "thin_peers": {"type": "array", "items": {"oneOf": [thin_peer, _thin_peer_generator()]}},
            "streams": {"type": "array", "items": {"oneOf": [stream, _stream_generator(stream)]}},
            "subscriptions": {"type": "array", "items": {"oneOf": [subscription, _subscription_generator()]}},
            "events": {"type": "array", "items": _events()},
            "planner": {
                "type": "object",
                "properties": {
                    "max_utilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    "peak_sd": {"type": "number", "minimum": 0, "maximum": 10},
                },
                "additionalProperties": False,
            },
            "cpu_costs": CPU_COSTS,
        },
        "required": ["name", "duration", "network", "thin_peers", "streams"],
        "additionalProperties": False,
    }
