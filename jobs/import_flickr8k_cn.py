"""Import Flickr8k-CN's Chinese captions of Flickr8k photos as curated records.

    python -m conceptual.jobs.import_flickr8k_cn --images DIR --cn DIR --output URI
        [source=baidu|google|native|human|english]
        [split=official | splits.train=0.9 splits.val=0.1 ...]

--images is a folder of Flickr8k photos (all of them or a part); only its photos are imported.
--cn is the Flickr8k-CN folder (flickr8kzh{b,g,c}.caption.txt, flickr8kzhmtest.captions.txt,
flickr8kenc.caption.txt, flickr8k{train,val,test}.txt). source picks the sentences: baidu
(default) or google machine translations, native Chinese captions, human translations
(test photos only), or the English captions themselves (english). Chinese captions are
segmented into words joined by spaces (jieba); records carry language, source, the English
original and the unsegmented text (conceptual.fluency.flickr8k_cn).
Splits: a stable hash of each photo (the fractions are ImportConfig keys), or split=official.
"""

from __future__ import annotations

import sys

from conceptual.fluency.flickr8k_cn import Flickr8kCnConfig, describe, import_flickr8k_cn
from conceptual.jobs.arguments import translations_import

main = translations_import(
    "import_flickr8k_cn", __doc__, import_flickr8k_cn, Flickr8kCnConfig, describe
)

if __name__ == "__main__":
    sys.exit(main())
