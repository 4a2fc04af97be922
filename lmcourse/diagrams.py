"""Architecture diagrams drawn by code: boxes for vectors, arrows for weights.

A chapter that introduces a network shows it twice, as equations and as a
picture. The pictures are drawn here, with Matplotlib patches and mathtext
labels that use the chapter's own symbols ($W_{hh}$, $\\mathbf{h}_t$,
$\\mathbf{f}_t$), so the book needs no image files and a figure can never
drift out of date with its notation.

One colour per role, the same in every diagram: grey for tokens, blue for
embeddings, orange for hidden states, purple for gates, green for what the
model outputs, white for a whole sublayer and yellow for a normalisation. Each function draws on a given or new axes in data
coordinates with an equal aspect (circles stay round), hides the frame, and
returns the axes.
"""

from __future__ import annotations

# No matplotlib.use() here, for the same reason as in lmcourse.plots.
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyBboxPatch, Rectangle

# role -> (fill, edge)
COLOURS = {
    "token": ("#eeeeee", "#777777"),
    "embedding": ("#d6e6f5", "#3b75af"),
    "state": ("#fde3c8", "#b0600e"),  # edges dark enough for a label in the same colour (4.6:1 on white)
    "gate": ("#e7dcf3", "#7b52ae"),
    "output": ("#dcefd8", "#2f7a2a"),
    "layer": ("#ffffff", "#444444"),  # a whole sublayer (attention, feed-forward), drawn as one box
    "norm": ("#fff4c2", "#8a6508"),   # a normalisation
}
WIRE = "#444444"  # arrows and lines that carry a vector
NOTE = "#595959"  # italic notes beside the drawing: a grey with 7:1 contrast on white (WCAG asks 4.5:1)
WEIGHT = "#b03a2e"  # labels that name a weight matrix
FONT = 11  # labels inside boxes
SMALL = 10  # labels on arrows and notes


def _describe(ax, text: str) -> None:
    """What the diagram draws, in words: its alt text in the book (lmcourse.figure_notes)."""
    from lmcourse.figure_notes import set_description

    set_description(ax, text)


def _canvas(ax, xlim, ylim, inches_per_unit=0.8):
    """Axes showing exactly xlim × ylim at an equal aspect; a new figure is sized to fit them."""
    if ax is None:
        figsize = (inches_per_unit * (xlim[1] - xlim[0]), inches_per_unit * (ylim[1] - ylim[0]))
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def _box(ax, centre, text, role, width=1.0, height=0.6, fontsize=FONT):
    """A rounded box of `role`'s colours centred on `centre`, with `text` in its middle."""
    x, y = centre
    fill, edge = COLOURS[role]
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0,rounding_size=0.08", fc=fill, ec=edge, lw=1.3))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def _operator(ax, centre, symbol, radius=0.22):
    """A pointwise operation (× or +) drawn as a small circle, as in most LSTM diagrams."""
    ax.add_patch(Circle(centre, radius, fc="white", ec=WIRE, lw=1.3))
    ax.text(*centre, symbol, ha="center", va="center", fontsize=FONT + 1)


def _arrow(ax, start, end, colour=WIRE):
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.3, shrinkA=0, shrinkB=0, mutation_scale=12))


def _wire(ax, points):
    """A vector travelling along a polyline with corners; the last segment ends in an arrowhead."""
    xs, ys = zip(*points)
    ax.plot(xs[:-1], ys[:-1], color=WIRE, lw=1.3, solid_capstyle="butt")
    _arrow(ax, points[-2], points[-1])


def _junction(ax, xy):
    """A dot where one vector is copied to two places."""
    ax.plot(*xy, "o", ms=4, color=WIRE)


def _label(ax, xy, text, colour=WEIGHT, ha="left", va="center", fontsize=SMALL):
    ax.text(*xy, text, ha=ha, va=va, fontsize=fontsize, color=colour)


