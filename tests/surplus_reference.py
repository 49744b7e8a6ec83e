"""A plain per-tuple recomputation of a plan's attribute surplus (reports/surplus.py), for the tests only:
each tuple, each flow it is in, each link of the flow, the values it carries there against those a
subscription downstream of that link selects and is satisfied by."""

from __future__ import annotations

from topologies.workload import columns, emission_times, tuple_count


def reference_surplus(scenario, plan) -> dict[str, int]:
    """Plain reference: tuple by tuple, each flow it is in, each link of the flow: the values it carries
    there minus those a subscription downstream of that link selects and is satisfied by."""
    totals = {}
    for stream in scenario.streams:
        n = tuple_count(stream, scenario.duration)
        times = emission_times(stream, 0, n)
        values = columns(scenario, stream.id, 0, n)
        total = 0
        for i in range(n):
            epoch = next((e for e in plan.epochs if e.start <= times[i] < e.end), None)
            if epoch is None:
                continue
            row = {a: float(v[i]) for a, v in values.items()}
            flows = {f.id: f for f in epoch.flows if f.stream == stream.id}
            inside: dict[str, bool] = {}
            for f in epoch.flows:  # parents first
                if f.id in flows:
                    inside[f.id] = (f.parent is None or inside[f.parent]) and f.predicate.evaluate(row)

            def needed(flow, start: int, row=row, inside=inside, flows=flows, epoch=epoch) -> set[str]:
                """What the readers of ``flow`` at its super-peers ``start..`` select and want of the tuple."""
                later = set(flow.path[start:])
                want: set[str] = set()
                for d in epoch.deliveries:
                    if d.flow == flow.id and d.home in later and d.predicate.evaluate(row):
                        want |= set(d.attrs)
                for child in flows.values():
                    if child.parent == flow.id and child.origin in later and inside[child.id]:
                        want |= needed(child, 0)
                return want

            for f in flows.values():
                if not inside[f.id]:
                    continue
                trimmed = {a for p, attrs in f.trim if p.evaluate(row) for a in attrs}
                carried = trimmed if f.trim else set(f.attrs)
                for k in range(1, len(f.path)):
                    total += len(carried - needed(f, k))
        totals[stream.id] = total
    return totals
