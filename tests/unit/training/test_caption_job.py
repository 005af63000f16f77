"""The caption job on a saved (untrained, tiny) captioner: one line per image, clear errors;
a folder of photos into a COCO results JSON, unreadable files skipped with a note."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import skimage.data
from PIL import Image

from conceptual.jobs import caption
from conceptual.models.caption_files import coco_id
from conceptual.models.inference import ImageCaptioner, ImageError, read_image
from conceptual.models.saving import FeatureSettings, save_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_captioner):
    model, vocab = tiny_captioner("a cup of espresso on a saucer")
    return save_model(model, vocab, tmp_path_factory.mktemp("model"))


def jpeg(tmp_path, name="coffee.jpg"):
    path = tmp_path / name
    Image.fromarray(skimage.data.coffee()).save(path, "JPEG")
    return path


def test_one_caption_line_per_image(model_dir, tmp_path, capsys):
    images = [jpeg(tmp_path, "a.jpg"), jpeg(tmp_path, "b.jpg")]
    assert caption.main(["--model", str(model_dir), *map(str, images), "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [str(p) for p in images]
    words = set("a cup of espresso on saucer".split())
    assert all(set(line.split("\t")[1].split()) <= words for line in lines)


def test_same_image_same_caption(model_dir, tmp_path):
    data = jpeg(tmp_path).read_bytes()
    captioner = ImageCaptioner(model_dir, beam=2)
    assert captioner.caption_bytes([data]) == captioner.caption_bytes([data])


def test_bad_inputs_fail_clearly(model_dir, tmp_path, capsys):
    assert caption.main(["--model", str(model_dir), str(tmp_path / "nope.jpg")]) == 2
    assert "no such image file" in capsys.readouterr().err
    (tmp_path / "broken.jpg").write_bytes(b"not an image at all")
    assert caption.main(["--model", str(model_dir), str(tmp_path / "broken.jpg")]) == 2
    assert "not_an_image" in capsys.readouterr().err
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "PNG")
    assert ImageCaptioner(model_dir, beam=1).caption_bytes([buffer.getvalue()])  # PNG is fine


def test_several_captions_per_image_best_first(model_dir, tmp_path):
    captioner = ImageCaptioner(model_dir, beam=2)
    image = read_image(jpeg(tmp_path).read_bytes(), captioner.image_size)
    [ranked] = captioner.captions([image], beam=3, num_captions=3)
    assert len(ranked) == 3 and len(set(ranked)) == 3
    assert ranked[0] == ImageCaptioner(model_dir, beam=3).caption([image])[0]


def test_a_captioner_computes_features_at_the_image_size_it_was_saved_with(
    tiny_captioner, tmp_path
):
    """224 px features are a 7x7 grid (EfficientNet-lite's last map is 1/32 of the input);
    a captioner saved without its features' settings computes the old default, 256 px: 8x8."""
    model, vocab = tiny_captioner("a cup of espresso on a saucer")
    features = FeatureSettings(model="efficientnet-lite0", image_size=224)
    image = Image.fromarray(skimage.data.coffee())
    for saved, grid in [(features, 7), (None, 8)]:
        directory = save_model(model, vocab, tmp_path / str(grid), saved)
        captioner = ImageCaptioner(directory, beam=2)
        assert captioner.image_size == 32 * grid
        [[(_, cells)]] = captioner.extractor.extract([image])
        assert cells.shape == (grid, grid, 1280)
        [caption] = captioner.caption([image])
        assert caption and set(caption.split()) <= set(vocab.tokens)


def test_unreadable_images_name_their_reason():
    with pytest.raises(ImageError) as raised:
        read_image(b"\xff\xd8\xff\xe0 and then nothing", 256)
    assert raised.value.reason in ("truncated", "corrupt")
    with pytest.raises(ImageError, match="not_an_image"):
        read_image(b"plain text", 256)


def test_image_errors_survive_pickling():
    import pickle

    error = pickle.loads(pickle.dumps(ImageError("corrupt", "image 0: corrupt (bad data)")))
    assert error.reason == "corrupt" and str(error) == "image 0: corrupt (bad data)"


def test_image_ids_as_coco_names_them():
    assert coco_id(Path("COCO_val2014_000000123456.jpg")) == 123456
    assert coco_id(Path("val2017/000000000139.jpg")) == 139
    assert coco_id(Path("1000268201_693b08cb0e.jpg")) == "1000268201_693b08cb0e"  # Flickr8k
    assert coco_id(Path("img01.png")) == "img01"


def test_a_folder_captioned_into_a_coco_results_json(model_dir, real_data, tmp_path, capsys):
    """Three COCO photos, a broken one, a second name for one image and a file that is no
    photo in one folder: each photo captioned once, the broken one and the repeated id
    skipped with a note, the rest of the folder ignored."""
    folder = tmp_path / "val"
    folder.mkdir()
    photos = sorted((real_data / "coco_mini" / "val2017").glob("*.jpg"))[:3]
    for photo in photos:
        shutil.copy(photo, folder / photo.name)
    shutil.copy(photos[0], folder / f"{coco_id(photos[0])}.png")  # image 139 again
    (folder / "000000000001.jpg").write_bytes(b"not a photo")
    (folder / "captions_val2017.json").write_text("{}")
    results = tmp_path / "out" / "results.json"
    argv = ["--model", str(model_dir), str(folder), "--beam", "2", "--batch", "2"]
    assert caption.main([*argv, "--results-json", str(results)]) == 0
    out, err = capsys.readouterr()
    assert f"skipped {folder / '000000000001.jpg'}: not_an_image" in err
    assert "139.png has the image id of an earlier file" in err
    written = json.loads(results.read_text())
    assert [r["image_id"] for r in written] == [coco_id(p) for p in photos]  # name order
    assert all(isinstance(r["image_id"], int) for r in written)
    lines = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
    assert {r["caption"] for r in written} <= set(lines.values())
    assert f"results: {results}  (3 captions" in out
    # Batches change nothing: the same photos one by one give the same captions.
    alone = ImageCaptioner(model_dir, beam=2)
    assert [r["caption"] for r in written] == [
        alone.caption_bytes([p.read_bytes()])[0] for p in photos
    ]


def test_a_folder_without_photos_is_refused(model_dir, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("no photos here")
    assert caption.main(["--model", str(model_dir), str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err
