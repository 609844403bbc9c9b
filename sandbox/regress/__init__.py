"""From a reproduced failure to a regression check: generated pytest files, and the
``ci-repro`` check that every captured failure still reproduces."""

from sandbox.regress.check import CheckReport, RunCheck, check_store, expected_reproductions
from sandbox.regress.generate import regression_source, regression_test_name, write_regression_test

__all__ = [
    "CheckReport",
    "RunCheck",
    "check_store",
    "expected_reproductions",
    "regression_source",
    "regression_test_name",
    "write_regression_test",
]
