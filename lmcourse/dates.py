"""The toy translation task of Unit 5: dates written the way people write them, to ISO 8601.

The source is a date in one of several everyday formats, the target the same
date as ``YYYY-MM-DD``::

    source  3 March 2021        target  2021-03-03
    source  Mar 3, 2021         target  2021-03-03
    source  03/03/2021          target  2021-03-03

It is a small translation problem with the features of a real one. The
output is reordered (the year moves to the front), a word becomes digits
(``March`` -> ``03``), some characters of the source matter and others
(commas, spaces, the weekday-free padding of ``3`` into ``03``) must be
inserted or dropped, and the model has to *recognise the format* before it
knows where the day is: in ``03/04/2021`` the day comes first, in
``2021.04.03`` last. So a model that reads the source as a bag of characters,
without positions, cannot succeed, and the cross-attention of a trained
model has a readable pattern: each output digit looks at the characters it
comes from.

Only unambiguous formats are used: the US ``MM/DD/YYYY`` is left out because
``03/04/2021`` would then have two right answers.

Everything here is shared by the book, the assignment and its hidden checks,
so the three use the same characters, ids and definition of "correct":

- :data:`FORMATS` (name -> an example), :func:`format_date`, :func:`random_dates`;
- :data:`VOCAB`, one character vocabulary for sources and targets (the
  course's :class:`lmcourse.data.Vocab`, so ``<BOS>`` is 0, ``<EOS>`` 1 and
  ``<PAD>`` 3, as in :mod:`lmcourse.seq2seq`; batching, trimming and exact
  match come from there), :func:`encode` and :func:`decode`;
- :func:`date_pairs`: random (source, target) id pairs, deterministic given a
  seed or a NumPy generator.
"""

from __future__ import annotations

import datetime as dt
from typing import Iterable, Sequence

import numpy as np

from lmcourse.data import Vocab
from lmcourse.seq2seq import PAD, _generator, trim

__all__ = ["BOS_ID", "EOS_ID", "FIRST_DAY", "FORMATS", "LAST_DAY", "MAX_SOURCE_LEN", "PAD_ID", "TARGET_LEN",
           "VOCAB", "VOCAB_SIZE", "date_pairs", "decode", "encode", "format_date", "iso", "parse_date",
           "random_dates"]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")

# name -> how a date is written (str.format fields: d, dd, m, mm, yyyy, month, mon)
_PATTERNS = {
    "d month yyyy": "{d} {month} {yyyy}",        # 3 March 2021
    "month d, yyyy": "{month} {d}, {yyyy}",      # March 3, 2021
    "d mon yyyy": "{d} {mon} {yyyy}",            # 3 Mar 2021
    "mon d, yyyy": "{mon} {d}, {yyyy}",          # Mar 3, 2021
    "dd/mm/yyyy": "{dd}/{mm}/{yyyy}",            # 03/03/2021
    "yyyy.mm.dd": "{yyyy}.{mm}.{dd}",            # 2021.03.03
    "d.m.yyyy": "{d}.{m}.{yyyy}",                # 3.3.2021
}
FORMATS: dict[str, str] = {name: p.format(d=3, dd="03", m=3, mm="03", yyyy=2021, month="March", mon="Mar")
                           for name, p in _PATTERNS.items()}
"""The source formats, name -> the 3rd of March 2021 written in it."""

FIRST_DAY, LAST_DAY = dt.date(1900, 1, 1), dt.date(2099, 12, 31)
"""The dates drawn: two centuries, 73,049 days."""

VOCAB = Vocab([PAD, *"0123456789", " ", ",", "-", ".", "/", *sorted(set("".join(MONTHS)))])
"""<BOS> 0, <EOS> 1, <UNK> 2, <PAD> 3 (as in lmcourse.seq2seq), the digits '0'..'9' as 4..13, then
' ', ',', '-', '.', '/' and the letters of the month names."""
BOS_ID, EOS_ID = VOCAB.bos_id, VOCAB.eos_id
PAD_ID = VOCAB.stoi[PAD]
VOCAB_SIZE = len(VOCAB)
TARGET_LEN = len("2021-03-03")
MAX_SOURCE_LEN = max(len(p.format(d=28, dd="28", m=12, mm="12", yyyy=2000, month="September", mon="Sep"))
                     for p in _PATTERNS.values())
"""The longest source: 'September 28, 2000', 18 characters."""


def iso(day: dt.date) -> str:
    """The target: ``YYYY-MM-DD`` (ISO 8601).

    >>> iso(dt.date(2021, 3, 3))
    '2021-03-03'
    """
    return day.isoformat()


