"""Block-pair selection rules and a user partition with blocks of different sizes.

The paper draws the pair of blocks uniformly at random (Algorithm alg-RSSM); cyclic and
shuffled orders, and any partition of the columns, are peers chosen by name.
"""

import rssm
from rssm.problems import L1Procrustes

prob = L1Procrustes.synthetic(m=300, n=20, p=10, seed=0)
x0 = prob.initial_point()
blocks = [[7], [0, 9], [1, 4, 8], [2, 3, 5, 6]]  # sizes 1, 2, 3, 4, interleaved

for selection in ("uniform", "cyclic", "shuffled"):
    for partition in (None, blocks):
        # the problem's hand-set geometric rule (stepsize="auto" needs ~2x more iterations
        # for 1e-10 on this problem: docs/stepsizes.md)
        res = rssm.minimize(
            prob, x0, method="rssm", stepsize=prob.reference_stepsize(), max_iter=1200, seed=1,
            options={"n_blocks": 4, "partition": partition, "selection": selection}
        )
        kind = "equal blocks" if partition is None else "user blocks "
        print(f"{res.selection:8s} {kind}  error {res.error:.1e}  time {res.time:.2f} s")
        assert res.error < 1e-10
