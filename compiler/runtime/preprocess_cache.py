"""Quark's two graph simplifications once per input, in the quantizer's process: onnxslim's and onnxruntime's graph
optimizations wrapped where Quark's pre-processing (quark/onnx/preprocess/preproc.py) looks them up; the same input
model (and onnxslim options) gives back the model the first call produced.

They are most of Quark's pre-processing, itself about 40 % of a quantization whose ranges come from the calibration
cache, and each is a function of its input model alone: that model (as bytes, with the options for onnxslim) is the
key, so a hit is exactly what the call would have returned, whatever else the trial's configuration changes. Not
cached: models with external data (their weights are files beside the temporary model, not in the key).
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEPT = 8  # results kept per function (each a whole model: a search sees one or a few distinct inputs)


class PreprocessCache:
    """In-memory: (function, key) -> the result model's bytes; on while `enabled` (search.calibration_cache)."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.installed = False
        self.enabled = False
        self.hits = 0

    def install(self) -> None:
        """Wrap the two functions in preproc.py's namespace (once per process)."""
        import quark.onnx.preprocess.preproc as preproc

        if self.installed:
            return
        preproc.optimize_model_using_onnxslim = self._slim(preproc.optimize_model_using_onnxslim)
        preproc.optimize_model_using_onnxrt = self._onnxrt(preproc.optimize_model_using_onnxrt)
        self.installed = True

    def _slim(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def cached(inp_model: Any, config: dict[str, Any] | None = None) -> Any:
            if not self.enabled or _has_external_data(inp_model):
                return function(inp_model, config or {})
            key = _digest(inp_model.SerializeToString(), repr(sorted((config or {}).items())).encode())
            return self._answer(("onnxslim", key), lambda: function(inp_model, config or {}))
        return cached

    def _onnxrt(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def cached(inp_model: Any, opt_model_path: Path) -> Any:
            data = Path(inp_model).read_bytes() if isinstance(inp_model, str | Path) else inp_model.SerializeToString()
            if not self.enabled or _has_external_data(data):
                return function(inp_model, opt_model_path)
            result = self._answer(("onnxruntime", _digest(data)), lambda: function(inp_model, opt_model_path))
            if not Path(opt_model_path).exists():  # the file the call writes, as it would have
                Path(opt_model_path).write_bytes(result.SerializeToString())
            return result
        return cached

    def _answer(self, key: tuple[str, str], compute: Callable[[], Any]) -> Any:
        """The stored result as a fresh model (Quark mutates what it gets back), or computed and stored."""
        import onnx

        if key in self.entries:
            self.entries.move_to_end(key)
            self.hits += 1
            return onnx.load_from_string(self.entries[key])
        result = compute()
        self.entries[key] = result.SerializeToString()
        while sum(1 for k in self.entries if k[0] == key[0]) > KEPT:
            del self.entries[next(k for k in self.entries if k[0] == key[0])]
        return result


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def _has_external_data(model: Any) -> bool:
    """True when an initializer keeps its data in a file (then the bytes are not the whole input)."""
    import onnx

    if isinstance(model, bytes):
        model = onnx.ModelProto.FromString(model)
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


PREPROCESS = PreprocessCache()  # the process's one cache: Quark's functions are wrapped once
