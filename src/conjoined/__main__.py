"""``python -m conjoined`` and the ``conjoined`` command: :func:`conjoined.cli.main`, loaded on the call."""

import sys


def main(argv=None):
    """Run the ``conjoined`` command with ``argv`` (see :func:`conjoined.cli.main`); returns the exit status.

    The command's modules (numba, scikit-learn, ...) load here, inside the call, so that a Ctrl-C while they load
    ends the command as one during its run does (a line on stderr, status 130), not with a traceback.
    """
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print("conjoined: interrupted", file=sys.stderr)
        return 130
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
