"""The pinned prompt set: a few domains where speculative decoding behaves differently.

Each domain is one TOML file under ``prompt_set/`` shipped with the package
(``code``, ``math``, ``chat``, ``summary``), written for this project and
licensed with it (MIT; see ``prompt_set/README.md``), so every machine and
every Python version sends the same prompts. A file holds the domain's
wrapper (``prefix`` before the text, ``suffix`` after it: a summarisation
prompt ends by asking for the summary) and its texts; the texts joined make
the corpus that prompts are cut from, in the server's tokens.

Drafters accept more on predictable text: code and worked maths more than
conversation (DFlash reports an accept length of 6.50 on HumanEval against
4.24 on MT-Bench), so a sweep's verdict can differ per domain.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_specdecode.config.load_options import DEFAULT_DOMAINS, DOMAINS
from pytest_specdecode.errors import SpecDecodeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

__all__ = ["DEFAULT_DOMAINS", "DOMAINS", "SET_DIR", "Domain", "DomainError", "load"]

SET_DIR = Path(__file__).with_name("prompt_set")


class DomainError(SpecDecodeError, ValueError):
    """An unknown domain or a broken prompt-set file; one line."""


@dataclass(frozen=True)
class Domain:
    """One domain of the prompt set."""

    name: str
    description: str
    prefix: str
    suffix: str
    texts: tuple[str, ...]
    license: str
    provenance: str

    @property
    def corpus(self) -> str:
        """The domain's texts joined: what prompt bodies are cut from."""
        return "\n\n".join(self.texts)


@cache
def load(name: str) -> Domain:
    """The domain ``name`` from its shipped TOML file."""
    if name not in DOMAINS:
        raise DomainError(f"unknown domain {name!r}: choose from {', '.join(DOMAINS)}")
    path = SET_DIR / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        texts = tuple(str(item["body"]).strip("\n") for item in data["text"])
        found = Domain(
            name=name,
            description=str(data["description"]),
            prefix=str(data.get("prefix", "")),
            suffix=str(data.get("suffix", "")),
            texts=texts,
            license=str(data["license"]),
            provenance=str(data["provenance"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DomainError(
            f"prompt set {str(path)!r} is unusable: {type(exc).__name__}: {exc}"
        ) from None
    if not texts or not all(texts):
        raise DomainError(f"prompt set {str(path)!r} has an empty text")
    return found
