"""The keys under which tests record their facts in ``user_properties``.

Written by the suites' runners and the session, read by :mod:`pytest_specdecode.report`;
pytest-xdist carries them from workers to the controller and JUnit XML writes them out.
"""

from __future__ import annotations

CONFIG = "dflash_config"  # the config's label, for people
CONFIG_KEY = "dflash_config_key"  # its canonical key (SpecConfig.key), for grouping
CONFIG_DATA = "dflash_config_data"
KIND = "dflash_kind"
RECORD = "dflash_record"
# The throughput cases the lossless check's baseline (algorithm NONE) measured for the
# speedup, when no throughput test of the run runs under NONE: a list of RECORD-like dicts.
BASELINE_CASES = "dflash_baseline_cases"
SERVICE = "dflash_service"
# The server of the test's config exited (a one-line reason): set by the session.
DIED = "dflash_server_died"
