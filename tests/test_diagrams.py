"""The book's architecture diagrams: they draw, name what the chapter's equations name, and stay on the page."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

from lmcourse import diagrams  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# Each diagram, and symbols of the chapter's equations that it must show.
DIAGRAMS = {
    "unrolled_rnn": (lambda: diagrams.unrolled_rnn(steps=3),
                     [r"W_{hh}", r"W_{xh}", r"W_{hy}", r"\mathbf{h}_0", r"\mathbf{x}_{3}", "softmax", "<BOS>"]),
    "lstm_cell": (diagrams.lstm_cell,
                  [r"\mathbf{f}_t", r"\mathbf{i}_t", r"\mathbf{o}_t", r"\tilde{\mathbf{c}}_t", r"\mathbf{c}_{t-1}",
                   r"\mathbf{h}_{t-1}", r"\mathbf{x}_t", r"\sigma"]),
    "feedforward_lm": (lambda: diagrams.feedforward_lm(context=3),
                       [r"w_{t-3}", r"w_{t-1}", "$E$", r"\tanh(W\mathbf{x} + \mathbf{b})", r"U\mathbf{h}",
                        r"P(w_t \mid w_{t-3:t-1})"]),
    "attention_seq2seq": (diagrams.attention_seq2seq,
                          [r"\bar{\mathbf{h}}_{1}", r"\mathbf{h}_t", r"\mathbf{c}_t", r"W_c[\mathbf{c}_t; \mathbf{h}_t]",
                           r"\mathrm{softmax}_j", "query", "<BOS>", "<EOS>"]),
    "transformer_stacks": (diagrams.transformer_stacks,
                           ["self-attention", "masked self-attention", "cross-attention", "feed-forward", "memory",
                            r"N_\mathrm{enc}", r"N_\mathrm{dec}", "<BOS>", "keys"]),
    "norm_placement": (diagrams.norm_placement,
                       ["post-norm", "pre-norm", r"\mathrm{LN}(X + \mathrm{Sublayer}(X))",
                        r"X + \mathrm{Sublayer}(\mathrm{LN}(X))", "LN", "residual", "X'"]),
}


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _drawn(ax):
    """Every patch, line and text of the axes, with its extent on the rendered page (display units)."""
    renderer = ax.figure.canvas.get_renderer()
    ax.figure.canvas.draw()
    for artist in [*ax.patches, *ax.lines, *ax.texts]:
        yield artist, artist.get_window_extent(renderer)


@pytest.mark.parametrize("name", DIAGRAMS)
def test_diagram_draws_and_names_the_equations_symbols(name):
    draw, symbols = DIAGRAMS[name]
    ax = draw()
    texts = " ".join(_texts(ax))
    missing = [s for s in symbols if s not in texts]
    assert not missing, f"{name} should label {missing}; its texts are {_texts(ax)}"
    assert ax.patches, f"{name} drew no boxes"
    assert not ax.axison  # a diagram, not a plot: no ticks or frame


@pytest.mark.parametrize("name", DIAGRAMS)
def test_nothing_is_drawn_outside_the_axes(name):
    ax = DIAGRAMS[name][0]()
    drawn = list(_drawn(ax))  # draw first: the layout and the equal aspect move the axes
    frame = ax.get_window_extent().padded(1.0)  # one pixel for antialiasing
    outside = [(type(a).__name__, getattr(a, "get_text", lambda: "")(), tuple(round(v) for v in box.extents))
               for a, box in drawn
               if box.x0 < frame.x0 or box.y0 < frame.y0 or box.x1 > frame.x1 or box.y1 > frame.y1]
    assert not outside, f"{name}: drawn outside the axes {tuple(round(v) for v in frame.extents)}: {outside}"


@pytest.mark.parametrize("name", DIAGRAMS)
def test_labels_do_not_overlap(name):
    ax = DIAGRAMS[name][0]()
    renderer = ax.figure.canvas.get_renderer()
    ax.figure.canvas.draw()
    # Text.get_window_extent is the text alone, without an annotation's arrow.
    labels = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in ax.texts
              if t.get_text() and not isinstance(t, Annotation)]
    clashes = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(labels, 2) if box_a.overlaps(box_b)]
    assert not clashes, f"{name}: overlapping labels {clashes}"


def test_unrolled_rnn_draws_one_column_per_step():
    for steps in [1, 5]:
        ax = diagrams.unrolled_rnn(steps=steps)
        texts = _texts(ax)
        assert texts.count("softmax") == steps
        assert sum("W_{hh}" in t for t in texts) == steps  # the same matrix on every step's arrow
    with pytest.raises(ValueError, match="at least 1"):
        diagrams.unrolled_rnn(steps=0)


def test_feedforward_lm_concatenates_every_context_embedding():
    ax = diagrams.feedforward_lm(context=4, d_embed=3)
    assert sum(t.startswith("$w_{t-") for t in _texts(ax)) == 4
    squares = [p for p in ax.patches if p.get_width() == pytest.approx(p.get_height())]
    assert len(squares) == 2 * 4 * 3  # each embedding drawn once when looked up and once in the concatenation
    with pytest.raises(ValueError, match="at least 1"):
        diagrams.feedforward_lm(context=0)


def test_diagrams_draw_on_a_given_axes():
    fig, axes = plt.subplots(1, 3)
    for ax, draw in zip(axes, [diagrams.unrolled_rnn, diagrams.lstm_cell, diagrams.feedforward_lm]):
        assert draw(ax=ax) is ax
    assert len(fig.axes) == 3
