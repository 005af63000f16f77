"""Import Flickr30k-CN's Chinese captions of Flickr30k photos as curated records.

    python -m conceptual.jobs.import_flickr30k_cn --images DIR --cn DIR --output URI

--images is a folder of Flickr30k photos (flickr30k-images/, all of them or a part); only its
photos are imported. --cn is the unpacked Flickr30k-CN release: flickr30kzhbbosontrain/,
flickr30kzhbbosonval/ (Baidu's translations) and flickr30kzhmbosontest/ (people's), each
with ImageSets/ and TextData/seg.*.caption.txt; folders that are absent are skipped and
said. The splits are the release's. Captions keep the release's BOSON segmentation; records
carry language, source and the unsegmented text (conceptual.fluency.flickr30k_cn), as
import_flickr8k_cn's do, so score_fluency, features and train_captioner language=zh take
them. The data is not in ../shared/data: nothing here reaches it offline.
"""

from __future__ import annotations

import sys

from conceptual.fluency.flickr30k_cn import Flickr30kCnConfig, describe, import_flickr30k_cn
from conceptual.jobs.arguments import JobParser, add_import_arguments, location
from conceptual.jobs.runner import job_main, run_import


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("import_flickr30k_cn", __doc__)
    parser.add_argument("--images", required=True, type=location, help="Flickr30k's photos")
    parser.add_argument("--cn", required=True, type=location, help="the Flickr30k-CN folder")
    add_import_arguments(parser, "ImportConfig keys (rows_per_part=...)")
    args = parser.parse_args(argv)

    def write(config: Flickr30kCnConfig) -> dict:
        return import_flickr30k_cn(args.images, args.cn, args.output, config)

    return run_import("import_flickr30k_cn", args, write, Flickr30kCnConfig, describe=describe)


if __name__ == "__main__":
    sys.exit(main())
