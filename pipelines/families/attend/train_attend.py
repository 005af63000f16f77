"""The attend family: Show, Attend and Tell (Xu et al., 2015) on the captioner's recipe. An
LSTM writes the caption and, before each word, attends over the image's grid cells (soft
attention): what it looks at moves with what it has written, where Show and Tell's LSTM
("rnn") reads the image once and the Transformer attends with fixed layers.

Per step t, with the LSTM state (h, c) after the words before it:

    e_i = w . tanh(K_i + U h)         K = W cells, computed once per image (the memory)
    a = softmax(e); z = sigmoid(f(h)) * sum_i a_i cells_i    (the paper's gating scalar)
    h, c = LSTM([word_t; z], (h, c)); out_t = tanh(O [h; z])  -> tied word logits

The state starts from the mean cell (h0 = tanh(I_h mean), c0 = tanh(I_c mean)). The model is
the captioner's (models/captioner.py: projection, tied words, beam search) with this core;
it trains, is evaluated and is served through the captioner's code, saved as its own kind.
Left out: the paper's doubly stochastic attention penalty (the loss is the captioner's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch
from pydantic import model_validator
from torch import Tensor, nn

from conceptual.models.captioner import Captioner, CaptionerConfig, CaptionerSettings, Memory, State
from conceptual.models.saving import SavedCaptioner
from conceptual.pipelines.families.captioner import train_captioner

MODEL_NAME = "captioner-attend"


class AttendCore(nn.Module):
    """The encoder and decoder of models/captioner.py's Captioner: encode(cells) -> memory,
    decode(memory, words, state) -> (every step's output, the state after the last)."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        d = config.d_model
        self.dropout = nn.Dropout(config.dropout)
        self.keys = nn.Linear(d, d)  # W: the cells as attention keys
        self.query = nn.Linear(d, d, bias=False)  # U: the state as the query
        self.score = nn.Linear(d, 1, bias=False)  # w
        self.gate = nn.Linear(d, 1)  # f: how much of the context this step takes
        self.init_h, self.init_c = nn.Linear(d, d), nn.Linear(d, d)
        self.cell = nn.LSTMCell(2 * d, d)
        self.out = nn.Linear(2 * d, d)

    def encode(self, cells: Tensor) -> Memory:
        cells = self.dropout(cells)
        mean = cells.mean(1)
        return cells, self.keys(cells), torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))

    def decode(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        cells, keys, h, c = memory
        if state is not None:
            h, c = state
        outputs = []
        for word in self.dropout(words).unbind(1):
            weights = self.score(torch.tanh(keys + self.query(h).unsqueeze(1))).softmax(1)
            context = torch.sigmoid(self.gate(h)) * (weights * cells).sum(1)
            h, c = self.cell(torch.cat([word, context], -1), (h, c))
            outputs.append(torch.tanh(self.out(torch.cat([h, context], -1))))
        return self.dropout(torch.stack(outputs, 1)), (h, c)


@dataclass(frozen=True)
class SavedAttend(SavedCaptioner):
    """A captioner with the attend core: read, captioned and served as a captioner."""

    kind: ClassVar[str] = "attend-captioner"

    @classmethod
    def build(cls, config: dict[str, Any]) -> Captioner:
        return Captioner(CaptionerConfig.model_validate(config), core=AttendCore)


class AttendTrainConfig(train_captioner.CaptionerTrainConfig):
    """The captioner's keys (configs/train_attend.yaml extends train_captioner.yaml); the
    decoder is recurrent, so `model.architecture` is rnn, as its saved config says."""

    model: CaptionerSettings = CaptionerSettings(architecture="rnn")

    @model_validator(mode="after")
    def _recurrent(self) -> AttendTrainConfig:
        if self.model.architecture != "rnn" or self.model.image_input != "state":
            raise ValueError(
                "the attend family's decoder is an LSTM that attends to the cells at every "
                "step: model.architecture=rnn, model.image_input=state"
            )
        return self


def model_name(config: AttendTrainConfig) -> str:
    """captioner-attend, and captioner-attend-zh for language=zh."""
    return MODEL_NAME if config.language == "en" else f"{MODEL_NAME}-{config.language}"


RECIPE = dataclasses.replace(
    train_captioner.RECIPE,
    job="train_attend",
    config=AttendTrainConfig,
    saved=SavedAttend,
    model_name=model_name,
    variant=lambda config: f"attend-{config.model.feature_map}",
    train_loop=partial(train_captioner.train_loop, saved=SavedAttend),
    unused_keys=lambda config: ("model.heads", "model.ffn", "model.layers", "model.image_input"),
)
