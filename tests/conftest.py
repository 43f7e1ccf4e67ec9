"""Shared test helpers: the --update-golden flag, paths, fixtures and the helpers more than one test module uses.

A helper that a second test module needs lives here; test modules import only from .conftest,
never from each other (tests/test_layout.py checks it).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.check.target_env import Environment, load_target

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = REPO / "specs" / "example"
GOLDEN = REPO / "golden"

# Tests that run amd-quark carry the `e2e` marker (pyproject.toml; tests/test_layout.py checks it) and skip where it
# is not installed. Checked without importing it: `import quark.onnx` imports torch and builds Quark's custom ops,
# which collecting the e2e modules for `pytest -m "not e2e"` must not pay for.
needs_quark = pytest.mark.skipif(importlib.util.find_spec("quark") is None, reason="amd-quark is not installed")

# Quark builds its custom ops into torch's extension cache, by default one folder per user and Python version, and a
# build records the absolute paths of the venv it was made in: two venvs on one machine (a checkout's and a CI clone's)
# then rebuild it in turn, about 30 s at every switch. The tests (and the scripts they start) keep one per interpreter.
if "TORCH_EXTENSIONS_DIR" not in os.environ:
    _cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    _key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    os.environ["TORCH_EXTENSIONS_DIR"] = str(_cache / "torch_extensions" / f"qas-tests-{_key}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden/*/expected from the compiler")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of specs/example (spec, model, samples; no outputs) to compile and run in."""
    target = tmp_path / "example"
    shutil.copytree(EXAMPLE_DIR, target, ignore=shutil.ignore_patterns("autosearch_output", "__pycache__"))
    return target


def model_with_external_data(folder: Path, data_bytes: int, missing: bool = False) -> Path:
    """The example model plus one initializer stored in a sparse external file of data_bytes (no real disk used)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"))
    tensor = numpy_helper.from_array(__import__("numpy").zeros(4, "float32"), "unused.weight")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "big.onnx_data"), ("offset", "0"), ("length", "16")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    model.graph.initializer.append(tensor)
    path = folder / "big.onnx"
    path.write_bytes(model.SerializeToString())
    if not missing:
        with open(folder / "big.onnx_data", "wb") as handle:
            handle.truncate(data_bytes)
    return path


def settings_from_script(text: str, script: Path) -> Any:
    """A compiled settings script's text in; its runtime Settings (as compiler.runtime's class) out, without running
    it."""
    from compiler.runtime.settings import Settings

    call = next(n for n in ast.walk(ast.parse(text))
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Settings")
    values = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg != "script"}
    return Settings(script=str(script), **values)


def target_env(case_dir: Path) -> Environment:
    """The case's own target_env.json, else golden/target_env.json: golden output never depends on this machine."""
    own = case_dir / "target_env.json"
    env = load_target(own if own.is_file() else GOLDEN / "target_env.json")
    assert not isinstance(env, str), env
    return env


def qas(*args: str, cwd: Path | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`qas <args>` in a subprocess with this interpreter, output captured as text (TimeoutExpired past timeout)."""
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def compile_and_run(spec: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """`qas compile spec`, then run the script it wrote; both must succeed. Returns the output folder and the run."""
    compiled = subprocess.run([sys.executable, "-m", "compiler", "compile", str(spec)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    out = spec.parent / "autosearch_output"
    script = next(out.glob("*_autosearch.py"))
    return out, run_script(script)


def run_script(script: Path) -> subprocess.CompletedProcess:
    """Run a compiled search script from its spec's folder; it must exit 0 (the tails of its output say why not)."""
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                         cwd=script.parent.parent)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return ran


