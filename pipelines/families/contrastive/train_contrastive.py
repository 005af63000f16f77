"""The contrastive family: a CLIP-style text-image model (open_clip's recipe) on the features
job's pooled image vectors: the image tower and a text tower, cosine scores times a learned
temperature (DualEncoder with model.normalize: its scale starts at 10, near CLIP's 1/0.07,
and is capped at 100 as open_clip's), trained with the symmetric InfoNCE loss over
in-batch negatives (models/losses.py), gathered from every worker.

It is a family of its own (conceptual.pipelines.families): it registers as `contrastive`, is run by
train_contrastive, evaluate_contrastive and compare_contrastive (the retriever's jobs and
arguments, its R@k on the same split beside the MMS retriever's, in the same `retrieval`
experiment), and is served for search as `retrievers: [contrastive]`. What it shares with the
text retriever is what a CLIP model is: two towers over the same rows, saved in the
retriever's form, so evaluation, indexing and serving read it as they read a retriever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from pydantic import model_validator

from conceptual.pipelines.families.retriever import train_retriever
from conceptual.pipelines.training.training import Prepared

MODEL_NAME = "contrastive"


class ContrastiveTrainConfig(train_retriever.RetrieverTrainConfig):
    """The text retriever's keys (configs/train_contrastive.yaml) with the loss that makes the
    family: text queries, InfoNCE, cosine scores with a learned temperature."""

    modality: Literal["text"] = "text"
    loss: Literal["infonce"] = "infonce"

    @model_validator(mode="after")
    def _scores_have_a_temperature(self) -> ContrastiveTrainConfig:
        if not self.model.normalize:
            raise ValueError("the contrastive family learns a temperature: model.normalize=true")
        return self


def prepare(
    config: ContrastiveTrainConfig,
    features_uri: str,
    speech_uri: str | None = None,
    teacher_speech: Sequence[str] = (),
) -> Prepared:
    """The text retriever's rows and dev set; spoken captions have no place here."""
    if speech_uri or teacher_speech:
        raise ValueError("the contrastive family is text-image: it takes no --speech clips")
    return train_retriever.prepare(config, features_uri)


RECIPE = dataclasses.replace(
    train_retriever.RECIPE,
    job="train_contrastive",
    config=ContrastiveTrainConfig,
    model_name=lambda config: MODEL_NAME,
    prepare=prepare,
)
