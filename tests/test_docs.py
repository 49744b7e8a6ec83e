"""The docs and comments stand on their own: no reference a reader of the repository cannot look up, and
every relative link of the docs leads to a file that exists.

A reference to a tracker entry, to the outside product contract or to an outside paper by its file number
means nothing to a reader of the repository; code and docs cite the papers by name (docs/REFERENCES.md),
concepts, or the repository's own docs instead.  Measurement records under bench/results/ quote history
and are left out.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

OUTSIDE_REFERENCE = re.compile(r"issue [0-9]|spec(\.md| section)|seed 00[0-9]|\.\./shared", re.IGNORECASE)
"""What points outside the repository: tracker entries, the outside contract's file and sections, the
papers' file numbers, the shared directory beside the repository."""

EXCLUDED = ("bench/results/",)

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def tracked_files() -> list[str]:
    """Paths of the repository's files, relative to its root: those git tracks or would track (new files
    too, ignored ones not); without git, every file outside hidden directories and outputs."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        return [path for path in listing.split("\0") if path]
    except (OSError, subprocess.CalledProcessError):
        skipped = {"out", "node_modules"}
        return [
            path.relative_to(ROOT).as_posix()
            for path in ROOT.rglob("*")
            if path.is_file()
            and not any(part.startswith(".") or part in skipped for part in path.relative_to(ROOT).parts)
        ]


def checked_sources() -> list[str]:
    return sorted(path for path in tracked_files() if path.endswith((".py", ".md")) and not path.startswith(EXCLUDED))


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(text: str) -> list[str]:
    """The targets of the Markdown links and images in ``text`` that are paths, without their anchors
    (links in code blocks and code spans are text, not links)."""
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    targets = []
    for target in LINK.findall(prose):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same page
        targets.append(target.split("#", 1)[0])
    return targets


def test_the_sources_are_found():
    sources = checked_sources()
    assert "README.md" in sources and "run.py" in sources and "tests/test_docs.py" in sources


def test_no_file_refers_to_what_a_reader_cannot_look_up():
    found = []
    for path in checked_sources():
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE_REFERENCE.search(line):
                found.append(f"{path}:{number}: {line.strip()[:100]}")
    assert not found, "references outside the repository:\n" + "\n".join(found)


@pytest.mark.parametrize("page", doc_pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file(page: Path):
    broken = [
        target for target in relative_links(page.read_text(encoding="utf-8")) if not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files: {broken}"


def test_the_readme_links_every_doc_page():
    linked = {(ROOT / target).resolve() for target in relative_links((ROOT / "README.md").read_text(encoding="utf-8"))}
    missing = [page.name for page in sorted((ROOT / "docs").glob("*.md")) if page.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize(
    ("text", "targets"),
    [
        ("see [the planner](docs/PLANNER.md#arrival) and ![plot](img/a.png)", ["docs/PLANNER.md", "img/a.png"]),
        ("[site](https://example.org) [top](#layers) `[x](code.md)`", []),
        ("```\n[x](fenced.md)\n```\n[y](kept.md)", ["kept.md"]),
    ],
)
def test_links_are_read_as_a_reader_would_follow_them(text: str, targets: list[str]):
    assert relative_links(text) == targets


# the examples are spelled in pieces, so that this file does not hold what it looks for
@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ("as the issue " + "12 says", True),
        ("see SPEC" + ".md", True),
        ("(Spec " + "section 3)", True),
        ("the figure of seed " + "004", True),
        ("../" + "shared/STYLE.md", True),
        ("Kuntschke & Kemper's Figure 1 (docs/REFERENCES.md)", False),
        ("the seed 7 of a scenario; an issue with it", False),
    ],
)
def test_outside_references_are_recognised(line: str, outside: bool):
    assert bool(OUTSIDE_REFERENCE.search(line)) is outside


# --- README.md: short, and every figure it shows is what the code prints ---------------------------------


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(text: str) -> list[str]:
    return [m.group(0).split("\n", 1)[1].rsplit("```", 1)[0] for m in FENCE.finditer(text)]


def _console(scenario: str, tmp_path: Path, *strategies: str) -> list[str]:
    import sys

    command = [sys.executable, str(ROOT / "run.py"), "run", scenario, "--out", str(tmp_path / "o"), "--no-plots"]
    command += ["--quiet", "--force", *(f"--strategy={s}" for s in strategies)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return [line.rstrip() for line in done.stdout.splitlines()]


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    text = _readme()
    assert len(text.splitlines()) <= 200
    first = _blocks(text)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make run", "make test"]
    assert "docs/BENCHMARKS.md" in text and "| benchmark |" not in text  # the figures live there


def test_the_readme_figure1_table_is_what_make_run_prints(tmp_path):
    table = next(b for b in _blocks(_readme()) if b.startswith("figure1: 3 subscriptions"))
    printed = _console("topologies/figure1.yaml", tmp_path)
    assert table.splitlines() == printed[: len(table.splitlines())]


def test_the_readme_real_network_is_the_shipped_file_and_its_figures(tmp_path):
    blocks = _blocks(_readme())
    shown = next(b for b in blocks if "import: {topohub: sndlib/germany50}" in b)
    shipped = (ROOT / "topologies" / "germany50.yaml").read_text().splitlines()
    assert shown.splitlines() == [line for line in shipped if not line.startswith("#")]
    table = next(b for b in blocks if b.startswith("strategy        backbone   bytes x ideal")).splitlines()
    printed = {line.split()[0]: line for line in _console("topologies/germany50.yaml", tmp_path)[1:]}
    for row in table:  # each row's figures as printed, up to the columns the README leaves out
        kept = row.removesuffix("...").split()
        assert printed[kept[0]].split()[: len(kept)] == kept, row
    from topologies.importing import topohub_keys

    assert f"Any of the {len(topohub_keys())} topologies the" in _readme()


def test_the_readme_command_lines_name_real_commands_and_options():
    from run import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # the subcommands argparse knows
    block = next(b for b in _blocks(_readme()) if b.startswith("python run.py validate FILE"))
    for line in block.splitlines():
        words = line.split("#")[0].split()
        assert words[:2] == ["python", "run.py"] and words[2] in commands, line
        known = {o for action in commands[words[2]]._actions for o in action.option_strings}
        for word in words[3:]:
            option = word.strip("[]").split("=")[0]
            if option.startswith("--"):
                assert option in known, f"{line}: {option}"
