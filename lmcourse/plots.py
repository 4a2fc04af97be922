"""Figures the book draws again and again, in one consistent style.

Every chapter draws the same few pictures: a training curve with the band a
correct model should end in, a matrix of counts or probabilities, the
attention weights of a head, words placed in a 2-D projection of their
vectors. Drawing them here keeps colours, labels and units the same from
Unit 1 to Unit 7, and keeps chapter code about the idea rather than about
Matplotlib.

Each function takes plain arrays (NumPy, lists, or CPU tensors), draws on a
given or new Matplotlib axes, and returns the axes, so a chapter can add a
title or a second curve. Shapes are checked up front, with a message that
says what was expected.
"""

from __future__ import annotations

from typing import Sequence

# No matplotlib.use() here: a notebook kernel keeps its inline backend, and
# Matplotlib itself falls back to the headless Agg backend without a display.
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.ticker import MaxNLocator

# Series colours: Okabe and Ito's palette (2008), chosen so that readers with any of the common colour
# vision deficiencies still tell the curves apart. The first five also contrast at least 3:1 with the
# white page (WCAG's bar for graphics); lmcourse.figure_notes checks both for every figure of the book.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9"]
GROUPS = ListedColormap(PALETTE, name="okabe_ito")  # categories (word groups), in the same colours

COURSE_STYLE = {
    "axes.prop_cycle": plt.cycler(color=PALETTE),
    "image.cmap": "viridis",  # perceptually uniform and readable without colour vision
    "font.size": 10,
    "legend.frameon": False,
}


def use_course_style() -> None:
    """Set Matplotlib's defaults to the course's (colour-blind-safe series colours, viridis maps).

    Importing this module does it, so a chapter's own `plt.plot` calls get the same colours as the
    helpers below; call it again after a `plt.rcdefaults()`.
    """
    plt.rcParams.update(COURSE_STYLE)


use_course_style()


