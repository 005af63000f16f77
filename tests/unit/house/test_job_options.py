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


def test_the_generic_jobs_run_a_family_s_job_by_its_name(capsys):
    """`train|evaluate|compare --family NAME` is that family's job: the same options."""
    from conceptual.jobs import family_verb

    for verb, job in (("train", "train_contrastive"), ("evaluate", "evaluate_captioner"),
                      ("compare", "compare_fluency")):  # fmt: skip
        with pytest.raises(SystemExit) as exited:
            family_verb(verb)(["--family", job.split("_")[1].removesuffix("s"), "--help"])
        assert exited.value.code == 0
        assert capsys.readouterr().out == help_of(job, capsys), verb


def test_a_generic_job_without_a_family_names_the_families_that_have_it(capsys):
    from conceptual.jobs import family_verb

    with pytest.raises(SystemExit) as exited:
        family_verb("evaluate")([])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--family is required: one of attend, captioner, contrastive, retriever" in err
    assert "(fluency has none)" in err
    with pytest.raises(SystemExit):
        family_verb("train")(["--family", "vit"])
    assert "invalid choice: 'vit'" in capsys.readouterr().err


def test_an_alias_and_a_generic_job_run_as_modules():
    """`python -m` runs the files (no finder builds modules at import time any more)."""
    import subprocess
    import sys

    for args in (["conceptual.jobs.train_contrastive"], ["conceptual.jobs.train", "--family",
                                                          "contrastive"]):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", *args, "--help"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0 and "--features" in done.stdout, done.stderr[-2000:]
