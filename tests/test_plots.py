"""The book's shared figure helpers: they draw what they say and reject mismatched shapes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lmcourse import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_loss_curves_draws_each_curve_and_the_expected_band():
    ax = plots.loss_curves({"train": ([0, 1, 2], [3.0, 2.0, 1.5]), "val": ([0, 1, 2], [3.1, 2.2, 1.9])},
                           expected_range=(1.4, 2.0))
    assert [line.get_label() for line in ax.get_lines()] == ["train", "val"]
    assert len(ax.patches) == 1  # axhspan adds one rectangle, y in data units
    band = ax.patches[0].get_bbox()
    assert (band.y0, band.y1) == (pytest.approx(1.4), pytest.approx(2.0))
    assert ax.get_ylabel() == "loss (nats per token)"


def test_loss_curves_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="3 steps but 2 losses"):
        plots.loss_curves({"train": ([0, 1, 2], [3.0, 2.0])})


def test_heatmap_labels_and_annotations():
    m = np.array([[0.0, 1.0], [0.5, 0.25]])
    ax = plots.heatmap(m, row_labels=["a", "b"], col_labels=["x", "y"], annotate=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    assert texts["1.00"] == "white" and texts["0.00"] == "black"  # dark cell, light cell


def test_heatmap_rejects_wrong_label_counts():
    with pytest.raises(ValueError, match="expected 2 column labels"):
        plots.heatmap(np.zeros((2, 2)), col_labels=["only one"])
    with pytest.raises(ValueError, match="2-D matrix"):
        plots.heatmap(np.zeros(3))


def test_count_matrix_and_attention_map_axes():
    ax = plots.count_matrix(np.arange(9).reshape(3, 3), ["<BOS>", "a", "b"])
    assert ax.get_xlabel() == "next token" and ax.get_ylabel() == "previous token"
    w = np.tril(np.ones((3, 3)))
    w /= w.sum(1, keepdims=True)
    ax = plots.attention_map(w, ["q1", "q2", "q3"], ["k1", "k2", "k3"])
    assert ax.get_xlabel() == "key (attended to)"
    assert ax.images[0].get_cmap().name == "viridis"


def test_embedding_scatter_labels_every_point():
    pts = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    ax = plots.embedding_scatter(pts, ["king", "queen", "man"], groups=[0, 0, 1])
    assert [t.get_text() for t in ax.texts] == ["king", "queen", "man"]
    with pytest.raises(ValueError, match=r"shape \(N, 2\)"):
        plots.embedding_scatter(np.zeros((3, 5)), ["a", "b", "c"])
    with pytest.raises(ValueError, match="expected 3 labels"):
        plots.embedding_scatter(pts, ["a"])


def test_distribution_panels_one_panel_per_distribution():
    axes = plots.distribution_panels({"T=0.5": [0.9, 0.1], "T=2": [0.6, 0.4]}, ["a", "b"], highlight="T=2")
    assert [ax.get_title() for ax in axes] == ["T=0.5", "T=2"]
    heights = [[p.get_height() for p in ax.patches] for ax in axes]
    assert heights == [[0.9, 0.1], [0.6, 0.4]]
    assert axes[0].patches[0].get_facecolor() != axes[1].patches[0].get_facecolor()
    with pytest.raises(ValueError, match="2 probabilities but there are 3 outcomes"):
        plots.distribution_panels({"x": [0.5, 0.5]}, ["a", "b", "c"])


def test_importing_plots_keeps_the_notebook_backend():
    import subprocess
    import sys

    code = ("import matplotlib; matplotlib.use('module://matplotlib_inline.backend_inline');"
            "import lmcourse.plots; print(matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "inline" in out.stdout


def test_book_tables_show_tokens_as_text():
    from lmcourse.display import markdown_table

    table = markdown_table(["token", "count"], [["<EOS>", 3], ["a|b", 1]])
    assert table.splitlines() == ["| token | count |", "|---|---|", "| &lt;EOS&gt; | 3 |", "| a\\|b | 1 |"]
