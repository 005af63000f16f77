"""The fluency system of docs/spec/fluency.md, in one place: Flickr8k-CN's sentences
(flickr8k_cn: the import, and the lines the others read), the labels derived from them
(labels), the four views of a sentence (views), the classifier (model) and its saved form
(saved), scores from a saved classifier (scorer) and the translator interface of the
late-translation baselines (translation). Its pipelines are pipelines/families/fluency/train_fluency.py,
score_fluency.py and compare_fluency.py."""
