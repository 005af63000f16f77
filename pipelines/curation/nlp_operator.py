"""The text stages of curation as one Ray Data actor: text filters, syntax filters and
hypernymization on one spaCy parse per text (conceptual.text does the work). spaCy and
WordNet load once per actor. The module imports nothing of the image side, so an NLP actor
starts without it.
"""

from __future__ import annotations

import pyarrow as pa

from conceptual.pipelines.dataflow.rows import pending, reject, table
from conceptual.text.curate import TextCurationConfig, TextCurator


class NlpOperator:
    """Text filters, syntax filters and hypernymization, on one spaCy parse per text."""

    def __init__(self, text: TextCurationConfig):
        self.curator = TextCurator(text)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        todo = pending(rows)
        outcomes = self.curator.process([rows[i]["alt_text"] for i in todo])
        for i, outcome in zip(todo, outcomes):
            rows[i].update(caption=outcome.caption, entities=outcome.entities, types=outcome.types)
            if outcome.rejection:
                reject(rows[i], outcome.stage, outcome.rejection)
        return table(rows)
