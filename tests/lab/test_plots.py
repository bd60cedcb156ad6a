"""lab.plots: labelled heatmaps whose pixels are the executor's numbers, and `witness inspect --plot`."""

import json

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

from tests.figures import PNG_MAGIC, ticks  # noqa: E402



@pytest.fixture(scope="module")
def network():
    return witness.compile("composition", L=2, m=2, n=[2])


@pytest.fixture(scope="module")
def tokens(network):
    return network.task.random_tokens(3, 1)[0]


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