def qdq_model(path: Path, quant_format: str = "QDQ") -> Path:
    """The example model quantized to QDQ (or QOperator: QLinearConv, ...) by onnxruntime's quantize_static (an
    already-quantized model to refuse)."""
    import numpy as np

    quantization = pytest.importorskip("onnxruntime.quantization")

    class Samples(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.samples = [{"input": np.load(p)} for p in sorted((EXAMPLE_DIR / "data" / "calib").glob("*.npy"))]

        def get_next(self):
            return self.samples.pop() if self.samples else None

    quantization.quantize_static(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"), str(path), Samples(),
                                 quant_format=getattr(quantization.QuantFormat, quant_format))
    return path


def dynamic_model(path: Path) -> Path:
    """The example model quantized by onnxruntime's quantize_dynamic (DynamicQuantizeLinear, ConvInteger,
    MatMulInteger: a dynamically quantized model to refuse)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    quantization.quantize_dynamic(str(EXAMPLE_DIR / "models" / "tinycnn.onnx"), str(path),
                                  weight_type=quantization.QuantType.QUInt8)
    return path


# A real PostgreSQL server for the distributed search's shared Optuna storage: initdb and pg_ctl from Debian's
# `postgresql` (.ci/run installs it where missing), run as the unprivileged `postgres` user when the tests run as root
# (the server refuses root), listening on 127.0.0.1 on a free port with its unix socket in its own temp dir.
PG_USER = "postgres"


def postgres_bindir() -> Path | None:
    """The folder holding the server's initdb and pg_ctl: pg_config's bindir, Debian's newest version folder, PATH."""
    candidates = []
    if pg_config := shutil.which("pg_config"):
        found = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if found.returncode == 0:
            candidates.append(Path(found.stdout.strip()))
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(versions, key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
                         reverse=True)
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)
    return next((c for c in candidates if (c / "initdb").is_file() and (c / "pg_ctl").is_file()), None)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Postgres:
    """A PostgreSQL server of the test session in a temp dir: SQLAlchemy URLs to fresh databases, stop and start.

    `url` is the session's own database; `new_database()` creates another (so tests never see each other's studies);
    `stop()` kills the server abruptly (`pg_ctl stop -m immediate`: what a worker that loses the database sees) and
    `start()` brings it back on the same port, so URLs handed out before stay valid.
    """

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir, self.root = bindir, root
        self.data, self.sockets, self.log = root / "data", root / "sockets", root / "server.log"
        self.port = 0
        self.url = ""
        self._databases = 0
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root: run its programs as the postgres user
            runuser = shutil.which("runuser")
            self._as_user = [runuser, "-u", PG_USER, "--"] if runuser else ["su", PG_USER, "-s", "/bin/sh", "-c"]

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        words = [str(self.bindir / args[0]), *args[1:]]
        if self._as_user[:1] == ["su"]:
            import shlex

            words = [" ".join(shlex.quote(w) for w in words)]
        ran = subprocess.run(self._as_user + words, capture_output=True, text=True, cwd=self.root, timeout=timeout)
        if check and ran.returncode != 0:
            pytest.fail(f"{args[0]} {' '.join(args[1:])} exited {ran.returncode}:\n{ran.stdout}{ran.stderr}"
                        f"{self._log_tail()}", pytrace=False)
        return ran

    def _log_tail(self) -> str:
        try:
            return "\nserver.log (end):\n" + self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def init(self) -> None:
        """Make the data dir (trust authentication, superuser postgres), owned by the user the server runs as."""
        self.sockets.mkdir()
        if self._as_user:
            import pwd

            try:
                owner = pwd.getpwnam(PG_USER)
            except KeyError:
                pytest.fail(f"running as root, the PostgreSQL server needs the unprivileged user {PG_USER!r}, which "
                            "does not exist (Debian's `postgresql` package creates it)", pytrace=False)
            for path in (self.root, self.sockets):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", PG_USER, "-E", "UTF8", "--locale=C",
                  "--no-sync")

    def running(self) -> bool:
        return self._run("pg_ctl", "status", "-D", str(self.data), check=False).returncode == 0

    def start(self, timeout: float = 60) -> None:
        """Start the server (on a new free port the first time, the same port after) and wait until it answers."""
        if self.running():
            return
        for attempt in range(3):
            port = self.port or free_port()
            options = f"-c listen_addresses=127.0.0.1 -p {port} -k {self.sockets} -c fsync=off"
            ran = self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(int(timeout)),
                            "-o", options, check=False, timeout=timeout + 30)
            if ran.returncode == 0:
                self.port = port
                break
            if self.port or attempt == 2:  # a restart keeps its port; a first start tries three free ones
                pytest.fail(f"pg_ctl start exited {ran.returncode}:\n{ran.stdout}{ran.stderr}{self._log_tail()}",
                            pytrace=False)
        self._wait_until_it_answers(timeout)

    def _wait_until_it_answers(self, timeout: float) -> None:
        import time

        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres",
                                     connect_timeout=5):
                    return
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline:
                    pytest.fail(f"PostgreSQL on 127.0.0.1:{self.port} did not accept connections within {timeout} s: "
                                f"{error}{self._log_tail()}", pytrace=False)
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server at once, as a crash would: no clean shutdown, clients' connections cut."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")

    def database_url(self, name: str) -> str:
        return f"postgresql+psycopg://{PG_USER}@127.0.0.1:{self.port}/{name}"

    def new_database(self) -> str:
        """Create an empty database; its SQLAlchemy URL (postgresql+psycopg://postgres@127.0.0.1:PORT/NAME) out."""
        import psycopg

        self._databases += 1
        name = f"qas_test_{self._databases}"
        with psycopg.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres", autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)


