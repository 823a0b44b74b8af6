"""The planted sparse basis on seeds 0-15 with `rssm solve`: docs/custom.md's table.

    python -m benchmarks.sparse_basis_seeds [--out benchmarks/results/sparse_basis_seeds.log]

For each seed, RSM and RSSM (default 5 blocks), each with the problem's default rule and
with ``--stepsize auto``: the command's stop reason and final error, one line per run
(``seed S METHOD RULE: stop reason ...;final error ...;``), the same lines the table in
docs/custom.md ("The planted sparse basis") is read from. About a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path


def one(seed: int, method: str, rule: str) -> str:
    """One `rssm solve sparse_basis` run's stop reason and final error, as the log has
    them."""
    from rssm.cli import main

    argv = ["solve", "sparse_basis", "--seed", str(seed), "--method", method]
    if rule == "auto":
        argv += ["--stepsize", "auto"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    if rc != 0:
        raise RuntimeError(f"rssm {' '.join(argv)} exited {rc}")
    fields = {}
    for line in out.getvalue().splitlines():
        key, _, value = line.partition("  ")
        fields[key.strip()] = value.strip()
    return (f"seed {seed} {method} {rule}: stop reason {fields['stop reason']};"
            f"final error {fields['final error']};")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sparse_basis_seeds",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=16, help="seeds 0..N-1 (default 16)")
    ap.add_argument("--out", type=Path, default=None, help="also write the lines here")
    args = ap.parse_args(argv)
    lines = []
    for seed in range(args.seeds):
        for method in ("rsm", "rssm"):
            for rule in ("geometric", "auto"):
                lines.append(one(seed, method, rule))
                print(lines[-1], flush=True)
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
