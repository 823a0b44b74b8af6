"""Run the paper's experiments: plan the runs, execute them seed by seed, save as they end.

Order: for each problem, each seed builds its data and start once, then every method runs
on them back to back (the order rotated from seed to seed), so the CPU-time comparison of
the methods of one seed shares machine conditions. Each finished run is appended to the
CSV and the JSON run log atomically (`rssm.experiments.io`), so an interrupted
reproduction keeps what it finished and ``resume=True`` skips those runs.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rssm
from rssm.experiments import io
from rssm.experiments.configs import (
    AUTO_STEPSIZE,
    FIGURE_FORMATS,
    PAPER_METHODS,
    PROBLEMS,
    QUICK_DIVISOR,
    THRESHOLDS,
    TUNED_TARGET,
    TUNING_SEED,
    MethodSpec,
    ProblemConfig,
    make_stepsize,
    stepsize_label,
    temp_prefix,
)
from rssm.experiments.progress import ProgressBar, format_seconds
from rssm.stopping import StopReason

__all__ = [
    "RunSpec",
    "CSV_NAME",
    "JSON_NAME",
    "plan_paper",
    "plan_tuning",
    "plan_tuned",
    "plan_auto",
    "choose_tuned",
    "run_one",
    "reproduce",
]

#: The runs' table that `reproduce` writes in its folder (one row per run).
CSV_NAME = "results.csv"
#: The record beside it: the settings, the machine and each run's summary.
JSON_NAME = "results.json"


@dataclass(frozen=True)
class RunSpec:
    """One solver run of a reproduction.

    Parameters
    ----------
    part : {"paper", "tuning", "tuned", "auto"}
        The paper's settings; the step-size search of ``--tuned``; its reported runs;
        ``stepsize="auto"`` on the same seeds, beside them.
    problem : str
        Problem name.
    method : MethodSpec
        RSM or RSSM with l blocks.
    seed : int
        Data seed (and block-selection seed).
    stepsize : dict
        Step-size spec (`make_stepsize` form).
    max_iter, record_every : int
        Budget and trace resolution.
    target_error : float or None, default=None
        Stop once the error reaches it.
    """

    part: str
    problem: str
    method: MethodSpec
    seed: int
    stepsize: dict
    max_iter: int
    record_every: int
    target_error: float | None = None

    @property
    def key(self) -> tuple:
        """(part, problem, method key, seed, step-size label): identifies the run in the CSV."""
        return (self.part, self.problem, self.method.key, self.seed, stepsize_label(self.stepsize))

    @property
    def label(self) -> str:
        """Short text for the progress bar."""
        return f"{self.part} {self.problem} {self.method.label} seed {self.seed}"


def _rotate(seq: Sequence, k: int) -> list:
    k %= len(seq)
    return list(seq[k:]) + list(seq[:k])


def plan_paper(cfg: ProblemConfig, seeds: Sequence[int],
               methods: Sequence[MethodSpec] = PAPER_METHODS) -> list[RunSpec]:
    """The paper part of ``cfg``: every method on every seed with the paper's step size.

    Parameters
    ----------
    cfg : ProblemConfig
        The problem, its paper step size and budgets.
    seeds : sequence of int
        The data seeds.
    methods : sequence of MethodSpec, default=PAPER_METHODS
        The methods; their order is rotated from seed to seed.

    Returns
    -------
    list of RunSpec
        The runs of part "paper", seed by seed.
    """
    out = []
    for i, seed in enumerate(seeds):
        for m in _rotate(methods, i):
            out.append(RunSpec("paper", cfg.name, m, int(seed), dict(cfg.paper_stepsize),
                               cfg.max_iter(m), cfg.record_every(m)))
    return out


def plan_tuning(cfg: ProblemConfig, methods: Sequence[MethodSpec] = PAPER_METHODS) -> list[RunSpec]:
    """The step-size search of the tuned part: every grid candidate for every method on the
    data of `TUNING_SEED`, stopping at `TUNED_TARGET`.

    Parameters
    ----------
    cfg : ProblemConfig
        The problem, its grid of candidates (``cfg.tuned_grid``) and tuned budgets.
    methods : sequence of MethodSpec, default=PAPER_METHODS
        The methods; their order is rotated from candidate to candidate.

    Returns
    -------
    list of RunSpec
        The runs of part "tuning", candidate by candidate.
    """
    out = []
    for j, cand in enumerate(cfg.tuned_grid):
        for m in _rotate(methods, j):
            out.append(RunSpec("tuning", cfg.name, m, TUNING_SEED, dict(cand),
                               cfg.max_iter(m, tuned=True), cfg.record_every(m, tuned=True),
                               TUNED_TARGET))
    return out


def plan_tuned(cfg: ProblemConfig, seeds: Sequence[int], choice: dict[str, dict],
               methods: Sequence[MethodSpec] = PAPER_METHODS) -> list[RunSpec]:
    """The reported tuned runs: each method with its chosen step size (``choice[key]``).

    Parameters
    ----------
    cfg : ProblemConfig
        The problem and its tuned budgets.
    seeds : sequence of int
        The data seeds.
    choice : dict of str to dict
        Method key -> step-size spec (as `choose_tuned` gives it).
    methods : sequence of MethodSpec, default=PAPER_METHODS
        The methods; their order is rotated from seed to seed.

    Returns
    -------
    list of RunSpec
        The runs of part "tuned", seed by seed, stopping at `TUNED_TARGET`.
    """
    out = []
    for i, seed in enumerate(seeds):
        for m in _rotate(methods, i):
            out.append(RunSpec("tuned", cfg.name, m, int(seed), dict(choice[m.key]),
                               cfg.max_iter(m, tuned=True), cfg.record_every(m, tuned=True),
                               TUNED_TARGET))
    return out


def plan_auto(cfg: ProblemConfig, seeds: Sequence[int],
              methods: Sequence[MethodSpec] = PAPER_METHODS) -> list[RunSpec]:
    """``stepsize="auto"`` on every seed and method with the tuned part's budget and
    target (part "auto"): what a user gets without tuning, beside the grid's pick.

    Parameters
    ----------
    cfg : ProblemConfig
        The problem and its tuned budgets.
    seeds : sequence of int
        The data seeds.
    methods : sequence of MethodSpec, default=PAPER_METHODS
        The methods; their order is rotated from seed to seed.

    Returns
    -------
    list of RunSpec
        The runs of part "auto", seed by seed.
    """
    out = []
    for i, seed in enumerate(seeds):
        for m in _rotate(methods, i):
            out.append(RunSpec("auto", cfg.name, m, int(seed), dict(AUTO_STEPSIZE),
                               cfg.max_iter(m, tuned=True), cfg.record_every(m, tuned=True),
                               TUNED_TARGET))
    return out


def _time_to(rows: list[dict], level: float) -> float:
    for r in rows:
        if r["error"] <= level:
            return r["time"]
    return math.inf


def choose_tuned(cfg: ProblemConfig, rows: Sequence[dict],
                 methods: Sequence[MethodSpec] = PAPER_METHODS) -> dict[str, dict]:
    """Pick each method's step size from its tuning runs: the candidate that reaches
    `TUNED_TARGET` in the least solver time; if none does, the lowest final error.

    Parameters
    ----------
    cfg : ProblemConfig
        The problem and its grid of tuned candidates (``cfg.tuned_grid``).
    rows : sequence of dict
        CSV rows (at least those of part "tuning" of this problem).
    methods : sequence of MethodSpec
        The methods to choose for (default: the paper's).

    Returns
    -------
    dict
        Method key -> the chosen candidate's step-size spec.
    """
    choice = {}
    for m in methods:
        best, best_score = None, None
        for cand in cfg.tuned_grid:
            lab = stepsize_label(cand)
            sel = [r for r in rows if r["part"] == "tuning" and r["problem"] == cfg.name
                   and r["method"] == m.key and r["stepsize"] == lab]
            if not sel:
                continue
            sel.sort(key=lambda r: r["iteration"])
            score = (_time_to(sel, TUNED_TARGET), sel[-1]["error"])
            if best_score is None or score < best_score:
                best, best_score = cand, score
        if best is None:
            raise ValueError(f"no tuning runs found for {cfg.name} {m.key}")
        choice[m.key] = dict(best)
    return choice


def run_one(spec: RunSpec, problem, x0: np.ndarray) -> tuple[list[list[str]], dict]:
    """Run ``spec`` with `rssm.minimize`; return its CSV rows and its summary for the run log.

    Parameters
    ----------
    spec : RunSpec
        The run.
    problem : Problem
        The problem instance of the run's seed (`ProblemConfig.build`).
    x0 : numpy.ndarray of shape (n, p)
        Its starting point.

    Returns
    -------
    rows : list of list of str
        The run's CSV rows (`rssm.experiments.io.trace_rows`).
    summary : dict
        The run's entry for the JSON run log (its key, settings, final and best errors
        and costs, iterations, time, flops, feasibility, stop reason, wall time).

    Raises
    ------
    KeyboardInterrupt
        If the run was interrupted (its partial trace is dropped, so ``--resume`` reruns it).
    """
    wall0 = time.perf_counter()
    # The paper's protocol: a fixed budget (or the tuned part's target error), so the
    # convergence test is off (tol=0) and the figures follow the iterates to the end.
    res = rssm.minimize(
        problem, x0, method=spec.method.method, stepsize=make_stepsize(spec.stepsize),
        max_iter=spec.max_iter, target_error=spec.target_error, seed=spec.seed,
        record=spec.record_every, tol=0,
        options={"n_blocks": max(2, spec.method.n_blocks), "clip_steps": _clips(spec.part)})
    wall = time.perf_counter() - wall0
    if res.stop_reason is StopReason.INTERRUPTED:
        # minimize turns Ctrl-C into a Result; a cut-short run must not be saved as finished.
        raise KeyboardInterrupt
    meta = {"part": spec.part, "problem": spec.problem, "method": spec.method.key,
            "blocks": spec.method.n_blocks, "seed": spec.seed,
            "stepsize": stepsize_label(spec.stepsize)}
    rows = io.trace_rows(meta, res.trace)
    doc = res.to_dict()
    summary = {
        "key": list(spec.key),
        "stepsize": spec.stepsize,
        "max_iter": spec.max_iter,
        "record_every": spec.record_every,
        "target_error": spec.target_error,
        # the last row of the trace (the figures' end point) and the best iterate
        "final_error": float(res.trace["error"][-1]),
        "final_cost": float(res.trace["cost"][-1]),
        "best_error": doc["error"],
        "best_cost": doc["fun"],
        **{k: doc[k] for k in ("n_iter", "time", "flops", "feasibility", "stop_reason",
                               "threads", "n_clipped")},
        "wall": wall,
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return rows, summary


def _summary_from_rows(spec: RunSpec, rows: list[dict]) -> dict:
    """A run-log entry rebuilt from the run's CSV rows (its JSON entry was lost to a kill
    between the two writes); wall time and feasibility are unknown."""
    rows = sorted(rows, key=lambda r: r["iteration"])
    last = rows[-1]
    if spec.target_error is not None and last["error"] <= spec.target_error:
        reason = StopReason.TARGET_ERROR.value
    elif last["iteration"] >= spec.max_iter:
        reason = StopReason.MAX_ITER.value
    else:
        reason = "unknown"
    return {
        "key": list(spec.key), "stepsize": spec.stepsize, "max_iter": spec.max_iter,
        "record_every": spec.record_every, "target_error": spec.target_error,
        "n_iter": last["iteration"], "time": last["time"], "flops": last["flops"],
        "final_error": last["error"], "final_cost": last["cost"], "feasibility": None,
        "stop_reason": reason, "wall": 0.0, "finished_at": None, "rebuilt_from_csv": True,
    }


def _clips(part: str) -> bool:
    """Whether the loop shortens steps longer than the block's diameter in runs of
    ``part``: not for the paper's step sizes (Algorithm ``alg-RSSM`` to the letter: the
    cap changed ODL RSSM l = 5 seed 0 from error 0.31 to 3e-7), as rssm's default for the
    grid and ``auto`` parts (the library's own schedules)."""
    return part != "paper"


def _settings(configs: dict[str, ProblemConfig], seeds, quick: bool, tuned: bool,
              budget_scale: float) -> dict:
    return {
        "budget_scale": budget_scale,
        "problems": {k: c.as_dict() for k, c in configs.items()},
        "methods": [m.key for m in PAPER_METHODS],
        "seeds": [int(s) for s in seeds],
        "quick": quick,
        "tuned": tuned,
        "thresholds": list(THRESHOLDS),
        "tuned_target": TUNED_TARGET,
        "tuning_seed": TUNING_SEED,
        "start": "data: synthetic(seed=seed); "
                 "x0 = initial_point(numpy.random.default_rng([seed, 1]))",
        "minimize": "rssm.minimize(problem, x0, method, stepsize=..., max_iter=..., "
                    "target_error=..., seed=seed, record=record_every, tol=0, "
                    "options={'n_blocks': l, 'clip_steps': part != 'paper'})",
        "paper_steps_clipped": False,
    }


_RESUME_KEYS = ("problems", "methods", "quick", "thresholds", "tuned_target", "tuning_seed",
                "paper_steps_clipped")


def _reduction(settings: dict) -> str:
    """The option that set a run's budgets, as a user typed it: ``--quick``, ``--budget
    S`` or none (the full budgets)."""
    if not settings.get("quick"):
        return "the full budgets"
    scale = settings.get("budget_scale")
    if not isinstance(scale, (int, float)) or scale == 1.0 / QUICK_DIVISOR:
        return "--quick"
    return f"--budget {scale:g}"


def _differences(old: dict, new: dict) -> list[str]:
    """What makes a resumed run's settings differ from the folder's, in words."""
    out = []
    # (an audit: a folder of --budget 0.01 resumed without it was said to differ in
    # "--quick (on there)", an option neither command used; so the budgets are named as
    # typed, where they differ: options that give the same budgets, --quick and --budget
    # 0.0667, resume)
    length = _reduction(old), _reduction(new)
    for k in _RESUME_KEYS:
        if old.get(k) == new.get(k):
            continue
        if k == "problems" and isinstance(old.get(k), dict) and isinstance(new.get(k), dict):
            a, b = set(old[k]), set(new[k])
            if a != b:
                out.append(f"the experiments ({', '.join(sorted(a)) or 'none'} there, "
                           f"{', '.join(sorted(b)) or 'none'} now)")
            elif length[0] != length[1]:
                out.append(f"the budgets ({length[0]} there, {length[1]} now)")
            else:
                changed = sorted(n for n in a if old[k][n] != new[k][n])
                out.append(f"the sizes or budgets of {', '.join(changed)}")
        elif k == "quick":
            if old.get("problems") == new.get("problems"):
                out.append(f"the budgets ({length[0]} there, {length[1]} now)")
            # (else said with the problems)
        elif k == "paper_steps_clipped":
            out.append("the clipping of the paper's steps (results made before rssm ran "
                       "them unclipped, Algorithm 1 to the letter)")
        else:
            out.append(k.replace("_", " "))
    return out


def _run_json(path: Path) -> bool:
    """``path`` is the results.json of a run (a JSON object with its settings)."""
    if not path.is_file():
        return False
    try:
        doc = io.read_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("settings"), dict)


