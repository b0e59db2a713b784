"""``python -m conjoined`` and the ``conjoined`` command: :func:`conjoined.cli.main`, loaded on the call."""

import signal
import sys


def main(argv=None):
    """Run the ``conjoined`` command with ``argv`` (see :func:`conjoined.cli.main`); returns the exit status.

    The command's modules (numba, scikit-learn, ...) load here, inside the call, so that a Ctrl-C while they load
    ends the command as one during its run does (a line on stderr, status 130), not with a traceback.
    """
    try:
        from .cli import main as run_command
    except KeyboardInterrupt:
        print("conjoined: interrupted", file=sys.stderr)
        return 130
    return run_command(argv)


def run():
    """The ``conjoined`` command and ``python -m conjoined``: :func:`main` on ``sys.argv``, then SIGINT ignored,
    outside an interactive session (IPython's ``%run -m conjoined`` must leave the session's Ctrl-C working).

    The command is done and its outputs whole; a Ctrl-C while the interpreter then shuts down (numba's and Dask's
    threads, up to a second) would kill the process by SIGINT, whose status says "nothing written".
    """
    status = main()
    if not (hasattr(sys, "ps1") or sys.flags.inspect or "IPython" in sys.modules):  # python -i: a REPL follows
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status


if __name__ == "__main__":
    raise SystemExit(run())
