"""The captioner variants of docs/spec/captioning.md: RNN or Transformer, over 1x1 or 8x8
features. A module of its own (no torch) so that command-line help can list them at once."""

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

VARIANTS = ("rnn-1x1", "rnn-8x8", "transformer-1x1", "transformer-8x8")

# The registered model that captioners become versions of (Serve follows its champion).
MODEL_NAME = "captioner"
# The languages a captioner writes: English from curated captions, Chinese from translated
# (or native) ones (conceptual.fluency.flickr8k_cn).
LANGUAGES = ("en", "zh")


def language_code(value: Any) -> Any:
    """A language tag as the platform names languages: its primary subtag, lowercased
    (`zh-CN`, `zh_Hans`, `ZH` -> `zh`; `en-US` -> `en`); what is no string is left to fail."""
    return (
        value.strip().replace("_", "-").split("-", 1)[0].lower()
        if isinstance(value, str)
        else value
    )


# A config's `language`: one of LANGUAGES, given as any tag of it.
Language = Annotated[Literal["en", "zh"], BeforeValidator(language_code)]


def model_name(language: str = "en") -> str:
    """The registered model of a language's captioners: captioner, captioner-zh."""
    return MODEL_NAME if language == "en" else f"{MODEL_NAME}-{language}"
