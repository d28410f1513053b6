"""pytest-specdecode: speculative-decoding drafter configs as pytest sessions."""

from __future__ import annotations

__version__ = "0.1.0"
