"""Benchmark: one search with 1 and 2 worker processes, and the study's storage (journal file or PostgreSQL), side by
side: flags in, a table or JSON out.

1. Scaling. bench/make_models.py builds resnetish (6.3 MB, 50 nodes; 16 calibration, 8 evaluation samples) in a temp
   workspace; its spec searches a custom space with `sampler: Grid` (activation Int8/UInt8 x calibration MinMax,
   Percentile, MinMSE x weight Int8/Int16 x CLE with -1 or 1 steps or none: 36 plain configurations, the first
   --trials of them, every one distinct and run once; 1-5 s each on one core). Per run the output folder is removed,
   the spec compiled with `python -m compiler compile` and `<out>/<name>_autosearch.py --workers N` run as a
   subprocess (N = 1, 2; the launcher pins worker K to its share of the cores). Measured: wall time of the whole
   script (interpreter start-up, quark/torch imports, float score and the end's best_model/plots included); the
   search phase alone, first trial start to last trial end from the study (Optuna's datetime_start/complete, read
   with JournalStorage(JournalFileBackend)); both as trials per hour and the 2-vs-1 ratio; and, to say why a ratio
   falls short of 2: the CPU seconds the run's processes used (getrusage of the waited children) per wall second,
   the median trial duration, each worker's start-up (its process start to its first trial, from the launcher's
   start), the workers' idle time between their own trials, and how far apart the workers' last trials end.
   Also, unless --no-postgres, the same spec with 1 worker on PostgreSQL (`storage: {url_env: ...}`, a fresh
   database per run): its wall time against the journal file's. The configurations alternate which runs first
   from one round to the next (--rounds), and the check that every run completed exactly the same trials is printed.
2. Storage cost of one trial, without quantization: compiler.runtime.search.Search driven in this process with
   an instant fake quantizer (writes the config to the model file) and scorer (a number from the config), for
   --storage-trials trials on each storage, two ways: the grid stage (sampler Grid: slots queued by index) and the
   sampler stage (Random sampler, one stage, a 1..10^6 integer range so the draws are distinct). ms per trial of
   Search.run (claiming a slot, the trial's attributes, tell, the models' pruning and the reuse look-up; opening the
   study and queueing the slots are reported apart as "open"), and the ratio PostgreSQL/journal.

PostgreSQL: a real server in a temp dir, started the way tests/conftest.py's Postgres class does (its minimum
copied here, not imported: a bench imports no test module): initdb and pg_ctl from `pg_config --bindir` or
/usr/lib/postgresql/*/bin, as the `postgres` user when run as root, trust authentication, 127.0.0.1 on a free
port, fsync off; stopped and removed at the end.

The machine is shared and noisy: the table prints its cores and the load average before and after; read the
ratios, not the absolute seconds. Takes 7-13 minutes on 2 CPU cores with the defaults.

  .venv/bin/python bench/workers.py [--trials 24] [--rounds 2] [--storage-trials 100] [--no-postgres] [--json]
                                    [--keep]

Measured 2026-12-03 on 2 shared cores, defaults, other work taking 0.04-0.08 cores: 2 workers / 1 worker 1.21 in
trials per hour of wall time, 1.29 in the search phase (target 1.6, not met): one worker already used 1.33 cores
(onnxruntime's threads), two got 1.78 of the 2 (1.33x the CPU), and each trial cost 1.10x the CPU (trials per CPU
hour 0.91: two start-ups, one core per trial); worker 0 ran 15-16 of the 24 trials, worker 1 8-9. PostgreSQL vs
the journal file: 182-204 vs 6.4-6.9 ms of storage per trial (26-32x); end to end with 1 worker 1.14x the wall time
(+3 s start-up, +77 ms between trials). A run 15 minutes earlier, with other containers taking 1.2-1.5 of the 2
cores, measured 0.72: read 'others' share' before the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import itertools
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import make_models  # noqa: E402 - bench/ is on the path only now

NAME = "resnetish"
URL_ENV = "QAS_BENCH_STORAGE_URL"
SPEC = """qas: 1
name: resnetish
model: models/resnetish.onnx
calibration:
  folder: data/calib
