"""The compile pipeline: a spec path in; located diagnostics, and rendered files when clean, out.

load -> schema -> model -> passes (in order) -> facts -> lower -> render. It stops after the first
stage or pass that reports an error; the facts are derived once, after every pass is clean. Writing
is the caller's (see emit).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from compiler.back.facts import Facts, derive
from compiler.back.lower import Plan, lower
from compiler.back.render import render
from compiler.check.passes import passes
from compiler.check.target_env import Environment, current_environment
from compiler.diagnostics import Diagnostic, has_errors, sort_key
from compiler.front import model, schema, source


@dataclass
class Result:
    spec_file: Path
    diagnostics: list[Diagnostic] = field(default_factory=list)
    facts: Facts | None = None
    plan: Plan | None = None
    files: dict[str, str] = field(default_factory=dict)
    out_dir: Path | None = None
    environment: Environment | None = None
    document: source.Document | None = None  # the loaded spec, to locate diagnostics found after the pipeline

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    def locate(self, found: list[Diagnostic]) -> list[Diagnostic]:
        """Diagnostics of a later stage (emit) in, each placed at its path in the spec out."""
        return _locate(self.document, found) if self.document is not None else found


def _locate(doc: source.Document, found: list[Diagnostic]) -> list[Diagnostic]:
    out = []
    for d in found:
        if d.line is None:
            line, col = doc.locate(d.path, d.at_key)
            d = d.located(line, col)
        out.append(d)
    return sorted(out, key=sort_key)


def analyze(spec_file: Path,
            env: Environment | None = None) -> tuple[Result, source.Document | None, model.Spec | None]:
    """Run every checking stage against `env` (default: this interpreter, probed); the Spec (and
    `result.facts`) only when clean."""
    spec_file = Path(os.path.abspath(spec_file))
    env = env if env is not None else current_environment()
    result = Result(spec_file=spec_file, environment=env)
    doc, found = source.load(spec_file)
    if doc is None:
        result.diagnostics = found
        return result, None, None
    result.document = doc
    found = schema.check(doc.data)
    if has_errors(found):
        result.diagnostics = _locate(doc, found)
        return result, doc, None
    spec = model.build(doc.data, spec_file, doc.text)
    diagnostics: list[Diagnostic] = list(found)
    for _name, run_pass in passes(env):
        diagnostics.extend(run_pass(spec))
        if has_errors(diagnostics):
            result.diagnostics = _locate(doc, diagnostics)
            return result, doc, None
    result.diagnostics = _locate(doc, diagnostics)
    result.facts = derive(spec)
    result.out_dir = result.facts.output_dir
    return result, doc, spec


def compile_spec(spec_file: Path, env: Environment | None = None) -> Result:
    """Check, lower and render for `env`; files are filled in only when there is no error."""
    result, _doc, spec = analyze(spec_file, env)
    if spec is None:
        return result
    assert result.facts is not None and result.environment is not None
    result.plan = lower(spec, result.facts, result.environment)
    result.files = render(result.plan)
    return result
