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
from conceptual.jobs.arguments import translations_import

main = translations_import(
    "import_flickr30k_cn", __doc__, import_flickr30k_cn, Flickr30kCnConfig, describe
)

if __name__ == "__main__":
    sys.exit(main())
