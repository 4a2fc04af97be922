"""What a figure shows, in words, and whether a reader can read it.

Every figure in the book is a Matplotlib figure drawn by a chapter's code when
the book is built. Two things about it cannot be seen in the code:

- **What it shows, in words.** A reader who cannot see the image (a screen
  reader, a failed download) gets its *alt text*. Writing it by hand would
  drift from the figure the first time the code changed, so `describe(fig)`
  generates it from the figure itself: its panels, titles and axis labels, the
  series and where they start and end, the size of a heat map, the legend.
  A figure whose picture is not data (an architecture diagram) says what it
  draws with `set_description(fig, text)`, which `describe` then returns.
- **Whether it is legible on the page.** `audit(fig)` measures the smallest
  text in the image (in pixels of the PNG), and lists what a reader would trip
  over: fractional ticks on an axis whose data are whole numbers, maths written
  as plain text outside `$...$` (`h_t` instead of $h_t$), annotations whose
  colour does not contrast with the heat-map cell under them, and series that
  look alike to a reader with colour-blindness.

While `lmcourse book` runs a chapter, its kernel attaches both to every PNG the
chapter displays (`install`, from the IPython profile that
`lmcourse.instructor.book` writes): the output's metadata carries
``{"alt": ..., "lmcourse": {...}}``. The book's Sphinx extension puts the alt
text on the page's ``<img>``, and tests/test_book.py reads the measurements
from the executed chapters.
"""

from __future__ import annotations

import math
import re

import numpy as np

DESCRIPTION_ATTR = "lmcourse_description"
NOTES_KEY = "lmcourse"  # under the PNG's output metadata, beside "alt"
MIN_CONTRAST = 4.5  # WCAG AA for normal-size text
MIN_SERIES_DISTANCE = 12.0  # CIE76 ΔE between two series that differ only by colour
# A figure on the book's page: a chapter's column is 672 CSS pixels wide in a 1280-pixel window (measured
# by tests/test_browser.py), and a wider PNG is scaled down to it. Its smallest text must still be this big.
PAGE_WIDTH_PX = 672
MIN_FONT_PX = 9.0


def font_px_on_page(min_font_px: float, png_width: int, page_width: int = PAGE_WIDTH_PX) -> float:
    """The smallest text's height in CSS pixels once the PNG is shown (scaled down to the column if wider)."""
    return min_font_px * min(1.0, page_width / png_width)


# --- alt text ---------------------------------------------------------------------------------------------------


def set_description(fig_or_ax, text: str):
    """Say in words what a figure shows, when that is not its data (a diagram); `describe` returns it."""
    fig = getattr(fig_or_ax, "figure", fig_or_ax)
    if fig is None or not str(text).strip():
        raise ValueError("set_description needs a figure (or axes) and a non-empty description")
    setattr(fig, DESCRIPTION_ATTR, " ".join(str(text).split()))
    return fig_or_ax


def _plain(text: str) -> str:
    """A label as a screen reader should say it: mathtext's `$h_{t-1}$` becomes `h_{t-1}`."""
    text = re.sub(r"\$([^$]*)\$", lambda m: re.sub(r"\\(mathdefault|mathbf|mathrm|mathit|text|operatorname)"
                                                   r"\{([^}]*)\}", r"\2", m.group(1)).replace("\\", ""), str(text))
    return " ".join(text.split())


def _num(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.2g}"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:.3g}"


def _data_axes(fig) -> list:
    """The panels that show something: not colour bars, not hidden axes."""
    return [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]


def _visible_lines(ax) -> list:
    return [ln for ln in ax.get_lines() if ln.get_visible() and len(np.atleast_1d(ln.get_xdata())) > 1]


def _series_name(artist) -> str | None:
    label = artist.get_label() or ""
    return None if not label or label.startswith("_") else _plain(label)


def _axis_phrase(ax, which: str, with_span: bool = True) -> str:
    label = _plain(getattr(ax, f"get_{which}label")())
    lo, hi = sorted(getattr(ax, f"get_{which}lim")())
    scale = getattr(ax, f"get_{which}scale")()
    ticks = [t.get_text() for t in getattr(ax, f"get_{which}ticklabels")() if t.get_text()]
    span = f"{_num(lo)} to {_num(hi)}" + (" (log scale)" if scale == "log" else "")
    numeric = r"[−\-+0-9.,e×^{}$% ]+"
    if scale == "linear" and ticks and not all(re.fullmatch(numeric, _plain(t)) for t in ticks):
        # categories (tokens, words): name the first ones, a reader needs them to follow the picture
        shown = ", ".join(_plain(t) for t in ticks[:12]) + (f" and {len(ticks) - 12} more" if len(ticks) > 12 else "")
        span = f"categories {shown}"
    elif not with_span:  # a heat map's cell indices say nothing
        span = ""
    return (f"{label} ({span})" if span else label) if label else span


