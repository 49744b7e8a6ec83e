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
