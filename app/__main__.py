"""``python3 -m app``: set up on first use, then run ``gemma-chat`` with the same arguments."""

from __future__ import annotations

import sys
from pathlib import Path

from app import bootstrap


def main() -> None:
    python = bootstrap.ensure()
    if Path(sys.prefix).resolve() != bootstrap.VENV.resolve():
        bootstrap.exec_in_venv(python, ["-m", "app.cli", *sys.argv[1:]])
    from app.cli import main as cli_main

    sys.exit(cli_main())


if __name__ == "__main__":
    main()
