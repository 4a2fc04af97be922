"""Instructor notes: one page per unit, built *outside* the public site.

``instructors/<unit>.md`` holds what an instructor needs to teach a unit next
week: learning objectives, a 75-minute lecture plan that follows the unit's
slide deck, in-class questions with answers, the mistakes students make in
the assignment, and what the assignment costs (a student's time, the
grader's CPU and GPU time). The common mistakes come from the unit's
known mistakes (``VARIANTS`` in ``autograder/<unit>/mistakes.py``), so each
one names a bug the hidden checks are proven to catch; because they say what
the hidden checks test, the pages are rendered to ``book/_build/instructors/``,
next to the public site and never inside it (the leak test checks both).

``lmcourse slides --check`` validates the notes with the decks; ``lmcourse
book`` renders them.
"""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path

NOTES_SRC = Path("instructors")
OUT = Path("book") / "_build" / "instructors"
SECTIONS = ("Learning objectives", "Lecture plan (75 minutes)", "In-class questions", "Common mistakes",
            "Time and cost")
LECTURE_MINUTES = 75


def variant_names(root: Path, unit: str) -> set[str]:
    """The known mistakes of a unit's assignment: the keys of VARIANTS in ``autograder/<unit>/mistakes.py``
    (read, not run)."""
    found: set[str] = set()
    path = root / "autograder" / unit / "mistakes.py"
    if not path.is_file():
        return found
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == "VARIANTS" and isinstance(value, ast.Dict):
            found |= {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and target.value.id == "VARIANTS" and isinstance(target.slice, ast.Constant)):
            found.add(target.slice.value)
    return found


