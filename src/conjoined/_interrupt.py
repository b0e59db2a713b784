"""Interruptions that compiled code wrapped.

A KeyboardInterrupt (Ctrl-C), or an exception a signal handler raises, that arrives while numba's compiled code
has called back into Python comes out as the context of a ``SystemError`` ("... returned a result with an
exception set"). :func:`interruption_behind` finds it again, and :func:`unwrapping_interruptions` makes a long
method raise it as it was, so that ``except KeyboardInterrupt`` and notebooks see what the user did.
"""

from __future__ import annotations

import functools

__all__ = ["interruption_behind", "unwrapping_interruptions"]


def interruption_behind(exc, kinds=(KeyboardInterrupt,)):
    """The exception of one of the ``kinds`` behind ``exc`` (itself, its cause or context, and so on), or None;
    ``kinds`` may be any exception types (``io.kept_elsewhere`` looks for the results an interruption hid).
    (Not any BaseException: a timed-out connection holds asyncio's CancelledError in its context.)"""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def unwrapping_interruptions(method):
    """Decorator: a ``SystemError`` with a KeyboardInterrupt behind it is raised as that KeyboardInterrupt."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except SystemError as exc:
            interruption = interruption_behind(exc)
            if interruption is None:
                raise
            raise interruption from None

    return wrapper
