"""A family's jobs offer the options its models take, and no option the family refuses:
the contrastive family is text-image, so its jobs take no clips (no Ray)."""

from __future__ import annotations

import pytest

from conceptual.jobs import registry_job

SPEECH_OPTIONS = ("--speech", "--teacher-speech", "--eval-speech")


def help_of(job: str, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        registry_job(job)(["--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("job", ["train_contrastive", "compare_contrastive"])
def test_a_text_image_family_offers_no_speech_options(job, capsys):
    shown = help_of(job, capsys)
    assert "--features" in shown
    assert not [option for option in SPEECH_OPTIONS if option in shown]


@pytest.mark.parametrize(
    ("job", "options"),
    [
        ("train_retriever", ("--speech", "--teacher-speech")),
        ("compare_retrievers", SPEECH_OPTIONS),
    ],
)
def test_the_speech_retriever_jobs_still_take_clips(job, options, capsys):
    shown = help_of(job, capsys)
    assert all(option in shown for option in options)
