"""The caption job on a saved (untrained, tiny) captioner: one line per image, clear errors."""

from __future__ import annotations

import io

import pytest
import skimage.data
from PIL import Image

from conceptual.jobs import caption
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
