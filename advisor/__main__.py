"""`python -m advisor` is the same as the `trl-advisor` command."""

from advisor.cli import main

raise SystemExit(main())
