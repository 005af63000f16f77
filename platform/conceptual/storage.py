"""One way to reach data wherever it lives: local paths, `file://` and `s3://` URIs.

S3 settings come from the standard AWS environment variables, so AWS, MinIO or any
S3-compatible store works unchanged: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (a custom
endpoint such as http://127.0.0.1:9000), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN (else the default credential chain), AWS_REGION or AWS_DEFAULT_REGION.

`resolve(uri)` returns a pyarrow filesystem and the path inside it; Ray Data readers and
writers take both (`filesystem=`), so Ray never has to guess a region from real AWS.

An S3 request that fails on the network (refused, reset, timed out), a 5xx or throttling is
retried by the AWS SDK with exponential backoff from 25 ms: S3_ATTEMPTS (10, about 25 s of
waiting; CONCEPTUAL_S3_ATTEMPTS changes it) rides out an endpoint that restarts. Ray Data
retries a failed write again on top. A store that stays down fails the job, whose output
then has no SUCCESS marker.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import posixpath
import uuid
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from conceptual.uris import redact

# Every job writes this file into its output folder last: without it the output is a
# crashed or running job's, and is not read unless asked for.
SUCCESS = "_SUCCESS"


S3_ATTEMPTS = int(os.environ.get("CONCEPTUAL_S3_ATTEMPTS", "10"))


class StorageError(OSError):
    """A URI that cannot be used; the message names it."""


class TrackingUnreachable(StorageError):
    """The tracking server does not answer (tracking.check_reachable): every job stops at
    once saying so, the server named without credentials."""


class IncompleteOutputError(StorageError):
    """A job output without its SUCCESS marker; the message says how to read it anyway."""


def is_remote(uri: str) -> bool:
    return uri.startswith("s3://")


# Where the AWS SDK may find credentials besides AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY: a
# profile, a web identity (EKS, KubeRay), a container's credentials endpoint (ECS), or the EC2
# instance's role (AWS_EC2_METADATA_DISABLED=false says to ask it). With none of them and no
# endpoint, the SDK probes the instance metadata service for about 40 s before failing.
_CREDENTIAL_SOURCES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_EC2_METADATA_DISABLED",
)


def _has_credentials() -> bool:
    if any(os.environ.get(name) for name in _CREDENTIAL_SOURCES):
        return True
    aws = Path("~/.aws").expanduser()
    return (aws / "credentials").is_file() or (aws / "config").is_file()


def _s3_endpoint() -> str | None:
    """The S3 endpoint the environment names; StorageError when S3 cannot be reached at all
    (neither an endpoint nor credentials)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint and not _has_credentials():
        raise StorageError(
            "s3:// needs credentials or an endpoint, and neither is set: for AWS set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials; "
            "on EC2 with an instance role, AWS_EC2_METADATA_DISABLED=false); for MinIO or "
            "another S3-compatible store also AWS_ENDPOINT_URL=http://host:port"
        )
    return endpoint


def s3_filesystem() -> pafs.S3FileSystem:
    endpoint = _s3_endpoint()
    options: dict[str, Any] = {
        "region": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1",
        "retry_strategy": pafs.AwsDefaultS3RetryStrategy(max_attempts=S3_ATTEMPTS),
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc
        options["scheme"] = parsed.scheme
        # S3-compatible stores (MinIO, moto) serve buckets as paths, not as subdomains.
        options["force_virtual_addressing"] = False
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        options.update(
            access_key=key, secret_key=secret, session_token=os.environ.get("AWS_SESSION_TOKEN")
        )
    return pafs.S3FileSystem(**options)


def resolve(uri: str | os.PathLike) -> tuple[pafs.FileSystem, str]:
    """`s3://bucket/key` -> (S3FileSystem, "bucket/key"); a path or file:// URI -> (local, abs path)."""
    uri = os.fspath(uri)
    if is_remote(uri):
        path = uri[len("s3://") :].strip("/")
        if not path:
            raise StorageError(f"{uri!r} names no bucket")
        return s3_filesystem(), path
    if uri.startswith("file://"):
        uri = urlparse(uri).path
    elif "://" in uri:
        raise StorageError(f"unsupported URI scheme in {uri!r}: use a path, file:// or s3://")
    return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())


