"""Loading a scenario or parsing a query loads no shared-filter engine, no numba and reads no /proc."""

import json
import subprocess
import sys

SPY = """
import builtins, json, sys
opened = []
real_open = builtins.open

def spying_open(file, *args, **kwargs):
    opened.append(str(file))
    return real_open(file, *args, **kwargs)

builtins.open = spying_open
import topologies.loader, matcher
print(json.dumps({"modules": sorted(sys.modules), "opened": opened}))
"""


def test_importing_the_loader_and_the_matcher_loads_no_engine_and_reads_no_proc():
    result = subprocess.run([sys.executable, "-c", SPY], capture_output=True, text=True, check=True)
    seen = json.loads(result.stdout)
    assert "matcher" in seen["modules"] and "topologies.loader" in seen["modules"]
    loaded = [m for m in seen["modules"] if m.startswith(("matcher.filters", "matcher._eval", "numba"))]
    assert not loaded
    assert not [path for path in seen["opened"] if path.startswith("/proc")]
