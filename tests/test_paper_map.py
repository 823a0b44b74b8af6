"""docs/paper-map.md is the one place that maps the paper's LaTeX labels to its numbers
(issue 20, item 5): every label the code cites must be in its table, with a number."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The label prefixes of the paper's source, and its one label without a prefix.
LABEL = re.compile(r"\b(?:(?:eq|alg|lem|prop|thm|sect|fig|def|rem)-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
                   r"|mainpb)\b")


def cited_labels() -> set[str]:
    """Labels cited in the code, the tests and the guides (the table's promise)."""
    out: set[str] = set()
    paths = [*(ROOT / "src" / "rssm").rglob("*.py"), *(ROOT / "tests").glob("*.py"),
             *(p for p in (ROOT / "docs").glob("*.md") if p.name != "paper-map.md")]
    for path in paths:
        if path.name == "test_paper_map.py":
            continue
        out |= set(LABEL.findall(path.read_text()))
    return out


def mapped_labels() -> dict[str, str]:
    """label -> "in the paper" cell of the table."""
    rows = {}
    for line in (ROOT / "docs" / "paper-map.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


def test_every_label_the_code_cites_is_mapped():
    cited = cited_labels()
    assert {"alg-RSSM", "eq-Rsubdiff", "lem-projsubmfdblk"} <= cited   # the scan works
    missing = sorted(cited - set(mapped_labels()))
    assert not missing, f"labels cited in src/rssm but not in docs/paper-map.md: {missing}"


def test_every_mapped_label_has_a_number():
    number = re.compile(r"^(eq\. \(\d+\)|(Lemma|Proposition|Theorem|Definition|Remark) "
                        r"(\d+|[A-Z])\.\d+|Algorithm \d+|Figure \d+|Section \d+(\.\d+)?)(,|$)")
    bad = {k: v for k, v in mapped_labels().items() if not number.match(v)}
    assert not bad, bad
