"""What the plugin writes for people: figures as they read, the live line, no secrets.

:mod:`~pytest_specdecode.output.figures`: ``30,572 tok/s``, never ``3.057e+04``;
:mod:`~pytest_specdecode.output.progress`: the live progress line on the
terminal; :mod:`~pytest_specdecode.output.redact`: secrets masked at every sink.
"""

from __future__ import annotations
