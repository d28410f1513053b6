"""Compressed bodies: decoded by their Content-Encoding, within the size cap."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_specdecode.client import wire


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


CODINGS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # HTTP's deflate: zlib-wrapped
    "identity": lambda data: data,
}


@given(
    st.binary(max_size=4096),
    st.lists(st.sampled_from(sorted(CODINGS)), max_size=3),
    st.integers(0, 8192),
    st.sampled_from(["", " ", "  "]),
)
def test_any_body_in_any_stack_of_codings_decodes_to_itself_each_stage_within_the_cap(
    data: bytes, codings: list[str], cap: int, space: str
) -> None:
    body = data
    stages = []  # what each real coding's decoding gives back: each within the cap
    for coding in codings:  # applied in the order listed
        if coding != "identity":
            stages.append(len(body))
        body = CODINGS[coding](body)
    header = ("," + space).join(c.upper() if len(c) % 2 else c for c in codings) or None
    if all(size <= cap for size in stages):
        assert wire.decoded(body, header, cap=cap) == data
        return
    with pytest.raises(wire.BoundExceeded) as caught:
        wire.decoded(body, header, cap=cap)
    assert caught.value.kind == wire.RESPONSE


def test_raw_deflate_under_the_deflate_name_and_gzip_members_decode() -> None:
    assert wire.decoded(raw_deflate(b"abc" * 50), "deflate", cap=1000) == b"abc" * 50
    assert wire.decoded(gzip.compress(b"one ") + gzip.compress(b"two"), "gzip", cap=10) == (
        b"one two"
    )


def test_a_zip_bomb_stops_at_the_cap_not_in_memory() -> None:
    bomb = gzip.compress(bytes(200 << 20))  # 200 MiB of zeros in about 200 KiB
    assert len(bomb) < 1 << 20
    with pytest.raises(wire.BoundExceeded, match=r"more than 1048576 bytes decoded") as caught:
        wire.decoded(bomb, "gzip", cap=1 << 20)
    assert caught.value.kind == wire.RESPONSE


@pytest.mark.parametrize(
    ("header", "body", "words"),
    [
        ("br", b"\x0b\x02\x80abc\x03", "Content-Encoding 'br', which the plugin does not decode"),
        ("gzip, zstd", b"x", "Content-Encoding 'zstd'"),
        ("gzip", b"plain text, not gzip", "not valid gzip"),
        # mtime=0: a gzip header holds the time, and a test id made of it differs
        # between two xdist workers collecting a second apart (a collection error).
        ("gzip", gzip.compress(b"abcdef" * 100, mtime=0)[:-20], "not valid gzip"),
        ("deflate", b"\x00\x01garbage", "not valid deflate"),
    ],
    ids=["br", "zstd", "plain-as-gzip", "cut-gzip", "garbage-deflate"],
)
def test_an_unknown_coding_or_a_broken_body_is_one_line(
    header: str, body: bytes, words: str
) -> None:
    with pytest.raises(wire.BoundExceeded) as caught:
        wire.decoded(body, header, cap=1 << 20)
    assert caught.value.kind == wire.ENCODING
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
