"""Checks for Part 2: BERT's masking, by its structure and by its statistics.

Structure (exact, on a small vocabulary whose special ids are not contiguous, so that a random replacement
drawn from the whole vocabulary, or from "every id above the specials", hits a special often): labels hold
the original id exactly where selected and -100 elsewhere; unselected positions keep their token; special
positions are never selected; a selected position holds [MASK], a non-special id, or its own token; the
same generator seed gives the same result and another seed a different one (a function that ignores the
generator it is given draws from torch's global generator, which the probe seeds identically every call).

Statistics, on 1,000 rows of 200 positions of MiniLM's vocabulary (about 160,000 selectable): every
test is a z-test at |z| <= 6, so an implementation that follows the spec fails one with probability below
1e-8 (a fixed, tiny false-alarm rate: never flaky). The rates: 15% selected; of those 80% [MASK], 10%
random, 10% unchanged (HF's TensorFlow collator's 2% random, huggingface/transformers#32329, and an
80/20 split without "unchanged" both fail). Jointly: the selection rate is the same for frequent and rare
tokens and in the first quarter of the rows and the rest (a rule such as "the first 15% of each row" fails),
neighbours' selections are uncorrelated, within a row and across rows (one pattern for the whole batch fails), and the random replacements are uniform over the non-special
vocabulary (a chi-square test over 16 bins, false-alarm rate below 1e-8), which also fails replacements
copied from elsewhere in the batch. Selecting exactly round(0.15 n) of each row passes every test.
"""

from __future__ import annotations

import math

import numpy as np

from lmcourse import minilm
from lmcourse.grading.checks import check, expect_shape
from lmcourse.grading.compare import expect_runs_elsewhere
from lmcourse.grading.sandbox.inside.probes import GENERATOR_ARG

Z = 6.0  # |z| above this fails: P < 2e-9 per test for a correct implementation


def _call(student, ids, special_ids, mask_id, vocab_size, seeds, what, same_inputs=False):
    """mask_tokens once per seed. same_inputs: every call gets the same ids tensor, which must come back as it
    was given (the instructions: do not modify ids)."""
    out = student.probe("call_with_generators", fn="mask_tokens", args=[ids, list(special_ids), mask_id, vocab_size],
                        seeds=list(seeds), timeout=60, same_inputs=same_inputs)
    if same_inputs:
        after = out.get("inputs_after") if isinstance(out, dict) else None
        if not isinstance(after, list) or not after or not isinstance(after[0], np.ndarray):
            raise AssertionError(f"{what}: the grader could not read your results")
        if after[0].shape != ids.shape or not np.array_equal(after[0], ids):
            raise AssertionError(f"{what}: the call changed the ids tensor it was given (in place); corrupt a copy "
                                 "(ids.clone()) and leave ids as it was: the caller may use the batch again")
        out = out.get("results")
    if not isinstance(out, list) or len(out) != len(seeds):
        raise AssertionError(f"{what}: the grader could not read your results")
    results = []
    for pair in out:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise AssertionError(f"{what}: expected a pair (inputs, labels); found {type(pair).__name__}")
        inputs = expect_shape(pair[0], ids.shape, what=f"{what}: inputs")
        labels = expect_shape(pair[1], ids.shape, what=f"{what}: labels")
        for name, x in (("inputs", inputs), ("labels", labels)):
            if x.dtype != np.int64:
                raise AssertionError(f"{what}: expected {name} as int64; found {x.dtype}")
        results.append((inputs, labels))
    return results


