"""Which output folder a command means: what `qas run` accepts (an output folder, its run_manifest.yaml, or the spec)
in; the output folder holding run_manifest.yaml out, or a one-line error with a hint.

A spec is only read (loaded, schema-checked, its output.dir resolved against its folder): reading a finished
search must not need the model, the data or the packages a compile checks.
"""

from __future__ import annotations

import os
from pathlib import Path

from compiler.diagnostics import has_errors
from compiler.runtime.contract import MANIFEST_FILE


def resolve_out_dir(target: Path) -> Path | str:
    """An output folder, a run_manifest.yaml or a spec in; the output folder out (it holds run_manifest.yaml), or an
    error line."""
    from compiler.commands.run import manifest_target

    if target.is_dir():
        if not (target / MANIFEST_FILE).is_file():
            return (f"no {MANIFEST_FILE} in {target}\n  hint: give the output folder of a compiled search, or its "
                    f"spec")
        return target
    if not target.is_file():
        return f"no output folder, {MANIFEST_FILE} or spec at {target}"
    spec = manifest_target(target)
    if isinstance(spec, str):
        return spec
    if spec is not None:  # a qas run_manifest.yaml: its folder
        return target.parent
    out = _spec_out_dir(target)
    if isinstance(out, str):
        return out
    if not (out / MANIFEST_FILE).is_file():
        return (f"{target} writes to {out}, which holds no {MANIFEST_FILE}\n"
                f"  hint: compile and run it first: qas run {target}")
    return out


def _spec_out_dir(spec_file: Path) -> Path | str:
    """A spec in; its output.dir (relative to the spec's folder) out, or an error line when it does not load."""
    from compiler.check.resolved import spec_path
    from compiler.front import model, schema, source

    doc, found = source.load(Path(os.path.abspath(spec_file)))
    if doc is None or has_errors(found):
        return f"{spec_file} is not a readable spec\n  hint: qas validate {spec_file} says why"
    if has_errors(schema.check(doc.data)):
        return f"{spec_file} does not pass the spec schema\n  hint: qas validate {spec_file} says why"
    spec = model.build(doc.data, Path(os.path.abspath(spec_file)), doc.text)
    return spec_path(spec, spec.output.dir)
