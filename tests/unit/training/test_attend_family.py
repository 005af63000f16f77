"""The attend family's model (pipelines/families/attend/train_attend.py): the captioner with a
Show, Attend and Tell core, decoded as every captioner is and saved as its own kind."""

import pytest
import torch
from test_captioner import (  # noqa: F401 (one_thread: a fixture)
    CAPTIONS,
    FEATURE_DIM,
    VOCAB,
    assert_steps_match_teacher_forcing,
    one_thread,
    random_features,
    random_tokens,
)

from conceptual.models.captioner import CaptionerConfig
from conceptual.models.decoding import greedy, n_best
from conceptual.models.losses import caption_loss
from conceptual.models.saving import SavedCaptioner, SavedRetriever, load, save_model
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families import FAMILIES, saved_form
from conceptual.pipelines.families.attend.train_attend import (
    AttendCore,
    AttendTrainConfig,
    SavedAttend,
)


def attend_model(vocab_size=VOCAB):
    torch.manual_seed(0)
    config = CaptionerConfig(
        architecture="rnn", vocab_size=vocab_size, feature_dim=FEATURE_DIM, d_model=32, dropout=0
    )
    return SavedAttend.build(config.model_dump()).eval()


def test_stepping_token_by_token_matches_teacher_forcing():
    assert_steps_match_teacher_forcing(attend_model(), random_features("8x8"), random_tokens())


def test_every_step_looks_at_the_cells():
    """Show and Tell reads the image once; here a cell changed changes each word's logits,
    and the cells' order does not matter (soft attention is a weighted sum over them)."""
    model = attend_model()
    features, tokens = random_features("8x8"), random_tokens()
    before = model(features, tokens)
    changed = features.clone()
    changed[:, 5] += 3.0
    assert not torch.allclose(before[:, -1], model(changed, tokens)[:, -1])
    shuffled = features[:, torch.randperm(features.shape[1])]
    torch.testing.assert_close(model(shuffled, tokens), before, atol=1e-5, rtol=1e-5)


def test_beam_search_decodes_it_as_any_captioner():
    ranked = n_best(attend_model(), random_features("8x8"), beam=3, n=2)
    assert [len(best) for best in ranked] == [2, 2, 2]


@pytest.mark.usefixtures("one_thread")
def test_overfits_eight_captions_on_the_grid():
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    model = attend_model(len(vocab)).train()
    features = random_features("8x8", images=len(CAPTIONS))
    tokens = torch.from_numpy(vocab.encode_array(CAPTIONS, 17))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(300):
        loss = caption_loss(model, features, tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = first or loss.item()
    assert loss.item() < 0.1 * first
    assert [vocab.decode(ids) for ids in greedy(model.eval(), features)] == CAPTIONS


def test_saved_as_its_own_kind_and_loaded_by_its_family(tmp_path):
    model = attend_model(len(Vocabulary.build(CAPTIONS, min_count=1)))
    save_model(model, Vocabulary.build(CAPTIONS, min_count=1), tmp_path, saved=SavedAttend)
    saved = FAMILIES["attend"].load(tmp_path)
    assert isinstance(saved, SavedAttend) and isinstance(saved.model.core, AttendCore)
    # read as a captioner where one is asked for its family's form
    assert isinstance(load(tmp_path, kind=SavedAttend), SavedCaptioner)
    features, tokens = random_features("8x8"), random_tokens()
    torch.testing.assert_close(saved.model(features, tokens), model(features, tokens))
    # a job that takes any captioner (caption, recaption) finds the form by the family table
    assert saved_form(tmp_path, SavedCaptioner) is SavedAttend
    with pytest.raises(ValueError, match="holds a attend-captioner, not a retriever"):
        saved_form(tmp_path, SavedRetriever)
    # the core's loader does not guess at a family's form it was not given
    with pytest.raises(ValueError, match="holds a attend-captioner, not a captioner"):
        load(tmp_path, kind=SavedCaptioner)
    with pytest.raises(ValueError, match="holds a captioner, not a attend-captioner"):
        save_model(model, Vocabulary.build(CAPTIONS, min_count=1), tmp_path / "plain")
        FAMILIES["attend"].load(tmp_path / "plain")


def test_its_config_refuses_the_transformers_architecture():
    with pytest.raises(ValueError, match="model.architecture=rnn"):
        AttendTrainConfig(model={"architecture": "transformer"})


def test_evaluated_with_the_captioners_code_and_a_family_without_evaluation_refuses():
    # Family.evaluate runs the evaluate module of the family it runs as, reading its own form
    assert FAMILIES["attend"].runs_as is FAMILIES["captioner"]
    assert FAMILIES["attend"].jobs["evaluate"] == "evaluate_attend"
    with pytest.raises(ValueError, match="the fluency family has no evaluate job"):
        FAMILIES["fluency"].evaluate("models:/fluency-zh@champion", "features", None)