def common_mistakes(root: Path, unit: str) -> list[str]:
    """The mistakes the unit's notes teach from (the headings of "## Common mistakes"); [] without notes."""
    path = root / NOTES_SRC / f"{unit}.md"
    if not path.is_file():
        return []
    section = _sections(path.read_text(encoding="utf-8")).get("Common mistakes", "")
    return [m.strip().strip("`") for m in re.findall(r"(?m)^### (.+)$", section)]


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"(?m)^## (.+)$", text)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def check_notes(root: Path, unit: str, deck_slides: int | None = None) -> list[str]:
    """Everything wrong with a unit's instructor notes; [] when they are complete."""
    path = root / NOTES_SRC / f"{unit}.md"
    if not path.exists():
        return [f"{unit}: no instructor notes ({path.relative_to(root)})"]
    text = path.read_text(encoding="utf-8")
    sections = _sections(text)
    problems = [f"{unit} notes: no section '## {s}'" for s in SECTIONS if s not in sections]
    plan = sections.get("Lecture plan (75 minutes)", "")
    rows = [r for r in re.findall(r"(?m)^\|\s*(\d+)\s*\|\s*([\d–-]+)\s*\|", plan)]
    if plan and not rows:
        problems.append(f"{unit} notes: the lecture plan needs a table | minutes | slides | what happens |")
    if rows:
        minutes = sum(int(m) for m, _ in rows)
        if minutes != LECTURE_MINUTES:
            problems.append(f"{unit} notes: the lecture plan adds up to {minutes} minutes, not {LECTURE_MINUTES}")
        if deck_slides:
            covered: set[int] = set()
            for _, span in rows:
                a, _, b = span.replace("–", "-").partition("-")
                covered |= set(range(int(a), int(b or a) + 1))
            missing = sorted(set(range(1, deck_slides + 1)) - covered)
            if missing:
                problems.append(f"{unit} notes: the lecture plan skips slides {missing} of the deck")
    questions = re.findall(r"(?m)^### ", sections.get("In-class questions", ""))
    if "In-class questions" in sections and not 3 <= len(questions) <= 5:
        problems.append(f"{unit} notes: {len(questions)} in-class questions (### headings); expected 3-5")
    if "In-class questions" in sections and \
            sections["In-class questions"].count("**Answer") < len(questions):
        problems.append(f"{unit} notes: every in-class question needs an **Answer.**")
    mistakes = re.findall(r"(?m)^### (.+)$", sections.get("Common mistakes", ""))
    known = variant_names(root, unit)
    if "Common mistakes" in sections and not 3 <= len(mistakes) <= 8:
        problems.append(f"{unit} notes: {len(mistakes)} common mistakes; expected 3-8")
    for m in mistakes:
        name = m.strip().strip("`")
        if name not in known:
            problems.append(f"{unit} notes: the mistake {name!r} is not a known-wrong variant of the unit "
                            "(a key of VARIANTS in autograder/<unit>/mistakes.py, copied exactly)")
    for block in re.split(r"(?m)^### ", sections.get("Common mistakes", ""))[1:]:
        for label in ("**The bug.**", "**What the student sees.**", "**How to help.**"):
            if label not in block:
                problems.append(f"{unit} notes: the mistake {block.splitlines()[0]!r} has no {label}")
    return problems


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2rem .5rem;vertical-align:top}}
code{{background:#f4f4f4;padding:0 .2rem}} .materials{{background:#f6f8fa;padding:.6rem 1rem;border-radius:6px}}</style>
<script>window.MathJax = {{ tex: {{ inlineMath: [["\\\\(", "\\\\)"]] }} }};</script>
<script src="../html/_static/mathjax/tex-mml-chtml.js" async></script>
</head><body><main>
<p class="materials">Instructors only: not part of the public site. {links}</p>
{body}
</main></body></html>
"""


def has_gpu_tier(root: Path, unit: str) -> bool:
    """Whether the unit's hidden checks have a GPU tier (a training check with a larger run under CUDA)."""
    return any(re.search(r"GPU_THRESHOLD|tier == \"gpu\"", p.read_text(encoding="utf-8"))
               for p in (root / "autograder" / unit).glob("*.py"))


def cost_table(root: Path, unit: str) -> str:
    """The measured grading cost of one submission (instructors/grading-cost.json), as Markdown."""
    import json

    path = root / NOTES_SRC / "grading-cost.json"
    measured = json.loads(path.read_text(encoding="utf-8")).get(unit, {}) if path.exists() else {}
    rows = []
    for tier in ("cpu", "gpu"):
        m = measured.get(tier)
        if m:
            rows.append(f"| {tier.upper()} | {m['seconds']} s | {m['peak_mb']} MB | {m['machine']} | {m['date']} |")
        elif tier == "gpu" and not has_gpu_tier(root, unit):
            rows.append("| GPU | as on the CPU: this assignment has no training check, so no GPU tier | | | |")
        else:
            rows.append(f"| {tier.upper()} | not measured yet (no run on such a machine so far) | | | |")
    return ("\n\n**Grading cost per submission**, measured by `tools/measure_grading_cost.py` (the solution, "
            "submitted as a student would, graded by `lmcourse grade` one submission at a time; peak memory "
            "of the largest process):\n\n| tier | wall time | peak memory | machine | date |\n| --- | --- | --- | --- | --- |\n"
            + "\n".join(rows) + "\n\nA cohort graded with `--jobs N` takes about (students / N) times as long "
            "on a machine with N free cores.\n")


def cohort_cost_table(root: Path) -> str:
    """Every assignment's grading cost (instructors/grading-cost.json) and budget, as Markdown, for the book's
    public grading page; with the Slurm overhead `benchmarks/slurm.py --record` measured."""
    import json

    from lmcourse.course import Course
    from lmcourse.instructor.batch import runner_timeout
    from lmcourse.instructor.slurm import STARTUP_SECONDS

    path = root / NOTES_SRC / "grading-cost.json"
    measured = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    rows = []
    for assignment in Course(root).assignment_ids():
        cpu, gpu = measured.get(assignment, {}).get("cpu"), measured.get(assignment, {}).get("gpu")
        budget = runner_timeout(root, assignment)
        if gpu:
            on_gpu = f"{gpu['seconds']} s ({gpu['machine']})"
        elif has_gpu_tier(root, assignment):
            on_gpu = "not measured yet"
        else:
            on_gpu = "no GPU tier (no training check)"
        rows.append(f"| `{assignment}` | " + (f"{cpu['seconds']} s | {cpu['peak_mb']:,} MB | "
                                             f"{cpu['seconds'] * 100 / 2 / 60:.0f} min"
                                             if cpu else "not measured yet | | ")
                    + f" | {on_gpu} | {budget / 60:.0f} min | {(budget + STARTUP_SECONDS) / 60:.0f} min |")
    machines = sorted({m["machine"] for a, tiers in measured.items() if not a.startswith("_")
                       for m in tiers.values()})
    table = ("| assignment | CPU tier, one submission | peak memory | 100 students, `--jobs 2` | GPU tier, one "
             "submission | budget | Slurm `--time` default |\n| --- | --- | --- | --- | --- | --- | --- |\n"
             + "\n".join(rows) + "\n")
    if machines:
        table += f"\nMeasured on: {'; '.join(machines)}.\n"
    slurm = measured.get("_slurm", {})
    if slurm:
        first = next(iter(slurm.values()))
        table += ("\nA Slurm task costs a little more than a local grade: it starts its own grader process, and "
                  "waits for the scheduler. Measured through a single-node Slurm by `python benchmarks/slurm.py "
                  f"--record` ({first['machine']}, {first['date']}), two at a time both ways, seconds per "
                  "submission from `--slurm --submit` to `--collect` against a local `lmcourse grade --jobs 2` of "
                  "the same notebooks:\n\n| assignment | notebooks | local | Slurm | a task's overhead | a task "
                  "alone (start and grade) |\n| --- | --- | --- | --- | --- | --- |\n")
        table += "\n".join(f"| `{a}` | {m['submissions']} | {m['local_seconds']} s | {m['slurm_seconds']} s | "
                            f"+{m['overhead_seconds']} s | {m['task_seconds']} s |" for a, m in sorted(slurm.items()))
        table += "\n"
    return table


def build(root: Path, units: list[str]) -> Path:
    """Render every unit's notes (and an index) to book/_build/instructors/."""
    from lmcourse.instructor.slides import markdown  # the decks' Markdown: $...$ maths for MathJax, tables

    out = root / OUT
    out.mkdir(parents=True, exist_ok=True)
    items = []
    for unit in units:
        src = root / NOTES_SRC / f"{unit}.md"
        if not src.exists():
            continue
        text = src.read_text(encoding="utf-8") + cost_table(root, unit)
        title = (re.search(r"(?m)^# (.+)$", text) or [None, unit])[1]
        links = (f'<a href="index.html">All units</a> · <a href="../html/slides/{unit}.html">slides</a> · '
                 f'<a href="../html/slides/{unit}.pdf">PDF</a> · '
                 f'<a href="../html/slides/{unit}-notes.pdf">PDF with speaker notes</a> · '
                 f'<a href="../html/figures/index.html#{unit}">figures</a> · <a href="../html/units/{unit}.html">chapter</a>')
        (out / f"{unit}.html").write_text(_PAGE.format(title=html.escape(title), links=links, body=markdown(text)),
                                          encoding="utf-8")
        items.append(f'<li><a href="{unit}.html">{html.escape(title)}</a></li>')
    readme = root / NOTES_SRC / "README.md"
    intro = markdown(readme.read_text(encoding="utf-8")) if readme.exists() else "<h1>Instructor notes</h1>"
    (out / "index.html").write_text(_PAGE.format(
        title="Instructor notes", links='<a href="../html/course/instructors.html">the public instructors page</a>',
        body=intro + "<ul>" + "".join(items) + "</ul>"), encoding="utf-8")
    return out
