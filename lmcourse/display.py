"""Tables the book shows: one definition for every chapter."""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["markdown_table", "show_table"]


def _escape(cell) -> str:
    # tokens such as <EOS> or a | must show as text, not as HTML or a column break
    return str(cell).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def markdown_table(header: Sequence, rows: Iterable[Sequence]) -> str:
    """A Markdown table of `rows` under `header`, every cell shown as text.

    >>> print(markdown_table(["token", "p"], [["<EOS>", 0.5]]))
    | token | p |
    |---|---|
    | &lt;EOS&gt; | 0.5 |
    """
    lines = ["| " + " | ".join(map(_escape, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(_escape, row)) + " |" for row in rows]
    return "\n".join(lines)


def show_table(header: Sequence, rows: Iterable[Sequence]) -> None:
    """Render `rows` as a Markdown table in the notebook's output (the book shows it as a table)."""
    from IPython.display import Markdown, display

    display(Markdown(markdown_table(header, rows)))
