"""lmcourse: the shared machinery of an open course on language models.

The book, the solution notebooks and the autograder's checks all import from
this package, so each idea is defined once:

- :mod:`lmcourse.data`    corpora (cache, checksum, offline mirror, download),
                          train/validation split, vocabularies, batching
- :mod:`lmcourse.device`  CUDA / CPU choice and seeding
- :mod:`lmcourse.plots`   figures used by the book
- :mod:`lmcourse.diagrams` model diagrams drawn by code (unrolled RNN, LSTM cell, ...)
- :mod:`lmcourse.ngram`   interpolated Kneser–Ney over ids: the count-based baseline
- :mod:`lmcourse.seq2seq` the toy transduction task of Unit 4 (reversal), batching, exact match
- :mod:`lmcourse.grading` the trusted grader
- :mod:`lmcourse.cli`     the ``lmcourse`` command
"""

__version__ = "0.1.0"