def _axes(ax=None, figsize=(6, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _matrix(values, name: str) -> np.ndarray:
    m = np.asarray(values, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix (rows, columns), got an array of shape {m.shape}")
    return m


def _check_labels(labels, n: int, what: str) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"expected {n} {what} labels (one per {what}), got {len(labels)}")


def loss_curves(
    curves: dict[str, tuple[Sequence[float], Sequence[float]]],
    *,
    expected_range: tuple[float, float] | None = None,
    expected_label: str = "range a correct implementation reaches",
    ylabel: str = "loss (nats per token)",
    xlabel: str = "step",
    ax=None,
):
    """Plot named (steps, losses) curves, shading the band a correct model ends in.

    The band is what turns a loss curve into a check a student can read: "my
    validation loss should end between 1.8 and 2.0 nats per token".

    >>> ax = loss_curves({"train": ([0, 100, 200], [4.2, 2.3, 1.9]),
    ...                   "val": ([0, 100, 200], [4.2, 2.4, 2.1])}, expected_range=(1.8, 2.2))
    """
    ax = _axes(ax)
    for name, (steps, losses) in curves.items():
        if len(steps) != len(losses):
            raise ValueError(f"curve {name!r}: {len(steps)} steps but {len(losses)} losses; give one loss per step")
        ax.plot(steps, losses, label=name)
    if expected_range is not None:
        lo, hi = expected_range
        if lo > hi:
            raise ValueError(f"expected_range must be (low, high), got ({lo}, {hi})")
        ax.axhspan(lo, hi, color=PALETTE[2], alpha=0.15, label=expected_label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are counted: no "2.5" ticks
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def heatmap(
    matrix: np.ndarray,
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    cmap: str = "Blues",
    annotate: bool = False,
    fmt: str = "{:.2f}",
    xlabel: str | None = None,
    ylabel: str | None = None,
    colorbar: bool = True,
    ax=None,
):
    """A labelled heat map: attention weights, count matrices, confusion tables.

    With `annotate`, each cell also prints its value, in black or white, whichever contrasts more with
    the cell's own colour (with viridis, "high" is yellow: white on it could not be read).
    """
    matrix = _matrix(matrix, "the heat map's values")
    _check_labels(row_labels, matrix.shape[0], "row")
    _check_labels(col_labels, matrix.shape[1], "column")
    ax = _axes(ax, figsize=(max(4, 0.35 * matrix.shape[1] + 2), max(3, 0.35 * matrix.shape[0] + 1.5)))
    im = ax.imshow(matrix, cmap=cmap, aspect="auto")
    if row_labels is not None:
        ax.set_yticks(range(len(row_labels)), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(len(col_labels)), labels=list(col_labels), rotation=90)
    if annotate and matrix.size:
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                v = matrix[i, j]
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=8, color=text_colour(im.to_rgba(v)))
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(im, ax=ax)
    return ax


def text_colour(background) -> str:
    """Black or white: the one with the higher WCAG contrast against `background` (an RGB(A) colour)."""
    from lmcourse.figure_notes import contrast

    return "black" if contrast((0, 0, 0), background) >= contrast((1, 1, 1), background) else "white"


def count_matrix(counts: np.ndarray, labels: Sequence[str], *, ax=None, **kw):
    """Bigram-style count matrix: rows are the previous token, columns the next.

    Counts of text are heavily skewed (a few pairs are very common, most are
    zero), so chapters often pass `np.log10(1 + counts)` and say so in the
    caption.
    """
    return heatmap(counts, row_labels=labels, col_labels=labels, xlabel="next token",
                   ylabel="previous token", ax=ax, **kw)


def attention_map(weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], *, ax=None, **kw):
    """Attention weights (T_q, T_k): each row is one query's distribution over keys.

    Rows should sum to one (a softmax over keys); masked positions show as 0.
    """
    kw.setdefault("cmap", "viridis")
    return heatmap(weights, row_labels=queries, col_labels=keys, xlabel="key (attended to)",
                   ylabel="query", ax=ax, **kw)


def embedding_scatter(points: np.ndarray, labels: Sequence[str], *, groups: Sequence[int] | None = None, ax=None):
    """2-D projection of word vectors with each point labelled by its word.

    `points` (N, 2) comes from a projection such as PCA of the (N, d) vectors;
    `groups` (N,) colours words by a category (e.g. countries vs capitals), so
    a reader can see whether the vectors keep the categories apart.
    """
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"points must have shape (N, 2), got {points.shape}; project the vectors to 2-D first")
    if len(labels) != len(points):
        raise ValueError(f"expected {len(points)} labels (one per point), got {len(labels)}")
    if groups is not None and len(groups) != len(points):
        raise ValueError(f"expected {len(points)} group ids (one per point), got {len(groups)}")
    ax = _axes(ax, figsize=(6, 6))
    if groups is None:
        ax.scatter(points[:, 0], points[:, 1], color=PALETTE[0], s=20)
    else:  # group k in the palette's k-th colour
        ax.scatter(points[:, 0], points[:, 1], c=groups, cmap=GROUPS, vmin=0, vmax=len(PALETTE) - 1, s=20)
    for (x, y), label in zip(points, labels):
        ax.annotate(label, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def distribution_panels(
    distributions: dict[str, Sequence[float]],
    outcomes: Sequence[str],
    *,
    ylabel: str = "probability",
    highlight: str | None = None,
    ylim: tuple[float, float] | None = (0.0, 1.0),
    axes=None,
):
    """Several distributions over the same outcomes, one bar chart per panel, side by side.

    For next-token distributions under different temperatures, top-k or top-p cuts:
    `distributions` maps a panel title to one probability per outcome (same order as
    `outcomes`); the panel named `highlight` is drawn in a second colour. A new figure holds at most three
    panels a row. Returns the axes, one per distribution.
    """
    if not distributions:
        raise ValueError("distributions is empty: pass at least one {title: probabilities} entry")
    for title, probs in distributions.items():
        if len(probs) != len(outcomes):
            raise ValueError(f"panel {title!r} has {len(probs)} probabilities but there are "
                             f"{len(outcomes)} outcomes; pass one probability per outcome, in the same order")
    if axes is None:
        # At most three panels a row: the page's column is about 7 inches wide, and five panels side by
        # side shrank their labels to 5 pixels (lmcourse.figure_notes measures it).
        n = len(distributions)
        cols = min(n, 3)
        rows = -(-n // cols)
        fig, grid = plt.subplots(rows, cols, figsize=(2.5 * cols, 2.9 * rows), sharey=True,
                                 layout="constrained", squeeze=False)
        for extra in grid.ravel()[n:]:
            extra.set_visible(False)
        axes = list(grid.ravel()[:n])
        for row in grid:
            row[0].set_ylabel(ylabel)
    else:
        axes[0].set_ylabel(ylabel)
    for ax, (title, probs) in zip(axes, distributions.items()):
        ax.bar(range(len(outcomes)), np.asarray(probs, dtype=float),
               color=PALETTE[1] if title == highlight else PALETTE[0])
        ax.set_xticks(range(len(outcomes)), labels=list(outcomes), rotation=70, fontsize=9)
        ax.set_title(title, fontsize=10)
        if ylim is not None:
            ax.set_ylim(*ylim)
    return axes
