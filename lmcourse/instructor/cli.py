"""``lmcourse grade | leaderboard | report | gradescope``: the instructors' faces of the grader.

The top of the grader's layers: ``lmcourse grade`` → `batch` (or `slurm`) →
`lmcourse.grading.runner` → `plugin` → `sandbox`, each importing only the ones
below it; ``lmcourse gradescope`` calls the bundle builder. Imported by
``lmcourse.cli`` and imports nothing from it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lmcourse.grading.cli import known


def grade(root: Path, args: argparse.Namespace) -> int:
    """Grade a folder of submissions (see :mod:`lmcourse.instructor.batch`)."""
    from lmcourse.errors import CommandError, GraderError
    from lmcourse.instructor import batch
    from lmcourse.grading.runner import resolve_tier

    known(root, args.assignment)
    if not args.submissions.is_dir():
        raise CommandError(f"{args.submissions} is not a folder (expected <student>.ipynb or <student>/{args.assignment}/"
                           f"{args.assignment}.ipynb inside)")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        if not os.access(args.out, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        raise CommandError(f"--out {args.out}: cannot create or write to it ({err.strerror}); choose a folder "
                           "you can write to") from None
    if getattr(args, "slurm", False) or getattr(args, "collect", False):
        return _grade_on_slurm(root, args)
    if getattr(args, "submit", False):
        raise CommandError("--submit goes with --slurm (it submits the round that --slurm writes)")
    try:
        summary = batch.run(root, args.assignment, args.submissions, args.out, jobs=args.jobs, force=args.force,
                            tier=resolve_tier(args.tier), gradebook=args.gradebook,
                            progress=not getattr(args, "no_progress", False),
                            preflight=not getattr(args, "no_preflight", False), hints=getattr(args, "hints", None),
                            term=getattr(args, "term", None))
    except (FileNotFoundError, GraderError) as err:
        raise CommandError(str(err)) from None
    return 1 if summary["grader_errors"] else 0


def _grade_on_slurm(root: Path, args: argparse.Namespace) -> int:
    """``--slurm`` writes (and submits) a round of jobs; ``--collect`` gathers their results (`lmcourse.instructor.slurm`)."""
    from lmcourse.errors import CommandError, GraderError
    from lmcourse.instructor import slurm

    if getattr(args, "no_preflight", False):
        raise CommandError("--no-preflight does not go with --slurm or --collect: a round's array job runs only after "
                           "its preflight job has passed on a node like theirs")
    try:
        if args.collect:
            summary = slurm.collect(root, args.assignment, args.submissions, args.out, gradebook=args.gradebook,
                                    hints=getattr(args, "hints", None), term=getattr(args, "term", None))
            return 1 if summary["grader_errors"] or summary["queued"] or summary["unsubmitted"] else 0
        options = slurm.Options(partition=args.partition, gpus_per_task=args.gpus_per_task, time=args.time,
                                cpus_per_task=args.cpus_per_task, mem=args.mem, max_running=args.max_running,
                                sbatch_args=list(args.sbatch_arg))
        slurm.prepare(root, args.assignment, args.submissions, args.out, tier=args.tier, options=options,
                      force=args.force, submit=args.submit)
    except (FileNotFoundError, GraderError) as err:
        raise CommandError(str(err)) from None
    return 0


def leaderboard(root: Path, args: argparse.Namespace) -> int:
    """Rank a graded cohort's grader-verified training results (see :mod:`lmcourse.instructor.leaderboard`)."""
    from lmcourse.errors import CommandError
    from lmcourse.instructor import leaderboard as lb

    known(root, args.assignment)
    if not (args.grades / "students").is_dir():
        raise CommandError(f"{args.grades} holds no students/ folder: give the --out folder of `lmcourse grade "
                           f"{args.assignment} ...`")
    if args.names is not None and not args.names.is_file():
        raise CommandError(f"--names {args.names}: no such file (expected a CSV of student,shown rows)")
    path, counts = lb.build(args.grades, args.assignment, show=args.show, names=args.names, out=args.out)
    skipped = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items()
                        if what not in ("results", "ranked") and n)
    print(f"{args.assignment}: {counts['ranked']} of {counts['results']} results ranked"
          + (f" ({skipped})" if skipped else "") + f"; written to {path}")
    return 0


def similarity(root: Path, args: argparse.Namespace) -> int:
    """Which submissions share code (see :mod:`lmcourse.instructor.similarity`)."""
    from lmcourse.errors import CommandError
    from lmcourse.instructor import similarity as sim

    known(root, args.assignment)
    if not args.submissions.is_dir():
        raise CommandError(f"{args.submissions}: no such folder (expected a folder of <student>.ipynb or "
                           f"<student>/{args.assignment}/{args.assignment}.ipynb)")
    threshold = sim.THRESHOLD if args.threshold is None else args.threshold
    if not 0 < threshold <= 1:
        raise CommandError(f"--threshold {threshold}: a share between 0 and 1, e.g. 0.8")
    result = sim.run(root, args.assignment, args.submissions, args.out, threshold=threshold,
                     with_solution=not args.no_solution)
    students = [p for p in result.parties if p.name != sim.SOLUTION]
    print(f"{len(students)} submissions, {len(result.unreadable())} not compared; {len(result.pairs)} pairs share "
          f"code, {len(result.flagged())} at or above {threshold:.0%} ({result.seconds:.1f} s)")
    for pair in result.flagged()[:10]:
        print(f"  {pair.score:.0%}  {pair.a} and {pair.b}: " + ", ".join(m.unit for m in pair.flagged(threshold)))
    for party in result.unreadable():
        print(f"  not compared: {party.name}: {party.problem}")
    print(f"page: {Path(args.out) / 'index.html'}")
    return 0