evaluation:
  metric: L2
  data:
    folder: data/eval
search:
  space:
    activation: [Int8Spec, UInt8Spec]
    activation_params:
      calibration_method: [MinMax, Percentile, MinMSE]
      only_if: activation
    weight: [Int8Spec, Int16Spec]
    cle_algo: [cle, null]
    cle_params:
      cle_steps: [-1, 1]
      only_if: {{cle_algo: cle}}
  sampler: Grid
  n_trials: {trials}
device: cpu
output:
  dir: out
{storage}"""
GRID_CONFIGS = 36
PG_USER = "postgres"


# --- 1. Scaling: the compiled script with 1 and 2 workers -----------------------------------------------------------
def workspace(root: Path) -> Path:
    folder = root / "workspace"
    make_models.make(NAME, folder, 16, 8)
    return folder


def run_search(folder: Path, trials: int, workers: int, url: str | None) -> dict[str, Any]:
    """Compile the spec into a clean output folder and run its script with `workers` workers; the figures out."""
    storage = f"storage: {{url_env: {URL_ENV}}}\n" if url else ""
    spec = folder / "spec.yaml"
    spec.write_text(SPEC.format(trials=trials, storage=storage), encoding="utf-8")
    shutil.rmtree(folder / "out", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], cwd=REPO, env=env,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        raise SystemExit(f"workers: compile failed:\n{compiled.stdout}{compiled.stderr}")
    from ruamel.yaml import YAML

    manifest = YAML(typ="safe").load(folder / "out" / "run_manifest.yaml")
    script = folder / "out" / manifest["outputs"]["script"]
    run_env = {**os.environ, **({URL_ENV: url} if url else {})}
    before, busy_before = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_s()
    start = time.time()
    done = subprocess.run([sys.executable, str(script), "--workers", str(workers)], cwd=folder, env=run_env,
                          capture_output=True, text=True)
    end = time.time()
    after, busy_after = resource.getrusage(resource.RUSAGE_CHILDREN), machine_busy_s()
    if done.returncode != 0:
        raise SystemExit(f"workers: the script with {workers} worker(s) exited {done.returncode}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    trials_seen = read_trials(folder / "out" / manifest["outputs"]["study"]["db"], url)
    summary = summarize(trials_seen, start, end, cpu, workers)
    if busy_before is not None and busy_after is not None:  # every process on the machine, ours and others'
        summary["machine_busy_cores"] = round((busy_after - busy_before) / (end - start), 2)
        summary["others_busy_cores"] = round(summary["machine_busy_cores"] - summary["cpu_per_wall"], 2)
    return summary


def machine_busy_s() -> float | None:
    """CPU seconds the whole machine has spent busy (all processes, also those of other containers; /proc/stat's
    user, nice, system, irq, softirq and steal), or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def read_trials(journal: Path, url: str | None) -> list[dict[str, Any]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if url:
        storage: Any = optuna.storages.RDBStorage(url)
    else:
        from optuna.storages.journal import JournalFileBackend

        storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    found = []
    for name in optuna.get_all_study_names(storage):
        for t in optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False):
            if t.state.name != "COMPLETE":
                continue
            found.append({"start": t.datetime_start.timestamp(), "end": t.datetime_complete.timestamp(),
                          "worker": t.user_attrs.get("worker", "?").split("@")[0],
                          "config": json.dumps(t.user_attrs.get("config"), sort_keys=True)})
    return sorted(found, key=lambda t: t["start"])