def _location(uri: str) -> tuple[str, str] | None:
    """(file system, normalized path ending in "/") of a storage URI, without reaching the
    store; None for what is no storage location (models:/..., runs:/...)."""
    if is_remote(uri):
        return "s3", posixpath.normpath("/" + uri[len("s3://") :]).rstrip("/") + "/"
    if uri.startswith("file://"):
        uri = urlparse(uri).path
    elif "://" in uri or uri.startswith(("models:/", "runs:/")):
        return None
    return "local", str(Path(uri).expanduser().resolve()).rstrip("/") + "/"


def overlapping(a: str, b: str) -> bool:
    """Whether one location is, or lies inside, the other: the same bucket and prefix, or
    the same local folder (symbolic links followed). Nothing is read from the store."""
    where_a, where_b = _location(os.fspath(a)), _location(os.fspath(b))
    if where_a is None or where_b is None or where_a[0] != where_b[0]:
        return False
    path_a, path_b = where_a[1], where_b[1]
    return path_a.startswith(path_b) or path_b.startswith(path_a)


def refuse_overlap(outputs: dict[str, str | None], inputs: dict[str, str | None]) -> None:
    """StorageError when an output (named as the user gave it: `{"--output": uri}`) is, holds
    or lies inside an input: a job clears and rewrites its output, so it would delete or
    replace the data it reads (and read what it writes)."""
    for out_name, output in outputs.items():
        for in_name, source in inputs.items():
            if output and source and overlapping(output, source):
                raise StorageError(
                    f"{out_name} {redact(output)} and {in_name} {redact(source)} overlap: "
                    f"choose an output folder that neither holds nor lies inside {in_name}"
                )


# Marks a folder as a job's output: a job clears and rewrites the parts it writes there, and
# only in a folder that holds this file naming it (or was empty) unless told otherwise. A file
# output gets one beside it, NAME + "." + OWNER, with the digest of what the job wrote.
OWNER = "_conceptual_output.json"
INTO_EXISTING = "--into-existing"  # the option that lets a job write into a foreign folder


class ForeignOutputError(StorageError):
    """An output that holds files another job, or no job of this platform, wrote."""


def claim_output(uri: str, job: str, into_existing: bool = False) -> None:
    """Make `uri` a job's output before the job writes anything. A new or empty folder, or
    one this `job` wrote (OWNER names it), is marked and used; one holding anything else
    (another job's output, or files no job wrote) is refused (ForeignOutputError naming it
    and what it holds) unless `into_existing`: the job then writes there, and a job only
    ever removes the parts it writes itself, so the folder's other files stay."""
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise ForeignOutputError(f"{redact(uri)} is a file: a job's output is a folder")
    if info.type == pafs.FileType.NotFound:
        _fresh_claims.append(uri)
    jobs = _marked_jobs(join(uri, OWNER))
    if job in jobs:
        return
    if jobs and not into_existing:
        raise ForeignOutputError(
            f"{redact(uri)} is the output of {', '.join(jobs)}, not of {job}: give a new or "
            f"empty folder, or {INTO_EXISTING} to write into it anyway (a job replaces only "
            "the parts it writes, and the rest stays)"
        )
    if info.type == pafs.FileType.Directory and not jobs and not into_existing:
        held = sorted(
            posixpath.basename(entry.path.rstrip("/"))
            + ("/" if entry.type == pafs.FileType.Directory else "")
            for entry in fs.get_file_info(pafs.FileSelector(path, recursive=False))
        )
        if held:
            shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
            raise ForeignOutputError(
                f"{redact(uri)} holds files no job of this platform wrote ({shown}): give a "
                f"new or empty folder, or {INTO_EXISTING} to write into it anyway (a job "
                "replaces only the parts it writes, and the rest stays)"
            )
    # Every job let in is named, so that each may rerun into the folder without the option.
    write_json(join(uri, OWNER), {"jobs": [*jobs, job]})


def _marked_jobs(marker: str) -> list[str]:
    """The jobs an OWNER file names (older ones name one, as `job`); none where there is no
    such file or it is not one this platform wrote."""
    try:
        mark = read_json(marker)
    except (OSError, ValueError):  # none, or not JSON
        return []
    names = (mark.get("jobs") or [mark.get("job")]) if isinstance(mark, dict) else []
    return [name for name in names if isinstance(name, str)]


