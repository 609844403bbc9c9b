"""Hostile files cost bounded memory and one short error line.

Each case runs the real ``sandbox`` command in a child process and reads the child's own
peak resident set size (``VmHWM``): a sparse tar made by GNU tar, a 1 GiB PAX extended
header and a 1 GiB GNU long name (each in a gzip file of about a megabyte), gzip bombs, and
a store run of 100,000 events (imported, verified, shown and listed; ``make bench`` runs the
same commands on a million events, ``bench/big_run.py``, and checks that memory does not grow
with the run).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
import subprocess
import tarfile
import tempfile
import threading
import time
import zlib
from pathlib import Path

import pytest
from snapshot_factory import reg, write_tar

from bench.big_run import big_run, commands, run_cli
from sandbox.errors import BundleError
from sandbox.snapshot import SCHEMA_VERSION, DirectoryStore
from sandbox.snapshot.bundle import BundleLimits, export_bundle, read_bundle
from sandbox.snapshot.verify import verify_bundle

CEILING_KIB = 256 * 1024
MAX_LINE = 300
GIB = 1 << 30


def gzip_with_zeros(path: Path, prefix: bytes, zeros: int, suffix: bytes = b"") -> Path:
    """A gzip file of ``prefix``, ``zeros`` zero bytes and ``suffix``, written without
    compressing the zeros one by one (full flushes make each MiB compress the same)."""
    chunk = bytes(1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        f.write(comp.compress(prefix) + comp.flush(zlib.Z_FULL_FLUSH))
        crc = zlib.crc32(prefix)
        block = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
        again = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
        assert block == again  # after a full flush each MiB of zeros compresses the same
        whole, rest = divmod(zeros, len(chunk))
        crc = zlib.crc32(chunk, crc)
        crc = zlib.crc32(chunk, crc)
        f.write(block + again)
        for _ in range(whole - 2):
            f.write(block)
            crc = zlib.crc32(chunk, crc)
        tail = bytes(rest) + suffix
        f.write(comp.compress(tail) + comp.flush())
        crc = zlib.crc32(tail, crc)
        total = len(prefix) + zeros + len(suffix)
        f.write(struct.pack("<II", crc & 0xFFFFFFFF, total & 0xFFFFFFFF))
    return path


def header(name: str, size: int, kind: bytes, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(format=fmt)


def assert_one_short_error(code: int, stderr: str, rss_kib: int) -> str:
    lines = stderr.splitlines()
    assert code == 2, stderr[:500]
    assert len(lines) == 1, stderr[:500]
    assert len(lines[0]) <= MAX_LINE, lines[0][:400]
    assert rss_kib < CEILING_KIB, f"peak RSS {rss_kib // 1024} MiB"
    return lines[0]


def _store_args(tmp_path: Path) -> list[str]:
    return ["--store", str(tmp_path / "store")]


@pytest.mark.parametrize("fmt", ["gnu", "pax"])
def test_sparse_tar_is_refused(tmp_path: Path, fmt: str) -> None:
    if shutil.which("tar") is None:
        pytest.fail("GNU tar is needed to make a real sparse archive")
    big = tmp_path / "blobs"
    big.mkdir()
    with open(big / "big", "wb") as f:
        f.truncate(3 * GIB)  # a 3 GiB hole
    bundle = tmp_path / f"sparse-{fmt}.tar.gz"
    subprocess.run(
        ["tar", f"--format={fmt}", "-S", "-czf", str(bundle), "-C", str(tmp_path), "blobs/big"],
        check=True,
    )
    assert bundle.stat().st_size < 1024
    for args in (["import", str(bundle)], ["verify", str(bundle)]):
        code, out, err, rss = run_cli([*args, *_store_args(tmp_path)], tmp_path)
        if args[0] == "import":
            line = assert_one_short_error(code, err, rss)
            assert "sparse" in line
        else:
            assert code == 1 and "sparse" in out and rss < CEILING_KIB
            assert all(len(line) <= MAX_LINE for line in out.splitlines())


def test_a_1_gib_pax_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    bundle = gzip_with_zeros(
        tmp_path / "pax.tar.gz", header("././@PaxHeader", GIB, tarfile.XHDTYPE), GIB
    )
    assert bundle.stat().st_size < 2 * 1024 * 1024
    code, _, err, rss = run_cli(["import", str(bundle), *_store_args(tmp_path)], tmp_path)
    line = assert_one_short_error(code, err, rss)
    assert "PAX extended header of 1073741824 bytes" in line


def test_a_1_gib_gnu_long_name_gives_a_short_line(tmp_path: Path) -> None:
    bundle = gzip_with_zeros(
        tmp_path / "long.tar.gz", header("././@LongLink", GIB, tarfile.GNUTYPE_LONGNAME), GIB
    )
    code, _, err, rss = run_cli(["import", str(bundle), *_store_args(tmp_path)], tmp_path)
    line = assert_one_short_error(code, err, rss)
    assert "GNU long name of 1073741824 bytes" in line


def test_a_long_name_within_limits_is_cut_in_the_error(tmp_path: Path) -> None:
    name = "x" * 4000
    bundle = gzip_with_zeros(
        tmp_path / "name.tar.gz", header(name, 0, tarfile.REGTYPE) + bytes(1024), 0
    )
    code, _, err, rss = run_cli(["import", str(bundle), *_store_args(tmp_path)], tmp_path)
    line = assert_one_short_error(code, err, rss)
    assert "unexpected member 'xxxx" in line and "…" in line


def test_gzip_bomb_of_one_huge_member(tmp_path: Path) -> None:
    key = "ab" * 32
    name = f"blobs/sha256/ab/{key}"
    bundle = gzip_with_zeros(
        tmp_path / "bomb.tar.gz", header(name, 5 * GIB, tarfile.REGTYPE), 5 * GIB
    )
    assert bundle.stat().st_size < 6 * 1024 * 1024
    code, _, err, rss = run_cli(["import", str(bundle), *_store_args(tmp_path)], tmp_path)
    line = assert_one_short_error(code, err, rss)
    assert "more than the limit" in line


def test_gzip_bomb_within_the_member_limit_is_streamed_not_held(tmp_path: Path) -> None:
    key = "cd" * 32
    size = 400 * 1024 * 1024  # under the member limit: read to the end, to disk
    bundle = gzip_with_zeros(
        tmp_path / "bomb.tar.gz",
        header(f"blobs/sha256/cd/{key}", size, tarfile.REGTYPE),
        size,
        bytes(1024),
    )
    code, _, err, rss = run_cli(["import", str(bundle), *_store_args(tmp_path)], tmp_path)
    line = assert_one_short_error(code, err, rss)
    assert "bundle.json" in line  # refused: no index, after streaming the member
    assert not (tmp_path / "store").exists()  # nothing written


BIG_EVENTS = 100_000


def test_a_100k_event_run_is_imported_verified_shown_and_listed_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """The commands ``bench.big_run`` measures at a million events, at a tenth of that."""
    source = DirectoryStore(tmp_path / "source")
    run = "big-1e5"
    big_run(source, run, BIG_EVENTS)
    bundle = export_bundle(source, run, tmp_path / "big.tar.gz")
    steps = commands(run, bundle, tmp_path / "target")
    for args in steps.values():
        code, out, err, rss = run_cli(args, tmp_path)
        assert code == 0, f"{args[0]}: {err[:300]}"
        assert rss < CEILING_KIB, f"{' '.join(args[:2])}: peak RSS {rss // 1024} MiB"
        if args[0] == "list":
            assert str(BIG_EVENTS) in out
        if args[:1] == ["show"] and "--json" in args:
            assert out.count('"kind":"state"') == BIG_EVENTS
    listed = json.loads(run_cli([*steps["list"], "--json"], tmp_path)[1])
    assert listed[0]["events"] == BIG_EVENTS


def _staged_peak(folder: Path, done: threading.Event, peak: list[int]) -> None:
    while not done.is_set():
        total = 0
        with contextlib.suppress(OSError):  # a staging folder removed while it is walked
            for path in folder.rglob("*"):
                with contextlib.suppress(OSError):
                    if path.is_file():
                        total += path.stat().st_size
        peak[0] = max(peak[0], total)
        time.sleep(0.002)


def test_a_bomb_of_garbage_blobs_stages_at_most_one_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle whose index declares blobs within the limits but whose blobs are zeros
    (their names are not their digests) is refused, and the temporary folder never holds
    more than about one of them (it used to hold all of them until the end)."""
    member = 4 << 20
    blobs = [(f"blobs/sha256/{i:02x}/{i:02x}" + "0" * 62, bytes(member)) for i in range(12)]
    index = {
        "format": "sandbox-replayer-bundle",
        "schema_version": SCHEMA_VERSION,
        "run_id": "run-1",
        "members": [{"path": n, "sha256": n[-64:], "size": member} for n, _ in blobs],
    }
    bomb = write_tar(
        tmp_path / "bomb.tar.gz",
        [reg("bundle.json", json.dumps(index).encode()), *(reg(n, d) for n, d in blobs)],
    )
    staging = tmp_path / "tmpdir"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    done, peak = threading.Event(), [0]
    poller = threading.Thread(target=_staged_peak, args=(staging, done, peak))
    poller.start()
    try:
        report = verify_bundle(
            bomb, BundleLimits(max_member_bytes=member, max_total_bytes=64 << 20)
        )
    finally:
        done.set()
        poller.join()
    assert not report.ok
    assert peak[0] <= 2 * member, f"{peak[0] >> 20} MiB staged"
    assert not any(staging.iterdir())


@pytest.mark.parametrize(
    ("declared", "error"),
    [
        (8 << 20, "bundle.json says member"),  # over the member limit
        (1 << 20, "is 4194304 bytes, bundle.json says 1048576"),  # not what the tar says
    ],
)
def test_declared_sizes_are_checked_before_anything_is_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: int, error: str
) -> None:
    name = "blobs/sha256/ab/ab" + "0" * 62
    index = {
        "format": "sandbox-replayer-bundle",
        "schema_version": SCHEMA_VERSION,
        "run_id": "run-1",
        "members": [{"path": name, "sha256": name[-64:], "size": declared}],
    }
    bomb = write_tar(
        tmp_path / "b.tar.gz",
        [reg("bundle.json", json.dumps(index).encode()), reg(name, bytes(4 << 20))],
    )
    staging = tmp_path / "tmpdir"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    with pytest.raises(BundleError, match=error):
        read_bundle(bomb, BundleLimits(max_member_bytes=6 << 20))
    assert not any(staging.iterdir())
