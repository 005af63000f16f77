"""Import the released Conceptual Captions: the captions exactly as released, the images
fetched, checked and written as curated records.

    python -m conceptual.jobs.import_conceptual --input URI --output URI
        [--split train|validation] [--config FILE] [key=value ...]

The input (a file or folder; a path, file:// or s3://; gzip or zstd or not) is the released
TSV (`caption<TAB>url`, no header: Train_GCC-training.tsv, Validation_GCC-1.1.0-Validation.tsv)
or the Hugging Face Parquet files of either config (`unlabeled`: image_url, caption;
`labeled`: also labels, MIDs, confidence_scores). Each row's split is --split, else the one
its file holds (its name, or a Parquet `split` column). The output is what curate writes
(curated/, rejected/, stats.json; shards/ with webdataset.enabled=true), so the features,
training and speech jobs read it as they read a curation's. docs/curation.md: "Importing the released
Conceptual Captions" has the settings, e.g. image.resize.short_side=256 labels.source=dataset.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, run_data_job

SPLITS = ("train", "validation")  # conceptual.candidates.RELEASED_SPLITS, without importing it


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("import_conceptual", __doc__, keys="import_conceptual.yaml")
    released = "the released TSV or Hugging Face Parquet files: a file or folder"
    add_data_arguments(parser, "where curated/, rejected/ and stats.json go", "--input", released)
    add_config(parser, "ImportConceptualConfig", "image.resize.short_side=256")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        help="every row's split (default: the one each file's name or split column says)",
    )
    args = parser.parse_intermixed_args(argv)  # overrides before or after --split
    if args.split:
        args.overrides.append(f"released.split={args.split}")
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import funnel
    from conceptual.candidates import CandidateFormatError
    from conceptual.pipelines.curation.curation import run, where_it_went
    from conceptual.pipelines.curation.curation_config import ImportConceptualConfig
    from conceptual.pipelines.curation.released import ReleasedInputError, check_input, summary

    def checked(source: str, config: ImportConceptualConfig) -> ImportConceptualConfig:
        """The input's splits and labels, before Ray starts."""
        if config.captions == "released":
            dataset_labels = config.overlap.enabled and config.labels.source == "dataset"
            split = config.released.split
            if named := check_input(source, config.input_format, split, dataset_labels):
                # The input's one split, said by its files' names: logged with the config.
                config.released = config.released.model_copy(update={"split": named})
        return config

    def show(stats: dict, config: ImportConceptualConfig) -> None:
        print(funnel.render(stats))
        print(summary(stats))
        print(where_it_went(stats, args.output, config))

    refused = (CandidateFormatError, ReleasedInputError)
    job = "import_conceptual"
    return run_data_job(job, args, args.input, ImportConceptualConfig, run, show, refused, checked)


if __name__ == "__main__":
    sys.exit(main())
