"""Where a warning should point: the user's line, however deep in the package it is raised."""

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel():
    """The ``stacklevel`` that makes ``warnings.warn``, called by the function that calls this, point at the first
    frame outside the package: the user's call, through any of the package's wrappers and decorators
    (``DPMM.fit_predict``, ``conjoined.anndata.cdp``). 1 names that function itself."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _in_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _in_package(filename):
    # relative names ("<string>", a notebook cell's) are never the package's, whatever the working directory
    return os.path.isabs(filename) and os.path.abspath(filename).startswith(_PACKAGE)