def claim_file(uri: str, job: str) -> None:
    """Make `uri` a file `job` writes (a results JSON), before it writes anything: refused
    (ForeignOutputError) where something is there that this job did not write, or that
    changed since it did (its mark beside it says who wrote what). settle_claims marks the
    file once the job has written it."""
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        raise ForeignOutputError(f"{redact(uri)} is a folder: give the path of a file to write")
    before = None
    if info.type == pafs.FileType.File:
        before = _sha256(uri)
        try:
            mark = read_json(_file_mark(uri))
        except (OSError, ValueError):  # none, or not JSON
            mark = None
        if mark != {"job": job, "sha256": before}:
            raise ForeignOutputError(
                f"{redact(uri)} exists and {job} did not write it as it is now: give a new "
                "path, or move the file away first (a job overwrites only its own files)"
            )
    _file_claims.append((uri, job, before))


def _file_mark(uri: str) -> str:
    return uri + "." + OWNER


def _sha256(uri: str) -> str:
    return content_identity(uri)[0][2]


_fresh_claims: list[str] = []  # outputs claim_output created in this process
_file_claims: list[tuple[str, str, str | None]] = []  # claim_file's: (uri, job, digest before)


def settle_claims(used: bool) -> None:
    """After a job: unless it `used` its outputs, remove each folder that claim_output
    created for it and that still holds nothing but its mark (a job stopped before writing
    leaves no folder behind); mark each claimed file the job wrote, whether or not it then
    succeeded, so that its next run may replace it."""
    while _file_claims:
        uri, job, before = _file_claims.pop()
        fs, path = resolve(uri)
        if fs.get_file_info(path).type == pafs.FileType.File and (now := _sha256(uri)) != before:
            write_json(_file_mark(uri), {"job": job, "sha256": now})
    while _fresh_claims:
        uri = _fresh_claims.pop()
        if used:
            continue
        fs, path = resolve(uri)
        selector = pafs.FileSelector(path, recursive=False, allow_not_found=True)
        if [posixpath.basename(e.path) for e in fs.get_file_info(selector)] == [OWNER]:
            fs.delete_dir(path)


def join(uri: str, *parts: str) -> str:
    if is_remote(uri) or uri.startswith("file://"):
        return posixpath.join(uri.rstrip("/"), *parts)
    return str(Path(uri, *parts))


def exists(uri: str) -> bool:
    fs, path = resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_files(uri: str) -> list[str]:
    """Paths (inside the filesystem) of all files under a directory, or the file itself, or
    the files a glob matches (`shards/*.tar`, `s3://bucket/crawl/*.wat.gz`; none: [])."""
    if glob.has_magic(os.fspath(uri)):
        return _matching(os.fspath(uri))
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise StorageError(f"{uri} does not exist")
    if info.type == pafs.FileType.File:
        return [path]
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def _matching(uri: str) -> list[str]:
    """The files a glob matches: a local one as `glob` matches it (`**` for any folders);
    on S3, the objects listed below the pattern's fixed part that it matches (`*` there
    crosses `/`, as a prefix listing does)."""
    fs, pattern = resolve(uri)
    if not is_remote(uri):
        return sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
    fixed = pattern[: min(pattern.find(c) for c in "*?[" if c in pattern)].rsplit("/", 1)[0]
    if fs.get_file_info(fixed).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(fixed, recursive=True))
    return sorted(
        i.path for i in infos if i.type == pafs.FileType.File and fnmatch(i.path, pattern)
    )


def content_identity(uri: str) -> list[list[Any]]:
    """Every file under `uri` as [path, size, SHA-256 of its bytes]: what a skip or a resume
    compares, so that an input rewritten in place (same name, size and even modification
    time) is seen as new. Reading it all costs about a second per GB, small beside any job
    that then reads the same bytes."""
    fs, _ = resolve(uri)
    identities = []
    for path in list_files(uri):
        digest, size = hashlib.sha256(), 0
        with fs.open_input_stream(path, compression=None) as f:  # the bytes as stored
            while chunk := f.read(_HASH_CHUNK):
                digest.update(chunk)
                size += len(chunk)
        identities.append([path, size, digest.hexdigest()])
    return identities


_HASH_CHUNK = 8 << 20


