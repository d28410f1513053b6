"""Coding problems as sandboxed correctness tests (pytest-independent core).

Problems come from :func:`builtin_problems`, :func:`load_problems_toml`,
:func:`load_humaneval`, or are built in Python as :class:`Problem` (see
:mod:`pytest_specdecode.coding.problem` for an example with a function as the
reference and :func:`args_strategy` for declaring inputs by type).

A reply is judged by :func:`check_reply` (extract the code, then
:func:`check_answer`): the code runs in a sandbox (:func:`sandbox_mode`,
:func:`sandbox_warning`) and must agree with the reference on the fixed cases
and on hypothesis-generated inputs; the :class:`Verdict` carries a one-line
reason and the shrunk counterexample. :func:`pass_at_k` and :func:`aggregate`
turn repeated samples into pass@k.
"""

from __future__ import annotations

from pytest_specdecode.coding.builtin import builtin_problems
from pytest_specdecode.coding.check import Verdict, check_answer, check_reply, generate_inputs
from pytest_specdecode.coding.extract import extract_code, strip_reasoning
from pytest_specdecode.coding.humaneval import DatasetUnavailable, load_humaneval
from pytest_specdecode.coding.passk import aggregate, pass_at_k, report_ks
from pytest_specdecode.coding.problem import Problem
from pytest_specdecode.coding.sandbox import Limits, sandbox_mode, sandbox_warning
from pytest_specdecode.coding.toml_problems import ProblemFileError, load_problems_toml
from pytest_specdecode.coding.typespec import TypeSpecError, args_strategy, parse_type

__all__ = [
    "DatasetUnavailable",
    "Limits",
    "Problem",
    "ProblemFileError",
    "TypeSpecError",
    "Verdict",
    "aggregate",
    "args_strategy",
    "builtin_problems",
    "check_answer",
    "check_reply",
    "extract_code",
    "generate_inputs",
    "load_humaneval",
    "load_problems_toml",
    "parse_type",
    "pass_at_k",
    "report_ks",
    "sandbox_mode",
    "sandbox_warning",
    "strip_reasoning",
]
