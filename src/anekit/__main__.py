"""``python -m anekit``: the ``anekit`` command line."""

from anekit.cli import main

if __name__ == "__main__":
    main()