def format_date(day: dt.date, fmt: str) -> str:
    """`day` written in the format named `fmt` (a key of :data:`FORMATS`).

    >>> format_date(dt.date(1999, 12, 31), "mon d, yyyy")
    'Dec 31, 1999'
    """
    if fmt not in _PATTERNS:
        raise KeyError(f"unknown date format {fmt!r}; the formats are {', '.join(map(repr, _PATTERNS))}")
    month = MONTHS[day.month - 1]
    return _PATTERNS[fmt].format(d=day.day, dd=f"{day.day:02d}", m=day.month, mm=f"{day.month:02d}",
                                 yyyy=f"{day.year:04d}", month=month, mon=month[:3])


# the formats as datetime.strptime reads them (it accepts "3" for %d and %m, and English month names)
_STRPTIME = {"d month yyyy": "%d %B %Y", "month d, yyyy": "%B %d, %Y", "d mon yyyy": "%d %b %Y",
             "mon d, yyyy": "%b %d, %Y", "dd/mm/yyyy": "%d/%m/%Y", "yyyy.mm.dd": "%Y.%m.%d", "d.m.yyyy": "%d.%m.%Y"}


def parse_date(text: str) -> dt.date:
    """The day a source names, whatever its format: the inverse of :func:`format_date`.

    >>> parse_date("Dec 31, 1999"), parse_date("2021.03.03")
    (datetime.date(1999, 12, 31), datetime.date(2021, 3, 3))
    """
    for name, pattern in _STRPTIME.items():
        try:
            day = dt.datetime.strptime(text, pattern).date()
        except ValueError:
            continue
        if format_date(day, name) == text:  # strptime is lenient ("03 March"); the format is not
            return day
    raise ValueError(f"{text!r} is not a date in any of the formats {', '.join(map(repr, _PATTERNS))}")


def random_dates(n: int, rng) -> list[dt.date]:
    """`n` days drawn uniformly and independently from :data:`FIRST_DAY` .. :data:`LAST_DAY`."""
    rng = _generator(rng)
    first, span = FIRST_DAY.toordinal(), (LAST_DAY - FIRST_DAY).days + 1
    return [dt.date.fromordinal(first + int(k)) for k in rng.integers(0, span, size=n)]


def encode(text: str) -> list[int]:
    """Characters -> ids; a character outside :data:`VOCAB` is an error, not <UNK>.

    >>> encode("2021-03")
    [6, 4, 6, 5, 16, 4, 7]
    """
    missing = sorted({c for c in text if c not in VOCAB.stoi})
    if missing:
        raise ValueError(f"characters {missing} are not in the dates vocabulary (digits, ' ,-./' and the letters "
                         "of the month names)")
    return [VOCAB.stoi[c] for c in text]


def decode(ids: Iterable[int]) -> str:
    """Ids -> text, cut at the first ``<EOS>`` and without ``<BOS>``/``<PAD>`` (:func:`lmcourse.seq2seq.trim`).

    >>> decode([0, 6, 4, 6, 5, 1, 9])
    '2021'
    """
    return "".join(VOCAB.itos[i] if 0 <= i < len(VOCAB) else "?" for i in trim(ids))


def date_pairs(n: int, rng, formats: Sequence[str] | None = None) -> list[tuple[list[int], list[int]]]:
    """`n` (source, target) id pairs: a random day in a random format, and the same day in ISO form.

    Days are uniform on :data:`FIRST_DAY` .. :data:`LAST_DAY`, formats uniform on `formats`
    (default: all of :data:`FORMATS`), both drawn from `rng` (a seed or a
    ``numpy.random.Generator``), so the same seed gives the same pairs on every machine. No
    ``<BOS>``, ``<EOS>`` or ``<PAD>``: :func:`lmcourse.seq2seq.seq2seq_batch` adds them.

    >>> [(decode(s), decode(t)) for s, t in date_pairs(2, rng=0)]
    [('Feb 15, 2070', '2070-02-15'), ('May 24, 2027', '2027-05-24')]
    """
    rng = _generator(rng)
    names = list(_PATTERNS) if formats is None else list(formats)
    if not names:
        raise ValueError("date_pairs needs at least one format")
    for name in names:
        if name not in _PATTERNS:
            raise KeyError(f"unknown date format {name!r}; the formats are {', '.join(map(repr, _PATTERNS))}")
    days = random_dates(n, rng)
    which = rng.integers(0, len(names), size=n)
    return [(encode(format_date(day, names[int(k)])), encode(iso(day))) for day, k in zip(days, which)]