def _rows(rng, B, T, special, low, high, zipf=True):
    """(B, T) ids: [CLS] + ordinary ids + [SEP] + [PAD]..., rows of random lengths; ordinary ids from
    [low, high), Zipf-like when `zipf` (frequent and rare tokens), with a few [UNK] among them."""
    n = high - low
    weights = 1.0 / np.arange(1, n + 1) if zipf else np.ones(n)
    ids = low + rng.choice(n, size=(B, T), p=weights / weights.sum())
    unk = rng.random((B, T)) < 0.01
    ids[unk] = special["[UNK]"]
    lengths = rng.integers(T // 2, T + 1, size=B)
    for b, L in enumerate(lengths):
        ids[b, 0], ids[b, L - 1] = special["[CLS]"], special["[SEP]"]
        ids[b, L:] = special["[PAD]"]
    return ids.astype(np.int64)


@check(points=2, cell="test_mask_tokens", name="mask_tokens: labels, unselected positions, special positions "
                                              "and random replacements as specified; the generator decides; ids "
                                              "left unmodified; it runs where ids are")
def test_mask_structure(student, rng):
    # a 12-id vocabulary with specials 0, 3, 5, 7 (PAD, CLS, SEP, MASK) and 9 as [UNK]
    special = {"[PAD]": 0, "[CLS]": 3, "[SEP]": 5, "[MASK]": 7, "[UNK]": 9}
    specials = sorted(set(special.values()))  # the five special ids
    ordinary = np.array([i for i in range(12) if i not in specials])
    ids = ordinary[rng.integers(0, len(ordinary), size=(300, 40))]
    ids[:, 0], ids[:, 30] = special["[CLS]"], special["[SEP]"]
    ids[:, 31:] = special["[PAD]"]
    ids[rng.random(ids.shape) < 0.05] = special["[UNK]"]
    ids = ids.astype(np.int64)
    seed = int(rng.integers(1 << 30))
    what = (f"mask_tokens(ids (300, 40), special_ids={specials}, mask_id=7, vocab_size=12, generator)")
    # one ids tensor for the three calls: a function that corrupts it in place fails here, by name
    (inputs, labels), (again, again_labels), (other, _) = _call(student, ids, specials, 7, 12, [seed, seed, seed + 1],
                                                                what, same_inputs=True)
    selected = labels != -100
    is_special = np.isin(ids, specials)
    if (selected & is_special).any():
        b, t = np.argwhere(selected & is_special)[0]
        raise AssertionError(f"{what}: position ({b}, {t}) holds the special id {ids[b, t]} and was selected "
                             "(labels != -100 there); special positions are never selected")
    wrong = selected & (labels != ids)
    if wrong.any():
        b, t = np.argwhere(wrong)[0]
        raise AssertionError(f"{what}: at the selected position ({b}, {t}) the label is {labels[b, t]}; the label of "
                             f"a selected position is its original id, {ids[b, t]}")
    bad = (labels != -100) & ~selected
    leftover = ~selected & (labels != -100)
    if leftover.any() or bad.any():
        raise AssertionError(f"{what}: labels must be -100 wherever a position is not selected")
    changed = ~selected & (inputs != ids)
    if changed.any():
        b, t = np.argwhere(changed)[0]
        raise AssertionError(f"{what}: position ({b}, {t}) was not selected (label -100) but its input changed from "
                             f"{ids[b, t]} to {inputs[b, t]}; only selected positions are corrupted")
    if not selected.any():
        raise AssertionError(f"{what}: no position was selected")
    replaced = selected & (inputs != ids) & (inputs != 7)
    special_in = replaced & np.isin(inputs, specials)
    if special_in.any():
        b, t = np.argwhere(special_in)[0]
        raise AssertionError(f"{what}: the selected position ({b}, {t}) was replaced by the special id "
                             f"{inputs[b, t]}; random replacements are drawn from the non-special ids only")
    outside = selected & ((inputs < 0) | (inputs >= 12))
    if outside.any():
        raise AssertionError(f"{what}: a replacement lies outside range(vocab_size)")
    if not (np.array_equal(again, inputs) and np.array_equal(again_labels, labels)):
        raise AssertionError(f"{what}: two calls with generators seeded alike gave different results; draw all "
                             "randomness from the generator you are given")
    if np.array_equal(other, inputs):
        raise AssertionError(f"{what}: generators seeded differently gave the same result; draw all randomness "
                             "from the generator you are given (torch.rand(..., generator=generator)), not from "
                             "torch's global generator")
    expect_runs_elsewhere(student, fn="mask_tokens", args=[ids[:6], specials, 7, 12, GENERATOR_ARG],
                          what="mask_tokens(ids (6, 40) on a GPU, special_ids, mask_id=7, vocab_size=12, a CPU "
                               "generator)")


def _z(found, expected, n):
    return (found - expected) / math.sqrt(expected * (1 - expected) / n)


def _two_groups(a_hits, a_n, b_hits, b_n):
    """z of the difference of two proportions (pooled)."""
    p = (a_hits + b_hits) / (a_n + b_n)
    se = math.sqrt(p * (1 - p) * (1 / a_n + 1 / b_n))
    return (a_hits / a_n - b_hits / b_n) / se if se > 0 else 0.0


def _same_rate(hits, a, b, *, what: str, groups: tuple[str, str], rule: str) -> None:
    """Fail unless `hits` (boolean) happen at the same rate in groups `a` and `b` (boolean masks): |z| <= Z."""
    z = _two_groups(int((hits & a).sum()), int(a.sum()), int((hits & b).sum()), int(b.sum()))
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: {groups[0]} were selected at a rate of {(hits & a).sum() / a.sum():.4f} and "
                             f"{groups[1]} at {(hits & b).sum() / b.sum():.4f} (z = {z:+.1f}): whether a position is "
                             f"selected must not depend {rule}")


@check(points=2, cell="test_mask_tokens", name="mask_tokens: on 200,000 positions, 15% selected and of those "
                                              "80% [MASK], 10% random, 10% unchanged, independent of token, "
                                              "position and row; random ids uniform over the non-special vocabulary")
