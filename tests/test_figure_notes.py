"""lmcourse.figure_notes: the words a figure's alt text says, and the legibility audit, each shown able to fail.

tests/test_book.py applies the audit to every figure of the built book; here each kind of problem is
planted in a small figure and must be found, and the course's own plotting helpers must pass.
"""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from lmcourse import diagrams, figure_notes as fn, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _drawn(fig):
    fig.canvas.draw()  # tick labels exist once the figure is drawn, as in the kernel (after its PNG)
    return fig


def test_a_line_chart_is_described_by_its_series_and_axes():
    ax = plots.loss_curves({"train": ([0, 100, 200], [4.2, 2.3, 1.9]), "val": ([0, 100, 200], [4.3, 2.5, 2.1])},
                           expected_range=(1.8, 2.2))
    text = fn.describe(_drawn(ax.figure))
    for words in ("train from 4.2 to 1.9", "val from 4.3 to 2.1", "x axis step", "loss (nats per token)"):
        assert words in text, f"{words!r} missing from {text!r}"


def test_a_heat_map_is_described_by_its_size_range_and_categories():
    ax = plots.attention_map(np.full((3, 4), 0.25), ["a", "b", "c"], ["w", "x", "y", "z"])
    text = fn.describe(_drawn(ax.figure))
    assert "3 rows by 4 columns" in text and "values 0.25 to 0.25" in text
    assert "categories w, x, y, z" in text and "query" in text, text


def test_panels_are_described_one_by_one_and_maths_is_spoken_plainly():
    fig, axes = plt.subplots(1, 2)
    axes[0].plot([0, 1, 2], [1, 2, 3], label="$h_{t-1}$")
    axes[0].legend()
    axes[0].set_title("first")
    axes[1].bar(["a", "b"], [1, 2])
    text = fn.describe(_drawn(fig))
    assert text.startswith("2 panels: panel 1 (first: 1 line: h_{t-1} from 1 to 3") and "panel 2 (2 bars" in text, text


def test_a_diagram_says_what_it_draws():
    ax = diagrams.unrolled_rnn(steps=3)
    text = fn.describe(_drawn(ax.figure))
    assert "recurrent" in text.lower() and "3" in text, text


def test_a_description_can_be_given():
    fig, ax = plt.subplots()
    fn.set_description(ax, "A  sketch of   two boxes.")
    assert fn.describe(fig) == "A sketch of two boxes."
    with pytest.raises(ValueError):
        fn.set_description(fig, "  ")


def test_small_text_is_measured_in_pixels_of_the_png_and_on_the_page():
    fig, ax = plt.subplots(figsize=(14, 3), dpi=100)
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=7)
    notes = fn.audit(_drawn(fig))
    assert notes["min_font_px"] == pytest.approx(7 * 100 / 72, abs=0.01)
    shown = fn.font_px_on_page(notes["min_font_px"], 1400)
    assert shown == pytest.approx(7 * 100 / 72 * 672 / 1400, abs=0.01) and shown < fn.MIN_FONT_PX


def test_fractional_ticks_on_a_counted_axis_are_found():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [0.5, 0.2, 0.1])
    problems = fn.audit(_drawn(fig))["problems"]
    assert any("counts whole numbers" in p and "1.5" in p for p in problems), problems
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    assert not fn.audit(_drawn(fig))["problems"]


def test_maths_written_as_plain_text_is_found():
    fig, ax = plt.subplots()
    ax.set_xlabel("norm of h_t")
    assert any("h_t" in p for p in fn.audit(_drawn(fig))["problems"])
    ax.set_xlabel("norm of $h_t$ (tok_emb)")  # maths in $...$, a code name with an underscore: both fine
    assert not fn.audit(_drawn(fig))["problems"]


def test_white_on_yellow_is_found_and_the_heat_map_helper_picks_readable_text():
    fig, ax = plt.subplots()
    m = np.array([[0.0, 1.0], [0.5, 0.9]])
    ax.imshow(m, cmap="viridis")
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, f"{v:.1f}", color="white")
    assert any("contrast" in p for p in fn.audit(_drawn(fig))["problems"])
    for cmap in ("viridis", "Blues", "RdBu", "magma"):
        ax = plots.heatmap(np.linspace(-1, 1, 36).reshape(6, 6), annotate=True, cmap=cmap)
        assert not fn.audit(_drawn(ax.figure))["problems"], cmap


def test_series_a_colour_blind_reader_cannot_tell_apart_are_found():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="tab:red", label="a")
    ax.plot([0, 1], [1, 0], color="tab:green", label="b")
    problems = fn.audit(_drawn(fig))["problems"]
    assert any("'a' and 'b'" in p for p in problems), problems
    ax.lines[1].set_linestyle("--")  # a dash tells them apart
    assert not fn.audit(_drawn(fig))["problems"]


def test_the_course_palette_is_safe_for_colour_blind_readers_and_visible_on_white():
    for a, b in itertools.combinations(plots.PALETTE[:5], 2):
        for vision in ("normal", "protanopia", "deuteranopia", "tritanopia"):
            assert fn.colour_distance(to_rgb(a), to_rgb(b), vision) >= fn.MIN_SERIES_DISTANCE, (a, b, vision)
    for c in plots.PALETTE[:5]:
        assert fn.contrast(to_rgb(c), (1, 1, 1)) >= 3.0, c  # WCAG 1.4.11: graphics against the page


def test_the_course_helpers_pass_the_audit():
    ax = plots.loss_curves({"train": (list(range(0, 1001, 100)), np.linspace(4, 2, 11)),
                            "val": (list(range(0, 1001, 100)), np.linspace(4, 2.2, 11))}, expected_range=(2, 2.3))
    assert not fn.audit(_drawn(ax.figure))["problems"]
    ax = plots.embedding_scatter(np.random.default_rng(0).normal(size=(6, 2)), list("abcdef"), groups=[0, 0, 1, 1, 2, 2])
    assert not fn.audit(_drawn(ax.figure))["problems"]
    axes = plots.distribution_panels({"τ = 0.5": [0.5, 0.3, 0.2], "τ = 1": [0.4, 0.35, 0.25]}, ["a", "b", "c"],
                                     highlight="τ = 1")
    assert not fn.audit(_drawn(axes[0].figure))["problems"]


def test_the_kernel_hook_attaches_the_notes_to_each_png():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        fn.install(shell)
        fn.install(shell)  # twice is once
        from IPython.core.pylabtools import select_figure_formats

        select_figure_formats(shell, {"png"})  # what the inline backend does when it starts, after the hook
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [3, 2, 1], label="loss")
        ax.legend()
        data, md = shell.display_formatter.format(fig)
        assert data["image/png"][:4] in (b"\x89PNG", "iVBO"), "the PNG itself is still there"
        notes = md["image/png"]
        assert "loss from 3 to 1" in notes["alt"]
        assert notes[fn.NOTES_KEY]["min_font_px"] > 0 and "problems" in notes[fn.NOTES_KEY]
    finally:
        InteractiveShell.clear_instance()