def summarize(trials: list[dict[str, Any]], start: float, end: float, cpu: float, workers: int) -> dict[str, Any]:
    wall = end - start
    search = trials[-1]["end"] - trials[0]["start"]
    by_worker: dict[str, list[dict[str, Any]]] = {}
    for t in trials:
        by_worker.setdefault(t["worker"], []).append(t)
    idle = sum(b["start"] - a["end"] for ts in by_worker.values() for a, b in itertools.pairwise(ts))
    last_ends = [ts[-1]["end"] for ts in by_worker.values()]
    return {
        "workers": workers, "trials": len(trials), "configs": sorted({t["config"] for t in trials}),
        "wall_s": round(wall, 2), "search_s": round(search, 2),
        "trials_per_hour_wall": round(len(trials) * 3600 / wall, 1),
        "trials_per_hour_search": round(len(trials) * 3600 / search, 1),
        "cpu_s": round(cpu, 1), "cpu_per_wall": round(cpu / wall, 2),
        "trials_per_cpu_hour": round(len(trials) * 3600 / cpu, 1),
        "median_trial_s": round(statistics.median(t["end"] - t["start"] for t in trials), 2),
        "trial_s_sum": round(sum(t["end"] - t["start"] for t in trials), 1),
        "startup_s": {w: round(ts[0]["start"] - start, 2) for w, ts in sorted(by_worker.items())},
        "trials_by_worker": {w: len(ts) for w, ts in sorted(by_worker.items())},
        "idle_between_trials_s": round(idle, 2),
        "last_trial_end_spread_s": round(max(last_ends) - min(last_ends), 2),
        "tail_s": round(end - trials[-1]["end"], 2),
    }


def scaling(root: Path, trials: int, rounds: int, pg: PgServer | None) -> dict[str, Any]:
    folder = workspace(root)
    kinds = [("1 worker, journal", 1, False), ("2 workers, journal", 2, False)]
    if pg is not None:
        kinds.append(("1 worker, PostgreSQL", 1, True))
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k, _, _ in kinds}
    for index in range(rounds):
        order = kinds if index % 2 == 0 else kinds[::-1]  # alternate who goes first: drift hits all
        for label, workers, on_pg in order:
            url = pg.new_database() if on_pg and pg is not None else None
            runs[label].append({"round": index + 1, "load_before": load_average(),
                                **run_search(folder, trials, workers, url)})
    one, two = runs["1 worker, journal"], runs["2 workers, journal"]
    configs = {json.dumps(r["configs"]) for rs in runs.values() for r in rs}
    counts = {r["trials"] for rs in runs.values() for r in rs}
    result: dict[str, Any] = {
        "spec": f"{NAME}, sampler Grid, {trials} of {GRID_CONFIGS} configurations", "runs": runs,
        "same_trials": len(counts) == 1 and counts == {trials} and len(configs) == 1,
        "trials_each": sorted(counts),
        "ratio_2_vs_1": {
            "trials_per_hour_wall": ratio(median(two, "trials_per_hour_wall"), median(one, "trials_per_hour_wall")),
            "trials_per_hour_search": ratio(median(two, "trials_per_hour_search"),
                                            median(one, "trials_per_hour_search")),
            "median_trial_s": ratio(median(two, "median_trial_s"), median(one, "median_trial_s")),
            "cpu_per_wall": ratio(median(two, "cpu_per_wall"), median(one, "cpu_per_wall")),
            "trials_per_cpu_hour": ratio(median(two, "trials_per_cpu_hour"), median(one, "trials_per_cpu_hour"))},
    }
    if pg is not None:
        on_pg = runs["1 worker, PostgreSQL"]
        result["ratio_postgres_vs_journal_1_worker"] = {
            "wall_s": ratio(median(on_pg, "wall_s"), median(one, "wall_s")),
            "search_s": ratio(median(on_pg, "search_s"), median(one, "search_s"))}
    for rs in runs.values():
        for r in rs:
            del r["configs"]
    return result


