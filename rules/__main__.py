"""`python -m rules --write-docs [PATH]`: regenerate docs/rules.md from the registry (also `--check` for CI)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rules", description=__doc__)
    parser.add_argument("--write-docs", nargs="?", const=str(DEFAULT_DOCS), metavar="PATH",
                        help=f"write the rules table (default {DEFAULT_DOCS})")
    parser.add_argument("--check-docs", nargs="?", const=str(DEFAULT_DOCS), metavar="PATH",
                        help="exit 1 when the docs file is out of date")
    args = parser.parse_args(argv)
    from rules.render import rules_markdown

    text = rules_markdown()
    if args.check_docs:
        current = Path(args.check_docs).read_text(encoding="utf-8") if Path(args.check_docs).exists() else ""
        if current != text:
            print(f"{args.check_docs} is out of date: run python -m rules --write-docs", file=sys.stderr)
            return 1
        return 0
    if args.write_docs:
        path = Path(args.write_docs)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(path)
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
