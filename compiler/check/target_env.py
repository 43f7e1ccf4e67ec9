"""The target environment: an interpreter path (probed) or a --target-env file in; an Environment or an error line out.

The probe is `env_probe.py` run once in that interpreter, in a subprocess with a timeout; the
compiler itself never imports the probed packages. Errors are returned as strings (they are
usage errors of the command line, not spec diagnostics).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from compiler.resources import load_schema

PROBE_SCRIPT = Path(__file__).resolve().parent / "env_probe.py"
PROBE_TIMEOUT_S = 120


@dataclass(frozen=True)
class Environment:
    source: str  # "probe" | "target-env"
    origin: str  # the interpreter as given, or the target-env file
    document: dict[str, Any]  # an env_context document (see schemas/target_env.schema.json)

    @property
    def python_version(self) -> str:
        return self.document["environment"]["python"]

    @property
    def packages(self) -> dict[str, str | None]:
        return self.document["environment"]["packages"]

    @property
    def providers(self) -> list[str]:
        return self.document["environment"]["onnxruntime_providers"]

    @property
    def torch_build(self) -> str | None:
        return self.document["environment"]["torch_build"]

    @property
    def gpu_count(self) -> int | None:
        return self.document["hardware"].get("gpu_count")

    @property
    def python_command(self) -> str:
        """How install hints name the interpreter."""
        return self.origin if self.source == "probe" else "python"


def probe(python: str) -> Environment | str:
    """Run the probe in `python`; the Environment, or a one-line reason it could not be probed."""
    try:
        done = subprocess.run([python, "-I", str(PROBE_SCRIPT)], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return f"--python {python}: no such interpreter"
    except PermissionError:
        return f"--python {python}: not executable"
    except subprocess.TimeoutExpired:
        return f"--python {python}: the environment probe did not finish in {PROBE_TIMEOUT_S} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"--python {python}: the environment probe failed: {last}"
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"--python {python}: the environment probe printed no JSON (is it a Python interpreter?)"
    problem = _schema_problem(document)
    if problem:
        return f"--python {python}: unexpected probe output: {problem}"
    return Environment(source="probe", origin=python, document=document)


def load_target(path: Path) -> Environment | str:
    """Read and check a --target-env file; the Environment, or 'FILE:LINE:COL: reason'."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        return f"{path}: cannot read the target environment: {error.strerror or error}"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        return f"{path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
    problem = _schema_problem(document)
    if problem:
        return f"{path}: {problem} (write one on the target machine with `qas env > {shlex.quote(path.name)}`)"
    return Environment(source="target-env", origin=str(path), document=document)


def _schema_problem(document: Any) -> str | None:
    validator = jsonschema.Draft202012Validator(load_schema("target_env.schema.json"))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
    return f"at {where}: {first.message}"


def describe(env: Environment, needed: list[str]) -> dict[str, Any]:
    """The facts recorded in the manifest: where they came from and the versions of what the script needs."""
    return {
        "source": env.source,
        "python": env.python_version,
        "os": env.document["environment"]["os"],
        "accelerator": env.document["hardware"]["accelerator"],
        "torch_build": env.torch_build,
        "onnxruntime_providers": list(env.providers),
        "packages": {name: env.packages.get(name) for name in needed},
    }


@cache
def current_environment() -> Environment:
    """This interpreter, probed once per process; a probe failure here is a bug, not a user error."""
    found = probe(sys.executable)
    if isinstance(found, str):
        raise RuntimeError(found)
    return found
