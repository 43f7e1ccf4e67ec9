"""Hostile YAML is refused fast and located: size (QAS104), nesting depth (QAS105), alias expansion (QAS106).

The CLI cases are the attacks from issue 10 (billion laughs, 5000 nested `[`, 5000 nested
mappings, a 50 MB spec); the unit cases pin the limits at their boundaries. Timings are guards
against minutes, not benchmarks (bench/yaml_limits.py measures).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from compiler.commands.pipeline import compile_spec
from compiler.front import yaml_limits
from compiler.front.source import load

from .conftest import GOLDEN, qas, target_env

GUARD_S = 5.0


def laughs(levels: int = 9, width: int = 9) -> str:
    lines = ["qas: 1", "name: laughs", f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"search: {{preset: *l{levels - 1}}}")
    return "\n".join(lines) + "\n"


def nested(opener: str, closer: str, n: int) -> str:
    return f"qas: 1\nname: deep\nx: {opener * n}1{closer * n}\n"


def write_50mb(spec: Path) -> None:
    with spec.open("w", encoding="utf-8") as handle:
        handle.write("qas: 1\nname: big\n")
        line = "# " + "x" * 97 + "\n"
        handle.write(line * (50 * 1024 * 1024 // len(line)))


# name -> (writer, code, line, col)
ATTACKS = {
    "billion_laughs": (lambda p: p.write_text(laughs()), "QAS106", 6, 30),
    "nested_lists_5000": (lambda p: p.write_text(nested("[", "]", 5000)), "QAS105", 3, 67),
    "nested_mappings_5000": (lambda p: p.write_text(nested("{a: ", "}", 5000)), "QAS105", 3, 256),
    "spec_50mb": (write_50mb, "QAS104", 1, 1),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attacks_are_refused_by_the_cli_located_fast_and_write_nothing(tmp_path: Path, attack: str) -> None:
    writer, code, line, col = ATTACKS[attack]
    spec = tmp_path / "spec.yaml"
    writer(spec)

    start = time.perf_counter()
    loaded, found = load(spec)
    elapsed = time.perf_counter() - start
    assert loaded is None and [(d.code, d.line, d.col) for d in found] == [(code, line, col)]
    assert elapsed < GUARD_S, f"{attack}: refused in {elapsed:.1f}s"

    text = qas("compile", str(spec), timeout=120)
    assert text.returncode == 1, text.stderr
    assert f"spec.yaml:{line}:{col}: error[{code}]: " in text.stderr and "  hint: " in text.stderr
    assert "Traceback" not in text.stderr

    as_json = qas("compile", "--format", "json", str(spec), timeout=120)
    assert as_json.returncode == 1, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["ok"] is False and document["plan"] is None
    (item,) = document["diagnostics"]
    assert (item["code"], item["line"], item["col"], item["severity"]) == (code, line, col, "error")
    assert item["hint"]

    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no output dir, nothing written


def _load(tmp_path: Path, text: str) -> list[tuple[str, int, int]]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    _doc, found = load(spec)
    return [(d.code, d.line, d.col) for d in found]


def test_depth_limit_is_exact_in_flow_and_block_style(tmp_path: Path) -> None:
    # the top-level mapping is level 1, so `x:` holds 63 more levels and no more
    assert _load(tmp_path, nested("[", "]", 63)) == []
    assert _load(tmp_path, nested("[", "]", 64)) == [("QAS105", 3, 67)]
    def block(levels: int) -> str:  # k1 in the top mapping, each k<i> holding the next mapping
        return "".join("  " * (i - 1) + f"k{i}:\n" for i in range(1, levels + 1)) + "  " * levels + "v\n"

    assert _load(tmp_path, block(64)) == []
    assert _load(tmp_path, block(65)) == [("QAS105", 65, 129)]
    # indentless `- ` lists count too (the scanner does not see them as levels, the event check does)
    def indentless(brackets: int) -> str:  # six levels before the brackets
        return "a:\n- b:\n  - c:\n    - " + "[" * brackets + "]" * brackets + "\n"

    assert _load(tmp_path, indentless(58)) == []
    assert _load(tmp_path, indentless(59)) == [("QAS105", 4, 65)]


def test_an_alias_counts_as_deep_as_what_it_names(tmp_path: Path) -> None:
    anchored = "qas: 1\nd: &d " + "[" * 40 + "1" + "]" * 40 + "\n"
    # at the alias: the top mapping and k lists, plus the 40 levels *d names
    assert _load(tmp_path, anchored + "x: " + "[" * 23 + "*d" + "]" * 23 + "\n") == []
    assert _load(tmp_path, anchored + "x: " + "[" * 24 + "*d" + "]" * 24 + "\n") == [("QAS105", 3, 28)]


def test_an_alias_inside_the_node_it_names_is_refused(tmp_path: Path) -> None:
    assert _load(tmp_path, "qas: 1\na: &a {x: *a}\n") == [("QAS106", 2, 11)]
    assert _load(tmp_path, "qas: 1\na: &a\n  - [*a]\n") == [("QAS106", 3, 6)]
    # an anchor defined again inside names the inner node from there on (as in ruamel's composer)
    with pytest.warns(Warning, match="duplicate anchor"):  # ruamel's ReusedAnchorWarning
        assert _load(tmp_path, "qas: 1\na: &a [&a 1, *a]\nb: *a\n") == []


def test_node_budget_counts_aliases_as_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_limits, "MAX_NODES", 20)
    # the mapping, 'qas', 1, 'a', the list and its 4 items, 'b': 10 nodes; *a adds 5, 'c' 1, *a 5 more: 21
    spec = "qas: 1\na: &a [1, 2, 3, 4]\nb: *a\nc: *a\n"
    assert _load(tmp_path, spec) == [("QAS106", 4, 4)]
    assert _load(tmp_path, spec.replace("c: *a\n", "")) == []
    # the mapping, 'qas', 1, 'x' and the list: 5 nodes, so 15 items fit and the 16th does not
    assert _load(tmp_path, "qas: 1\nx: [" + ", ".join(["1"] * 15) + "]\n") == []
    assert _load(tmp_path, "qas: 1\nx: [" + ", ".join(["1"] * 16) + "]\n") == [("QAS106", 2, 50)]


def test_nine_levels_of_nine_aliases_stop_at_the_first_alias_past_the_budget(tmp_path: Path) -> None:
    ((code, line, col),) = _load(tmp_path, laughs())
    # 931 nodes before l3's list items (l2 alone is 820), so its fifth *l2 crosses 5000
    assert yaml_limits.MAX_NODES == 5000
    assert code == "QAS106" and (line, col) == (6, 30)
    spec = tmp_path / "spec.yaml"
    (d,) = load(spec)[1]
    assert "alias *l2 stands for 820 nodes" in d.message and "5000" in d.hint


def test_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    body = "qas: 1\nname: padded\n"
    spec.write_text(body + "#" * (yaml_limits.MAX_BYTES - len(body) - 1) + "\n", encoding="utf-8")
    assert spec.stat().st_size == yaml_limits.MAX_BYTES
    assert load(spec)[1] == []
    with spec.open("a") as handle:
        handle.write("\n")
    _doc, found = load(spec)
    assert [(d.code, d.line, d.col) for d in found] == [("QAS104", 1, 1)]
    assert f"{yaml_limits.MAX_BYTES + 1} bytes" in found[0].message and found[0].hint


def test_syntax_errors_and_undefined_aliases_are_still_qas100(tmp_path: Path) -> None:
    assert _load(tmp_path, "qas: 1\nname: *nowhere\n") == [("QAS100", 2, 7)]
    assert [code for code, _, _ in _load(tmp_path, "qas: 1\nx: [[[\n")] == ["QAS100"]


def test_a_spec_using_anchors_within_the_limits_compiles(example_copy: Path) -> None:
    spec = example_copy / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    iters = "num_iterations: {type: int, low: 10, high: 50, step: 10}"
    assert text.count(iters) == 2
    first = text.index(iters)
    text = text[:first] + iters.replace("{type", "&iters {type") + text[first + len(iters):]
    text = text.replace(iters, "num_iterations: *iters")
    assert "*iters" in text and "&iters" in text
    aliased = example_copy / "aliased.yaml"
    aliased.write_text(text, encoding="utf-8")
    result = compile_spec(aliased, target_env(GOLDEN))
    assert result.ok, result.diagnostics
    plain = compile_spec(spec, target_env(GOLDEN))
    assert result.plan.settings.space_hash == plain.plan.settings.space_hash
