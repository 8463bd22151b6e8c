"""``python -m dispatch_fn``: the command line (``dispatch_fn.cli``)."""

from dispatch_fn.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
