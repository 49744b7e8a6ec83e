"""The project as an installed package: `pip install -e .` (which `make venv` runs) makes `import
streamglobe` and the `streamglobe` command work from any directory, and the package's dependencies are
the pinned ones of requirements.txt."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_dependencies_are_pinned_in_requirements():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[name.strip().lower()] = version
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", name) for name in declared)  # versions live in requirements.txt
    assert {name.lower() for name in declared} <= set(pinned)
    assert pinned["topohub"] == "1.5.1"


def test_streamglobe_imports_and_runs_from_any_directory(tmp_path):
    assert metadata.version("streamglobe-emulator") == "0.1.0", "run `make venv` (it installs the project)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = (
        "import streamglobe as sg\n"
        f"scenario = sg.load({str(ROOT / 'topologies' / 'figure1.yaml')!r})\n"
        "report = sg.run(scenario, ['query-shipping'])\n"
        "print(sg.__file__, report['query-shipping'].backbone_bytes, report['query-shipping'].exact)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path, backbone, exact = done.stdout.split()
    assert Path(path) == ROOT / "streamglobe" / "__init__.py" and int(backbone) > 0 and exact == "True"
    command = Path(sys.executable).parent / "streamglobe"
    done = subprocess.run([str(command), "validate", str(ROOT / "topologies" / "figure1.yaml")], cwd=tmp_path,
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("figure1: 8 super-peers"), done.stderr
