"""The fall read off a curve (experiments/capacity_law.py), on curves whose answers are worked out by hand: where the
mean accuracy crosses 1/2, interpolated in log2 N, and the slope of log2 N50 against log2 d_head and log2 C."""

from __future__ import annotations

import pytest

from experiments import capacity_law


def entry(architecture, size, d_head, mean, state_bits=0):
    return {"architecture": architecture, "size": size, "d_head": d_head, "mean": mean, "min": mean, "max": mean,
            "state_bits": state_bits}


def curve(accuracies: dict[int, dict[int, float]], control_mean: float = 1.0) -> dict:
    """GLA at each d_head with the given accuracy per N, C = 100 d_head^2, and a control at `control_mean`."""
    summary = []
    for d_head, by_size in accuracies.items():
        for size, mean in by_size.items():
            summary += [entry("control", size, d_head, control_mean), entry("gla", size, d_head, mean,
                                                                            100 * d_head ** 2)]
    return {"spec": {"format": "fp16"}, "summary": summary}


def test_the_fall_is_interpolated_in_log_n_and_the_slope_is_one_where_it_tracks_d_head():
    # d_head 4: 0.75 at N = 8, 0.25 at N = 16: halfway, log2 N50 = 3.5; d_head 8: the same one octave up.
    rows = capacity_law.falls(curve({4: {4: 1.0, 8: 0.75, 16: 0.25}, 8: {8: 1.0, 16: 0.75, 32: 0.25}}))
    assert [(row["d_head"], row["between"]) for row in rows] == [(4, [8, 16]), (8, [16, 32])]
    assert rows[0]["N50"] == pytest.approx(2 ** 3.5, rel=1e-12) and rows[1]["N50"] == pytest.approx(2 ** 4.5)
    slopes = capacity_law.exponents(rows)["gla"]
    # N50 doubles as d_head doubles and as C quadruples
    assert (slopes["points"], round(slopes["vs_d_head"], 9), round(slopes["vs_C"], 9)) == (2, 1.0, 0.5)


def test_a_fall_where_the_control_did_not_learn_is_not_counted():
    rows = capacity_law.falls(curve({4: {4: 1.0, 8: 0.75, 16: 0.25}, 8: {8: 1.0, 16: 0.75, 32: 0.25}},
                                    control_mean=0.9))
    assert all(row["N50"] and not row["control_learned"] for row in rows)
    assert capacity_law.exponents(rows)["gla"] == {"points": 0}
    assert "the control did not learn" in capacity_law.markdown(curve({4: {4: 1.0, 8: 0.2}}, control_mean=0.5))


def test_no_fall_inside_the_sizes_is_said_so():
    rows = capacity_law.falls(curve({4: {4: 0.9, 8: 0.6}, 8: {4: 0.3, 8: 0.1}}))
    assert [row["N50"] for row in rows] == [None, None]
    assert [row["reason"] for row in rows] == ["at or above 1/2 up to N = 8", "below 1/2 already at N = 4"]


def test_the_page_and_the_plot_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    data = curve({4: {4: 1.0, 8: 0.75, 16: 0.25}, 8: {8: 1.0, 16: 0.75, 32: 0.25}})
    capacity_law.write(data, tmp_path)
    page = (tmp_path / "law.md").read_text()
    assert "| gla | 4 | 1600 | 8–16 | 11.3 | 2.83 | yes |" in page and "slope 1.00 against d_head" in page
    assert (tmp_path / "law.png").stat().st_size > 0
