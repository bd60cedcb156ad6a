"""lab.plots: labelled heatmaps whose pixels are the executor's numbers, and `witness inspect --plot`."""

import json
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import witness  # noqa: E402
from lab import plots  # noqa: E402
from lab import strategies as ws  # noqa: E402
from cli.main import main  # noqa: E402
from witness.errors import InputError, ParameterError  # noqa: E402
from witness.execute import run  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def network():
    return witness.compile("composition", L=2, m=2, n=[2])


@pytest.fixture(scope="module")
def tokens(network):
    return network.task.random_tokens(3, 1)[0]


def ticks(axis_labels):
    return [label.get_text() for label in axis_labels]


def test_residual_stream_has_basis_labels_and_the_traced_values(network, tokens):
    fig = plots.residual_stream(network, tokens)
    ax = fig.axes[0]
    assert ticks(ax.get_xticklabels()) == list(network.basis.labels)
    rows = ticks(ax.get_yticklabels())
    assert rows[0] == "hook_embed" and rows[-1] == f"blocks.{len(network.layers) - 1}.hook_resid_post"
    drawn = ax.images[0].get_array()
    trace = run(network, tokens, trace=True).trace
    assert np.array_equal(drawn[-1], trace[rows[-1]][0, -1])
    # the final slot R2 holds the ±1 code of the answer: read it back from the picture
    answer = int(network.task.answers(tokens)[0])
    slot = [network.basis.index(f"R2[{k}]") for k in range(2)]
    assert sum(1 << k for k, column in enumerate(slot) if drawn[-1, column] > 0) == answer


def test_attention_patterns_label_positions_by_segment(network, tokens):
    fig = plots.attention_patterns(network, tokens)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == len(network.layers)
    labels = ticks(heatmaps[0].get_xticklabels())
    assert labels[-1] == f"w[0]={tokens[-1]}" and labels[network.task.segment("z0").start].startswith("z0[0]=")
    trace = run(network, tokens, trace=True).trace
    for l, ax in enumerate(heatmaps):
        assert np.array_equal(ax.images[0].get_array(), trace[f"blocks.{l}.attn.hook_pattern"][0, 0])


def test_weight_matrix_labels_the_residual_axis(network):
    fig = plots.weight_matrix(network, "blocks.1.attn.W_Q")
    ax = fig.axes[0]
    assert ticks(ax.get_yticklabels()) == list(network.basis.labels)
    assert ticks(ax.get_xticklabels()) == [str(i) for i in range(network.layers[1].mixer.d_head)]
    assert np.array_equal(ax.images[0].get_array(), network.layers[1].mixer.W_Q[0])
    fig = plots.weight_matrix(network, "unembed.W_U")
    assert ticks(fig.axes[0].get_yticklabels()) == list(network.basis.labels)


def test_margins_match_an_independent_count(network):
    batch = network.task.random_tokens(0, 200)
    logits = run(network, batch).logits[:, 0]
    answers = network.task.answers(batch)
    expected = [logits[i, a] - max(np.delete(logits[i], a)) for i, a in enumerate(answers)]
    assert np.array_equal(plots.margins(network, batch), np.array(expected))
    # the construction's readout gives the answer logit b_V and every other at most b_V - 2
    assert (plots.margins(network, batch) == 2).all()
    broken = network.with_arrays({"unembed.W_U": -network.readout.W_U})
    fig = plots.margin_histogram(broken, batch)
    assert "(200 not positive)" in fig.axes[0].get_title()


def test_bad_arguments(network, tokens):
    with pytest.raises(InputError, match="one input"):
        plots.residual_stream(network, network.task.random_tokens(0, 2))
    with pytest.raises(ParameterError, match="no array"):
        plots.weight_matrix(network, "blocks.9.attn.W_Q")
    with pytest.raises(ParameterError, match="layer 7"):
        plots.attention_patterns(network, tokens, layers=[7])


