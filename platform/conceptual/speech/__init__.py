"""Spoken captions (spec/retrieval.md, "Conceptual Spoken Captions"): engine-agnostic blocks.

    synthesis.py  per-clip parameters drawn from the caption's id, and the espeak-ng engine
    audio.py      resampling to 16 kHz, FLAC encoding, decoding (MP3 included)
    clips.py      the clip record (records.CLIP) for synthesized and imported speech alike
    human.py      a folder's recorded clips (speech_gtts/IMAGE_STEM.mp3) as clip records
    features.py   MFCCs, crop/pad and SpecAugment for the audio tower

The Ray Data composition is conceptual.pipelines.features.speech.
"""
