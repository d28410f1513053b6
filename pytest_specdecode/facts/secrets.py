"""Which launch options hold a secret, by the kind of value their name says they hold.

A rule over an option's name, not a list of flags: SGLang's table is read from
its wheel, and a release that adds ``--foo-api-key`` or ``--bar-password`` is
covered without anyone noticing it. A name is split into its words (``_`` and
``-``); it names a secret when a word is one of :data:`SECRET_WORDS` or two
adjacent words are one of :data:`SECRET_PAIRS`. ``token`` alone is not enough:
SGLang has dozens of options counting tokens (``--max-total-tokens``,
``--kt-max-deferred-experts-per-token``) and naming tokenizers; only a token
that authenticates (``auth-token``, ``access-token``, ``hf-token``) is one.

For SGLang 0.5.23 the rule picks ``--api-key``, ``--admin-api-key`` and
``--ssl-keyfile-password`` out of its 531 options (``tests/test_facts_secrets.py``
says so), and none of the paths beside them (``--ssl-keyfile``, ``--ssl-certfile``).
"""

from __future__ import annotations

import itertools
import re

SECRET_WORDS = frozenset(
    {"password", "passwd", "passphrase", "secret", "credential", "credentials", "apikey"}
)
SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("access", "token"),
        ("auth", "token"),
        ("bearer", "token"),
        ("hf", "token"),
        ("refresh", "token"),
        ("session", "token"),
    }
)

_SPLIT = re.compile(r"[^a-z0-9]+")


def words(name: str) -> list[str]:
    """``--SSL-keyfile_password`` -> ``['ssl', 'keyfile', 'password']``."""
    return [w for w in _SPLIT.split(name.lower()) if w]


def is_secret_name(name: str) -> bool:
    """Whether an option, field or variable named ``name`` holds a secret."""
    parts = words(name)
    return any(w in SECRET_WORDS for w in parts) or any(
        pair in SECRET_PAIRS for pair in itertools.pairwise(parts)
    )
