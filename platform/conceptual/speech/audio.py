"""Audio in the form every clip is stored in: 16 kHz mono, 16-bit FLAC.

Resampling is soxr's high-quality polyphase resampler (anti-aliased: its low-pass keeps
what lies under the new Nyquist frequency and removes what lies above). Encoding and
decoding are libsndfile's (through soundfile), which reads MP3 since libsndfile 1.1.
Both are deterministic: the same samples give the same FLAC bytes.

Audio from strangers (a search query, a dataset's recorded speech) is checked before it is
decoded (`check_header`): the container from its first bytes (WAV, FLAC or MP3 only, and the
one its media type names), then libsndfile's reading of the header: 8-48 kHz, at most 2
channels, at most `max_seconds` of frames. `decode_checked` then reads at most that many
frames (a header that lies cannot make it read more), block by block within a deadline, and
clips the samples to [-1, 1]. Each refusal is an AudioRefused with a stable reason.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import numpy as np
import soundfile
import soxr

from conceptual.limits import BYTES_PER_SAMPLE, ROW_BYTES

SAMPLE_RATE = 16_000
MIN_RATE, MAX_RATE = 8_000, 48_000  # telephone to studio; others are refused, not resampled
MAX_CHANNELS = 2
# What libsndfile calls each container it may find inside one we accept.
CONTAINERS = {"WAV": {"WAV", "WAVEX"}, "FLAC": {"FLAC"}, "MP3": {"MP3", "MPEG"}}
MEDIA_TYPES = {
    "audio/wav": "WAV", "audio/x-wav": "WAV", "audio/wave": "WAV", "audio/vnd.wave": "WAV",
    "audio/flac": "FLAC", "audio/x-flac": "FLAC", "audio/mpeg": "MP3", "audio/mp3": "MP3",
}  # fmt: skip
BLOCK_FRAMES = 1 << 16  # the deadline is checked between blocks of this many frames
# Whatever max_seconds says, a clip's decoded samples stay within the row budget.
MAX_FRAMES = ROW_BYTES // BYTES_PER_SAMPLE


def resample(samples: np.ndarray, rate: float, target: int = SAMPLE_RATE) -> np.ndarray:
    """Mono float samples at `rate` (any positive number, not only an integer) to `target`."""
    if rate == target:
        return samples.astype(np.float32)
    return soxr.resample(samples.astype(np.float32), rate, target, quality="HQ")


def encode_flac(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """Float samples in [-1, 1] (clipped there) as 16-bit mono FLAC bytes."""
    buffer = io.BytesIO()
    soundfile.write(buffer, np.clip(samples, -1.0, 1.0), rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """(mono float32 samples, sample rate) of FLAC, WAV, MP3... bytes; channels averaged."""
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1), rate


def decode_16k(data: bytes) -> np.ndarray:
    """Any clip's bytes as mono float32 samples at 16 kHz."""
    samples, rate = decode(data)
    return resample(samples, rate)


