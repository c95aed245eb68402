"""The PNG plots of `corpus report`, drawn with matplotlib's Agg canvas into bytes.

Byte-stable: a fixed size and dpi, no `Software` (or any other) PNG text chunk, the fonts
matplotlib ships with; the same numbers give the same bytes with the same matplotlib
(`tests/cli/test_report_cli.py` reports a build twice and compares). matplotlib is imported
only when a plot is drawn, with MPLCONFIGDIR pointed at a temporary folder unless it is set,
so nothing is written into the home directory.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SIZE_IN = (7.0, 4.0)
DPI = 100
BLUE, ORANGE = "#1f77b4", "#ff7f0e"
QUALITY_PLOT = "report_quality_"
"""The file name prefix of a classifier's score plot: `report_quality_<name>.png`."""


# Fixed margins (fractions of the figure): tight_layout drew every figure twice, about a third of
# the drawing time, for the same room around these axes.
MARGINS = {"left": 0.1, "right": 0.97, "top": 0.9, "bottom": 0.18}


def private_config_dir() -> None:
    """Point matplotlib's cache at a temporary folder (unless MPLCONFIGDIR is set): nothing goes
    into the home directory. Changes the environment: call it on the main thread."""
    os.environ.setdefault(
        "MPLCONFIGDIR", os.path.join(tempfile.gettempdir(), f"corpus-mpl-{os.getuid()}")
    )


def warm_up() -> None:
    """Import what drawing needs (about half of a report's fixed cost): the run worker calls this
    on a thread while a stage's subprocess runs, so the report after the stage does not wait.
    `private_config_dir()` must have run first."""
    import matplotlib.backends.backend_agg
    import matplotlib.figure
    import matplotlib.ticker  # noqa: F401


def _figure() -> tuple[Figure, Axes]:
    private_config_dir()
    warm_up()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig: Figure) -> bytes:
    fig.subplots_adjust(**MARGINS)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def histogram_plot(
    title: str, xlabel: str, edges: Sequence[int], series: Mapping[str, Sequence[int]]
) -> bytes:
    """Step histograms sharing `edges` (log x axis, linear below 1), one per named series."""
    return _png(histogram_figure(title, xlabel, edges, series))


def histogram_figure(
    title: str, xlabel: str, edges: Sequence[int], series: Mapping[str, Sequence[int]]
) -> Figure:
    """The figure of `histogram_plot`, before it is saved."""
    fig, ax = _figure()
    for (label, counts), color in zip(series.items(), (BLUE, ORANGE), strict=False):
        total = sum(counts)
        if edges:
            ax.stairs(counts, edges, label=f"{label} ({total:,})", color=color, linewidth=1.5)
    ax.set_xscale("symlog", linthresh=1)
    if edges:
        _label_log_axis(ax, edges[0], edges[-1])
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("documents")
    if series and edges:
        ax.legend()
    ax.grid(alpha=0.3)
    return fig


def log_ticks(low: float, high: float) -> list[int]:
    """Round tick positions in [low, high] for a log axis: 1-2-5 steps, finer (1…9 per decade)
    when that gives fewer than three, so a range inside one decade still has labels."""
    decades = range(0, 16)
    for mantissas in ((1, 2, 5), tuple(range(1, 10))):
        ticks = [m * 10**e for e in decades for m in mantissas if low <= m * 10**e <= high]
        ticks = ([0] if low <= 0 <= high else []) + ticks
        if len(ticks) >= 3:
            return ticks
    return sorted({int(low), int(high)})


def _label_log_axis(ax: Axes, low: float, high: float) -> None:
    """Labelled ticks (thousands separated) on the log x axis; no unlabelled minor clutter."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ax.xaxis.set_major_locator(FixedLocator(log_ticks(low, high)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    ax.xaxis.set_minor_locator(NullLocator())


def bar_plot(title: str, counts: Mapping[str, int], ylabel: str = "documents") -> bytes:
    """One bar per key, its count written above it."""
    fig, ax = _figure()
    from matplotlib.ticker import MaxNLocator

    names, values = list(counts), [counts[k] for k in counts]
    bars = ax.bar(names, values, color=BLUE)
    ax.bar_label(bars, labels=[f"{v:,}" for v in values])
    if not names:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, max([*values, 1]) * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(axis="x", labelrotation=20 if len(names) > 3 else 0)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def all_plots(numbers: Mapping[str, Any]) -> dict[str, bytes]:
    """File name → PNG bytes for every plot of the report's numbers."""
    lengths = numbers["lengths"]
    plots = {
        "report_lengths.png": histogram_plot(
            "Document length before and after filtering",
            "characters per document",
            lengths["edges"],
            {"before": lengths["before"]["counts"], "after": lengths["after"]["counts"]},
        ),
        "report_drops.png": bar_plot("Documents dropped by filter reason", numbers["dropped"]),
        "report_duplicates.png": bar_plot("Duplicates removed or cut", numbers["duplicates"]),
        "report_pii.png": bar_plot("PII replaced, by kind", numbers["pii"], "occurrences"),
    }
    return plots | quality_plots(numbers) | tokens_plots(numbers)


def quality_plot_name(classifier: str) -> str:
    """`report_quality_<name>.png` (a classifier name is lowercase letters, digits and `_`)."""
    return f"{QUALITY_PLOT}{classifier}.png"


def quality_plots(numbers: Mapping[str, Any]) -> dict[str, bytes]:
    """One score histogram per quality classifier, in config order (none without classifiers)."""
    return {
        quality_plot_name(c["name"]): _png(quality_figure(c))
        for c in numbers.get("classifiers", [])
    }


def cut_label(entry: Mapping[str, Any]) -> str:
    """The cut in words: `min_score 0.5`, `keep_top 0.3: lowest kept 0.8123`."""
    if entry["rule"] == "min_score":
        return f"min_score {entry['min_score']}"
    cut = entry["cut"]
    return f"keep_top {entry['keep_top']}: " + (
        "none kept" if cut is None else f"lowest kept {cut:.4f}"
    )


def quality_figure(entry: Mapping[str, Any]) -> Figure:
    """A classifier's score histogram (every document it scored), its cut a dashed line."""
    fig, ax = _figure()
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

    hist = entry["histogram"]
    ax.stairs(
        hist["counts"],
        hist["edges"],
        label=f"scored ({entry['scored']:,})",
        color=BLUE,
        linewidth=1.5,
    )
    if entry["cut"] is not None:
        ax.axvline(entry["cut"], color=ORANGE, linestyle="--", linewidth=2, label=cut_label(entry))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, max([*hist["counts"], 1]) * 1.15)
    ax.xaxis.set_major_locator(FixedLocator([i / 10 for i in range(11)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:.1f}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"Scores of classifier {entry['name']} (label {entry['label']})")
    ax.set_xlabel(f"score (probability of {entry['label']})")
    ax.set_ylabel("documents")
    ax.legend(loc="best")  # clear of the bars and the cut
    ax.grid(alpha=0.3)
    return fig


def tokens_plots(numbers: Mapping[str, Any]) -> dict[str, bytes]:
    """The tokens-per-document plot, when the numbers have a tokens build."""
    tokens = numbers["tokens"]
    if tokens is None:
        return {}
    per_doc = tokens["per_document"]
    return {
        "report_tokens.png": histogram_plot(
            "Tokens per document (EOS included)",
            "tokens per document",
            per_doc["edges"],
            {"documents": per_doc["counts"]},
        )
    }