def reproduce(configs: dict[str, ProblemConfig], out: str | os.PathLike, seeds: Sequence[int],
              *, quick: bool = False, tuned: bool = False, resume: bool = False,
              overwrite: bool = False, progress: bool | None = None, command: str = "",
              budget_scale: float = 1.0,
              log: Callable[[str], None] | None = None) -> dict:
    """Run the experiments of ``configs`` and write CSV and JSON under ``out``.

    Parameters
    ----------
    configs : dict of str to ProblemConfig
        Problems to run, in order.
    out : path
        Output folder (created).
    seeds : sequence of int
        Data seeds; every method runs on each.
    quick : bool
        Recorded in the settings (the configs carry the budgets).
    tuned : bool
        Also run the tuned part (grid search on `TUNING_SEED`, then every seed).
    resume : bool
        Keep the runs already in ``out``/results.csv and skip them.
    overwrite : bool
        Delete earlier results in ``out`` first.
    progress : bool or None
        Progress bar (tqdm) on stderr or in a notebook; None: when stderr is a terminal
        or the code runs in a Jupyter notebook.
    command : str
        The command line, recorded in the JSON.
    budget_scale : float
        Factor of the configs' budgets against the full ones (recorded in the JSON).
    log : callable, optional
        Receives one-line messages.

    Returns
    -------
    dict
        The JSON document written (settings, machine, runs, tuned choice).

    Raises
    ------
    ValueError
        If ``out`` holds results and neither ``resume`` nor ``overwrite`` is set, or if
        ``resume`` finds results made with different settings.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / CSV_NAME, out / JSON_NAME
    settings = _settings(configs, seeds, quick, tuned, budget_scale)
    seeds = [int(s) for s in seeds]
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    doc: dict
    if csv_path.exists() and not (resume or overwrite):
        raise ValueError(f"--out {out} already holds {CSV_NAME}; pass --resume to continue "
                         "it or --overwrite to start over")
    if not (csv_path.exists() or _run_json(json_path) or overwrite):
        # a folder that holds no run: files with the names the run writes are a user's own
        # (an audit: a user's report.md was replaced without a word; and a results.json
        # of their own turned the check off)
        mine = [p.name for p in [out / "report.md", json_path]
                + [out / f"{name}{suffix}.{fmt}" for name in configs
                   for suffix in ("", "-tuned") for fmt in FIGURE_FORMATS] if p.exists()]
        if mine:
            raise ValueError(f"--out {out} holds {', '.join(mine)} but no {CSV_NAME}: the "
                             "reproduction would replace them; choose another --out or pass "
                             "--overwrite to replace them")
    # Temporary files of writes cut short (kill -9 during os.replace's preparation).
    # (and of figures: a draw killed before its rename leaves .odl.kjpl87qb.pdf)
    stales = list(out.glob(f".{CSV_NAME}.*.tmp")) + list(out.glob(f".{JSON_NAME}.*.tmp"))
    stales += [p for name in PROBLEMS for suffix in ("", "-tuned") for fmt in FIGURE_FORMATS
               for p in out.glob(f"{temp_prefix(name + suffix)}*.{fmt}")]
    for stale in stales:
        stale.unlink(missing_ok=True)
    if overwrite:
        # "start over": where the folder holds a run, its figures and report go too (they
        # were left beside the new results, drawn from runs no longer in them); a folder
        # without one keeps every file
        olds = [csv_path, json_path]
        if csv_path.exists() or json_path.exists():
            olds += [out / "report.md"]
            olds += [out / f"{name}{suffix}.{fmt}" for name in PROBLEMS
                     for suffix in ("", "-tuned") for fmt in FIGURE_FORMATS]
        for p in olds:
            if p.exists():
                p.unlink()
    done_rows: list[dict] = []
    if resume and csv_path.exists() and not json_path.exists():
        raise ValueError(f"--resume: {csv_path} has no {JSON_NAME} beside it, so its settings "
                         "are unknown; use another --out or --overwrite")
    if resume and json_path.exists():
        try:
            doc = io.read_run_json(json_path)
        except ValueError as exc:
            raise ValueError(f"--resume: {exc}; use another --out or --overwrite") from None
        differ = _differences(doc.get("settings", {}), settings)
        if differ:
            raise ValueError(f"--resume: {json_path} was written with other settings: "
                             f"{'; '.join(differ)} differ; use the same ones, another --out "
                             "or --overwrite")
        # seeds and the tuned part may grow on resume, and neither shrinks: a resume
        # without --tuned kept the tuned rows but dropped Part 2 from the report
        kept_tuned = bool(doc.get("settings", {}).get("tuned")) and not tuned
        if kept_tuned:
            settings["tuned"] = True
        doc["settings"] = settings
        if csv_path.exists():
            done_rows = io.read_rows(csv_path)
    else:
        if csv_path.exists():
            csv_path.unlink()
        doc = {"settings": settings, "runs": [], "tuned_choice": {}}
    doc["command"] = command
    doc.setdefault("history", []).append(
        {"command": command,
         "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    doc["machine"] = io.machine_info()
    doc.setdefault("started", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    doc.setdefault("tuned_choice", {})
    done = io.finished_runs(done_rows)
    # What the tables and figures will use: the seeds asked for now and those of runs kept
    # from earlier (``--resume`` with fewer ``--seeds`` keeps them).
    kept = {int(r["seed"]) for r in done_rows if r["part"] in ("paper", "tuned")}
    doc["settings"]["requested_seeds"] = list(seeds)
    doc["settings"]["seeds"] = sorted(set(seeds) | kept)
    # A run is finished when its rows are in the CSV (the CSV is written first).
    doc["runs"] = [r for r in doc["runs"] if tuple(r["key"]) in done]
    logged = {tuple(r["key"]) for r in doc["runs"]}
    done_by_key: dict[tuple, list[dict]] = {}
    for r in done_rows:
        done_by_key.setdefault(tuple(r[c] for c in io.RUN_KEY), []).append(r)
    io.write_json(json_path, doc)

    n_total = 0
    for cfg in configs.values():
        n_total += len(seeds) * len(PAPER_METHODS)
        if tuned:
            n_total += (len(cfg.tuned_grid) + 2 * len(seeds)) * len(PAPER_METHODS)
    bar = ProgressBar(n_total, enabled=progress)
    say = log or (lambda msg: None)
    if resume and settings["tuned"] and not tuned:
        say(f"{json_path.parent}: its tuned part (--tuned earlier) stays in the report; "
            "pass --tuned to run it for new seeds too")
    t_start = time.perf_counter()
    n_run = 0

    def execute(plan: list[RunSpec]) -> None:
        nonlocal n_run
        cache: dict[int, tuple] = {}
        cfg = configs[plan[0].problem] if plan else None
        for spec in plan:
            if spec.key in done:
                if spec.key not in logged and spec.key in done_by_key:
                    # killed between the CSV append and the JSON write: rebuild the entry
                    doc["runs"].append(_summary_from_rows(spec, done_by_key[spec.key]))
                    logged.add(spec.key)
                    io.write_json(json_path, doc)
                bar.skip()
                continue
            if spec.seed not in cache:
                cache.clear()
                cache[spec.seed] = cfg.build(spec.seed)
            problem, x0 = cache[spec.seed]
            bar.start(spec.label)
            rows, summary = run_one(spec, problem, x0)
            io.append_rows(csv_path, rows)
            done.add(spec.key)
            if spec.key not in logged:
                doc["runs"].append(summary)
                logged.add(spec.key)
            doc["elapsed"] = doc.get("elapsed", 0.0) + summary["wall"]
            io.write_json(json_path, doc)
            bar.finish()
            n_run += 1
            say(f"[{bar.done}/{bar.total}, ETA {format_seconds(bar.eta())}] {spec.label}: "
                f"{summary['n_iter']} iterations, {summary['time']:.2f} s, "
                f"final error {summary['final_error']:.3g} ({summary['stop_reason']})")

    try:
        for cfg in configs.values():
            execute(plan_paper(cfg, seeds))
            if tuned:
                execute(plan_tuning(cfg))
                rows = io.read_rows(csv_path)
                choice = choose_tuned(cfg, rows)
                doc["tuned_choice"][cfg.name] = choice
                io.write_json(json_path, doc)
                execute(plan_tuned(cfg, seeds, choice))
                execute(plan_auto(cfg, seeds))
    finally:
        bar.close()
    doc["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    doc["session_seconds"] = time.perf_counter() - t_start
    io.write_json(json_path, doc)
    return doc
