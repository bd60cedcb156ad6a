"""The main job's plots (experiments.hierarchy.plots) and the capacity curve's (experiments.capacity): what each
point and legend entry says, read back from the figure."""

from dataclasses import asdict

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from experiments.hierarchy import evidence, plots  # noqa: E402

from tests.figures import PNG_MAGIC, drawn, overlaps, ticks  # noqa: E402


def outcome_rows():
    def row(name, stage, status, Hdp, L=1, **extra):
        return {"stage": stage, "L": L, "task": "composition", "name": name, "status": status,
                "architecture": f"{name} ({stage})", "budget": {"Hdp": Hdp}, **extra}
    return [row("construction", "construction", "certified", 161, n_ctx=16),
            row("separation", "separation", "certified", 33726, largest_covered_Hdp={"theorem_1_1": "33850"}),
            row("hybrid", "probe", "failures found", 161, weights="random", control=False),
            row("hybrid", "probe", "failures found", 161, weights="trained", control=False, control_learned=True),
            row("full", "probe", "none found", 161, weights="trained", control=False, control_learned=False),
            row("control", "probe", "failures found", 161, weights="trained", control=True),
            row("linear", "probe", "failures found", 161, weights="trained", control=False, expressive=False),
            row("missing", "construction", "not available", 161),
            row("deep", "construction", "certified", 405, L=3, n_ctx=46)]


def test_outcome_categories_from_the_rows_fields():
    rows = outcome_rows()
    assert [plots.drawn_category(row) for row in rows] == [
        evidence.PROVEN, evidence.PROVEN, evidence.UNTRAINED, evidence.EVIDENCE, evidence.NO_EVIDENCE, evidence.CONTROL,
        evidence.CANNOT_EXPRESS, None, evidence.PROVEN]
    assert plots.drawn_category({"status": "failures found", "weights": "natural"}) == evidence.UNTRAINED
    assert plots.drawn_category({"status": "unknown", "weights": "trained", "control_learned": True}) is None
    # floor(n^(2^-(4L+2))): tiny at runnable prompt lengths, the stored value for a separation row
    assert plots.covered_Hdp(rows[0], {}) == 1 and plots.covered_Hdp(rows[2], {1: 16}) == 1
    assert plots.covered_Hdp(rows[1], {}) == 33850
    assert plots.covered_Hdp({"L": 1, "task": "composition", "n_ctx": 2 ** 64}, {}) == 2
    assert plots.covered_Hdp({"L": None, "task": "two_sum", "n_ctx": 16}, {}) is None


def test_outcomes_draw_one_legend_entry_per_category_and_the_separation_on_its_own_panel(tmp_path):
    rows = outcome_rows()
    fig = plots.plot_outcomes(tmp_path / "outcomes.png", rows)
    assert (tmp_path / "outcomes.png").read_bytes()[:8] == PNG_MAGIC
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    words = {kind: style[2] for kind, style in plots.CATEGORY_STYLE.items()}
    assert legend[:6] == [words[kind] for kind in (evidence.PROVEN, evidence.EVIDENCE, evidence.NO_EVIDENCE,
                                                   evidence.CANNOT_EXPRESS, evidence.CONTROL, evidence.UNTRAINED)]
    assert len(set(words.values())) == 6 and "hollow: no failing input found" in legend
    assert any("Theorem 1.1 covers" in text for text in legend)
    small, big = fig.axes
    points = lambda ax: sorted(x for c in ax.collections if c.get_offsets().size for x, _ in c.get_offsets())  # noqa
    assert points(big) == [33726] and 33726 not in points(small) and max(points(small)) == 405
    assert big.get_xscale() == "log" and small.get_xlim()[1] < 33726
    assert small.get_shared_y_axes().joined(small, big)
    labels = ticks(small.get_yticklabels())
    assert not any("missing" in label for label in labels)  # not available: not drawn
    assert "L=1: hybrid (probe, random weights)" in labels and "L=1: hybrid (probe, trained weights)" in labels
    # the threshold in words where it is tiny, and the separation's budget against its own
    notes = [text.get_text() for text in small.texts]
    assert "Theorem 1.1 covers only\nHdp ≤ 1 at n = 16" in notes and any("n = 46" in note for note in notes)
    assert [text.get_text() for text in big.texts] == ["Hdp 33,726 ≤ 33,850"]
    # a category the rows carry wins over the fallback, and only categories present get an entry
    fig = plots.plot_outcomes(tmp_path / "o.png", [dict(rows[2], category=evidence.EVIDENCE), rows[0]])
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend[:2] == [words[evidence.PROVEN], words[evidence.EVIDENCE]] and words[evidence.UNTRAINED] not in legend
    assert len(fig.axes) == 1  # no separation row: one panel