def test_cli_inspect_writes_a_labelled_png(tmp_path, capsys, network):
    path = tmp_path / "net.npz"
    network.save(path)
    picture = tmp_path / "overview.png"
    assert main(["inspect", str(path), "--plot", str(picture), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plot"] == str(picture)
    assert picture.read_bytes()[:8] == PNG_MAGIC
    fig = plots.overview(network, network.task.random_tokens(0, 1)[0])
    residual, attention = [ax for ax in fig.axes if ax.images]
    assert ticks(residual.get_xticklabels()) == list(network.basis.labels)
    assert ticks(attention.get_yticklabels()) == [f"blocks.{l}.attn head 0" for l in range(len(network.layers))]


def test_cli_plot_errors_are_one_line(tmp_path, capsys, network):
    path = tmp_path / "net.npz"
    network.save(path)
    assert main(["inspect", str(path), "--plot", str(tmp_path / "missing" / "x.png")]) == 2
    assert main(["inspect", str(path), "--tokens", "1,2"]) == 2
    assert main(["inspect", str(path), "--plot", str(tmp_path / "x.png"), "--tokens", "1,2"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("witness: error:") for line in errors)


@settings(max_examples=5, deadline=None)
@given(ws.networks(max_layers=2))
def test_a_network_without_a_task_still_draws(net_and_tokens):
    network, tokens = net_and_tokens
    fig = plots.overview(network, tokens[0])
    residual = [ax for ax in fig.axes if ax.images][0]
    assert ticks(residual.get_xticklabels()) == list(network.basis.labels)


# -- the report's plots: outcomes, p*, capacity curves, the dataflow grid -------------------------------------------
def drawn(fig):
    """Lay the figure out and draw it (Agg), so that extents are what a saved file shows; returns the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


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
            row("missing", "construction", "not available", 161),
            row("deep", "construction", "certified", 405, L=3, n_ctx=46)]


def test_outcome_categories_from_the_rows_fields():
    from experiments import hierarchy_report as report

    rows = outcome_rows()
    assert [report.category(row) for row in rows] == [
        report.PROVEN, report.PROVEN, report.UNTRAINED, report.EVIDENCE, report.NO_EVIDENCE, report.CONTROL, None,
        report.PROVEN]
    assert report.category({"status": "failures found", "weights": "natural"}) == report.UNTRAINED
    assert report.category({"status": "unknown", "weights": "trained", "control_learned": True}) is None
    # floor(n^(2^-(4L+2))): tiny at runnable prompt lengths, the stored value for a separation row
    assert report.covered_Hdp(rows[0], {}) == 1 and report.covered_Hdp(rows[2], {1: 16}) == 1
    assert report.covered_Hdp(rows[1], {}) == 33850
    assert report.covered_Hdp({"L": 1, "task": "composition", "n_ctx": 2 ** 64}, {}) == 2
    assert report.covered_Hdp({"L": None, "task": "two_sum", "n_ctx": 16}, {}) is None


def test_outcomes_draw_one_legend_entry_per_category_and_the_separation_on_its_own_panel(tmp_path):
    from experiments import hierarchy_report as report

    rows = outcome_rows()
    fig = report.plot_outcomes(tmp_path / "outcomes.png", rows)
    assert (tmp_path / "outcomes.png").read_bytes()[:8] == PNG_MAGIC
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    words = {kind: style[2] for kind, style in report.CATEGORY_STYLE.items()}
    assert legend[:5] == [words[kind] for kind in (report.PROVEN, report.EVIDENCE, report.NO_EVIDENCE,
                                                   report.CONTROL, report.UNTRAINED)]
    assert len(set(words.values())) == 5 and "hollow: no failing input found" in legend
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
    fig = report.plot_outcomes(tmp_path / "o.png", [dict(rows[2], category=report.EVIDENCE), rows[0]])
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert legend[:2] == [words[report.PROVEN], words[report.EVIDENCE]] and words[report.UNTRAINED] not in legend
    assert len(fig.axes) == 1  # no separation row: one panel


def test_min_precision_legend_sits_outside_and_ticks_are_whole_bits(tmp_path):
    from experiments import hierarchy_report as report

    points = [{"L": L, "semantics": s, "log2_n": x, "p": p} for L, s, x, p in [
        (1, "strict", 2.0, 7), (1, "strict", 3.3, 7), (1, "theory", 8.0, 5), (1, "theory", 16.0, 6),
        (2, "theory", 8.1, 5), (2, "theory", 16.0, 6), (2, "strict", 3.0, 8), (2, "strict", 6.2, 9)]]
    fig = report.plot_min_precision(tmp_path / "p.png", points)
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
    from experiments import capacity

    curve = capacity_curve((24, 32, 48, 64))
    fig = capacity.plot(curve, tmp_path / "capacity.png")
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


def test_dataflow_grid_marks_reads_and_writes(network, tmp_path):
    from lab import dataflow

    fig = dataflow.draw(network, tmp_path / "flow.png")
    assert (tmp_path / "flow.png").read_bytes()[:8] == PNG_MAGIC
    ax = fig.axes[0]
    columns = [label.replace("\n", " ") for label in ticks(ax.get_xticklabels())]
    assert columns == ["embed pos", "embed tok", "blocks.0 attention", "blocks.0 mlp", "blocks.1 attention",
                       "blocks.1 mlp", "blocks.2 attention", "blocks.2 mlp", "unembed"]
    rows = [label.split("  (")[0] for label in ticks(ax.get_yticklabels())]
    assert rows == list(network.basis.labels)
    assert ticks(ax.get_yticklabels())[rows.index("val[0]")].endswith("(token)")
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    flow = dataflow.dataflow(network)
    grid = ax.images[0].get_array()
    for r, label in enumerate(rows):
        assert ("U" in cells.get((r, 8), "")) == (r in flow.readout)
        assert ("K" in cells.get((r, 6), "")) == (r in flow.layers[2].key)
        assert ("W" in cells.get((r, 0), "")) == (r in flow.position_written)
        assert (grid[r, 3] >= 2) == (r in flow.layers[0].mlp_writes)  # red or purple: written
    # past MAX_ROWS directions, one row per label group
    dataflow_rows = dataflow.MAX_ROWS
    try:
        dataflow.MAX_ROWS = 4
        grouped = ticks(dataflow.draw(network).axes[0].get_yticklabels())
    finally:
        dataflow.MAX_ROWS = dataflow_rows
    assert grouped[0] == "one  (position)" and "R2 (2)  (computed)" in grouped
