"""The captioner variants of docs/spec/captioning.md: RNN or Transformer, over 1x1 or 8x8
features. A module of its own (no torch) so that command-line help can list them at once."""

VARIANTS = ("rnn-1x1", "rnn-8x8", "transformer-1x1", "transformer-8x8")

# The registered model that captioners become versions of (Serve follows its champion).
MODEL_NAME = "captioner"
# The languages a captioner writes: English from curated captions, Chinese from translated
# (or native) ones (conceptual.flickr8k_cn).
LANGUAGES = ("en", "zh")


def model_name(language: str = "en") -> str:
    """The registered model of a language's captioners: captioner, captioner-zh."""
    return MODEL_NAME if language == "en" else f"{MODEL_NAME}-{language}"