def _column(ax, x, boxes, height=0.6):
    """Boxes (y, text, role, width) drawn bottom to top at `x`, each joined to the next by an arrow;
    returns their heights."""
    for (y, text, role, width), above in zip(boxes, [*boxes[1:], None]):
        _box(ax, (x, y), text, role, width=width, height=height)
        if above is not None:
            _arrow(ax, (x, y + height / 2), (x, above[0] - height / 2))
    return [y for y, *_ in boxes]


def unrolled_rnn(ax=None, steps=4):
    """The Elman RNN language model unrolled over `steps` time steps.

    Bottom to top at step t: the previous token $w_{t-1}$, its embedding
    $\\mathbf{x}_t$, the state $\\mathbf{h}_t$ (which also receives
    $\\mathbf{h}_{t-1}$ from the left), and the softmax that predicts $w_t$.
    Every arrow of a kind carries the same weight matrix: the unrolled network
    is deep, but it has one layer's worth of parameters.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1 (the number of time steps to draw), got {steps}")
    dx = 2.3  # distance between time steps
    top = 6.2
    ax = _canvas(ax, (-0.95, dx * steps + 0.95), (-0.4, top + 0.4), inches_per_unit=0.75)
    row = {"token": 0.3, "x": 1.75, "h": 3.35, "out": 4.95}
    _box(ax, (0, row["h"]), r"$\mathbf{h}_0 = \mathbf{0}$", "state", width=1.45)
    for name, y in [("previous token", row["token"]), ("embedding", row["x"]), ("output", row["out"]),
                    ("prediction", top)]:
        ax.text(0, y, name, ha="center", va="center", fontsize=SMALL, color=NOTE, style="italic")
    for t in range(1, steps + 1):
        x = dx * t
        previous = r"$w_0$ = <BOS>" if t == 1 else f"$w_{{{t - 1}}}$"
        _box(ax, (x, row["token"]), previous, "token", width=1.45 if t == 1 else 0.9)
        _box(ax, (x, row["x"]), rf"$\mathbf{{x}}_{{{t}}}$", "embedding", width=0.9)
        _box(ax, (x, row["h"]), rf"$\mathbf{{h}}_{{{t}}}$", "state", width=0.9)
        _box(ax, (x, row["out"]), "softmax", "output", width=1.3)
        ax.text(x, top, rf"$p(w_{{{t}}} \mid \mathbf{{h}}_{{{t}}})$", ha="center", va="center", fontsize=FONT)
        # vertical: token -> embedding -> state -> scores -> prediction
        _arrow(ax, (x, row["token"] + 0.3), (x, row["x"] - 0.3))
        _label(ax, (x + 0.1, (row["token"] + row["x"]) / 2), r"$E$", colour=COLOURS["embedding"][1])
        _arrow(ax, (x, row["x"] + 0.3), (x, row["h"] - 0.3))
        _label(ax, (x + 0.1, (row["x"] + row["h"]) / 2), r"$W_{xh}$")
        _arrow(ax, (x, row["h"] + 0.3), (x, row["out"] - 0.3))
        _label(ax, (x + 0.1, (row["h"] + row["out"]) / 2), r"$W_{hy}$")
        _arrow(ax, (x, row["out"] + 0.3), (x, top - 0.3))
        # horizontal: the state carried from the previous step
        left_edge = 0.725 if t == 1 else dx * (t - 1) + 0.45
        _arrow(ax, (left_edge, row["h"]), (x - 0.45, row["h"]))
        _label(ax, ((left_edge + x - 0.45) / 2, row["h"] + 0.12), r"$W_{hh}$", ha="center", va="bottom")
    # the last state goes on to the next step (or window, in truncated BPTT)
    _arrow(ax, (dx * steps + 0.45, row["h"]), (dx * steps + 0.85, row["h"]))
    _describe(ax, f"Diagram of a recurrent language model unrolled over {steps} time steps. At each step t, from "
                  "bottom to top: the previous token w_(t-1) (w_0 is <BOS>), its embedding x_t through the matrix E, "
                  "the hidden state h_t through W_xh, a softmax through W_hy, and the prediction p(w_t | h_t). An "
                  "arrow labelled W_hh carries each state to the next step, starting from h_0 = 0; every step uses "
                  "the same matrices.")
    return ax


def lstm_cell(ax=None):
    """One step of the LSTM, eq. (rnn-lstm), as a cell with three gates.

    The cell state runs along the top: multiplied by the forget gate, then
    added to (input gate × candidate). The hidden state is the output gate
    times $\\tanh(\\mathbf{c}_t)$. Every gate and the candidate is a layer of
    its own over $[\\mathbf{x}_t, \\mathbf{h}_{t-1}]$, running along the
    bottom; σ squashes into (0, 1), tanh into (-1, 1).
    """
    ax = _canvas(ax, (0.1, 12.3), (-0.5, 6.45), inches_per_unit=0.7)
    cell_y, bus_y, gate_y = 5.4, 1.3, 2.75
    ax.add_patch(FancyBboxPatch((1.6, 0.7), 8.9, 5.4, boxstyle="round,pad=0,rounding_size=0.3",
                                fc="#fafafa", ec="#bbbbbb", lw=1.0, ls="--"))
    # gates and candidate: one layer each over [x_t, h_{t-1}]
    gates = {"f": 3.0, "i": 4.6, "c": 6.2, "o": 7.8}
    for name, gx in gates.items():
        _box(ax, (gx, gate_y), r"$\tanh$" if name == "c" else r"$\sigma$", "gate" if name != "c" else "state",
             width=0.95, height=0.6)
        ax.plot([gx, gx], [bus_y, gate_y - 0.3], color=WIRE, lw=1.3)
        if name != "o":  # the bus ends at the output gate; elsewhere it branches
            _junction(ax, (gx, bus_y))
    # the input: h_{t-1} from the left, x_t from below, joined into one vector
    _label(ax, (1.25, bus_y), r"$\mathbf{h}_{t-1}$", colour="black", ha="right", fontsize=FONT)
    ax.plot([1.35, gates["o"]], [bus_y, bus_y], color=WIRE, lw=1.3)
    _arrow(ax, (2.2, -0.05), (2.2, bus_y))
    _junction(ax, (2.2, bus_y))
    _label(ax, (2.2, -0.25), r"$\mathbf{x}_t$", colour="black", ha="center", fontsize=FONT)
    _label(ax, (4.6, bus_y - 0.28), r"$[\mathbf{x}_t, \mathbf{h}_{t-1}]$", colour=WIRE, ha="center", va="top")
    # the cell path: forget some, add some
    forget, add, write = (gates["f"], cell_y), (5.4, cell_y), (5.4, 4.2)
    _label(ax, (1.25, cell_y), r"$\mathbf{c}_{t-1}$", colour="black", ha="right", fontsize=FONT)
    _arrow(ax, (1.35, cell_y), (forget[0] - 0.22, cell_y))
    _operator(ax, forget, r"$\times$")
    _arrow(ax, (forget[0] + 0.22, cell_y), (add[0] - 0.22, cell_y))
    _operator(ax, add, "+")
    _arrow(ax, (add[0] + 0.22, cell_y), (11.35, cell_y))
    _label(ax, (11.45, cell_y), r"$\mathbf{c}_t$", colour="black", fontsize=FONT)
    _arrow(ax, (gates["f"], gate_y + 0.3), (forget[0], cell_y - 0.22))
    _label(ax, (gates["f"] + 0.1, 4.1), r"$\mathbf{f}_t$", colour=COLOURS["gate"][1])
    _operator(ax, write, r"$\times$")
    _wire(ax, [(gates["i"], gate_y + 0.3), (gates["i"], write[1]), (write[0] - 0.22, write[1])])
    _label(ax, (gates["i"] + 0.1, 3.55), r"$\mathbf{i}_t$", colour=COLOURS["gate"][1])
    _wire(ax, [(gates["c"], gate_y + 0.3), (gates["c"], write[1]), (write[0] + 0.22, write[1])])
    _label(ax, (gates["c"] + 0.1, 3.55), r"$\tilde{\mathbf{c}}_t$", colour=COLOURS["state"][1])
    _arrow(ax, (write[0], write[1] + 0.22), (add[0], cell_y - 0.22))
    # the hidden state: what the output gate lets out of tanh(c_t)
    squash, show = (9.2, 4.3), (9.2, 3.35)
    _junction(ax, (squash[0], cell_y))
    _arrow(ax, (squash[0], cell_y), (squash[0], squash[1] + 0.25))
    _box(ax, squash, r"$\tanh$", "state", width=0.95, height=0.5, fontsize=SMALL)
    _arrow(ax, (squash[0], squash[1] - 0.25), (show[0], show[1] + 0.22))
    _operator(ax, show, r"$\times$")
    _wire(ax, [(gates["o"], gate_y + 0.3), (gates["o"], show[1]), (show[0] - 0.22, show[1])])
    _label(ax, ((gates["o"] + show[0]) / 2 - 0.1, show[1] + 0.05), r"$\mathbf{o}_t$", colour=COLOURS["gate"][1],
           ha="center", va="bottom")
    _wire(ax, [(show[0], show[1] - 0.22), (show[0], bus_y), (11.35, bus_y)])
    _label(ax, (11.45, bus_y), r"$\mathbf{h}_t$", colour="black", fontsize=FONT)
    _describe(ax, "Diagram of one LSTM step. Along the bottom, the input x_t and the previous state h_(t-1) feed "
                  "four layers: the forget gate f, the input gate i (both sigmoids), the candidate (tanh) and the "
                  "output gate o (sigmoid). Along the top, the cell state c_(t-1) is multiplied by f, then the "
                  "product of i and the candidate is added, giving c_t. The new hidden state h_t is o times "
                  "tanh(c_t).")
    return ax


def feedforward_lm(ax=None, context=3, d_embed=4):
    """Bengio et al.'s feed-forward LM, eq. (rnn-ffnn), for a window of `context` tokens.

    Each token is looked up in the one embedding table $E$; the `context`
    vectors of `d_embed` numbers are laid end to end (the concatenation
    $\\mathbf{x}$), and an MLP turns $\\mathbf{x}$ into scores over the
    vocabulary. The prediction sees these tokens and nothing before them.
    """
    if context < 1 or d_embed < 1:
        raise ValueError(f"context and d_embed must be at least 1, got context={context}, d_embed={d_embed}")
    cell = 0.42  # side of one number of an embedding
    gap = 0.7  # space between the tokens' columns, closed up in the concatenation
    span = context * d_embed * cell + (context - 1) * gap
    width = max(span, 6.0) + 5.2  # room for the notes either side
    left = (width - span) / 2
    ax = _canvas(ax, (0, width), (-0.2, 7.7), inches_per_unit=0.7)
    centre = width / 2
    rows = {"token": 0.25, "lookup": 1.85, "concat": 3.25, "hidden": 4.75, "scores": 6.0, "prob": 7.2}
    concat_left = centre - context * d_embed * cell / 2
    for k in range(context):
        column = left + k * (d_embed * cell + gap)  # left edge of this token's embedding
        mid = column + d_embed * cell / 2
        offset = context - k
        _box(ax, (mid, rows["token"]), f"$w_{{t-{offset}}}$", "token", width=1.0, height=0.5)
        _arrow(ax, (mid, rows["token"] + 0.25), (mid, rows["lookup"] - cell / 2))
        _label(ax, (mid + 0.1, (rows["token"] + rows["lookup"]) / 2 - 0.05), r"$E$", colour=COLOURS["embedding"][1])
        target = concat_left + k * d_embed * cell  # where this vector sits in the concatenation
        for j in range(d_embed):
            for x0, y in [(column, rows["lookup"]), (target, rows["concat"])]:
                fill, edge = COLOURS["embedding"]
                ax.add_patch(FancyBboxPatch((x0 + j * cell, y - cell / 2), cell, cell, boxstyle="square,pad=0",
                                            fc=fill, ec=edge, lw=1.0))
        _arrow(ax, (mid, rows["lookup"] + cell / 2), (target + d_embed * cell / 2, rows["concat"] - cell / 2))
    _label(ax, (left - 0.15, rows["lookup"]), r"$\mathbf{e}_w$", colour="black", ha="right", fontsize=FONT)
    _label(ax, (left - 0.15, (rows["token"] + rows["lookup"]) / 2), "the same table $E$\nfor every position",
           colour=WIRE, ha="right", fontsize=SMALL - 1)
    _label(ax, (concat_left - 0.15, rows["concat"]), r"$\mathbf{x}$", colour="black", ha="right", fontsize=FONT)
    concat_right = concat_left + context * d_embed * cell
    _label(ax, (concat_right + 0.15, rows["concat"]), rf"concatenation:""\n"rf"${context} \times m$ numbers",
           colour=WIRE, fontsize=SMALL)
    _arrow(ax, (centre, rows["concat"] + cell / 2), (centre, rows["hidden"] - 0.3))
    _label(ax, (centre + 0.1, (rows["concat"] + rows["hidden"]) / 2), r"$W, \mathbf{b}$")
    _box(ax, (centre, rows["hidden"]), r"$\mathbf{h} = \tanh(W\mathbf{x} + \mathbf{b})$", "state", width=3.4)
    _arrow(ax, (centre, rows["hidden"] + 0.3), (centre, rows["scores"] - 0.3))
    _label(ax, (centre + 0.1, (rows["hidden"] + rows["scores"]) / 2), r"$U, \mathbf{c}$")
    _box(ax, (centre, rows["scores"]), r"$\mathbf{s} = U\mathbf{h} + \mathbf{c}$", "output", width=2.6)
    _arrow(ax, (centre, rows["scores"] + 0.3), (centre, rows["prob"] - 0.3))
    _label(ax, (centre + 0.1, (rows["scores"] + rows["prob"]) / 2), "softmax", colour=WIRE)
    _box(ax, (centre, rows["prob"]), rf"$P(w_t \mid w_{{t-{context}:t-1}})$", "output", width=3.0)
    _describe(ax, f"Diagram of a feed-forward language model with a window of {context} tokens: each of the "
                  f"tokens w_(t-{context}) to w_(t-1) is looked up in the embedding table, the {context} embeddings "
                  "are concatenated into x, a hidden layer computes h = tanh(Wx + b), an output layer the scores "
                  f"s = Uh + c, and a softmax the probability of w_t given the {context} tokens before it.")
    return ax


def norm_placement(ax=None):
    """One residual sublayer in the two places a transformer can normalise, side by side.

    Left, post-norm (Vaswani et al., 2017): the sum of the residual and the
    sublayer's output is normalised, so the stream itself passes through every
    LN above it. Right, pre-norm (GPT-2 on): only the sublayer's input is
    normalised, and the residual path from $X$ to $X'$ carries nothing but an
    addition, which is why its gradient keeps an identity term at any depth.
    """
    ax = _canvas(ax, (-1.7, 8.4), (-0.45, 6.35), inches_per_unit=0.62)
    panels = [(0.0, "post-norm (2017)", r"$X' = \mathrm{LN}(X + \mathrm{Sublayer}(X))$", False),
              (5.2, "pre-norm (GPT-2 on)", r"$X' = X + \mathrm{Sublayer}(\mathrm{LN}(X))$", True)]
    for x0, title, formula, pre in panels:
        side = x0 + 1.7  # the branch through the sublayer
        plus = 3.6 if pre else 2.9  # where the branch rejoins the stream
        ax.text(x0 + 0.85, 6.05, title, ha="center", va="center", fontsize=FONT, weight="bold")
        ax.text(x0 + 0.85, 5.45, formula, ha="center", va="center", fontsize=SMALL)
        _box(ax, (x0, 0.0), r"$X$", "state", width=0.8)
        ax.plot([x0, x0], [0.3, 0.8], color=WIRE, lw=1.3)
        _junction(ax, (x0, 0.8))
        _arrow(ax, (x0, 0.8), (x0, plus - 0.22))  # the residual path
        ax.text(x0 - 0.15, (0.8 + plus) / 2, "residual", ha="right", va="center", fontsize=SMALL, color=NOTE,
                style="italic", rotation=90)
        if pre:
            _wire(ax, [(x0, 0.8), (side, 0.8), (side, 1.45)])
            _box(ax, (side, 1.75), "LN", "norm", width=0.8)
            _arrow(ax, (side, 2.05), (side, 2.45))
            _box(ax, (side, 2.75), r"$\mathrm{Sublayer}$", "layer", width=1.8)
            _wire(ax, [(side, 3.05), (side, plus), (x0 + 0.22, plus)])
        else:
            _wire(ax, [(x0, 0.8), (side, 0.8), (side, 1.45)])
            _box(ax, (side, 1.75), r"$\mathrm{Sublayer}$", "layer", width=1.8)
            _wire(ax, [(side, 2.05), (side, plus), (x0 + 0.22, plus)])
        _operator(ax, (x0, plus), "+")
        if pre:
            _arrow(ax, (x0, plus + 0.22), (x0, 4.3))
        else:
            _arrow(ax, (x0, plus + 0.22), (x0, 3.3))
            _box(ax, (x0, 3.6), "LN", "norm", width=0.8)
            _arrow(ax, (x0, 3.9), (x0, 4.3))
        _box(ax, (x0, 4.6), r"$X'$", "state", width=0.8)
    _describe(ax, "Diagram comparing where a transformer normalises, side by side. Left, post-norm (2017): the "
                  "input X and the sublayer's output are added, then LayerNorm is applied, so X' = LN(X + "
                  "Sublayer(X)). Right, pre-norm: LayerNorm is applied to the sublayer's input only, and the "
                  "residual path from X to X' is a plain addition, X' = X + Sublayer(LN(X)).")
    return ax


def attention_seq2seq(ax=None, source=("3", "1", "4", "<EOS>"), weights=(0.82, 0.07, 0.05, 0.06)):
    """The encoder-decoder with attention of Unit 4, at one decoder step t.

    Bottom left, the encoder's GRU reads the source and keeps every state
    $\\bar{\\mathbf{h}}_j$; bottom right, the decoder's GRU reads <BOS> and the
    target so far. At step t the decoder's state $\\mathbf{h}_t$ is the query:
    its dot product with each encoder state, through a softmax, gives the
    weights $a_{tj}$ (drawn as the lines' widths), the context
    $\\mathbf{c}_t$ is the weighted sum of the encoder states, and
    $\\tanh(W_c[\\mathbf{c}_t; \\mathbf{h}_t])$ feeds the output layer, eq. (attn-luong).
    `weights` are illustrative, one per source token: the third step of
    reversing "314" has read <BOS>, "4" and "1", and looks up the "3".
    """
    if len(weights) != len(source):
        raise ValueError(f"one weight per source token: {len(source)} tokens, {len(weights)} weights")
    S, dx = len(source), 1.45
    enc_x = [dx * j for j in range(S)]
    dec_x = [enc_x[-1] + 2.1 + dx * t for t in range(3)]
    token_y, state_y, context_y, out_y, top = 0.3, 1.9, 3.9, 5.2, 6.35
    ax = _canvas(ax, (-0.9, dec_x[-1] + 2.0), (-0.8, top + 0.35), inches_per_unit=0.62)
    ax.text((enc_x[0] + enc_x[-1]) / 2, -0.05 + token_y - 0.55, "encoder (reads the source)", ha="center",
            va="center", fontsize=SMALL, color=NOTE, style="italic")
    ax.text((dec_x[0] + dec_x[-1]) / 2, -0.05 + token_y - 0.55, "decoder (reads <BOS> and the target so far)",
            ha="center", va="center", fontsize=SMALL, color=NOTE, style="italic")
    for j, (x, token) in enumerate(zip(enc_x, source)):
        _box(ax, (x, token_y), token, "token", width=1.0 if token.startswith("<") else 0.6)
        _arrow(ax, (x, token_y + 0.3), (x, state_y - 0.3))
        _box(ax, (x, state_y), rf"$\bar{{\mathbf{{h}}}}_{{{j + 1}}}$", "state", width=0.75)
        if j:
            _arrow(ax, (enc_x[j - 1] + 0.375, state_y), (x - 0.375, state_y))
    for t, (x, token) in enumerate(zip(dec_x, ["<BOS>", "4", "1"])):
        _box(ax, (x, token_y), token, "token", width=1.0 if token.startswith("<") else 0.6)
        _arrow(ax, (x, token_y + 0.3), (x, state_y - 0.3))
        _box(ax, (x, state_y), rf"$\mathbf{{h}}_{{{t + 1}}}$" if t < 2 else r"$\mathbf{h}_t$", "state", width=0.75)
        start = enc_x[-1] + 0.375 if t == 0 else dec_x[t - 1] + 0.375
        _arrow(ax, (start, state_y), (x - 0.375, state_y))
    # step t: the context, a weighted sum of the encoder states
    cx = enc_x[-1] + 0.9
    _box(ax, (cx, context_y), r"$\mathbf{c}_t = \sum_j a_{tj}\,\bar{\mathbf{h}}_j$", "embedding", width=2.3)
    for x, a in zip(enc_x, weights):
        ax.plot([x, cx - 0.6 + 1.2 * (x - enc_x[0]) / max(enc_x[-1] - enc_x[0], 1e-9)],
                [state_y + 0.3, context_y - 0.3], color=COLOURS["embedding"][1], lw=0.6 + 6 * a,
                solid_capstyle="butt")
    t_x = dec_x[-1]
    _wire(ax, [(t_x - 0.375, state_y + 0.15), (t_x - 0.9, state_y + 0.15), (t_x - 0.9, context_y),
               (cx + 1.15, context_y)])
    _label(ax, (t_x - 0.85, (state_y + context_y) / 2 + 0.1), "query", colour=WIRE)
    _label(ax, (cx + 1.3, context_y + 0.55), r"$a_{tj} = \mathrm{softmax}_j(\mathbf{h}_t^\top \bar{\mathbf{h}}_j)$",
           colour=WEIGHT)
    # the combination and the prediction
    _box(ax, (t_x, out_y), r"$\tilde{\mathbf{h}}_t = \tanh(W_c[\mathbf{c}_t; \mathbf{h}_t])$", "gate", width=3.5)
    _arrow(ax, (t_x, state_y + 0.3), (t_x, out_y - 0.3))
    _wire(ax, [(cx, context_y + 0.3), (cx, out_y), (t_x - 1.75, out_y)])
    _arrow(ax, (t_x, out_y + 0.3), (t_x, top - 0.25))
    ax.text(t_x + 1.9, top, r"$p(y_t \mid y_{<t}, x_{1:S}) = \mathrm{softmax}(W_o \tilde{\mathbf{h}}_t + \mathbf{b}_o)_{y_t}$",
            ha="right", va="center", fontsize=FONT)
    shown = ", ".join(f"{tok} {w:.2f}" for tok, w in zip(source, weights))
    _describe(ax, "Diagram of an encoder-decoder with attention at one decoder step t. The encoder reads the source "
                  f"tokens {' '.join(source)} into states h-bar_1 to h-bar_{len(source)}; the decoder has read <BOS> "
                  "and the target so far, and its state h_t is the query. Lines from h_t to each encoder state have "
                  f"widths proportional to the attention weights ({shown}). The context c_t is the weighted sum of "
                  "the encoder states, and tanh(W_c [c_t; h_t]) feeds the output layer.")
    return ax


def transformer_stacks(ax=None):
    """The encoder-decoder transformer of Unit 5: two stacks of layers, joined by cross-attention.

    Left, the encoder: the source's embeddings plus positions pass through
    $N_\\text{enc}$ layers of self-attention and a feed-forward network; its
    last states are the memory. Right, the decoder: the target so far (after
    <BOS>) passes through $N_\\text{dec}$ layers of masked self-attention,
    cross-attention (queries from the decoder, keys and values from the
    memory) and a feed-forward network, then the output layer. Every sublayer
    sits in a residual connection with a LayerNorm (see `norm_placement`).
    """
    enc, dec = 0.0, 5.4
    ax = _canvas(ax, (-2.5, 8.4), (-0.45, 8.05), inches_per_unit=0.6)
    encoder = _column(ax, enc, [(0.0, "source ids", "token", 1.7), (1.15, "embedding + position", "embedding", 3.3),
                                (2.5, "self-attention", "layer", 2.2), (3.6, "feed-forward", "layer", 2.2),
                                (5.05, "memory", "state", 1.5)])
    ax.add_patch(Rectangle((enc - 1.45, 1.95), 2.9, 2.0, fill=False, ec="#888888", ls="--", lw=1.1))
    ax.text(enc - 1.6, 2.95, r"$\times N_\mathrm{enc}$", ha="right", va="center", fontsize=FONT)
    _column(ax, dec, [(0.0, "<BOS> + target so far", "token", 3.4), (1.15, "embedding + position", "embedding", 3.3),
                      (2.5, "masked self-attention", "layer", 3.2), (3.6, "cross-attention", "layer", 3.2),
                      (4.7, "feed-forward", "layer", 3.2), (6.15, "linear + softmax", "output", 2.4)])
    ax.add_patch(Rectangle((dec - 1.8, 1.95), 3.6, 3.1, fill=False, ec="#888888", ls="--", lw=1.1))
    ax.text(dec + 1.95, 3.5, r"$\times N_\mathrm{dec}$", ha="left", va="center", fontsize=FONT)
    _arrow(ax, (dec, 6.45), (dec, 7.3))
    ax.text(dec, 7.6, r"$p(y_t \mid y_{<t}, \mathrm{source})$", ha="center", va="center", fontsize=FONT)
    # the memory reaches every decoder layer's cross-attention as its keys and values
    memory = encoder[-1]
    _wire(ax, [(enc + 0.75, memory), (2.45, memory), (2.45, 3.6), (dec - 1.6, 3.6)])
    _label(ax, (2.57, 4.3), "keys,\nvalues", colour=WIRE)
    ax.text(enc, 5.7, "(every decoder layer reads it)", ha="center", va="center", fontsize=SMALL,
            color=NOTE, style="italic")
    _describe(ax, "Diagram of the encoder-decoder transformer. Left, the encoder: source ids, embedding plus "
                  "position, then N_enc layers of self-attention and feed-forward, giving the memory. Right, the "
                  "decoder: <BOS> and the target so far, embedding plus position, then N_dec layers of masked "
                  "self-attention, cross-attention and feed-forward, then a linear layer and softmax giving "
                  "p(y_t | y_<t, source). The memory is wired to every decoder layer's cross-attention as its keys "
                  "and values.")
    return ax
