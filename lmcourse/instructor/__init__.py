"""Instructors only: publishing the course and grading a cohort. Never shipped to students.

Everything under this folder reads the course's secrets (``solutions/``, the
hidden checks in ``autograder/``, ``instructors/``) or writes what only an
instructor hands out. The student edition (``lmcourse publish``) leaves this
package out, and ``tests/test_student_edition.py`` proves that nothing outside it
needs it: the rest of :mod:`lmcourse` (the given code the chapters and
assignments import, and ``lmcourse check`` with :mod:`lmcourse.grading`) is what
a student installs.

Publishing the course:

    book        ``lmcourse book``: the site, its chapters executed, the lecture materials
    slides      the reveal.js decks, their figures and PDFs
    lecture     ``lmcourse slides``: decks checked against their chapters
    notes       the instructor notes (not part of the site)
    release     ``lmcourse assign``: student notebooks generated from the solutions
    leaks       the scanner that proves nothing secret is in what students receive
    publish     ``lmcourse publish student``: the student edition, its visible checks and their record

Grading a cohort (above :mod:`lmcourse.grading`, which grades one notebook):

    cli         lmcourse grade | leaderboard | report | similarity | export | gradescope
    slurm       a folder on a Slurm cluster: one array task per submission, collected with batch's writers
    batch       a folder: runner processes in a thread pool; the only writer of results
    gradebook   nbgrader's SQLite gradebook (batch records each grade as it arrives)
    gradescope  the Gradescope bundle (setup.sh, run_autograder), the same runner
    leaderboard a graded cohort's verified training results, ranked (reads the batch's results.json)
    cohort      ``lmcourse report``: what a cohort got wrong (checks failed, known mistakes matched, errors, time)
    late        term.toml: due dates and late policies, applied to the raw scores after grading
    similarity  ``lmcourse similarity``: which submissions share code, graded function by graded function
    export      ``lmcourse export``: grades into Canvas (its import CSV, its API) or a generic CSV
    mistakes    the known mistakes (autograder/<id>/mistakes.py): each graded once, its signature cached
    preflight   solution full marks, release zero, on this machine, before any student
    testing     honest and known-wrong submissions built from the solutions, for tests and the preflight
"""