# --- 2. The storage's cost of one trial ------------------------------------------------------------------------------
class InstantQuark:
    """The fake quantizer and scorer: the config written as the model file, a value made from it."""

    def quantize(self, config: dict[str, Any], output: Path) -> None:
        output.write_text(json.dumps(config, sort_keys=True), encoding="utf-8")

    def score(self, model: Path) -> float:
        return (zlib.crc32(model.read_bytes()) % 100000) / 100000.0




GRID_SPACE_KEYS = ("a", "b", "c")  # a product of lists: 10 x 10 x 10 configurations, the first N run


def fake_settings(folder: Path, stage: str, trials: int, storage: dict[str, Any]) -> Any:
    from compiler.runtime.settings import Settings

    if stage == "grid":
        space: dict[str, Any] = {key: list(range(10)) for key in GRID_SPACE_KEYS}
        sampler, grid = "Grid", trials
    else:
        space = {"algorithms": ["adaround"],
                 "adaround_params": {"num_iterations": {"type": "int", "low": 1, "high": 1_000_000},
                                     "only_if": {"algorithms": "adaround"}}}
        sampler, grid = "Random", 0
    folder.mkdir(parents=True)
    return Settings(
        script=str(folder / "fake_autosearch.py"), engine="qas", spec_hash="s", space_hash="h", device="cpu",
        torch_device="cpu", model="model.onnx", model_sha256={}, calibration={"folder": "calib", "limit": None},
        eval_data=None, metric="L2", evaluator=None, direction="minimize", sampler=sampler, seed=0, n_trials=trials,
        two_stage=False, grid_configs=grid, study_name=f"bench-{stage}",
        study_db="bench_study.journal" if storage["kind"] == "journal" else "bench_study", resume=True, plots=False,
        temp_dir="tmp", requirements={}, search_space=space, storage=storage)


def product_configs(space: dict[str, Any]) -> list[dict[str, Any]]:
    import itertools

    keys = [k for k, v in space.items() if isinstance(v, list)]
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(space[k] for k in keys))]


def storage_trial_cost(root: Path, stage: str, kind: str, trials: int, pg: PgServer | None) -> dict[str, Any]:
    from compiler.runtime.search import Search
    from compiler.runtime.space import stage_configs

    storage: dict[str, Any] = {"kind": "journal"}
    if kind == "postgres":
        os.environ[URL_ENV] = pg.new_database()
        storage = {"kind": "url", "env": URL_ENV, "heartbeat": 10.0, "grace": 60.0}
    settings = fake_settings(root / f"{stage}-{kind}", stage, trials, storage)
    fake = InstantQuark()
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        opened = time.perf_counter()
        search = Search(settings)
        search.attach(fake.quantize, fake.score)
        configs = stage_configs(settings.search_space, settings.sampler, settings.two_stage, settings.n_trials,
                                product_configs)
        started = time.perf_counter()
        code = search.run(configs)
        ended = time.perf_counter()
    done = len(search.trials("COMPLETE"))
    if code is not None or done != trials:
        raise SystemExit(f"workers: the fake {stage} search on {kind} ended with {code}, {done} of {trials} trials:\n"
                         f"{quiet.getvalue()[-2000:]}")
    return {"trials": done, "open_s": round(started - opened, 3), "run_s": round(ended - started, 3),
            "ms_per_trial": round((ended - started) * 1000 / trials, 2)}


def storage_costs(root: Path, trials: int, pg: PgServer | None) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kinds = ["journal"] + (["postgres"] if pg is not None else [])
    found: dict[str, Any] = {}
    for index, stage in enumerate(("grid", "sampler")):
        order = kinds if index % 2 == 0 else kinds[::-1]
        found[stage] = {kind: storage_trial_cost(root, stage, kind, trials, pg) for kind in order}
        if pg is not None:
            found[stage]["ratio_postgres_vs_journal"] = ratio(found[stage]["postgres"]["ms_per_trial"],
                                                              found[stage]["journal"]["ms_per_trial"])
    return found


