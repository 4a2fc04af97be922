"""The ``lmcourse`` command: one entry point for students and instructors.

Each subcommand is a thin layer over a library function, so everything the
command does can also be done (and tested) from Python.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Callable, Sequence

from lmcourse.errors import CommandError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _repo_root() -> Path:
    """The course checkout that holds book/, solutions/, assignments/ and autograder/."""
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "solutions").is_dir() and (p / "book").is_dir():
            return p
    pkg_root = Path(__file__).resolve().parent.parent
    if (pkg_root / "solutions").is_dir():
        return pkg_root
    raise CommandError("run this inside the course checkout (a folder with book/ and solutions/)")


def _course_root(args: argparse.Namespace) -> Path:
    """--course when given (a course tree such as the tests' fixture), else this checkout."""
    course = getattr(args, "course", None)
    if course is not None:
        if not (course / "solutions").is_dir():
            raise CommandError(f"--course {course}: expected a folder with solutions/ in it")
        return course.resolve()
    return _repo_root()


def _checked_course(args: argparse.Namespace) -> Path:
    """What `lmcourse check` checks against: --course, else the course checkout around the current folder,
    else the student edition installed with this package (its releases and visible checks)."""
    if getattr(args, "course", None) is not None:
        course = args.course
        if not ((course / "solutions").is_dir() or (course / "assignments").is_dir()):
            raise CommandError(f"--course {course}: expected a course (a folder with assignments/ in it)")
        return course.resolve()
    try:
        return _repo_root()
    except CommandError:
        from lmcourse.course import Course

        edition = Course.installed_edition()
        if edition is None:
            raise
        return edition.root


def cmd_data(args: argparse.Namespace) -> int:
    from lmcourse import data

    names = args.names or sorted(data.CORPORA)
    bad = 0
    for name in names:
        try:
            path = data.fetch(name, download=not args.offline)
        except data.DataError as err:
            bad += 1
            print(f"{name}: MISSING\n{err}", file=sys.stderr)
            continue
        corpus = data.CORPORA[name]
        source = "package" if corpus.package_path else "cache"
        print(f"{name:18s} ok  {corpus.size:>10,} bytes  sha256 {corpus.sha256[:12]}…  {source}: {path}")
    return 1 if bad else 0


def cmd_book(args: argparse.Namespace) -> int:
    from lmcourse.instructor import book

    return book.build(_repo_root(), assignments=not args.no_assign, check=args.check)


def cmd_slides(args: argparse.Namespace) -> int:
    from lmcourse.instructor import lecture

    return lecture.main(_repo_root(), args.units, check_only=args.check)


def cmd_assign(args: argparse.Namespace) -> int:
    from lmcourse.instructor import release

    return release.main(_course_root(args), args.ids, check_only=args.check)


def cmd_publish(args: argparse.Namespace) -> int:
    from lmcourse.instructor import publish

    return publish.main(_course_root(args), args.out, repository=args.repository, book_url=args.book_url,
                        ids=args.ids or None, force=args.force, hints=args.hints)


def cmd_check(args: argparse.Namespace) -> int:
    from lmcourse.grading import cli as grading_cli

    return grading_cli.check(_checked_course(args), args)


def cmd_grade(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.grade(_course_root(args), args)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.leaderboard(_course_root(args), args)


def cmd_report(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.report(_course_root(args), args)


def cmd_similarity(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.similarity(_course_root(args), args)


def cmd_export(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    # --course is Canvas's course id here; the course folder is --course-root
    return instructor_cli.export(_course_root(argparse.Namespace(course=args.course_root)), args)


def cmd_mistakes(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.mistakes(_course_root(args), args)


def cmd_gradescope(args: argparse.Namespace) -> int:
    from lmcourse.instructor import cli as instructor_cli

    return instructor_cli.gradescope(_course_root(args), args)


def build_parser() -> argparse.ArgumentParser:
    instructor = importlib.util.find_spec("lmcourse.instructor") is not None
    parser = _Parser(
        prog="lmcourse",
        description="An open course on language models: " + (
            "build the book, release assignments, check and grade notebooks." if instructor else
            "check your notebook before you submit it (the student edition)."),
    )
    from lmcourse import __version__

    parser.add_argument("--version", action="version", version=f"lmcourse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # The instructors' commands exist where lmcourse.instructor does: not in the student edition.
    instructors = sub.add_parser if instructor else \
        (lambda name, **kwargs: _Parser(prog=f"lmcourse {name}"))

    p = instructors("book", help="build the book site (and the student assignments)")
    p.add_argument("--no-assign", action="store_true", help="do not regenerate assignments/ first")
    p.add_argument("--check", action="store_true", help="also Sphinx's nit-picky mode (-n): every reference to a missing target fails; what the tests use")
    p.set_defaults(func=cmd_book)

    p = instructors("slides", help="(instructors) build the lecture decks from book/slides/ (after `lmcourse book`), "
                                      "or --check them against their chapters")
    p.add_argument("units", nargs="*", help="decks such as 01-ngrams (default: all)")
    p.add_argument("--check", action="store_true", help="only validate the decks' sources: slide count, speaker notes, "
                                                         "references to the chapter, starred syllabus items")
    p.set_defaults(func=cmd_slides)

    p = instructors("assign", help="generate student notebooks in assignments/ from solutions/")
    p.add_argument("ids", nargs="*", help="assignment ids such as 01-ngrams (default: all)")
    p.add_argument("--check", action="store_true", help="only report whether assignments/ is up to date")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_assign)

    p = sub.add_parser("check", help="(students) check a notebook before submitting: its test cells, the visible "
                                     "checks and what is left to do (exit 0 when ready)")
    p.add_argument("assignment", help="assignment id, e.g. 01-ngrams")
    p.add_argument("notebook", type=Path, help="your notebook (.ipynb)")
    p.add_argument("-v", "--verbose", action="store_true", help="also show how your code was isolated, in full")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_check)

    p = instructors("publish", help="(instructors) write the student edition: the assignments, the given code and "
                                     "`lmcourse check` with the visible checks; no answer, no hidden check")
    p.add_argument("edition", choices=["student"], help="what to publish (the student edition)")
    p.add_argument("out", type=Path, help="an empty folder to write it to (then push it as its own repository)")
    p.add_argument("--repository", required=True,
                   help="where students will find the edition (e.g. https://github.com/uni/lm-course-student): "
                        "the Colab badges and install cells point there")
    p.add_argument("--book-url", help="the book site's address, for the edition's README")
    p.add_argument("--force", action="store_true", help="replace what OUT holds")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.add_argument("--only", action="append", metavar="ID", dest="ids",
                   help="publish this assignment only (repeatable; default: all)")
    p.add_argument("--hints", choices=["compute", "cached", "off"], default=None,
                   help="the likely-cause hints of known mistakes: compute their signatures if not cached "
                        "(default; minutes, once per course version), use only cached ones, or none "
                        "(default from $LMCOURSE_HINTS)")
    p.set_defaults(func=cmd_publish)

    p = instructors("grade", help="(instructors) grade a folder of submissions")
    p.add_argument("assignment", help="assignment id, e.g. 01-ngrams")
    p.add_argument("submissions", type=Path, help="folder of <student>.ipynb or <student>/<id>/<id>.ipynb")
    p.add_argument("--out", type=Path, required=True, help="output folder (grades.csv, per-student results)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    p.add_argument("--gradebook", type=Path, help="nbgrader gradebook.db to record scores in")
    p.add_argument("--force", action="store_true", help="re-grade submissions already graded and unchanged")
    p.add_argument("--tier", choices=["auto", "cpu", "gpu"], default="auto", help="training-check tier")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip grading the solution and the release on this machine first (not recommended)")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.add_argument("--term", type=Path, help="due dates and late policies (default: the course's term.toml, if any; "
                                             "see the book's grading page)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")
    p.add_argument("--hints", choices=["compute", "cached", "off"], default=None,
                   help="the likely-cause hints of known mistakes: compute their signatures if not cached "
                        "(default; minutes, once per course version), use only cached ones, or none "
                        "(default from $LMCOURSE_HINTS)")
    slurm = p.add_argument_group("on a Slurm cluster (one array task per submission; see the book's grading page)")
    mode = slurm.add_mutually_exclusive_group()
    mode.add_argument("--slurm", action="store_true", help="write a round of Slurm jobs for the submissions that need "
                                                          "grading (a preflight job, then an array job), instead of grading here")
    mode.add_argument("--collect", action="store_true", help="merge the finished Slurm tasks' results into --out "
                                                            "(grades.csv, students/, --gradebook), as a local run writes them")
    slurm.add_argument("--submit", action="store_true", help="with --slurm: also sbatch the round (else run its submit.sh)")
    slurm.add_argument("--partition", help="Slurm partition for the jobs")
    slurm.add_argument("--gpus-per-task", type=int, default=0, help="GPUs per task (default 0); with --tier auto, "
                                                                    "1 or more means the GPU tier")
    slurm.add_argument("--time", help="time limit per task in Slurm's format (default: the assignment's grading budget)")
    slurm.add_argument("--cpus-per-task", type=int, default=2, help="CPU cores per task (default 2)")
    slurm.add_argument("--mem", help="memory per task, e.g. 16G (default: the partition's)")
    slurm.add_argument("--max-running", type=int, help="at most this many tasks at once")
    slurm.add_argument("--sbatch-arg", action="append", default=[], metavar="OPTION",
                       help="one more sbatch option for both jobs, e.g. --sbatch-arg=--account=cs336 (repeatable)")
    p.set_defaults(func=cmd_grade)

    p = instructors("leaderboard", help="(instructors) rank a graded cohort's grader-verified training results "
                                           "as an HTML page")
    p.add_argument("assignment", help="assignment id, e.g. 07-gpt")
    p.add_argument("grades", type=Path, help="the --out folder of `lmcourse grade` (holds students/)")
    p.add_argument("--show", choices=["pseudonym", "student"], default="pseudonym",
                   help="who the page names: stable pseudonyms (default; their key stays in the grades folder) or "
                        "the student ids as they are")
    p.add_argument("--names", type=Path, help="CSV of student,shown rows: the names to show instead (nicknames)")
    p.add_argument("--out", type=Path, help="the page to write (default: GRADES/leaderboard.html)")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_leaderboard)

    p = instructors("report", help="(instructors) what a graded cohort got wrong: scores, the checks failed most, "
                                      "the known mistakes matched, grader errors and time, as an HTML page and CSV")
    p.add_argument("assignment", help="assignment id, e.g. 05-transformer")
    p.add_argument("grades", type=Path, help="the --out folder of `lmcourse grade` (holds students/), a folder of "
                                             "Gradescope results.json files, or Gradescope's submissions export")
    p.add_argument("--out", type=Path, help="the page to write (default: GRADES/report.html); the CSV files go beside it")
    p.add_argument("--no-mistakes", action="store_true",
                   help="do not match the known mistakes (the first run grades each of them once: minutes)")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_report)

    p = instructors("similarity", help="(instructors) which submissions share code, graded function by graded "
                                          "function: an HTML page of the closest pairs side by side, and CSV")
    p.add_argument("assignment", help="assignment id, e.g. 04-attention")
    p.add_argument("submissions", type=Path, help="folder of <student>.ipynb or <student>/<id>/<id>.ipynb")
    p.add_argument("--out", type=Path, required=True, help="output folder (index.html, pairs.csv, functions.csv, "
                                                           "students.csv)")
    p.add_argument("--threshold", type=float, default=None,
                   help="list a pair when one of its functions matches at least this share (default 0.8)")
    p.add_argument("--no-solution", action="store_true", help="do not compare with the instructor's solution")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_similarity)

    p = instructors("export", help="(instructors) grades into the LMS: Canvas's gradebook import CSV (and its API), or "
                                      "a generic CSV; a grader error is left empty, never 0")
    p.add_argument("format", choices=["canvas", "csv"], help="canvas: the import file of Canvas's gradebook; csv: "
                                                              "one row per student")
    p.add_argument("assignment", help="assignment id, e.g. 04-attention")
    p.add_argument("grades", type=Path, help="the --out folder of `lmcourse grade` (its grades.csv)")
    p.add_argument("--out", type=Path, help="the CSV to write (with --url: optional)")
    p.add_argument("--roster", type=Path, help="canvas: the course's gradebook as Canvas exports it (Gradebook > "
                                               "Export): its students' ids and its assignment columns")
    p.add_argument("--column", help="canvas: the roster's column for this assignment, 'Name (id)' or its id "
                                    "(default: the only one whose name holds the assignment id)")
    p.add_argument("--match", choices=["sis-login", "sis-user", "id", "name"], default="sis-login",
                   help="canvas: the roster column a submission's student id is (default: sis-login)")
    p.add_argument("--url", help="canvas: also post the scores through Canvas's API at this address "
                                 "(token from $CANVAS_TOKEN, never from the command line)")
    p.add_argument("--course", type=int, help="with --url: the Canvas course id")
    p.add_argument("--course-root", dest="course_root", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_export)

    p = instructors("gradescope", help="(instructors) build a Gradescope autograder zip")
    p.add_argument("assignment", help="assignment id, e.g. 01-ngrams")
    p.add_argument("--out", type=Path, required=True, help="path of the zip to write")
    p.add_argument("--hints", choices=["compute", "cached", "off"], default=None,
                   help="the likely-cause hints of known mistakes: compute their signatures if not cached "
                        "(default; minutes, once per course version), use only cached ones, or none "
                        "(default from $LMCOURSE_HINTS)")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_gradescope)

    p = instructors("mistakes", help="(instructors) grade each known mistake once (cached) and say which ones "
                                        "`lmcourse check` and graded feedback can name as a likely cause")
    p.add_argument("assignments", nargs="+", metavar="ID", help="assignment ids, e.g. 05-transformer")
    p.add_argument("--tier", choices=["cpu", "gpu"], default="cpu", help="the tier to grade them at (default cpu)")
    p.add_argument("--force", action="store_true", help="grade them again even if cached")
    p.add_argument("--course", type=Path, help="course folder (default: this checkout)")
    p.set_defaults(func=cmd_mistakes)

    p = sub.add_parser("data", help="show where each corpus was found, and verify it")
    p.add_argument("names", nargs="*", help="corpus names (default: all)")
    p.add_argument("--offline", action="store_true", help="never download; use cache and mirror only")
    p.set_defaults(func=cmd_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args) or 0)
    except CommandError as err:
        print(f"lmcourse {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"lmcourse {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run as `python -m lmcourse.cli`, this file is __main__: hand over to the package's module, so
    # that there is one copy of the command table (the commands' CommandError is lmcourse.errors').
    from lmcourse.cli import main as _main

    sys.exit(_main())
