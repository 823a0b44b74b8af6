"""Where the Dask path's time goes at m = 200 000 (docs/data.md, "Dask got slower").

The chunk actor's own ``run`` (a block-pair update and its partial products) is timed
in-process (a LocalCluster with ``processes=False``, so the actor object can be called
directly), beside the in-memory oracle on one thread, on the file that
``python -m benchmarks.data_scale`` writes to /tmp/rssm-data-bench:

    OPENBLAS_NUM_THREADS=1 python -m benchmarks.dask_actor_probe
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

PATH = "/tmp/rssm-data-bench/dpcp_n100_m200000.npy"
M, N, P = 200_000, 100, 90


def main() -> int:
    from distributed import Client, LocalCluster

    import rssm
    from rssm import stiefel
    from rssm.blocks import ColumnSet
    from rssm.data import samples
    from rssm.data.distributed import from_npy
    from rssm.data.store import default_chunk_size
    from rssm.problems import DPCP
    from rssm.stepsizes import Constant

    warnings.simplefilter("ignore")
    kw = dict(method="rssm", seed=1, tol=0, options={"n_blocks": 5}, stepsize=Constant(1e-3))
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        arr = from_npy(PATH, chunk_size=default_chunk_size(M, N))[:M]
        prob = DPCP(samples(arr, check_finite=False), P)
        x0 = stiefel.random_point(N, P, np.random.default_rng(0))
        rssm.minimize(prob, x0, max_iter=3, record=3, **kw)     # builds the actor
        worker = next(iter(cluster.workers.values()))
        actors = worker.state.actors if hasattr(worker, "state") else worker.actors
        actor = next(iter(actors.values()))
        cols = ColumnSet(np.arange(36), (slice(0, 36),), (0, 1))
        vals = x0[:, :36].copy()
        actor.run("cols", cols, vals, cols, True)
        t = time.perf_counter()
        for _ in range(5):
            actor.run("cols", cols, vals, cols, True)
        print(f"actor.run, in-process: {(time.perf_counter() - t) / 5 * 1e3:.1f} ms per call")
        yt = np.asarray(np.load(PATH, mmap_mode="r")[:M]).T
        res = rssm.minimize(DPCP(yt, P), x0, max_iter=20, record=20, threads=1, **kw)
        print(f"in memory, threads=1: {1e3 * res.time / res.n_iter:.1f} ms per iteration")
    finally:
        client.close()
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
