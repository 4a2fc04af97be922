"""Unit 6 (06-bert): the solution earns every point, the release none, and each known-wrong implementation
loses the points of the checks written to catch it.

The tests themselves are the shared unit contract (tests/unit_contract.py); autograder/06-bert/mistakes.py names
the checks and holds the known-wrong variants: the bugs students really write in BERT. WordPiece without the
`##` continuation, shortest match first, only the failing tail of a word as [UNK], no limit on a word's length;
masking that selects special tokens, corrupts every position instead of the selected ones, labels every
position, draws random replacements from the specials, gives 2% random replacements (TensorFlow's collator,
huggingface/transformers#32329) or none left unchanged (80/20), or ignores the generator it is given; the
encoder with tanh-approximate GELU, LayerNorm's default eps (1e-5 instead of BERT's 1e-12), pre-norm instead of
post-norm, padding not masked, no segment or no position embeddings; mean pooling over the padding; an MLM head
with a decoder matrix of its own, a loss averaged over every position; a classifier on the mean of the tokens
where [CLS] is documented; next-sentence pairs that may draw the true successor as NotNext, toss one coin for the
whole call or swap the labels' meaning, packing that puts the last [SEP] in segment 0 or truncates the wrong
segment, a pooler without its tanh; and one bug per training run: pretraining that predicts the corrupted inputs instead
of the original ids (the held-out masked-LM loss), fine-tuning that ignores the pretrained encoder it is given
(pretrained no better than from scratch). The two training runs (about 100 s a grade on one core) run for the
solution and for those two variants only. The correct alternates (a WordPiece that walks ends upward; masking by
one exact count per row; the layer as functions of its parameters with einsum) must earn full marks."""

from __future__ import annotations

from pathlib import Path

from lmcourse.instructor import mistakes
from lmcourse.instructor.testing import Edit
from unit_contract import UnitContract

_M = mistakes.module(Path(__file__).resolve().parent.parent, "06-bert")
# the checks' names and the known mistakes: autograder/06-bert/mistakes.py. Every check name stays a name of this
# module: tests/test_rules_by_what_runs.py leaves out the checks it does not keep by this module's names
WORDPIECE, MASK_STRUCTURE, MASK_STATS, LAYER, EMBED = _M.WORDPIECE, _M.MASK_STRUCTURE, _M.MASK_STATS, _M.LAYER, _M.EMBED
MODEL, MINILM, SENTENCES, MLM_HEAD, MLM_LOSS = _M.MODEL, _M.MINILM, _M.SENTENCES, _M.MLM_HEAD, _M.MLM_LOSS
PRETRAIN, FINE_TUNE, CLASSIFIER = _M.PRETRAIN, _M.FINE_TUNE, _M.CLASSIFIER
_LONGEST, _FF = _M._LONGEST, _M._FF
VARIANTS = _M.VARIANTS