def test_mask_statistics(student, rng):
    special = minilm.special_ids()
    specials = sorted(set(special.values()))  # the five special ids
    V = len(minilm.vocab())
    mask_id = special["[MASK]"]
    ids = _rows(rng, 1000, 200, special, 1996, 4996)  # ordinary pieces, Zipf-like over 3,000 ids
    what = f"mask_tokens(ids (1000, 200) of MiniLM's vocabulary, special_ids={specials}, mask_id={mask_id}, " \
           f"vocab_size={V}, generator)"
    (inputs, labels), = _call(student, ids, specials, mask_id, V, [int(rng.integers(1 << 30))], what)
    selectable = ~np.isin(ids, specials)
    selected = (labels != -100) & selectable
    if ((labels != -100) & ~selectable).any():
        raise AssertionError(f"{what}: special positions were selected")
    n, k = int(selectable.sum()), int(selected.sum())
    failures = []

    def expect(name, found_hits, total, p, advice):
        z = _z(found_hits / total, p, total)
        if not abs(z) <= Z:
            failures.append(f"{name}: {found_hits / total:.4f} of {total:,} (expected {p}; z = {z:+.1f}). {advice}")

    expect("selected among the non-special positions", k, n, 0.15, "Select each position with probability p")
    if k == 0:
        raise AssertionError(f"{what}: no position was selected")
    sel_in, sel_ids = inputs[selected], ids[selected]
    is_mask = sel_in == mask_id
    is_kept = sel_in == sel_ids
    is_random = ~is_mask & ~is_kept
    # a random draw equal to the original token counts as "unchanged" (probability 1/30,517 per draw)
    expect("of the selected, replaced by [MASK]", int(is_mask.sum()), k, 0.8, "80% of the selected become [MASK]")
    expect("of the selected, replaced by a random token", int(is_random.sum()), k, 0.1,
           "10% of the selected become a random token")
    expect("of the selected, left unchanged", int(is_kept.sum()), k, 0.1, "10% of the selected keep their token")
    if failures:
        raise AssertionError(f"{what}: " + "; ".join(failures))

    # joint: rows independent of each other, first (one pattern drawn for the whole batch and broadcast over
    # its rows has every rate right, and would otherwise show only as a position effect, misnamed): the same
    # position of two rows both selected at p^2, over disjoint pairs of rows (0 and 1, 2 and 3, ...), so that the
    # pairs are independent of each other and the z-test's variance is exact
    across = selectable[0::2] & selectable[1::2]
    both = int((selected[0::2] & selected[1::2] & across).sum())
    m = int(across.sum())
    p = k / n
    z = (both / m - p * p) / math.sqrt(p * p * (1 - p * p) / m)
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: {both / m:.4f} of the positions were selected in both rows of a pair of "
                             f"rows; independent rows give {p * p:.4f} (z = {z:+.1f}): draw every row's selection "
                             "on its own")
    # joint: selection independent of the token (frequent vs rare ids) and of the position
    frequent = selectable & (ids < 2006)  # the ten most frequent ids: about 30% of the tokens
    _same_rate(selected, frequent, selectable & ~frequent, what=what,
               groups=("the ten most frequent ids", "the others"), rule="on its token")
    early = selectable & (np.arange(ids.shape[1]) < ids.shape[1] // 4)
    _same_rate(selected, early, selectable & ~early, what=what,
               groups=("positions in the first quarter of the rows", "the others"), rule="on where it is")
    pairs = selectable[:, :-1] & selectable[:, 1:]
    both = int((selected[:, :-1] & selected[:, 1:] & pairs).sum())
    m = int(pairs.sum())
    p = k / n
    z = (both / m - p * p) / math.sqrt(p * p * (1 - p * p) / m)
    if not abs(z) <= Z:
        raise AssertionError(f"{what}: {both / m:.4f} of neighbouring pairs were both selected; independent "
                             f"selections give {p * p:.4f} (z = {z:+.1f}): select each position independently")
    outcome_by_freq = _two_groups(int((is_mask & (sel_ids < 2006)).sum()), int((sel_ids < 2006).sum()),
                                  int((is_mask & (sel_ids >= 2006)).sum()), int((sel_ids >= 2006).sum()))
    if not abs(outcome_by_freq) <= Z:
        raise AssertionError(f"{what}: frequent and rare tokens were replaced by [MASK] at different rates "
                             f"(z = {outcome_by_freq:+.1f}): the outcome must not depend on the token")
    # the random replacements: never special, uniform over the non-special ids (16 bins of equal mass)
    drawn = sel_in[is_random]
    if np.isin(drawn, specials).any() or ((drawn < 0) | (drawn >= V)).any():
        raise AssertionError(f"{what}: a random replacement was a special id or outside range(vocab_size)")
    allowed = np.setdiff1d(np.arange(V), specials)
    bins = np.searchsorted(allowed, drawn) * 16 // len(allowed)
    counts = np.bincount(bins, minlength=16)
    expected = len(drawn) / 16
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # chi-square with 15 degrees of freedom: P(chi2 > 75) < 1e-8 (Wilson-Hilferty)
    if not chi2 <= 75.0:
        raise AssertionError(f"{what}: the {len(drawn):,} random replacements are not spread uniformly over the "
                             f"non-special ids (chi-square {chi2:.0f} over 16 equal bins; uniform draws stay below "
                             f"75). Draw each replacement uniformly from the ids in range(vocab_size) that are not "
                             "special")