def _panel(ax) -> str:
    parts: list[str] = []
    images = [im for im in ax.get_images() if im.get_visible()]
    lines = _visible_lines(ax)
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection" and c.get_visible()]
    bars = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    if images:
        a = np.asarray(images[0].get_array())
        if a.ndim >= 2:
            finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a.ravel()
            rng = f", values {_num(float(finite.min()))} to {_num(float(finite.max()))}" if finite.size else ""
            parts.append(f"a heat map of {a.shape[0]} rows by {a.shape[1]} columns{rng}")
    if lines:
        named = [(n, ln) for ln in lines if (n := _series_name(ln))]
        if named:
            said = []
            for name, ln in named[:8]:
                y = np.asarray(ln.get_ydata(), dtype=float)
                y = y[np.isfinite(y)]
                said.append(f"{name} from {_num(y[0])} to {_num(y[-1])}" if y.size else name)
            more = f" and {len(named) - 8} more" if len(named) > 8 else ""
            parts.append(f"{len(lines)} line{'s' * (len(lines) > 1)}: " + "; ".join(said) + more)
        else:
            parts.append(f"{len(lines)} line{'s' * (len(lines) > 1)}")
    for c in scatters:
        n = len(c.get_offsets())
        name = _series_name(c)
        parts.append(f"{n} points" + (f" ({name})" if name else ""))
    if bars:
        n = sum(len(b.patches) for b in bars)
        names = [n_ for b in bars if (n_ := _series_name(b))]
        parts.append(f"{n} bars" + (f" ({', '.join(names)})" if names else ""))
    words = [_plain(t.get_text()) for t in ax.texts if t.get_visible() and t.get_text().strip()]
    if not parts and words:
        parts.append("labelled shapes: " + ", ".join(words[:15]) + (" and more" if len(words) > 15 else ""))
    elif words and not images:
        parts.append("annotated " + ", ".join(words[:6]) + (" and more" if len(words) > 6 else ""))
    if not parts:
        parts.append("an empty panel")
    body = "; ".join(parts)
    axes_said = []
    if ax.axison and (lines or scatters or bars or images):
        for which in ("x", "y"):
            phrase = _axis_phrase(ax, which, with_span=not images)
            if phrase:
                axes_said.append(f"{which} axis {phrase}")
    title = _plain(ax.get_title())
    legend = ax.get_legend()
    extra = []
    if legend is not None and not lines:
        names = [_plain(t.get_text()) for t in legend.get_texts() if t.get_text()]
        if names:
            extra.append("legend: " + ", ".join(names))
    head = f"{title}: " if title else ""
    return head + body + ("; " + "; ".join(axes_said) if axes_said else "") + ("; " + "; ".join(extra) if extra else "")


def describe(fig) -> str:
    """A figure in words, for its alt text: `set_description`'s text, else what its panels show."""
    given = getattr(fig, DESCRIPTION_ATTR, None)
    if given:
        return given
    panels = _data_axes(fig)
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    head = f"{_plain(suptitle)}. " if suptitle else ""
    if not panels:
        return head + "A figure with no axes."
    if len(panels) == 1:
        return head + "Chart: " + _panel(panels[0]) + "."
    said = [f"panel {i} ({_panel(ax)})" for i, ax in enumerate(panels, start=1)]
    return head + f"{len(panels)} panels: " + "; ".join(said) + "."


# --- legibility ---------------------------------------------------------------------------------------------------


def _texts(fig):
    """Every piece of text drawn in the figure (titles, labels, ticks, legend, annotations) with its axes."""
    from matplotlib.text import Text

    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0:
            yield t


def _all_integers(values) -> bool:
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    # three or more distinct whole numbers: a line from 0 to 1 may well be continuous
    return np.unique(v).size > 2 and bool(np.all(v == np.round(v)))


def _integer_axis_problems(ax, i: int) -> list[str]:
    """Fractional ticks ("2.5") on an x axis whose plotted positions are all whole numbers (steps, lengths,
    orders n). Only x: values on y are measured (losses, rates), and may well fall between integers."""
    lines = _visible_lines(ax)
    scatters = [c for c in ax.collections if type(c).__name__ == "PathCollection" and len(c.get_offsets())]
    if not (lines or scatters) or ax.get_xscale() != "linear":
        return []
    positions = [ln.get_xdata() for ln in lines] + [c.get_offsets()[:, 0] for c in scatters]
    if not all(_all_integers(x) for x in positions):
        return []
    lo, hi = sorted(ax.get_xlim())
    fractional = [label.get_text() for loc, label in zip(ax.get_xticks(), ax.get_xticklabels())
                  if lo <= loc <= hi and label.get_text() and abs(loc - round(loc)) > 1e-9]
    if not fractional:
        return []
    return [f"panel {i}: the x axis counts whole numbers but its ticks read {', '.join(fractional[:3])}; "
            "use MaxNLocator(integer=True) or set the ticks"]


