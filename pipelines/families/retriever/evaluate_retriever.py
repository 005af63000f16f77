"""Retriever evaluation (docs/spec/retrieval.md, "Evaluation"): Recall@1/5/10/50/100 in both
directions over a split's images and its spoken or written captions, beside chance level,
as one MLflow run. The trainer scores its dev split every epoch with the same functions.

    model URI + FEATURES (+ SPEECH), split  ->  MLflow run: {query}_to_{target}.R@{k}
                                               (speech_to_image.R@10, image_to_text.R@1...),
                                               chance.{query}_to_{target}.R@{k}, mean_R@10,
                                               the ranked results of a few queries
                                               (rankings.json), evaluation.json; a
                                               registered version also gets its score tag

With `asr=true` a text retriever is scored on spoken queries (--speech clips) through the
offline recognizer (conceptual.speech.recognizer): each clip is transcribed and the text
searched with, as a user without a speech model would. The metrics are then named as a
speech model's (speech_to_image.R@k, image_to_speech.R@k), with the recognizer's word error
rate against the clips' captions beside them (`wer`) and every transcript in
transcripts.json.

An image with several captions is found by any of them (image -> caption), and a caption
finds its own image (caption -> image). Automatic R@k underestimates quality: an unpaired
caption that fits an image counts as a miss.

Every R@k and mean_R@10 has a 95% bootstrap interval over the split's images beside it
(`text_to_image.R@10.ci95_low`, `.ci95_high`; conceptual.intervals): a resample draws
images, each with all its captions or clips, and every query keeps its rank against the
whole split (the candidates are not resampled), so R@k is exactly the mean over the drawn
queries.

A model that fine-tuned its CNN (model.image_backbone=finetune) embeds the split's photos
(their centre squares, from the curated data the features job names) rather than the
features' vectors: that data must be reachable from where the evaluation runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from conceptual import registry
from conceptual.config import Config
from conceptual.intervals import (
    HIGH,
    LOW,
    BootstrapConfig,
    mean_over,
    ratio_over,
    resample_counts,
    with_intervals,
)
from conceptual.metrics import KS, chance_recall, query_ranks, recall_at_k
from conceptual.models.retriever import DualEncoder
from conceptual.models.saving import SavedRetriever, load
from conceptual.pipelines.evaluation.evaluation import Evaluation, record
from conceptual.pipelines.families.retriever.retrieval_data import eval_set, query_inputs, relevance
from conceptual.speech.features import AudioFeatureConfig
from conceptual.speech.recognizer import AsrConfig, transcribe_clips, word_error_rate

SELECT_BY = "mean_R@10"  # the mean of both directions' R@10: picks checkpoints and champions
EMBED_BATCH = 256
RANKINGS = "rankings.json"
TRANSCRIPTS = "transcripts.json"


class RetrieverEvalConfig(Config):
    split: str = "test"
    max_images: int | None = None  # None: every image of the split
    # Speech: seconds of each clip the tower hears; None: the length it was trained on
    # (the spec crops human speech to 8 s, synthetic to 3.5 s).
    seconds: float | None = None
    rankings: int = 5  # queries per direction whose top 10 are logged
    # A text model on spoken queries (--speech): each clip through the offline recognizer,
    # with the model's caption language model (asr.lm=captions) or the general one.
    asr: AsrConfig = AsrConfig()
    bootstrap: BootstrapConfig = BootstrapConfig()  # the intervals' resamples of the images
    experiment: str = "retrieval"


@torch.no_grad()
def embed(encode: Any, inputs: np.ndarray, device: torch.device) -> torch.Tensor:
    """`encode` (a tower's embed function) over `inputs` in batches, in eval mode."""
    chunks = [
        encode(torch.as_tensor(inputs[i : i + EMBED_BATCH], device=device))
        for i in range(0, len(inputs), EMBED_BATCH)
    ]
    return torch.cat(chunks).float()


def directions(modality: str) -> tuple[str, str]:
    """The metric prefixes: (query -> image, image -> query)."""
    return f"{modality}_to_image", f"image_to_{modality}"


@torch.no_grad()
def retrieval_scores(
    model: DualEncoder,
    images: np.ndarray,
    queries: np.ndarray,
    relevant: np.ndarray,
    query_modality: str | None = None,
) -> tuple[dict[str, float], np.ndarray]:
    """R@k both ways with chance level (`chance.` keys) and SELECT_BY, and the (queries,
    images) score matrix. `images` is the image tower's input (an eval set's `images`),
    `relevant` (queries, images) bool; the metrics are named after `query_modality` (default:
    the model's; "speech" for a text model reading transcripts)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    image_embeddings = embed(model.embed_images, images, device)
    query_embeddings = embed(model.embed_queries, queries, device)
    scores = model.scores(image_embeddings, query_embeddings).T.cpu().numpy()  # (Q, I)
    model.train(was_training)
    forward, backward = directions(query_modality or model.config.modality)
    metrics: dict[str, float] = {}
    for name, matrix, hits in ((forward, scores, relevant), (backward, scores.T, relevant.T)):
        found, chance = recall_at_k(matrix, hits, KS), chance_recall(hits, KS)
        for k in KS:
            metrics[f"{name}.R@{k}"] = found[k]
            metrics[f"chance.{name}.R@{k}"] = chance[k]
    metrics[SELECT_BY] = (metrics[f"{forward}.R@10"] + metrics[f"{backward}.R@10"]) / 2
    return metrics, scores


def resampled_recall(
    scores: np.ndarray,
    relevant: np.ndarray,
    query_image: np.ndarray,
    modality: str,
    counts: np.ndarray,
) -> dict[str, np.ndarray]:
    """R@k both ways and SELECT_BY on every resample of the images (module docstring).
    scores and relevant (queries, images) as retrieval_scores; query_image: each query's
    image (its column); counts: intervals.resample_counts over the images."""
    forward, backward = directions(modality)
    images = relevant.shape[1]
    query_rank, image_rank = query_ranks(scores, relevant), query_ranks(scores.T, relevant.T)
    queries_of_image = np.bincount(query_image, minlength=images)
    resampled = {}
    for k in KS:
        found = np.bincount(query_image, weights=query_rank < k, minlength=images)
        resampled[f"{forward}.R@{k}"] = ratio_over(counts, found, queries_of_image)
        resampled[f"{backward}.R@{k}"] = mean_over(counts, image_rank < k)
    resampled[SELECT_BY] = (resampled[f"{forward}.R@10"] + resampled[f"{backward}.R@10"]) / 2
    return resampled


def rankings(evaluated: dict[str, Any], scores: np.ndarray, shown: int) -> dict[str, Any]:
    """The top 10 of the first `shown` queries in each direction, marking the right answers."""
    top = 10
    by_query = []
    for q in range(min(shown, scores.shape[0])):
        order = np.argsort(-scores[q], kind="stable")[:top]
        by_query.append(
            {
                "query": evaluated["captions"][q],
                "answer": evaluated["image_ids"][evaluated["query_image"][q]],
                "top": [
                    {
                        "image_id": evaluated["image_ids"][i],
                        "score": float(scores[q, i]),
                        "correct": bool(i == evaluated["query_image"][q]),
                    }
                    for i in order
                ],
            }
        )
    by_image = []
    captions, query_image = evaluated["captions"], evaluated["query_image"]
    for i in range(min(shown, scores.shape[1])):
        order = np.argsort(-scores[:, i], kind="stable")[:top]
        by_image.append(
            {
                "image_id": evaluated["image_ids"][i],
                # Its own captions (clips' texts): what a rater is shown when none is in the top.
                "answers": [c for c, image in zip(captions, query_image) if image == i],
                "top": [
                    {
                        "caption": evaluated["captions"][q],
                        "score": float(scores[q, i]),
                        "correct": bool(evaluated["query_image"][q] == i),
                    }
                    for q in order
                ],
            }
        )
    return {"query_to_image": by_query, "image_to_query": by_image}


def table(metrics: dict[str, float], modality: str) -> str:
    """R@k per direction, chance level beside each and the 95% interval below, as printed
    by the job."""
    lines = [f"{'':<18}" + "".join(f"{f'R@{k}':>16}" for k in KS)]
    for name in directions(modality):
        cells = "".join(
            f"{metrics[f'{name}.R@{k}']:>7.3f} ({metrics[f'chance.{name}.R@{k}']:.3f})" for k in KS
        )
        lines.append(f"{name:<18}{cells}")
        bounds = [(metrics[f"{name}.R@{k}{LOW}"], metrics[f"{name}.R@{k}{HIGH}"]) for k in KS]
        lines.append(
            f"{'  95% interval':<18}" + "".join(f"{f'[{a:.3f}, {b:.3f}]':>16}" for a, b in bounds)
        )
    lines.append("(chance level in parentheses; below, the 95% bootstrap interval over images)")
    return "\n".join(lines)


def evaluate(
    model_uri: str,
    features_uri: str,
    config: RetrieverEvalConfig,
    speech_uri: str | None = None,
    *,
    kind: type[SavedRetriever] = SavedRetriever,
    job: str = "evaluate_retriever",
) -> dict[str, Any]:
    """Score the model (saved as `kind`: its family's form) on `config.split`, the run
    tagged as `job` (its family's). Returns
    `metrics` (each followed by its interval), `table`, `eval_set`, `images`, `queries`,
    `run_id`, `version` (the registered version scored, or None) and `resampled` (metric ->
    its value on every resample, for paired comparisons; not in evaluation.json)."""
    saved = load(registry.resolve(model_uri), kind=kind)
    model, vocab, audio = saved.model, saved.vocab, saved.audio
    if config.asr.enabled and model.config.modality != "text":
        raise ValueError("asr=true scores a text retriever on transcripts; this one is speech")
    modality = "speech" if config.asr.enabled else model.config.modality  # what queries are
    evaluated = eval_set(
        features_uri,
        config.split,
        modality,
        speech_uri if modality == "speech" else None,
        config.max_images,
        photo_size=model.config.photo_size,
    )
    transcripts = None
    if config.asr.enabled:
        heard_with = config.asr.language_model(saved.language_model)
        if config.asr.lm == "captions" and heard_with is None:
            print("  the model has no caption language model (trained before it was saved "
                  "with one): the recognizer's general English model hears the clips")  # fmt: skip
        transcripts = transcribe_clips(evaluated["audio"], heard_with)
        inputs = vocab.encode_array(transcripts, model.config.max_tokens)
    else:
        heard = None
        if modality == "speech":
            heard = AudioFeatureConfig.model_validate(audio)
            if config.seconds is not None:
                heard = heard.model_copy(update={"seconds": config.seconds})
        inputs = query_inputs(evaluated, modality, vocab, heard, model.config.max_tokens)
    relevant = relevance(evaluated)
    metrics, scores = retrieval_scores(model, evaluated["images"], inputs, relevant, modality)
    resamples = resample_counts(len(evaluated["image_ids"]), config.bootstrap)
    resampled = resampled_recall(scores, relevant, evaluated["query_image"], modality, resamples)
    metrics = with_intervals(metrics, resampled)
    if transcripts is not None:
        metrics["wer"] = word_error_rate(evaluated["captions"], transcripts)

    counts = {"images": len(evaluated["image_ids"]), "queries": len(evaluated["query_ids"])}
    artifacts = {RANKINGS: rankings(evaluated, scores, config.rankings)}
    if transcripts is not None:
        heard = zip(evaluated["query_ids"], evaluated["captions"], transcripts)
        artifacts[TRANSCRIPTS] = [{"clip": q, "caption": c, "transcript": t} for q, c, t in heard]
    evaluation = Evaluation(
        metrics={**metrics, **counts},
        eval_set=evaluated["name"],
        result={
            "metrics": {k: v for k, v in metrics.items() if not k.startswith("chance.")},
            "chance": {k[7:]: v for k, v in metrics.items() if k.startswith("chance.")},
            "table": table(metrics, modality),
            **counts,
        },
        params={"speech_uri": speech_uri},
        tags={"modality": modality},
        artifacts=artifacts,
        # Not with asr: a version's score tag is on its own queries' kind.
        score=None if config.asr.enabled else (SELECT_BY, metrics[SELECT_BY]),
    )
    result = record(job, model_uri, features_uri, config, evaluation)
    return result | {"resampled": resampled}


def dev_scores(
    model: DualEncoder,
    evaluated: dict[str, Any],
    inputs: np.ndarray,
) -> dict[str, float]:
    """The trainer's dev metrics (no chance level: it does not change between epochs)."""
    metrics, _ = retrieval_scores(model, evaluated["images"], inputs, relevance(evaluated))
    return {k: v for k, v in metrics.items() if not k.startswith("chance.")}
