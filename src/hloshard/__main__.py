"""``python -m hloshard``: the same CLI as the ``hloshard`` script."""

from .entry import main

if __name__ == "__main__":
    main()
