"""The nbgrader gradebook: a batch's scores in nbgrader's own SQLite database.

With ``lmcourse grade --gradebook gradebook.db`` each graded submission is
recorded where nbgrader keeps its own grades, so formgrader (manual grading
of the answers that need a person), ``nbgrader export`` and the rest of
nbgrader's tools work on them unchanged. The assignment's structure comes from
the release notebook, as nbgrader's ``generate_assignment`` would record it;
each test cell's ``auto_score`` is the sum of the points its checks earned
(`Result.cells`). A ``grader-error`` is never recorded: the submission stays
ungraded in formgrader rather than showing a 0.

This adapter is the only module that talks to nbgrader's database; a batch
(`lmcourse.instructor.batch`) records each result as it comes in.
"""

from __future__ import annotations

import datetime as dt

import warnings
from pathlib import Path

from lmcourse.course import load_release
from lmcourse.grading import notebook as nbmod
from lmcourse.grading.result import Result


def _alembic_head() -> str:
    """nbgrader's ``get_alembic_version`` without the subprocess."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        return ScriptDirectory.from_config(Config(ini)).get_current_head()


class Gradebook:
    """One assignment's grades in the nbgrader gradebook at ``path`` (made when missing)."""

    def __init__(self, path: Path, root: Path, assignment_id: str):
        from lmcourse.instructor.release import tools_on_path

        tools_on_path()  # nbgrader runs `alembic` when it creates a gradebook
        self.url = f"sqlite:///{Path(path).resolve()}"
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.assignment = assignment_id
        self.release = load_release(root, assignment_id)
        self._created = False
        self._setup()

    def _open(self):
        nbmod.skip_slow_jsonschema_formats()
        import nbgrader.api

        if not self._created:
            # Creating a gradebook asks `alembic heads` in a subprocess for the schema
            # revision (10+ s on a busy machine). Ask alembic in this process instead:
            # same script directory, same answer; put back right after.
            self._created = True
            original = nbgrader.api.get_alembic_version
            nbgrader.api.get_alembic_version = _alembic_head
            try:
                return nbgrader.api.Gradebook(self.url)
            finally:
                nbgrader.api.get_alembic_version = original
        return nbgrader.api.Gradebook(self.url)

    def _setup(self) -> None:
        from nbgrader.utils import compute_checksum

        aid = nb = self.assignment
        with self._open() as gb:
            gb.update_or_create_assignment(aid)
            gb.update_or_create_notebook(nb, aid)
            for cell in self.release.cells:
                meta, gid = nbmod.nbgrader_meta(cell), nbmod.grade_id(cell)
                if not gid:
                    continue
                if meta.get("grade"):
                    gb.update_or_create_grade_cell(gid, nb, aid, max_score=float(meta.get("points", 0)),
                                                   cell_type=cell.cell_type)
                if meta.get("solution"):
                    gb.update_or_create_solution_cell(gid, nb, aid)
                gb.update_or_create_source_cell(gid, nb, aid, cell_type=cell.cell_type,
                                                locked=bool(meta.get("locked")), source=nbmod.cell_source(cell),
                                                checksum=meta.get("checksum") or compute_checksum(cell))

    def record(self, student: str, result: Result, late=None) -> None:
        """Record ``result`` as ``student``'s auto-grades; a ``grader-error`` (not a grade) is not recorded.

        late: the submission's `lmcourse.instructor.late.Adjustment`: its time and its penalty in points go where
        nbgrader keeps them (the submission's timestamp, the notebook's late_submission_penalty).
        """
        from nbgrader.api import MissingEntry

        if not result.graded:
            return  # not graded: leave the submission ungraded in formgrader rather than record a 0
        cells = result.cells
        with self._open() as gb, warnings.catch_warnings():
            # nbgrader's add_submission triggers SQLAlchemy autoflush warnings; harmless, noisy
            warnings.simplefilter("ignore")
            gb.update_or_create_student(student)
            try:
                gb.find_submission(self.assignment, student)
            except MissingEntry:
                gb.add_submission(self.assignment, student)
            for cell in self.release.cells:
                meta, gid = nbmod.nbgrader_meta(cell), nbmod.grade_id(cell)
                if not (gid and meta.get("grade")) or meta.get("solution"):
                    continue  # manually graded answers (grade + solution) are left for formgrader
                grade = gb.find_grade(gid, self.assignment, self.assignment, student)
                grade.auto_score = float(cells.get(gid, {}).get("score", 0.0))
            if late is not None:
                submission = gb.find_submission(self.assignment, student)
                if late.submitted is not None:
                    submission.timestamp = late.submitted.astimezone(dt.timezone.utc).replace(tzinfo=None)
                notebook = gb.find_submission_notebook(self.assignment, self.assignment, student)
                notebook.late_submission_penalty = float(late.penalty)
            gb.db.commit()
