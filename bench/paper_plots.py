"""The figures of ``bench paper``: section 6's Figures 9-18 redrawn from our measurements (PNG files)."""

from __future__ import annotations

from pathlib import Path

STYLES = {
    "HSR+QC": ("tab:green", "-", "o"),
    "HCR+QC": ("tab:orange", "-", "s"),
    "EM-BFS+QC": ("tab:blue", "--", "^"),
    "EM-BFS+I": ("tab:blue", "-", "^"),
    "EM-BFS+I*": ("tab:blue", ":", "^"),
    "EM-DFS+QC": ("tab:red", "--", "v"),
    "EM-DFS+I": ("tab:red", "-", "v"),
    "EM-DFS+I*": ("tab:red", ":", "v"),
    "EM-MIX+QC": ("tab:purple", "--", "D"),
    "EM-MIX+I": ("tab:purple", "-", "D"),
    "EM-MIX+I*": ("tab:purple", ":", "D"),
    "SE": ("black", "-", "o"),
    "IE": ("tab:blue", "-", "^"),
    "IE+SC": ("tab:red", "-", "v"),
    "IE (R-tree)": ("tab:blue", "--", "^"),
    "IE+SC (R-tree)": ("tab:red", "--", "v"),
}

LABELS = {"dims": "dimensions", "query_size": "boxes per query predicate", "stream_size": "boxes per stream predicate"}


def _axes(title: str, xlabel: str, ylabel: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def _line(ax, name: str, xs, ys, label: str | None = None) -> None:
    color, style, marker = STYLES.get(name, ("gray", "-", "."))
    ax.plot(xs, ys, color=color, linestyle=style, marker=marker, label=label or name)


def matching_figure(path: Path, title: str, parameter: str, rows: list[dict], names: tuple[str, ...]) -> None:
    """CPU ms per pair against the swept parameter, one line per algorithm (log scale, as the paper's)."""
    fig, ax = _axes(title, LABELS[parameter], "matching time per pair (CPU ms)")
    xs = [row["point"] for row in rows]
    for name in names:
        _line(ax, name, xs, [row["algorithms"][name]["ms_per_pair"] for row in rows])
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)


def memory_figure(path: Path, rows: list[dict]) -> None:
    fig, ax = _axes("Peak memory of the split strategies (EM+QC)", LABELS["stream_size"], "peak KiB per pair (max)")
    xs = [row["point"] for row in rows]
    for split in ("BFS", "DFS", "MIX"):
        _line(ax, f"EM-{split}+QC", xs, [row[f"EM-{split}"]["max_kib"] for row in rows], f"EM-{split}")
    ax.legend(fontsize=8)
    _save(fig, path)


def evaluation_figure(
    path: Path, title: str, key: str, xlabel: str, cases: list[dict], methods: tuple[str, ...]
) -> None:
    """Throughput in items per millisecond against the varied parameter (the paper's unit)."""
    fig, ax = _axes(title, xlabel, "items per ms (CPU)")
    xs = [c[key] for c in cases]
    for name in methods:
        _line(ax, name, xs, [c["methods"][name]["items_per_s"] / 1e3 for c in cases])
    if key == "boxes_n":
        ax.set_xscale("log")
    ax.legend(fontsize=8)
    _save(fig, path)


def overlap_figure(path: Path, by_overlap: dict, fifty: list[dict]) -> None:
    """IE+SC and IE relative to SE against selectivity, one pair of lines per overlap."""
    fig, ax = _axes("IE+SC (solid) and IE (dashed) relative to SE", "selectivity", "throughput / SE")
    colors = ["tab:green", "tab:orange", "tab:purple", "tab:red"]
    for color, (overlap, cases) in zip(colors, [*by_overlap.items(), ("0.5", fifty)], strict=False):
        xs = [c["selectivity"] for c in cases]
        for name, style in (("IE+SC", "-"), ("IE", "--")):
            ys = [c["methods"][name]["items_per_s"] / c["methods"]["SE"]["items_per_s"] for c in cases]
            ax.plot(xs, ys, color=color, linestyle=style, marker=".", label=f"{name}, overlap {float(overlap):.0%}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)