_BARE_MATHS = re.compile(r"(?<![\w$\\])([A-Za-zα-ωΑ-Ω])_(\{[^}]+\}|[A-Za-z0-9]{1,3})(?![\w])")


def _maths_outside_dollars(text: str) -> str | None:
    outside = re.sub(r"\$[^$]*\$", " ", text)
    m = _BARE_MATHS.search(outside) or re.search(r"\\(alpha|beta|theta|sigma|mathbf|frac|sqrt|sum|log)\b", outside)
    return m.group(0) if m else None


def _luminance(rgb) -> float:
    c = np.asarray(rgb[:3], dtype=float)
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2])


def contrast(a, b) -> float:
    """WCAG's contrast ratio of two colours (RGB in 0-1): 1 (same) to 21 (black on white)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _annotation_contrast_problems(ax, i: int) -> list[str]:
    from matplotlib.colors import to_rgba

    images = [im for im in ax.get_images() if im.get_visible()]
    if not images:
        return []
    im = images[0]
    a = np.asarray(im.get_array())
    if a.ndim != 2:
        return []
    x0, x1, y0, y1 = im.get_extent()
    rows, cols = a.shape
    worst = []
    for t in ax.texts:
        if not t.get_visible() or not t.get_text().strip():
            continue
        if t.get_transform() != ax.transData:
            continue
        x, y = t.get_position()
        c = int(np.floor((x - x0) / (x1 - x0) * cols))
        r = int(np.floor((y - y1) / (y0 - y1) * rows)) if im.origin == "upper" else int(np.floor((y - y0) / (y1 - y0) * rows))
        if not (0 <= r < rows and 0 <= c < cols):
            continue
        cell = im.to_rgba(a[r, c])
        ratio = contrast(to_rgba(t.get_color()), cell)
        if ratio < MIN_CONTRAST:
            worst.append((ratio, t.get_text()))
    if not worst:
        return []
    ratio, text = min(worst)
    return [f"panel {i}: {len(worst)} annotations on the heat map contrast less than {MIN_CONTRAST}:1 with their "
            f"cell (worst {ratio:.1f}:1, '{text}'); pick the text colour from the cell's luminance"]


def _text_contrast_problems(fig) -> list[str]:
    """Text against the figure's background (or its own box): light grey notes were the usual failure.

    Annotations on a heat map's cells are judged against their cell instead (_annotation_contrast_problems).
    """
    from matplotlib.colors import to_rgba

    page = to_rgba(fig.get_facecolor())
    if page[3] == 0:
        page = (1.0, 1.0, 1.0, 1.0)  # a transparent figure sits on the white page
    weak = []
    for t in _texts(fig):
        ax = t.axes
        if ax is not None and t in ax.texts and any(im.get_visible() for im in ax.get_images()):
            continue
        box = t.get_bbox_patch()
        ground = page
        if box is not None:  # a label in its own box: the box's fill, as blended over the page
            fill = to_rgba(box.get_facecolor())
            ground = tuple(fill[3] * f + (1 - fill[3]) * g for f, g in zip(fill[:3], page[:3])) + (1.0,)
        ratio = contrast(to_rgba(t.get_color()), ground)
        if ratio < MIN_CONTRAST:
            weak.append((ratio, _plain(t.get_text())[:30]))
    if not weak:
        return []
    ratio, text = min(weak)
    return [f"{len(weak)} texts contrast less than {MIN_CONTRAST}:1 with their background (worst {ratio:.1f}:1, "
            f"'{text}'); use a darker colour (e.g. #595959 for a grey note)"]


# Machado, Oliveira and Fernandes (2009), "A physiologically-based model for simulation of color vision
# deficiency", severity 1.0: linear RGB -> what a dichromat sees.
_CVD = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}


def _to_linear(c):
    c = np.asarray(c[:3], dtype=float)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear_rgb) -> np.ndarray:
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ np.clip(linear_rgb, 0, 1) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def colour_distance(a, b, vision: str = "normal") -> float:
    """CIE76 ΔE between two colours as seen with `vision` (normal, protanopia, deuteranopia, tritanopia)."""
    la, lb = _to_linear(a), _to_linear(b)
    if vision != "normal":
        la, lb = _CVD[vision] @ la, _CVD[vision] @ lb
    return float(np.linalg.norm(_lab(la) - _lab(lb)))


def _series_look(artist):
    """What tells a series apart besides colour: (linestyle, marker) for a line, the hatch for bars."""
    if hasattr(artist, "get_linestyle") and hasattr(artist, "get_marker"):
        return (str(artist.get_linestyle()), str(artist.get_marker()))
    return ("", "")


def _series_colour_problems(ax, i: int) -> list[str]:
    from matplotlib.colors import to_rgba

    series = []
    for ln in _visible_lines(ax):
        if _series_name(ln):
            series.append((_series_name(ln), to_rgba(ln.get_color()), _series_look(ln)))
    for c in ax.collections:
        if type(c).__name__ == "PathCollection" and _series_name(c) and len(c.get_facecolors()) == 1:
            series.append((_series_name(c), tuple(c.get_facecolors()[0]), ("scatter", str(c.get_paths()[0]))))
    problems = []
    for j in range(len(series)):
        for k in range(j + 1, len(series)):
            (na, ca, la), (nb, cb, lb) = series[j], series[k]
            if la != lb:
                continue  # a different dash or marker tells them apart
            for vision in ("normal", *_CVD):
                d = colour_distance(ca, cb, vision)
                if d < MIN_SERIES_DISTANCE:
                    problems.append(f"panel {i}: series '{na}' and '{nb}' differ only by colour, and look alike "
                                    f"with {vision} (ΔE {d:.0f}); use the course palette or a dash/marker")
                    break
    return problems


def audit(fig, dpi: float | None = None) -> dict:
    """Legibility measurements of a drawn figure: its smallest text in PNG pixels, and its problems.

    `dpi` is the resolution the PNG is saved at (the figure's own by default). Call it after the
    figure was drawn (tick labels exist only then): the kernel hook runs it right after the PNG.
    """
    dpi = float(dpi or fig.dpi)
    smallest, smallest_text = math.inf, ""
    problems: list[str] = []
    for t in _texts(fig):
        px = t.get_fontsize() * dpi / 72
        if px < smallest:
            smallest, smallest_text = px, _plain(t.get_text())[:40]
        bare = _maths_outside_dollars(t.get_text())
        if bare:
            problems.append(f"'{_plain(t.get_text())[:40]}' writes maths as plain text ({bare}): put it in $...$")
    problems += _text_contrast_problems(fig)
    for i, ax in enumerate(_data_axes(fig), start=1):
        problems += _integer_axis_problems(ax, i)
        problems += _annotation_contrast_problems(ax, i)
        problems += _series_colour_problems(ax, i)
    return {"min_font_px": round(smallest, 2) if math.isfinite(smallest) else None,
            "min_font_text": smallest_text, "dpi": dpi, "problems": sorted(set(problems))}


# --- the kernel hook ----------------------------------------------------------------------------------------------


def notes(fig, dpi: float | None = None) -> dict:
    """The PNG output's metadata for `fig`: its alt text, and the legibility audit under "lmcourse"."""
    return {"alt": describe(fig), NOTES_KEY: audit(fig, dpi)}


def install(shell=None) -> None:
    """Make this IPython kernel attach `notes` to the metadata of every Matplotlib figure's PNG.

    IPython lets a formatter return ``(data, metadata)``; the inline backend registers its own PNG
    function for figures whenever it is (re)configured, so the hook wraps the formatter object itself,
    which keeps whatever function is registered and adds the notes after it has drawn the figure.
    """
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return
    formatters = shell.display_formatter.formatters
    png = formatters["image/png"]
    if getattr(png, "_lmcourse_notes", False):
        return

    from matplotlib.figure import Figure

    class NotedPNGFormatter(type(png)):
        _lmcourse_notes = True

        def __call__(self, obj):
            data = super().__call__(obj)
            if data is None or not isinstance(obj, Figure):
                return data
            md = None
            if isinstance(data, tuple) and len(data) == 2:
                data, md = data
            try:
                extra = notes(obj, _savefig_dpi(obj))
            except Exception as err:  # noqa: BLE001 (a figure the audit cannot read must still be shown)
                extra = {"alt": "", NOTES_KEY: {"error": f"{type(err).__name__}: {err}"}}
            return data, {**(md or {}), **extra}

    noted = NotedPNGFormatter(parent=png.parent)
    noted.type_printers.update(png.type_printers)
    noted.deferred_printers.update(png.deferred_printers)
    noted.singleton_printers.update(png.singleton_printers)
    noted.enabled = png.enabled
    formatters["image/png"] = noted


def _savefig_dpi(fig) -> float:
    import matplotlib

    dpi = matplotlib.rcParams["savefig.dpi"]
    return float(fig.dpi if dpi == "figure" else dpi)