@pytest.fixture(scope="session")
def postgres() -> Any:
    """A running PostgreSQL server for the session (see Postgres); fails, never skips, where PostgreSQL is missing."""
    import tempfile

    bindir = postgres_bindir()
    if bindir is None:
        pytest.fail("PostgreSQL's server programs (initdb, pg_ctl) were not found in `pg_config --bindir`, "
                    "/usr/lib/postgresql/*/bin or PATH: install Debian's `postgresql` "
                    "(.ci/run does when it is missing)",
                    pytrace=False)
    server = Postgres(bindir, Path(tempfile.mkdtemp(prefix="qas-postgres-")))
    try:
        server.init()
        server.start()
        server.url = server.new_database()
        yield server
    finally:
        if server.data.is_dir() and server.running():
            server._run("pg_ctl", "stop", "-D", str(server.data), "-m", "immediate", "-w", check=False)
        shutil.rmtree(server.root, ignore_errors=True)


# --- The runtime without amd-quark: a fake quantizer and scorer over a small two-stage space ------------------
SPACE = {
    "activation": ["XInt8Spec", "Int8Spec", "Int16Spec"],
    "activation_params": {"symmetric": [True], "only_if": "activation"},
    "cle_algo": ["cle", None],
    "algorithms": ["adaround", "adaquant"],
    "adaround_params": {"num_iterations": {"type": "int", "low": 10, "high": 50, "step": 10},
                        "only_if": {"algorithms": "adaround"}},
    "adaquant_params": {"num_iterations": {"type": "int", "low": 10, "high": 50, "step": 10},
                        "only_if": {"algorithms": "adaquant"}},
    "OptimizeModel": [True],
}
ACTIVATION_ERROR = {"XInt8Spec": 0.3, "Int8Spec": 0.2, "Int16Spec": 0.1}


def fake_settings(folder: Path, **changes: Any) -> Any:
    """Settings of a two-stage search over SPACE in `folder` (the model itself is never read by the fakes)."""
    values: dict[str, Any] = dict(
        script=str(folder / "fake_autosearch.py"), engine="qas", spec_hash="s", space_hash="h", device="cpu",
        torch_device="cpu", model="model.onnx", model_sha256={}, calibration={"folder": "calib", "limit": None},
        eval_data=None, metric="L2", evaluator=None, direction="minimize", sampler="TPE", seed=0, n_trials=4,
        two_stage=True, grid_configs=6, study_name="fake", study_db="fake_study.journal", resume=True, plots=False,
        temp_dir="tmp", requirements={}, search_space=SPACE, storage={"kind": "journal"})
    values.update(changes)
    from compiler.runtime.settings import Settings

    return Settings(**values)


def product_configs(space: dict[str, Any]) -> list[dict[str, Any]]:
    """A stand-in for Quark's generate_all_configs: the Cartesian product of the top-level lists, in order."""
    keys = [k for k, v in space.items() if isinstance(v, list)]
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(space[k] for k in keys))]


class FakeQuark:
    """Quantizes by writing the config to the model file; scores from the config. Records every quantization."""

    def __init__(self, fail_when: Any = None, interrupt_at: int | None = None) -> None:
        self.quantized: list[dict[str, Any]] = []
        self.fail_when = fail_when or (lambda config: False)
        self.interrupt_at = interrupt_at

    def quantize(self, config: dict[str, Any], output: Path) -> None:
        if self.interrupt_at is not None and len(self.quantized) == self.interrupt_at:
            raise KeyboardInterrupt
        if self.fail_when(config):
            raise RuntimeError("quantizer exploded")
        self.quantized.append(config)
        output.write_text(json.dumps(config, sort_keys=True))

    def score(self, model: Path) -> float:
        config = json.loads(model.read_text())
        tuned = config.get("adaround_params", config.get("adaquant_params", {})).get("num_iterations", 0)
        return ACTIVATION_ERROR[config["activation"]] + (0.05 if config["cle_algo"] is None else 0.0) - tuned / 10000


