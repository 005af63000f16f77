"""The fluency paper's baselines (conceptual.fluency.baselines) and their rows in the
held-out table of train_fluency (pipelines/families/fluency/evaluate_fluency.py)."""

import numpy as np

from conceptual.fluency.baselines import MeanFluentLength, random_guess


def test_random_guess_is_a_seeded_coin():
    guessed, scores = random_guess(10_000, seed=3)
    assert guessed.dtype == bool and abs(guessed.mean() - 0.5) < 0.02
    assert (guessed == (scores < 0.5)).all()
    assert (random_guess(50, seed=3)[0] == guessed[:50]).all()  # the same table every run
    assert not (random_guess(50, seed=4)[0] == guessed[:50]).all()


def test_fluent_when_shorter_than_the_mean_fluent_training_length():
    rule = MeanFluentLength.fit(np.array([4, 6, 20, 30]), np.array([True, True, False, False]))
    assert rule.mean == 5.0
    assert rule.predict(np.array([4, 5, 6])).tolist() == [True, False, False]  # strictly shorter
    assert (np.argsort(-rule.scores(np.array([9, 3, 5])))).tolist() == [1, 2, 0]


def test_without_a_fluent_training_sentence_nothing_is_called_fluent():
    rule = MeanFluentLength.fit(np.array([4, 6]), np.array([False, False]))
    assert not rule.predict(np.array([0, 1, 100])).any()


def test_the_held_out_table_has_the_papers_three_baselines():
    from conceptual.pipelines.families.fluency.evaluate_fluency import paper_baselines

    # lengths per view (zh_words, zh_pos, en_words, en_pos), <bos> and <eos> included.
    def labelled(zh, en, labels):
        lengths = np.array([[z + 2, z + 2, e + 2, e + 2] for z, e in zip(zh, en)])
        return {"columns": {"lengths": lengths}, "labels": np.array(labels)}

    train = labelled([4, 6, 12, 14], [5, 7, 15, 17], [True, True, False, False])  # means 5, 6
    test = labelled([3, 9, 5, 13], [8, 5, 4, 16], [True, False, True, False])
    rows = {row["classifier"]: row for row in paper_baselines(train, test, seed=0)}
    assert list(rows) == ["random", "length_en", "length_zh"]
    # Chinese under 5 words: pairs 0 only; English under 6: pairs 1 and 2.
    assert rows["length_zh"]["precision"] == 1.0 and rows["length_zh"]["recall"] == 0.5
    assert rows["length_en"]["precision"] == 0.5 and rows["length_en"]["recall"] == 0.5
    assert "5.0 words" in rows["length_zh"]["rule"] and "6.0 words" in rows["length_en"]["rule"]
    assert 0.0 <= rows["random"]["AUC"] <= 1.0