def output_part(uri: str, part: str, allow_incomplete: bool = False) -> str:
    """The folder of one part (`curated`, `features`, ...) of a job's output, where `uri`
    names the output folder or that part itself. The output must hold the SUCCESS marker,
    unless `allow_incomplete`: a crashed run's files are not read by mistake."""
    inner = join(uri, part)
    if exists(inner):
        output, folder = uri, inner
    elif posixpath.basename(uri.rstrip("/")) == part:  # the part itself: the marker is above
        output, folder = posixpath.dirname(uri.rstrip("/")), uri
    else:
        output, folder = uri, uri
    if not allow_incomplete and not exists(join(output, SUCCESS)):
        raise IncompleteOutputError(
            f"{redact(output)} has no {SUCCESS} marker: the job that wrote it did not finish "
            "(it failed, or is still running). Rerun that job, or pass allow_incomplete=true "
            "to read what it left."
        )
    return folder


def read_bytes(uri: str) -> bytes:
    fs, path = resolve(uri)
    try:
        # compression=None: the bytes as stored (pyarrow would gunzip a `.gz` by its name)
        with fs.open_input_stream(path, compression=None) as stream:
            return stream.read()
    except FileNotFoundError as exc:
        raise StorageError(f"{uri} does not exist") from exc


def get_object(uri: str) -> bytes:
    """A whole object's bytes read with boto3, as the driver reads a listing outside Ray Data
    (a Common Crawl `wat.paths.gz`), from the endpoint and credentials the environment names;
    a local path or file:// URI as read_bytes reads it."""
    if not is_remote(uri):
        return read_bytes(uri)
    import boto3
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, key = uri[len("s3://") :].partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=_s3_endpoint(),
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        config=BotoConfig(retries={"max_attempts": S3_ATTEMPTS, "mode": "standard"}),
    )
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "NoSuchBucket", "404"):
            raise StorageError(f"{redact(uri)} does not exist") from exc
        raise StorageError(f"{redact(uri)} cannot be read: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"{redact(uri)} cannot be read: {exc}") from exc


def write_bytes(uri: str, data: bytes) -> None:
    """Write a whole object. Locally via a temporary file and a rename, so a reader never sees
    half a file; an S3 PUT is atomic by itself."""
    write_atomic(*resolve(uri), data)


def write_atomic(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """write_bytes for a filesystem and a path in it (what a Ray task is handed)."""
    parent = posixpath.dirname(path)
    if parent:
        fs.create_dir(parent, recursive=True)
    target = path if fs.type_name == "s3" else f"{path}.{uuid.uuid4().hex}.tmp"
    # compression=None: pyarrow would gzip the bytes again for a name ending in `.gz` (on
    # S3, where the target is the final name), and a crawl.warc.gz would be stored gzipped twice
    with fs.open_output_stream(target, compression=None) as stream:
        stream.write(data)
    if target != path:
        fs.move(target, path)


def store_failure(exc: OSError) -> str | None:
    """One line on an object-storage request that its retries did not save (the AWS error as
    pyarrow reports it), or None when `exc` is another OSError."""
    line = next((x.strip() for x in str(exc).splitlines() if "AWS Error" in x), None)
    return line and f"object storage failed after {S3_ATTEMPTS} attempts of a request: {line}"


def read_json(uri: str) -> Any:
    return json.loads(read_bytes(uri))


def write_json(uri: str, value: Any) -> None:
    write_bytes(uri, json.dumps(value, indent=2, sort_keys=False).encode())


def delete(uri: str) -> None:
    """Remove a file or a directory tree; nothing there is fine."""
    fs, path = resolve(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)


def delete_written(uri: str, written: Callable[[str], bool]) -> None:
    """Remove the files under `uri` whose names `written` says a job writes, and nothing else:
    a folder a job shares with someone keeps their files (a note beside the data)."""
    fs, path = resolve(uri)
    for entry in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
        if entry.type == pafs.FileType.File and written(posixpath.basename(entry.path)):
            fs.delete_file(entry.path)


def written_rows(uri: str) -> int:
    """The rows of the Parquet files under `uri` (0 when nothing is there), from their
    footers: how a job counts what it wrote before declaring its output complete."""
    if not exists(uri):
        return 0
    fs, _ = resolve(uri)
    total = 0
    for path in list_files(uri):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                total += pq.ParquetFile(f).metadata.num_rows
    return total
