import sys

from perfgate.cli import main

__all__: list[str] = []

sys.exit(main())