def test_min_precision_legend_sits_outside_and_ticks_are_whole_bits(tmp_path):
    points = [{"L": L, "semantics": s, "log2_n": x, "p": p} for L, s, x, p in [
        (1, "strict", 2.0, 7), (1, "strict", 3.3, 7), (1, "theory", 8.0, 5), (1, "theory", 16.0, 6),
        (2, "theory", 8.1, 5), (2, "theory", 16.0, 6), (2, "strict", 3.0, 8), (2, "strict", 6.2, 9)]]
    fig = plots.plot_min_precision(tmp_path / "p.png", points)
    renderer = drawn(fig)
    ax = fig.axes[0]
    assert not overlaps(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "L = 1, strict", "L = 1, theory", "L = 2, strict", "L = 2, theory"]
    low, high = ax.get_ylim()
    assert all(float(y).is_integer() for y in ax.get_yticks() if low <= y <= high)


def capacity_curve(sizes, mixers=("rnn", "deltanet")):
    from experiments import capacity

    spec = capacity.CapacitySpec(L=1, sizes=sizes, seeds=(0, 1), mixers=mixers)
    rows = []
    for size in sizes:
        for name in spec.architectures():
            state = {"control": 0, "1 full": 0, "0 full + rnn": 128}.get(name, 4096)
            for seed in spec.seeds:
                accuracy = 1.0 if name == "control" and size < 48 else 0.1 + 0.01 * seed
                rows.append({"size": size, "architecture": name, "seed": seed, "accuracy": accuracy,
                             "accuracy_fp64": accuracy, "table_bits": size * np.log2(size),
                             "budget": {"H": 1, "d": 8, "p": 16, "Hdp": 128, "state_bits": state}})
    plain = {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(spec).items()}
    return {"spec": plain, "rows": rows, "summary": capacity.summarise(spec, rows)}


def test_capacity_legend_sits_outside_and_names_C_and_chance(tmp_path):
    from experiments import capacity_report

    curve = capacity_curve((24, 32, 48, 64))
    fig = capacity_report.plot(curve, tmp_path / "capacity.png")
    assert (tmp_path / "capacity.png").read_bytes()[:8] == PNG_MAGIC
    renderer = drawn(fig)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert not overlaps(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
    texts = [text.get_text() for text in legend.get_texts()]
    assert texts[:4] == ["control", "1 full", "0 full + rnn", "0 full + deltanet"]
    assert "C = 128 state bits (0 full + rnn)" in texts  # drawn: near the sizes
    assert any(text.startswith("C = 4096 state bits (0 full + deltanet),\noff the right edge") for text in texts)
    assert "chance: 1/N (the answer is one of N)" in texts and any(text.startswith("N*:") for text in texts)
    chance = [line for line in ax.lines if line.get_label().startswith("chance")][0]
    assert np.allclose(chance.get_ydata(), [1 / 24, 1 / 32, 1 / 48, 1 / 64])
    dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in dashed] == [128] and ax.get_xlim()[1] < 4096
    # tick labels name N (a * where the control did not learn) and do not overlap one another
    labels = ax.get_xticklabels()
    assert [label.get_text().split("\n")[0] for label in labels] == ["N = 24", "N = 32", "N = 48*", "N = 64*"]
    boxes = [label.get_window_extent(renderer) for label in labels]
    assert not any(overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert not ax.xaxis.get_minorticklabels() or not any(t.get_text() for t in ax.xaxis.get_minorticklabels())
