"""The `--plot` picture of `clusterscaler simulate`: event marks with a legend outside the
axes, whole numbers on the count axes, cost per hour and cumulative cost with their units, a
subtitle naming the inputs and flags, and an SVG when the file name asks for one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.offline.output import (
    Sample,
    TimelineRow,
    cost_rates,
    event_marks,
    figure,
    plot_format,
    scale_labels,
)

pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"


def row(seconds: int, action: str, group: str = "general") -> TimelineRow:
    return TimelineRow(timedelta(seconds=seconds), action, group, "", {}, 0)


ROWS = [
    row(60, "event", ""),
    row(60, "scale-up"),
    row(60, "scale-up", "gpu"),  # one mark per minute and kind
    row(90, "cleanup"),
    row(90, "scale-up-failed", ""),
    row(90, "backoff"),
    row(600, "scale-down"),
    row(120, "node-ready"),
]


def test_event_marks_by_kind() -> None:
    assert event_marks(ROWS) == {
        "scale-up": [1.0],
        "failed provisioning": [1.5],
        "backoff": [1.5],
        "scale-down": [10.0],
    }


def test_cost_rate_per_hour() -> None:
    # 0.19 per node-hour, one node, sampled every 10 minutes; then two nodes.
    samples = [Sample(timedelta(minutes=10 * i), {}, 0, 0.19 * i / 6) for i in range(4)]
    samples.append(Sample(timedelta(minutes=40), {}, 0, samples[-1].cost + 0.38 / 6))
    assert [round(r, 6) for r in cost_rates(samples)] == [0.0, 0.19, 0.19, 0.19, 0.38]


def test_figure_legend_outside_integer_counts_and_units() -> None:
    samples = [
        Sample(timedelta(seconds=30 * i), {"general": 1 + (i > 3), "gpu": i % 2}, i % 3, 0.002 * i)
        for i in range(20)
    ]
    fig = figure(samples, "clusterscaler simulate: test", subtitle="scenario t.yaml | --expander=price", rows=ROWS)
    try:
        fig.canvas.draw()
        nodes_ax, pending_ax, cost_ax, cumulative_ax = fig.axes
        legend = nodes_ax.get_legend()
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels == ["general", "gpu", "scale-up", "scale-down", "failed provisioning", "backoff"]
        renderer = fig.canvas.get_renderer()
        # The legend lies right of every plot area, and of the cost's right-hand axis labels.
        box = legend.get_window_extent(renderer)
        assert box.x0 >= max(ax.get_window_extent(renderer).x1 for ax in fig.axes)
        assert box.x0 >= cumulative_ax.get_tightbbox(renderer).x1 - 1
        for ax in (nodes_ax, pending_ax):
            ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
            assert ticks and all(float(t).is_integer() for t in ticks), ticks
        assert "$/hour" in cost_ax.get_ylabel()
        assert cumulative_ax.get_ylabel() == "cumulative cost ($)"
        assert fig._suptitle.get_text() == "clusterscaler simulate: test\nscenario t.yaml | --expander=price"
        # Each mark spans the three panels.
        assert sum(1 for line in pending_ax.get_lines() if line.get_xdata()[0] == 1.5) == 2
    finally:
        from matplotlib import pyplot as plt

        plt.close(fig)


def test_plot_format_follows_the_file_name() -> None:
    assert (plot_format("run.svg"), plot_format("RUN.SVG"), plot_format("run.png"), plot_format("run")) == (
        "svg", "svg", "png", "png",
    )


def test_simulate_writes_an_svg_with_marks_and_subtitle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "outage.svg"
    code = main(["simulate", str(EXAMPLES / "spot-outage.yaml"), "--plot", str(path), "--scan-interval=10s"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"plot written to {path}" in out
    svg = path.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    for text in ("scale-up", "failed provisioning", "backoff", "cost rate ($/hour)", "cumulative cost ($)"):
        assert text in svg, text
    # The subtitle: the scenario file, its flags and the command line's, the simulated time.
    assert "scenario spot-outage.yaml | --expander=priority --scan-interval=10s | 10m0s simulated, a loop every 10s" in svg


def test_scale_marks_name_their_group_and_change() -> None:
    rows = [
        TimelineRow(timedelta(minutes=2), "scale-up", "general", "2 -> 5 for 16 pods", {}, 0),
        TimelineRow(timedelta(minutes=2), "scale-up", "gpu", "0 -> 1 for 2 pods", {}, 0),
        TimelineRow(timedelta(minutes=40), "scale-down", "general", "general-2 (empty)", {}, 0),
        TimelineRow(timedelta(minutes=40), "scale-down", "general", "general-3 (empty)", {}, 0),
        TimelineRow(timedelta(minutes=41), "node-ready", "general", "1 node", {}, 0),
    ]
    assert scale_labels(rows) == [
        (2.0, "general 2 -> 5"), (2.0, "gpu 0 -> 1"), (40.0, "general -2")]
    samples = [Sample(timedelta(minutes=m), {"general": 2}, 0, 0.0, {"general": up})
               for m, up in ((0, 0), (2, 3), (3, 0))]
    fig = figure(samples, rows=rows)
    try:
        nodes_ax = fig.axes[0]
        texts = [t.get_text() for t in nodes_ax.texts]
        assert texts == ["general 2 -> 5", "gpu 0 -> 1", "general -2"]
        _, labels = nodes_ax.get_legend_handles_labels()
        assert "requested, not ready" in labels
    finally:
        from matplotlib import pyplot as plt

        plt.close(fig)


def test_samples_carry_the_nodes_requested_and_not_ready(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["simulate", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    samples = [x for x in lines if x["type"] == "sample"]
    # The demo's scale-up to five general nodes: three upcoming until they are ready.
    assert max(s["upcoming"].get("general", 0) for s in samples) == 3
    assert samples[-1]["upcoming"] == {}
