"""Benchmarks behind ``python run.py bench NAME``.

Each module ``bench/<name>.py`` defines ``configure(parser)`` (its flags; ``--json`` is added by run.py)
and ``main(args) -> int``: it prints its parameters and a readable table, or with ``--json`` exactly one
JSON object on stdout.  A benchmark measures; it asserts nothing about time.
"""

BENCHMARKS = {
    "matching": "predicate matching, seed 004 section 6.2 (issue 2)",
    "evaluation": "predicate evaluation, seed 004 section 6.3 (issue 2)",
    "pubsub": "interval pub/sub matching on SPEC section 6 workloads (issue 2)",
    "planner": "subscriptions planned per second on a transit-stub topology (issue 3)",
    "filters": "shared multi-subscription filtering engines (issue 6)",
    "spark": "Spark data plane vs Catalyst (issue 4)",
    "engine": "local simulation engine per strategy on a many-epoch scenario (issue 3)",
}