def study_storage(path: Path) -> Any:
    """An Optuna storage over a study file an output folder holds: the journal (engine qas) or SQLite
    (autosearchpro)."""
    import optuna

    if path.suffix == ".journal":
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    return f"sqlite:///{path}"


# --- A search whose evaluator hangs on cue (for signals and killed workers) ----------------------------------
HANG_SPEC = """qas: 1
name: small
model: models/tinycnn.onnx
calibration: {folder: data/calib, limit: 4}
evaluation: {evaluator: evals.py:size, higher_is_better: false}
search:
  space:
    activation: [Int8Spec]
    activation_params:
      calibration_method: [MinMax, Percentile, Entropy]
      only_if: activation
    weight: [Int8Spec, Int16Spec]
  sampler: TPE
  seed: 3
  n_trials: N_TRIALS
device: cpu
"""

# A small search of the example whose evaluator can hang on cue. Scores a model by its file size. The first worker to
# score a quantized model while `hang` exists claims it (hang.claimed, atomically), writes its pid to `hanging` and
# hangs there, so a test can kill it mid-trial.
HANG_EVALUATOR = '''import os, time
from pathlib import Path

HERE = Path(__file__).parent


def size(model_path):
    if "quantized" in model_path and (HERE / "hang").exists():
        try:
            os.close(os.open(HERE / "hang.claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            (HERE / "hanging").write_text(str(os.getpid()))
            time.sleep(600)
    return os.path.getsize(model_path)
'''


def compile_hanging(folder: Path, n_trials: int, extra: str = "") -> Path:
    """HANG_SPEC (plus `extra` spec lines) and its evaluator compiled in `folder`, with `hang` set; the script out."""
    (folder / "spec.yaml").write_text(HANG_SPEC.replace("N_TRIALS", str(n_trials)) + extra)
    (folder / "evals.py").write_text(HANG_EVALUATOR)
    (folder / "hang").write_text("")
    done = qas("compile", str(folder / "spec.yaml"))
    assert done.returncode == 0, done.stderr
    return folder / "autosearch_output" / "small_autosearch.py"


# --- A model whose plain quantization loses accuracy in one known node --------------------------------------------
def outlier_model(folder: Path, width: int = 16, samples: int = 8) -> Path:
    """A four-Gemm MLP (fc1 relu1 fc2 relu2 fc3 relu3 head) whose fc2 holds one outlier weight (500 among weights of
    about 0.3) on an input that is always 0: harmless in float, but per-tensor int8 weights of fc2 round to 0. Writes
    models/outlier.onnx and data/calib/*.npy (seeded) under `folder`; the model's path out."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def gemm(name: str, x: str, w: Any, b: Any) -> str:
        inits.extend([numpy_helper.from_array(w.astype(np.float32), name + ".w"),
                      numpy_helper.from_array(b.astype(np.float32), name + ".b")])
        nodes.append(helper.make_node("Gemm", [x, name + ".w", name + ".b"], [name], name=name, transB=1))
        return name

    def relu(name: str, x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [name], name=name))
        return name

    w1, b1 = rng.normal(0, 0.3, (width, width)), rng.normal(0, 0.05, width)
    w1[0], b1[0] = 0.0, -1.0  # channel 0 is 0 after relu1
    x = relu("relu1", gemm("fc1", "input", w1, b1))
    w2 = rng.normal(0, 0.3, (width, width))
    w2[:, 0] = 0.0
    w2[3, 0] = 500.0  # the outlier meets channel 0: no effect in float
    x = relu("relu2", gemm("fc2", x, w2, rng.normal(0, 0.05, width)))
    x = relu("relu3", gemm("fc3", x, rng.normal(0, 0.3, (width, width)), rng.normal(0, 0.05, width)))
    x = gemm("head", x, rng.normal(0, 0.3, (10, width)), rng.normal(0, 0.05, 10))
    graph = helper.make_graph(nodes, "outlier", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / "models").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "calib").mkdir(parents=True, exist_ok=True)
    path = folder / "models" / "outlier.onnx"
    onnx.save(model, str(path))
    for i in range(samples):
        np.save(folder / "data" / "calib" / f"{i:02d}.npy", rng.normal(0, 1, (1, width)).astype(np.float32))
    return path
