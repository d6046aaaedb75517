"""``python -m rope_ref``: the `rope-ref` command."""

from rope_ref.cli import main

raise SystemExit(main())
