"""The fluency system of docs/spec/fluency.md, in one place: Flickr8k-CN's sentences
(flickr8k_cn: the import, and the lines the others read), the labels derived from them
(labels), the four views of a sentence (views), the classifier (model; its saved form is
models/saving.py's SavedFluency), scores from a saved classifier (scorer) and the translator interface of the
late-translation baselines (translation). Its pipelines are in pipelines/families/fluency/
(train_fluency.py, compare_fluency.py) and pipelines/features/score_fluency.py."""
