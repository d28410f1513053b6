"""The simulator's own tokenizer: word pieces with stable ids.

Not a real BPE: text is split into words (with their leading space),
numbers, punctuation runs and whitespace runs. Ids come from a stable hash so
they are the same in every process. Decoding is by the pieces the simulator
generated itself, so it never needs a vocabulary file.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence

EOS_TOKEN_ID = 2
_RESERVED = 100
_VOCAB = 32000

_PIECE = re.compile(r" ?[A-Za-z_]{1,12}| ?\d{1,3}| ?[^\sA-Za-z_\d]{1,4}|\n+|[ \t]+(?=\S)|\s+")

# Per piece: its id, the id as text and the piece escaped for a JSON string literal,
# worked out once: replies are built for every request admitted, from a bounded set
# of pieces (scripted replies may bring any: the cache is bounded).
_cache: dict[str, tuple[int, str, str]] = {}
_CACHE_MAX = 1 << 16


def split(text: str) -> list[str]:
    """Split ``text`` into pieces whose concatenation is ``text``."""
    return _PIECE.findall(text)


def _piece(piece: str) -> tuple[int, str, str]:
    found = _cache.get(piece)
    if found is None:
        if len(_cache) > _CACHE_MAX:
            _cache.clear()
        pid = _RESERVED + zlib.crc32(piece.encode()) % (_VOCAB - _RESERVED)
        found = _cache[piece] = (pid, str(pid), json.dumps(piece)[1:-1])
    return found


def piece_id(piece: str) -> int:
    """The stable id of one piece."""
    return _piece(piece)[0]


def count(text: str) -> int:
    """Number of tokens in ``text``."""
    return len(split(text))


class Pieces:
    """A token sequence with everything the streaming path needs precomputed.

    ``escaped[i]`` is piece ``i`` escaped for a JSON string literal, and
    ``id_strs[i]`` its id as text, so a streamed chunk is built with string
    joins only, without per-token Python work.
    """

    __slots__ = ("escaped", "id_strs", "ids", "pieces")

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        known = [_piece(p) for p in self.pieces]
        self.ids = [pid for pid, _, _ in known]
        self.id_strs = [text for _, text, _ in known]
        self.escaped = [escaped for _, _, escaped in known]

    def __len__(self) -> int:
        return len(self.pieces)

    def extend(self, other: Pieces, start: int = 0, stop: int | None = None) -> None:
        """Append ``other[start:stop]``."""
        self.pieces += other.pieces[start:stop]
        self.ids += other.ids[start:stop]
        self.escaped += other.escaped[start:stop]
        self.id_strs += other.id_strs[start:stop]

    def copy(self) -> Pieces:
        """A shallow copy that can be extended or patched independently."""
        new = Pieces(())
        new.extend(self)
        return new

    def replace(self, index: int, piece: str) -> None:
        """Overwrite one token (used by the ``lossy`` fault)."""
        self.pieces[index] = piece
        self.ids[index], self.id_strs[index], self.escaped[index] = _piece(piece)
