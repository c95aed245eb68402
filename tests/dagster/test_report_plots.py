"""The report's log-axis histograms carry labelled x ticks, thousands separated."""

from __future__ import annotations

import pytest

from corpus_assets.core.stages.report_plots import histogram_figure, log_ticks


def _tick_labels(edges: list[int]) -> list[str]:
    fig = histogram_figure(
        "Tokens per document", "tokens", edges, {"documents": [1] * (len(edges) - 1)}
    )
    fig.canvas.draw()
    (ax,) = fig.axes
    low, high = ax.get_xlim()
    return [
        t.get_text()
        for t, where in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
        if t.get_text() and low <= where <= high
    ]


@pytest.mark.parametrize(
    ("edges", "some"),
    [
        ([181, 215, 256, 304, 362, 431, 512, 609, 724], {"200", "300", "500"}),  # one decade
        ([0, 1, 2, 4, 16, 256, 4096, 65536], {"0", "1", "10", "100", "1,000", "10,000"}),
    ],
)
def test_the_log_axis_has_tick_labels(edges: list[int], some: set[str]) -> None:
    labels = _tick_labels(edges)
    assert len(labels) >= 3, labels
    assert some <= set(labels), labels


def test_log_ticks_inside_one_decade_are_finer() -> None:
    assert log_ticks(181, 724) == [200, 300, 400, 500, 600, 700]
    assert log_ticks(1, 1000) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
