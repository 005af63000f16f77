"""The labels the fluency classifier learns from (docs/spec/fluency.md), derived from
Flickr8k-CN's translations:

    pairs = labelled_pairs("../shared/data/flickr8k_cn")     # 10,000 LabelledPair

Flickr8k-CN has no human fluency grades, so the labels are derived: a machine translation
(Baidu's or Google's) of a test caption is fluent when it agrees closely with the human
translation (flickr8kzhmtest, zhm) of the same English sentence. Every test sentence gives
two labelled pairs: 1,000 photos x 5 sentences x 2 systems = 10,000, each with its English
source for the source views. What this measures: how little a person had to change the
translation to make it a good Chinese sentence. The human translations look like
post-edits of Baidu's (317 of the 5,000 Baidu sentences are identical to their human
translation, 23 of Google's), so low agreement means edited, which is mostly disfluency
but also mistranslation and omission: the label is fluency and adequacy together, and a
fluent sentence worded unlike its human translation is labelled not fluent. It errs on
the side of calling translations not fluent, as people did (under 30% fluent).

The agreement measure is chrF (Popovic 2015: the F-score, recall weighted by beta=2, of
character 1- to 6-grams, averaged over the orders), computed over the characters that are
not spaces or punctuation (a missing final "。" is the English source's doing). Four
measures were compared on the 10,000 pairs: chrF, character BLEU-4 (add-one smoothing,
brevity penalty), the difflib similarity ratio and 1 - character TER (Levenshtein distance
over the reference's length):

| measure | AUC vs 50 graded | rho vs native 3-gram share | rho vs length |
|---|---|---|---|
| chrF | 0.84 | 0.446 | +0.07 |
| char BLEU-4 | 0.88 | 0.443 | -0.05 |
| difflib ratio | 0.89 | 0.439 | -0.11 |
| 1 - char TER | 0.85 | 0.383 | -0.16 |

- "50 graded": 50 random translations graded fluent or not, from the Chinese alone and
  blind to the scores, by this module's author (a check, not ground truth; 18 of 50
  fluent). At n=50 the four are indistinguishable: at thresholds labelling 24% to 32%
  fluent, each is right about every sentence it labels fluent (recall 0.61 to 0.72).
- "native 3-gram share": a reference-free proxy of fluency over all 10,000, the share of
  a sentence's character trigrams found in the native-written captions (zhc) of the other
  7,091 photos; the human translations score 0.60 on it, Baidu's 0.56, Google's 0.43.
  chrF agrees with it best (Spearman rho), TER clearly worst.
- "length": Spearman rho with the sentence's length in characters. The edit measures
  favour short sentences; a label that follows length teaches the classifier length (the
  paper's length baseline reached only 45.3 precision on human grades). chrF is the least
  tied to length: at its threshold, "the shorter, the more fluent" predicts its label at
  AUC 0.50, against 0.55 to 0.59 at the other measures' thresholds of a similar share.

The threshold, 0.40, is where the examples turn: below about 0.35 nearly every translation
is broken Chinese, above 0.5 nearly every one reads well, and 0.40 labels 25.6% fluent
(Baidu's 40%, Google's 11%), close to the paper's 27% of human grades. Examples (chrF, machine
translation | human translation):

    0.07 摇摆人 | 秋千上的人                                   not fluent: "swing man"
    0.16 该名女子抱着女孩的手附近的一个灌木丛中。 | 在一从灌木旁边一个女人正拉着...   not fluent
    0.36 两个男孩在外就餐popscicles。 | 两个男孩在外面吃冰棍。                    not fluent
    0.38 两只熊彼此裸牙。 | 两只熊彼此展示着牙。                                  not fluent
    0.41 相机聚焦于人的双腿。 | 相机聚焦于两个人的双腿上。                         fluent
    0.42 三个女孩在沙滩上玩。 | 三个女孩在玩沙子。                                fluent
    0.44 一个孤独的，黄色的独木舟被划过河。 | 一个孤单的黄色的独木舟划过一条河。  fluent (awkward)
    0.53 一个女人踢在一个男人。 | 一个女人踢一个男人。                            fluent (it is not)
    0.63 那孩子在一个小水池里溅了水。 | 那个孩子在一个小水池里泼水。               fluent

and the errors the label makes: short fluent rewordings fall below (0.10 "那只狗游到一个
瀑布。" | "狗朝瀑布游了过去。"; 0.19 "男孩在女孩耳边低语。"), and a one-character
slip scores above ("踢在一个男人", 0.53).

The other candidate, native-written sentences (zhc) as fluent against translations as not
fluent, measures something else: written natively or translated. Native captions are half
as long (median 8 characters against Baidu's 15, punctuation aside), so length alone tells
them apart at AUC 0.91; they describe the photo rather than an English sentence; they have
no English source, so the source views would learn only "has a source, so translated";
and every translation would be not fluent, the 317 Baidu sentences a person left
unchanged included. It cannot rank translations against each other, which is what the
fluency-guided captioner needs, so the labels are the human-agreement ones.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conceptual.fluency.flickr8k_cn import ENGLISH, SOURCES, read_lines
from conceptual.importers import existing_dir, existing_file
from conceptual.text.chinese import is_punctuation, normalize

THRESHOLD = 0.40  # fluent when chrF against the human translation is at least this
MACHINE_TRANSLATIONS = ("baidu", "google")
CHRF_ORDERS, CHRF_BETA = 6, 2.0


@dataclass(frozen=True)
class LabelledPair:
    image: str  # the photo's file name
    n: int  # the sentence's number among the photo's five
    source: str  # the machine translation's system: "baidu" or "google"
    text: str  # the machine translation
    original: str  # the English sentence it translates
    reference: str  # the human translation of that sentence
    agreement: float  # chrF of `text` against `reference`
    fluent: bool  # agreement >= the threshold


def characters(text: str) -> list[str]:
    """The characters chrF compares: normalized, no spaces, no punctuation."""
    return [c for c in normalize(text) if not c.isspace() and not is_punctuation(c)]


def chrf(hypothesis: str, reference: str) -> float:
    """chrF (beta 2, character 1- to 6-grams) of a sentence against one reference, in [0, 1];
    the orders either side is too short for are left out of the average."""
    hyp, ref = characters(hypothesis), characters(reference)
    precisions, recalls = [], []
    for n in range(1, CHRF_ORDERS + 1):
        hyp_grams = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
        ref_grams = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
        if not hyp_grams or not ref_grams:
            continue
        matches = sum((hyp_grams & ref_grams).values())
        precisions.append(matches / hyp_grams.total())
        recalls.append(matches / ref_grams.total())
    if not precisions:
        return 0.0
    p, r = np.mean(precisions), np.mean(recalls)
    beta2 = CHRF_BETA**2
    return 0.0 if p + r == 0 else float((1 + beta2) * p * r / (beta2 * p + r))


def labelled_pairs(cn_dir: str | Path, threshold: float = THRESHOLD) -> list[LabelledPair]:
    """Each machine translation of a sentence that has a human translation and an English
    original, labelled by chrF against the human translation (the module's docstring), in
    the human file's order, Baidu's before Google's. Lines that do not parse are skipped;
    a missing folder or file is an importers.ImportSourceError (a ValueError)."""
    cn_dir = existing_dir(cn_dir)

    def sentences(file_name: str, tag: str) -> dict[tuple[str, int], str]:
        lines = read_lines(existing_file(cn_dir / file_name), tag)
        return {(line.image, line.n): line.text for line in lines if not line.problem}

    human, english = sentences(*SOURCES["human"]), sentences(*ENGLISH)
    translations = {source: sentences(*SOURCES[source]) for source in MACHINE_TRANSLATIONS}
    pairs = []
    for (image, n), reference in human.items():
        if (image, n) not in english:
            continue
        for source, translated in translations.items():
            if (text := translated.get((image, n))) is None:
                continue
            agreement = chrf(text, reference)
            fluent = agreement >= threshold
            original = english[image, n]
            pairs.append(
                LabelledPair(image, n, source, text, original, reference, agreement, fluent)
            )
    return pairs
