"""Benchmarks behind ``python run.py bench NAME``.

Each module ``bench/<name>.py`` defines ``configure(parser)`` (its flags; ``--json`` is added by run.py)
and ``main(args) -> int``: it prints its parameters and a readable table, or with ``--json`` exactly one
JSON object on stdout.  A benchmark measures; it asserts nothing about time.
"""

BENCHMARKS = {
    "matching": "predicate matching, Kuntschke & Kemper section 6.2",
    "evaluation": "predicate evaluation, Kuntschke & Kemper section 6.3",
    "pubsub": "interval pub/sub matching on workload files",
    "planner": "subscriptions planned per second on a transit-stub topology",
    "optimum": "the least backbone bytes of any plan on a small static scenario (MILP), against every strategy",
    "filters": "shared multi-subscription filtering engines",
    "spark": "Spark data plane vs Catalyst",
    "driver": "the Spark engine's driver memory, 10x the tuples",
    "engine": "local simulation engine per strategy on a many-epoch scenario",
    "failures": "every strategy under random failures and recoveries: exactness, losses",
    "paper": "Kuntschke & Kemper's section 6 reproduced: every experiment, figure, table and claim",
    "cpu": "what each step of a super-peer's operators costs here, against the default cpu_costs",
}