# --- A PostgreSQL server in a temp dir (the minimum of tests/conftest.py's Postgres) --------------------------------
class PgServer:
    """initdb + pg_ctl start on 127.0.0.1:<free port> (as `postgres` when root); fresh databases; stop and remove."""

    def __init__(self, root: Path) -> None:
        self.bindir = pg_bindir()
        if self.bindir is None:
            raise SystemExit("workers: PostgreSQL's initdb and pg_ctl were not found (install Debian's `postgresql`, "
                             "or pass --no-postgres)")
        self.root, self.data, self.port, self.databases = root, root / "data", 0, 0
        self.as_user: list[str] = []
        root.mkdir(parents=True)
        (root / "sockets").mkdir()
        if os.geteuid() == 0:  # the server refuses root
            import pwd

            owner = pwd.getpwnam(PG_USER)
            for path in (root, root / "sockets"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", PG_USER, "--"]

    def run(self, *args: str) -> None:
        ran = subprocess.run([*self.as_user, str(self.bindir / args[0]), *args[1:]], capture_output=True, text=True,
                             cwd=self.root, timeout=120)
        if ran.returncode != 0:
            raise SystemExit(f"workers: {args[0]} exited {ran.returncode}:\n{ran.stdout}{ran.stderr}")

    def start(self) -> None:
        self.run("initdb", "-D", str(self.data), "-A", "trust", "-U", PG_USER, "-E", "UTF8", "--locale=C", "--no-sync")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60",
                 "-o", f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root / 'sockets'} -c fsync=off")

    def new_database(self) -> str:
        import psycopg

        self.databases += 1
        name = f"qas_bench_{self.databases}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres", autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast",
                            "-w"], capture_output=True, timeout=120)


def pg_bindir() -> Path | None:
    candidates = []
    if pg_config := shutil.which("pg_config"):
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if found.returncode == 0:
            candidates.append(Path(found.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True,
                         key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()])
    return next((c for c in candidates if (c / "initdb").is_file() and (c / "pg_ctl").is_file()), None)


@contextlib.contextmanager
def postgres(root: Path, wanted: bool) -> Iterator[PgServer | None]:
    if not wanted:
        yield None
        return
    server = PgServer(root / "postgres")
    try:
        server.start()
        yield server
    finally:
        server.stop()


# --- Helpers, the table ----------------------------------------------------------------------------------------------
def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def ratio(a: float, b: float) -> float | None:
    return None if b == 0 else round(a / b, 3)