def export(root: Path, args: argparse.Namespace) -> int:
    """Grades into the LMS (see :mod:`lmcourse.instructor.export`)."""
    from lmcourse.errors import CommandError
    from lmcourse.files import atomic_write
    from lmcourse.instructor import export as ex

    known(root, args.assignment)
    grades = ex.read_grades(args.grades)
    if args.format == "csv":
        if not args.out:
            raise CommandError("--out FILE: where to write the CSV")
        atomic_write(args.out, ex.generic_csv(grades))
        print(f"{len(grades)} students, {sum(g.score is None for g in grades)} not graded (left empty): {args.out}")
        return 0
    if not args.roster:
        raise CommandError("--roster FILE: Canvas's gradebook export (Gradebook > Export > Export Entire Gradebook); "
                           "it names each student's Canvas ids and the assignment's column")
    if not args.out and not args.url:
        raise CommandError("--out FILE (the import CSV), --url URL (Canvas's API), or both")
    roster = ex.read_roster(args.roster)
    column = roster.column(args.column, args.assignment)
    matched = ex.match(grades, roster, args.match)
    scored = sum(v is not None for v in matched.scores.values())
    if args.out:
        atomic_write(args.out, ex.canvas_csv(roster, column, matched, ex.points_possible(grades)))
        print(f"{args.out}: {scored} scores in the column {column!r}; the other {len(roster.students) - scored} "
              f"students' cells are left empty")
    for g in matched.not_graded:
        print(f"  {g.student}: not graded (grader-error): left empty; grade it again, then export again")
    for g in matched.unmatched + matched.ambiguous:
        how = "matches no one" if g in matched.unmatched else "matches more than one student"
        print(f"  {g.student}: {how} in the roster's {ex.MATCH[args.match]!r} column: NOT exported "
              f"(score {g.score}); fix the id or use --match")
    if args.url:
        import os

        token = os.environ.get("CANVAS_TOKEN", "")
        if not token or args.course is None:
            raise CommandError("--url needs --course N and a token in $CANVAS_TOKEN (Canvas: Account > Settings > "
                               "New access token)")
        canvas_id = int(ex.ASSIGNMENT_COLUMN.match(column).group("id"))
        sent = ex.push(args.url, token, args.course, canvas_id, matched.scores)
        print(f"Canvas: {sent['sent']} scores posted to assignment {canvas_id} of course {args.course} "
              f"(job {sent['progress']}: {sent['state']}); empty cells were not sent")
    return 1 if matched.unmatched or matched.ambiguous else 0


def report(root: Path, args: argparse.Namespace) -> int:
    """What a graded cohort got wrong (see :mod:`lmcourse.instructor.cohort`)."""
    import sys

    from lmcourse.errors import CommandError
    from lmcourse.instructor import cohort

    known(root, args.assignment)
    if not args.grades.is_dir():
        raise CommandError(f"{args.grades}: no such folder (expected the --out folder of `lmcourse grade "
                           f"{args.assignment} ...`, or a folder of Gradescope results)")
    page, summary = cohort.build(root, args.grades, args.assignment, out=args.out,
                                 with_mistakes=not args.no_mistakes,
                                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    if summary.total == 0:
        print(f"{args.assignment}: no results of this assignment in {args.grades}", file=sys.stderr)
    explained = sum(1 for a in summary.attribution.values() if a["exact"])
    print(f"{args.assignment}: {summary.total} submissions ({len(summary.graded)} graded, "
          f"{len(summary.grader_errors)} grader errors); {explained} matched a known mistake exactly, "
          f"{len(summary.unexplained)} failing submissions unexplained; written to {page}")
    return 0


def gradescope(root: Path, args: argparse.Namespace) -> int:
    """Build the Gradescope autograder zip (see :mod:`lmcourse.instructor.gradescope`)."""
    from lmcourse.instructor import gradescope as gs

    known(root, args.assignment)
    path = gs.build(root, args.assignment, args.out, hints=getattr(args, "hints", None))
    print(f"{args.assignment}: Gradescope autograder written to {path}")
    return 0


def mistakes(root: Path, args: argparse.Namespace) -> int:
    """Grade each known mistake once (cached) and say which ones the feedback can name
    (see :mod:`lmcourse.instructor.mistakes`)."""
    import sys

    from lmcourse.errors import CommandError, GraderError
    from lmcourse.grading import signatures as sig
    from lmcourse.instructor import mistakes as catalogue

    for aid in args.assignments:
        known(root, aid)
    for aid in args.assignments:
        try:
            found = catalogue.signatures(root, aid, tier=args.tier, use_cache=not args.force,
                                         progress=lambda line: print(line, file=sys.stderr, flush=True))
        except GraderError as err:
            raise CommandError(str(err)) from None
        in_check = [s for s in found if sig.hinted(s, found, where="check")]
        graded = [s for s in found if sig.hinted(s, found, where="graded")]
        print(f"{aid}: {len(found)} known mistakes; `lmcourse check` names {len(in_check)} of them from the visible "
              f"checks and test cells, graded feedback {len(graded)}")
        for s in found:
            where = ", ".join(w for w, listed in (("check", in_check), ("graded feedback", graded)) if s in listed)
            print(f"  {s.mistake} [{s.function}]: fails {len(s.failing)} checks and test cells; "
                  f"its hint is shown in {where or 'neither (its failures are shared with more mistakes)'}")
    return 0
