"""The fluency classifier's held-out evaluation (docs/spec/fluency.md; the paper's Table 2):
precision, recall, F1 and AUC on the test labels of the four-view score, of each view
alone, of the paper's baselines (conceptual.fluency.baselines: a coin; fluent if the
English, or the Chinese, sentence is shorter than the mean fluent length of the train
labels) and of a tuned length rule beside them (fluent for sentences at most, or at least,
L words long, the direction and L set on the dev labels: length_rule).

    the best model, the labels' train, dev and test splits  ->  an Evaluation (pipelines/
        evaluation.py): `test.<classifier>.<metric>` metrics, held_out.md, and the table's
        rows as the result's `held_out`

train_fluency logs it into its training run as the run ends (evaluation.log): the labels
and their views are made there, from the Flickr8k-CN folder, and the table is the run's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from conceptual.fluency.baselines import MeanFluentLength, random_guess
from conceptual.fluency.model import FLUENT_ABOVE, VIEWS, FluencyModel, predict, scores
from conceptual.metrics import auc, binary_scores, classifier_scores
from conceptual.pipelines.evaluation.evaluation import Evaluation

TEST_SPLIT = "test"
HELD_OUT = "held_out.md"


def held_out_evaluation(
    model: FluencyModel,
    train: dict[str, Any],
    dev: dict[str, Any],
    test: dict[str, Any],
    eval_set: str,
    seed: int = 0,
) -> Evaluation:
    """The held_out table on the `test` labels (named `eval_set`) as an Evaluation: every
    finite score of every row as `test.<classifier>.<metric>`, and the table as held_out.md."""
    table = held_out(model, train, dev, test, seed)
    return Evaluation(
        metrics={
            f"{TEST_SPLIT}.{row['classifier']}.{name}": value
            for row in table
            for name, value in row.items()
            if isinstance(value, float) and math.isfinite(value)
        },
        eval_set=eval_set,
        result={"held_out": table},
        texts={HELD_OUT: held_out_markdown(table)},
    )


def held_out(
    model: FluencyModel,
    train: dict[str, Any],
    dev: dict[str, Any],
    test: dict[str, Any],
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The paper's Table 2 on the test labels: the four-view score, each view alone, the
    paper's baselines, and the tuned length rule (a threshold in Chinese words, set on the
    dev labels: length_rule)."""
    p = predict(model, test["columns"])
    lengths, labels = test["columns"]["lengths"], test["labels"]
    rows = [
        {"classifier": "four_view", **classifier_scores(scores(p, lengths), labels, FLUENT_ABOVE)}
    ]
    rows += [
        {"classifier": view, **classifier_scores(p[:, i], labels, FLUENT_ABOVE)}
        for i, view in enumerate(VIEWS)
    ]
    rows += paper_baselines(train, test, seed)
    shorter, words = length_rule(dev)
    test_words = words_of(test)
    predicted = test_words <= words if shorter else test_words >= words
    rows.append(
        {
            "classifier": "length",
            **binary_scores(predicted, labels),
            "AUC": auc(-test_words if shorter else test_words, labels),
            "rule": f"fluent if {'at most' if shorter else 'at least'} {words} words",
        }
    )
    share = float(labels.mean()) if len(labels) else 0.0
    return [{**row, "pairs": len(labels), "fluent": share} for row in rows]


def paper_baselines(train: dict[str, Any], test: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The paper's three baselines on the test labels (conceptual.fluency.baselines)."""
    labels = test["labels"]
    guessed, guess_scores = random_guess(len(labels), seed)
    rows = [
        {
            "classifier": "random",
            **binary_scores(guessed, labels),
            "AUC": auc(guess_scores, labels),
            "rule": "fluent with probability 0.5",
        }
    ]
    for view, name in (("en_words", "length_en"), ("zh_words", "length_zh")):
        rule = MeanFluentLength.fit(words_of(train, view), train["labels"])
        test_words = words_of(test, view)
        rows.append(
            {
                "classifier": name,
                **binary_scores(rule.predict(test_words), labels),
                "AUC": auc(rule.scores(test_words), labels),
                "rule": f"fluent if under {rule.mean:.1f} words, the train labels' fluent mean",
            }
        )
    return rows


def words_of(labelled: dict[str, Any], view: str = "zh_words") -> np.ndarray:
    """Each pair's sentence length in words in a words view (its ids but <bos>, <eos>)."""
    return labelled["columns"]["lengths"][:, VIEWS.index(view)] - 2


def length_rule(dev: dict[str, Any]) -> tuple[bool, int]:
    """(shorter is fluent?, the length L), from the dev labels: the direction in which length
    ranks the fluent pairs first (its AUC), and the L whose rule calls as many pairs fluent
    as the labels do. (The L of the best F1 calls every pair fluent: with a quarter of the
    pairs fluent, that F1, 0.4, beats any rule length can make.)"""
    words, labels = words_of(dev), dev["labels"]
    shorter = auc(-words, labels) >= 0.5
    share = labels.mean()
    candidates = np.unique(words)
    called = [np.mean(words <= n if shorter else words >= n) for n in candidates]
    return shorter, int(candidates[np.argmin(np.abs(np.array(called) - share))])


def held_out_markdown(table: list[dict[str, Any]]) -> str:
    head = table[0]
    lines = [
        f"Test labels: {head['pairs']} pairs, {head['fluent']:.1%} fluent.",
        "",
        "| classifier | precision | recall | F1 | AUC | predicted fluent |",
        "|---|---|---|---|---|---|",
    ]
    for row in table:
        name = row["classifier"] + (f" ({row['rule']})" if "rule" in row else "")
        lines.append(
            f"| {name} | {row['precision']:.3f} | {row['recall']:.3f} | {row['F1']:.3f} "
            f"| {row['AUC']:.3f} | {row['predicted_fluent']:.3f} |"
        )
    return "\n".join(lines) + "\n"
