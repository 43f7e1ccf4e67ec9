"""Bad input never raises: seeded random mutations of valid specs compile to diagnostics or files, never a traceback."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

from ruamel.yaml import YAML

from compiler.commands.pipeline import compile_spec

from .conftest import REPO

POOL = [None, 0, -1, 2.5, 10**12, "x", "", "Int8Spec", "only_if", [], {}, [None], [[1, 0.1]], {"type": "int"},
        {"type": "float", "low": 1, "high": 0}, {"only_if": 3}, {"only_if": {"x": 1, "y": 2}}, True, [[1]],
        {"a": {"b": []}}, {"only_if": "activation", "symmetric": [True]}, ["cle", None]]


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nodes(v, (*path, i))


def _set(data, path, new):
    node = data
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = new


def test_random_mutations_never_raise(tmp_path: Path) -> None:
    rng = random.Random(1234)
    bases = []
    for case in ("override", "custom_space", "grid_sampler", "preset_xint8_clamp"):
        data = YAML(typ="safe").load((REPO / "golden" / case / "spec.yaml").read_text())
        data["model"] = str(REPO / "specs/example/models/tinycnn.onnx")
        data["calibration"] = {"folder": str(REPO / "specs/example/data/calib")}
        bases.append(data)
    spec = tmp_path / "spec.yaml"
    outcomes = set()
    for _ in range(400):
        data = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            paths = [p for p in _nodes(data) if p]
            path = rng.choice(paths)
            if rng.random() < 0.2 and isinstance(path[-1], str):  # rename a key
                parent = data
                for p in path[:-1]:
                    parent = parent[p]
                if isinstance(parent, dict) and path[-1] in parent:
                    parent[path[-1] + rng.choice(["_", "s", ""])] = parent.pop(path[-1])
                continue
            _set(data, path, copy.deepcopy(rng.choice(POOL)))
        spec.write_text(json.dumps(data))
        result = compile_spec(spec)  # must not raise
        outcomes.add(result.ok)
        for d in result.diagnostics:
            assert d.line and d.col and d.message
    assert outcomes == {True, False}
