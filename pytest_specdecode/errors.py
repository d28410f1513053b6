"""The one root of every error the plugin reports to users.

Each :class:`SpecDecodeError` carries a one-line ``summary`` (what failed, on
which host/config, what to do next) and, where there is one, the ``log_tail``
that shows the evidence; ``str(exc)`` is the summary followed by the tail.
``reason`` is a short machine-readable cause (``"timeout"``, ``"died"``,
``"mismatch"``, ...), ``phase`` where it happened, ``config`` the label of
the config it concerns. Errors are raised ``from None`` where they replace a
lower-level one, so users never see "During handling of the above exception".
"""

from __future__ import annotations


class SpecDecodeError(Exception):
    """A failure meant for users: one summary line, then details."""

    def __init__(
        self,
        message: str = "",
        *,
        reason: str = "",
        phase: str | None = None,
        log_tail: str = "",
        config: str | None = None,
    ) -> None:
        text = message
        if log_tail.strip():
            text += f"\n--- last {len(log_tail.splitlines())} log lines ---\n{log_tail}"
        super().__init__(text)
        self.message = message
        self.reason = reason
        self.phase = phase
        self.log_tail = log_tail
        self.config = config

    @property
    def summary(self) -> str:
        """The message's first line: what a terminal line or a gate shows."""
        return str(self).split("\n", 1)[0]


class SpecDecodeWarning(UserWarning):
    """The root of the plugin's warnings (filter them with
    ``ignore::pytest_specdecode.errors.SpecDecodeWarning``)."""


class SweepOverrideWarning(SpecDecodeWarning):
    """A test's ``dflash`` marker sets a key ``--dflash-sweep`` varies: the marker wins."""
