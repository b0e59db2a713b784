"""``python -m conjoined``: the ``conjoined`` command line (see :mod:`conjoined.cli`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
