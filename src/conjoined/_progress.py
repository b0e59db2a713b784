"""Progress bars for long loops: tqdm where it can redraw in place (a terminal, a notebook) and is installed; a plain
stderr line otherwise, every 2 s on a terminal and every 30 s into a file or pipe, whose log it would otherwise
fill, and where a loop ends or stops. ``CONJOINED_PROGRESS=bar`` asks for tqdm where stderr is not a terminal but
redraws in place all the same (an IDE's console)."""

from __future__ import annotations

import os
import sys
import time


class _PlainBar:
    """A line on stderr at most every ``every`` seconds (and at the end): done/total ("done step(s)" where the
    total is None, unknown), elapsed time and the postfix."""

    def __init__(self, total, desc, every):
        self.total, self.desc, self.every, self.done, self.shown, self.postfix = total, desc, every, 0, 0, ""
        self.start = self.last = time.perf_counter()

    def update(self, n=1):
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.every or self.done == self.total:
            self._show(now)

    def _show(self, now):
        self.last, self.shown = now, self.done
        postfix = f", {self.postfix}" if self.postfix else ""
        done = f"{self.done} step(s)" if self.total is None else f"{self.done}/{self.total}"
        print(f"{self.desc}: {done} ({now - self.start:.1f} s{postfix})", file=sys.stderr)

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text

    def close(self):
        """A last line where the loop stopped short of its end (interrupted) since the line before."""
        if self.done != self.shown:
            self._show(time.perf_counter())


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, text, refresh=True):
        pass

    def close(self):
        pass


def _interactive(stream):
    """Whether a bar can redraw in place on ``stream``: a terminal, or a Jupyter kernel's stream (tqdm draws a
    widget there); a wrapper's stream (the command's stderr, ``wrapped_stream``) is judged by the stream it
    wraps."""
    stream = getattr(stream, "wrapped_stream", stream)
    isatty = getattr(stream, "isatty", None)
    return (bool(isatty is not None and isatty()) or type(stream).__module__.startswith("ipykernel")
            or os.environ.get("CONJOINED_PROGRESS") == "bar")


def progress_bar(total, desc, enabled):
    """An object with ``update``, ``set_postfix_str`` and ``close``; silent when ``enabled`` is false. ``total``
    None: steps of a loop whose length is not known."""
    if not enabled:
        return _NoBar()
    if not _interactive(sys.stderr):
        return _PlainBar(total, desc, every=30.0)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _PlainBar(total, desc, every=2.0)
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