# name -> {function or class: Edit(s) of the solution}: correct implementations that must earn full marks
ALTERNATES: dict[str, dict[str, Edit | list[Edit]]] = {
    "WordPiece by a set of candidate ends; masking by an exact count per row; the layer and heads in einsum; "
    "next-sentence pairs by rejection, packing by lengths": {
        "wordpiece_tokenize": Edit(
            _LONGEST,
            "            fits = [e for e in range(start + 1, len(word) + 1)\n"
            "                    if (word[start:e] if start == 0 else '##' + word[start:e]) in vocab]\n"
            "            end = max(fits) if fits else start\n"
            "            piece = (word[start:end] if start == 0 else '##' + word[start:end]) if fits else None\n",
            why="every end that fits, then the longest"),
        "mask_tokens": Edit(
            "    selected = (torch.rand(ids.shape, generator=generator) < p).to(ids.device) & selectable\n",
            "    scores = torch.rand(ids.shape, generator=generator).to(ids.device).masked_fill(~selectable, 2.0)\n"
            "    k = torch.round(p * selectable.sum(dim=1, keepdim=True)).long()  # (B, 1): how many per row\n"
            "    ranks = scores.argsort(dim=1).argsort(dim=1)  # rank of each position's score in its row\n"
            "    selected = ranks < k  # exactly round(p * n) of a row's n selectable positions (d2l's way)\n",
            why="the k positions with the smallest scores"),
        "BertLayer": Edit(
            _FF,
            "        hidden = torch.einsum('btd,fd->btf', x, self.ff1.weight) + self.ff1.bias\n"
            "        hidden = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))  # GELU by its definition\n"
            "        return self.ln2(x + torch.einsum('btf,df->btd', hidden, self.ff2.weight) + self.ff2.bias)",
            why="einsum and GELU from erf"),
        "BertClassifier": Edit(
            "        return self.head(h[:, 0])  # [CLS] is at position 0",
            "        cls = h.narrow(1, 0, 1).squeeze(1)  # (B, d_model)\n"
            "        return cls @ self.head.weight.T + self.head.bias", why="narrow and a product"),
        "nsp_pairs": Edit(
            "    other = torch.randint(n - 2, (n - 1,), generator=generator)  # one of the n - 2 sentences allowed ...\n"
            "    other = other + 2 * (other >= a).long()  # ... numbered past a and a + 1\n",
            "    other = torch.randint(n, (n - 1,), generator=generator)\n"
            "    bad = (other == a) | (other == a + 1)\n"
            "    while bad.any():  # redraw until every NotNext sentence is allowed\n"
            "        other[bad] = torch.randint(n, (int(bad.sum()),), generator=generator)\n"
            "        bad = (other == a) | (other == a + 1)\n", why="rejection sampling"),
        "pack_pair": Edit(
            "    a, b = list(a_ids), list(b_ids)\n"
            "    while len(a) + len(b) + 3 > max_len:  # BERT's truncate_seq_pair\n"
            "        if len(a) > len(b):\n"
            "            a.pop()\n"
            "        else:\n"
            "            b.pop()\n",
            "    la, lb = len(a_ids), len(b_ids)\n"
            "    while la + lb > max_len - 3:\n"
            "        la, lb = (la - 1, lb) if la > lb else (la, lb - 1)\n"
            "    a, b = list(a_ids)[:la], list(b_ids)[:lb]\n", why="lengths first, then slices"),
        "NSPHead": Edit(
            "        return self.classifier(torch.tanh(self.pooler(h[:, 0])))  # [CLS] is at position 0",
            "        pooled = torch.tanh(torch.einsum('bd,ed->be', h[:, 0], self.pooler.weight) + self.pooler.bias)\n"
            "        return pooled @ self.classifier.weight.T + self.classifier.bias", why="einsum"),
    },
}


class TestUnit06Bert(UnitContract):
    AID = "06-bert"
    MAX_SCORE = 29
    STUDENT_FUNCTIONS = 19
    RELEASE_MUST_NOT_CONTAIN = ('"##" + word[start:end]', "outcome < 0.8", "self.ln1(x + self.attn(x, mask=mask))",
                                "@ self.bert.tok_emb.weight.T", "self.head(h[:, 0])", "other + 2 * (other >= a)",
                                "torch.tanh(self.pooler(h[:, 0]))")
    VARIANTS = VARIANTS
    EXPENSIVE = (PRETRAIN, FINE_TUNE)  # about 70 s and 35 s a grade on one core; run for the variants they catch
    # ... with LMCOURSE_ALL_TRAINING=1 only: each proof pretrains (90-130 s), beyond CI's budget. Both passed when
    # the unit landed; the solution's grade in every make test still runs both checks
    EXPENSIVE_OPT_IN = (PRETRAIN, FINE_TUNE)
    ALTERNATES = ALTERNATES
    SYMPTOMS = {"mask_tokens draws one selection pattern for the whole batch": "draw every row's selection on its own",
                "mask_tokens corrupts ids in place (no copy)": "changed the ids tensor it was given"}
    RUN_DEMOS = False  # its demo is the CPU tier (a pretraining and two fine-tunings: about 100 s on one core)