def print_table(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(f"{report['when']} on {m['host']}: {m['cpus']} CPUs ({m['affinity']} usable), load average "
          f"{m['load_before']} before, {m['load_after']} after")
    s = report["scaling"]
    print(f"\n1. scaling: {s['spec']}; every run completed the same {s['trials_each']} trial(s), same configurations: "
          f"{'yes' if s['same_trials'] else 'NO'}")
    rows = [("wall time (s)", "wall_s"), ("search phase (s)", "search_s"),
            ("trials/hour, wall", "trials_per_hour_wall"), ("trials/hour, search", "trials_per_hour_search"),
            ("CPU s / wall s", "cpu_per_wall"), ("trials per CPU hour", "trials_per_cpu_hour"),
            ("machine busy (cores)", "machine_busy_cores"), ("others' share (cores)", "others_busy_cores"),
            ("median trial (s)", "median_trial_s"), ("idle between trials (s)", "idle_between_trials_s"),
            ("last trials' end spread (s)", "last_trial_end_spread_s"), ("end after last trial (s)", "tail_s")]
    for label, runs in s["runs"].items():
        print(f"  {label}:")
        for title, key in rows:
            print(f"    {title:<29}" + "".join(f"{r.get(key, '-'):>10}" for r in runs))
        print(f"    {'first trial at (s), by worker':<29}" + "".join(
            f"{'/'.join(str(v) for v in r['startup_s'].values()):>10}" for r in runs))
        print(f"    {'trials by worker':<29}" + "".join(
            f"{'/'.join(str(v) for v in r['trials_by_worker'].values()):>10}" for r in runs))
        print(f"    {'load before':<29}" + "".join(f"{r['load_before'][0]:>10}" for r in runs))
    print("  ratios, 2 workers / 1 worker (medians over rounds):")
    for key, value in s["ratio_2_vs_1"].items():
        print(f"    {key:<29}{value:>10}")
    if "ratio_postgres_vs_journal_1_worker" in s:
        print("  ratios, PostgreSQL / journal file, 1 worker:")
        for key, value in s["ratio_postgres_vs_journal_1_worker"].items():
            print(f"    {key:<29}{value:>10}")
    st = report["storage"]
    print(f"\n2. storage cost of one trial (Search.run with an instant fake quantizer, "
          f"{report['storage_trials']} trials)")
    for stage, kinds in st.items():
        for kind, v in kinds.items():
            if isinstance(v, dict):
                print(f"  {stage:<8} {kind:<9} {v['ms_per_trial']:>8} ms/trial   (open {v['open_s']} s)")
        if "ratio_postgres_vs_journal" in kinds:
            print(f"  {stage:<8} PostgreSQL/journal {kinds['ratio_postgres_vs_journal']}")
    print("\n" + HOW_TO_READ)


HOW_TO_READ = """How to read it: the wall ratio is what a user sees (each worker pays its own ~9 s start-up, so short
searches gain less); the search-phase ratio is the speed-up once the workers run. 2.0 would be perfect on 2 cores.
'CPU s / wall s' (the run's processes) above 1 for one worker means one worker already uses more than one core
(onnxruntime's and torch's threads): that share of the gain is taken before a second worker starts. 'machine busy'
counts every process on the machine (/proc/stat), 'others' share' what was not this run's: cores other work (other
containers on a shared machine, invisible to ps) took from the workers. 'trials per CPU hour' does not depend on
the cores the run got: its 2-vs-1 ratio is the work the second worker adds (its start-up, single-threaded trials). \
A median trial that grows with 2
workers means the workers slow each other (each pinned to one core, memory bandwidth, caches); idle time between
trials and a spread of the last trials' ends mean a worker waited (the claim loop, or nothing left to claim while
the other finishes its last trial). The storage table is the bookkeeping qas adds per trial, quantization aside."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24, help=f"grid configurations to run, 2..{GRID_CONFIGS}")
    parser.add_argument("--rounds", type=int, default=2, help="repeat each configuration, alternating the order")
    parser.add_argument("--storage-trials", type=int, default=100, help="trials of the fake search per storage")
    parser.add_argument("--no-postgres", action="store_true", help="journal file only: no PostgreSQL server")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    if not 2 <= args.trials <= GRID_CONFIGS or args.rounds < 1 or args.storage_trials < 1:
        parser.error(f"--trials must be 2..{GRID_CONFIGS}, --rounds and --storage-trials >= 1")
    root = Path(tempfile.mkdtemp(prefix="qas-bench-workers-"))
    if os.geteuid() == 0:
        os.chmod(root, 0o755)  # the postgres user reaches its data dir below
    machine = {"host": platform.node(), "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
               "load_before": load_average()}
    try:
        with postgres(root, not args.no_postgres) as pg:
            storage = storage_costs(root / "storage", args.storage_trials, pg)
            scale = scaling(root, args.trials, args.rounds, pg)
    finally:
        if args.keep:
            print(f"workers: kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    machine["load_after"] = load_average()
    report = {"when": dt.datetime.now().astimezone().isoformat(timespec="seconds"), "machine": machine,
              "scaling": scale, "storage_trials": args.storage_trials, "storage": storage}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