def duration(samples: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    return len(samples) / rate


class AudioRefused(ValueError):
    """Audio not decoded: `reason` is stable (unsupported_format, format_mismatch,
    bad_sample_rate, too_many_channels, too_long, bad_audio, empty_audio, decode_timeout),
    `message` says why in the service's own words."""

    def __init__(self, reason: str, message: str):
        super().__init__(reason, message)  # args as given, so it pickles across Ray
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class AudioHeader:
    container: str  # WAV, FLAC, MP3
    rate: int
    channels: int
    frames: int  # as the header declares (an estimate for MP3)
    start: int = 0  # where the audio starts, after its ID3 tags (id3_end)


# ID3v2 tags chained before the audio: an MP3 has one, rarely two (a tagger that prepended a
# new one); past this many the bytes are refused unread, since each costs a step and a
# 2 MiB body holds 200,000 empty ones.
MAX_ID3_TAGS = 4


def id3_end(data: bytes) -> int:
    """Where the audio starts after the ID3v2 tags chained before it (0 without any), by
    their declared sizes over a view of the bytes (nothing is copied); AudioRefused
    ("bad_audio") past MAX_ID3_TAGS of them."""
    view, offset, tags = memoryview(data), 0, 0
    while bytes(view[offset : offset + 3]) == b"ID3" and len(view) - offset >= 10:
        tags += 1
        if tags > MAX_ID3_TAGS:
            raise AudioRefused("bad_audio", f"more than {MAX_ID3_TAGS} ID3 tags before the audio")
        header = bytes(view[offset : offset + 10])
        size = int.from_bytes(bytes(b & 0x7F for b in header[6:10]), "big")  # 7 bits a byte
        footer = 10 if header[5] & 0x10 else 0  # ID3v2.4's footer flag
        offset += 10 + size + footer
    return min(offset, len(data))


def sniff(data: bytes, start: int = 0) -> str | None:
    """The container the bytes from `start` (id3_end) say the audio is in (WAV, FLAC, MP3),
    or None; after ID3 tags, MP3 unless they say another."""
    head = bytes(memoryview(data)[start : start + 12])
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"fLaC":
        return "FLAC"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # MPEG frame sync
        return "MP3"
    return "MP3" if start else None  # tags, then frames libsndfile will look for


def check_header(data: bytes, max_seconds: float, media_type: str | None = None) -> AudioHeader:
    """The header of WAV, FLAC or MP3 bytes, read without decoding; AudioRefused when the
    container is another (or not the one `media_type` names), or the sample rate, channel
    count or length is outside what is decoded."""
    try:
        return _check_header(data, max_seconds, media_type)
    except AudioRefused:
        raise
    except Exception as error:  # whatever the bytes make a library raise is the bytes' fault
        raise AudioRefused("bad_audio", "the audio cannot be read") from error


def _check_header(data: bytes, max_seconds: float, media_type: str | None) -> AudioHeader:
    start = id3_end(data)
    container = sniff(data, start)
    if container is None:
        raise AudioRefused("unsupported_format", "the audio is not WAV, FLAC or MP3")
    expected = MEDIA_TYPES.get(media_type or "")
    if expected is not None and container != expected:
        raise AudioRefused(
            "format_mismatch", f"the audio is {container}, not the {expected} its type says"
        )
    try:
        info = soundfile.info(audio_file(data, start))
    except Exception as error:  # libsndfile refuses the header
        raise AudioRefused("bad_audio", f"the {container} header cannot be read") from error
    if info.format not in CONTAINERS[container]:
        raise AudioRefused("format_mismatch", f"the audio is not the {container} it starts as")
    if not MIN_RATE <= info.samplerate <= MAX_RATE:
        raise AudioRefused("bad_sample_rate", f"the sample rate must be {MIN_RATE}-{MAX_RATE} Hz")
    if not 1 <= info.channels <= MAX_CHANNELS:
        raise AudioRefused("too_many_channels", f"the audio may have {MAX_CHANNELS} channels")
    if info.frames > min(max_seconds * info.samplerate, MAX_FRAMES):
        raise AudioRefused("too_long", f"the audio is longer than {max_seconds:g} s")
    return AudioHeader(container, info.samplerate, info.channels, info.frames, start)


def audio_file(data: bytes, start: int) -> io.BytesIO:
    """The audio from `start` as a file for libsndfile, which skips one ID3 tag but not a
    chain of them: the tags are left behind."""
    return io.BytesIO(memoryview(data)[start:])


def decode_checked(
    data: bytes,
    max_seconds: float,
    media_type: str | None = None,
    deadline_s: float = float("inf"),
) -> np.ndarray:
    """Audio from a stranger as 16 kHz mono float32 samples in [-1, 1], after check_header:
    at most `max_seconds` of frames are read, within `deadline_s` seconds; AudioRefused
    otherwise (non-finite samples are bad_audio)."""
    started = time.monotonic()
    header = check_header(data, max_seconds, media_type)
    max_frames = int(min(max_seconds * header.rate, MAX_FRAMES))
    blocks, frames = [], 0
    try:
        with soundfile.SoundFile(audio_file(data, header.start)) as sound:
            while frames <= max_frames:
                if time.monotonic() - started > deadline_s:
                    raise AudioRefused("decode_timeout", f"decoding took over {deadline_s:g} s")
                block = sound.read(BLOCK_FRAMES, dtype="float32", always_2d=True)
                if not len(block):
                    break
                blocks.append(block.mean(axis=1))
                frames += len(block)
    except AudioRefused:
        raise
    except Exception as error:  # soundfile's LibsndfileError, or whatever the bytes provoke
        raise AudioRefused("bad_audio", f"the {header.container} data cannot be decoded") from error
    if frames > max_frames:  # the header understated the length
        raise AudioRefused("too_long", f"the audio is longer than {max_seconds:g} s")
    if not frames:
        raise AudioRefused("empty_audio", "the audio holds no samples")
    samples = np.concatenate(blocks)
    if not np.isfinite(samples).all():
        raise AudioRefused("bad_audio", "the audio holds samples that are not numbers")
    # Clipped before resampling (1e19 would overflow it) and after (its ringing overshoots).
    return np.clip(resample(np.clip(samples, -1.0, 1.0), header.rate), -1.0, 1.0)
