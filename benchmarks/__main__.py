"""Entry point of ``python -m benchmarks``.

The BLAS thread count must be fixed before NumPy is imported, so the arguments are parsed
here first and the suite is imported afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    size.add_argument("--full", action="store_true", help="the committed run (<= 15 min)")
    ap.add_argument("--threads", type=int, default=None,
                    help="fix the BLAS/OpenMP thread count of the whole run (default: the "
                         "environment's, what users get; the sections 'userenv' and 'load' "
                         "always measure default and one thread side by side)")
    ap.add_argument("--only", nargs="*", default=None,
                    choices=["defaults", "userenv", "load", "periter", "fusion", "scaling",
                             "memory", "accuracy", "peers"],
                    help="run only these sections")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"),
                    help="directory for CSV files and the plot")
    args = ap.parse_args(argv)
    if args.threads is not None:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    from benchmarks import suite

    mode = "full" if args.full else "quick" if args.quick else "default"
    return suite.main(mode, args.threads, args.only, args.out)


if __name__ == "__main__":
    sys.exit(main())
