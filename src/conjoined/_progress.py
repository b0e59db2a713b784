"""Progress bars for long loops: tqdm when it is installed, a plain stderr line otherwise."""

from __future__ import annotations

import sys
import time


class _PlainBar:
    """A line on stderr at most every 2 s (and at the end): done/total, elapsed time and the postfix."""

    def __init__(self, total, desc):
        self.total, self.desc, self.done, self.postfix = total, desc, 0, ""
        self.start = self.last = time.perf_counter()

    def update(self, n=1):
        self.done += n
        now = time.perf_counter()
        if now - self.last >= 2.0 or self.done == self.total:
            self.last = now
            postfix = f", {self.postfix}" if self.postfix else ""
            print(f"{self.desc}: {self.done}/{self.total} ({now - self.start:.1f} s{postfix})", file=sys.stderr)

    def set_postfix_str(self, text, refresh=True):
        self.postfix = text

    def close(self):
        pass


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, text, refresh=True):
        pass

    def close(self):
        pass


def progress_bar(total, desc, enabled):
    """An object with ``update``, ``set_postfix_str`` and ``close``; silent when ``enabled`` is false."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _PlainBar(total, desc)
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr)
