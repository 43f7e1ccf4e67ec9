"""Schema stage: plain spec data in, QAS2xx diagnostics out (jsonschema Draft 2020-12)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError

from compiler.diagnostics import Diagnostic, YamlPath, diag
from compiler.durations import seconds, words
from compiler.front.schema_keys import SPEC_SCHEMA, placement
from compiler.front.source import non_finite_paths
from compiler.front.storage_urls import covers, database_urls
from compiler.front.suggest import did_you_mean
from compiler.resources import load_schema

# No number in a spec may be larger than this (floats lose integer precision beyond it), and no string may
# hold a NUL byte; the user's own reader arguments are passed through untouched and are exempt.
NUMBER_BOUND = 2**53
PASSED_THROUGH = (("calibration", "args"), ("evaluation", "data", "args"))

# JSON Schema counts 3.0 as an integer; a spec's integers are written as integers (the script gets an int).
_STRICT_TYPES = Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool))
_draft_maximum = Draft202012Validator.VALIDATORS["maximum"]


def _maximum(validator: Any, maximum: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """JSON Schema's maximum, also for a duration written as a string ("99999999999h"): one bound for every form."""
    if isinstance(instance, str):
        if not re.search(schema.get("pattern", ""), instance):
            return  # badly formed: the pattern's error says so, once
        value = seconds(instance)
        if value is not None and value > maximum:
            yield ValidationError(f"{instance!r} is more than {maximum} seconds")
        return
    yield from _draft_maximum(validator, maximum, instance, schema)


_Validator = validators.extend(Draft202012Validator, {"maximum": _maximum}, type_checker=_STRICT_TYPES)


def check(data: Any) -> list[Diagnostic]:
    """Spec data in; every schema violation as a diagnostic out, in document order of paths."""
    # Database URLs and passwords first, with their own code: no other message may repeat a value that holds one.
    urls = list(database_urls(data))
    found = list(_non_string_keys(data, ()))
    found += [diag("QAS208", "NaN and infinity are not allowed in a spec", p,
                   hint="write a finite number") for p in non_finite_paths(data)]
    found += list(_unusable_values(data, ()))
    found = urls + [d for d in found if not covers(urls, d.path)]
    if len(found) > len(urls):
        return found
    validator = _Validator(load_schema(SPEC_SCHEMA))
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    # One typo, one error: a required key an unknown key stands for is not reported missing as well.
    meant = {p for e in errors for _key, _hint, paths in _unknown_keys(e) for p in paths}
    for error in errors:
        found.extend(d for d in _translate(error, meant) if not covers(urls, d.path))
    return _dedupe(found)


def _unknown_keys(error: ValidationError) -> list[tuple[str, str | None, tuple[YamlPath, ...]]]:
    """An additionalProperties error in; each unknown key with its hint and the paths it probably meant out."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return []
    known = list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
    path = tuple(error.absolute_path)
    return [(k, *placement(k, path, known)) for k in error.instance if k not in known]


def _non_string_keys(value: Any, path: YamlPath) -> Iterator[Diagnostic]:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                yield diag("QAS203", f"keys must be strings, found {type(k).__name__} key {k!r}", (*path, k),
                           hint="quote the key", at_key=True)
            else:
                yield from _non_string_keys(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _non_string_keys(v, (*path, i))


def _unusable_values(value: Any, path: YamlPath) -> Iterator[Diagnostic]:
    """Numbers beyond NUMBER_BOUND and strings holding a NUL byte (no path, name or Quark string can), at any depth."""
    if any(path[:len(p)] == p for p in PASSED_THROUGH):
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value) and abs(value) > NUMBER_BOUND:  # NaN and infinity have their own code
            yield diag("QAS205", f"{value!r} is out of range: no number in a spec may exceed 2**53 "
                                 f"({NUMBER_BOUND}) in size", path, hint="write a number of a sensible size")
    elif isinstance(value, str):
        if "\0" in value:
            where = ".".join(str(p) for p in path)
            yield diag("QAS205", f"{where} holds a NUL byte (\\0), which no path or name can contain: {value!r}",
                       path, hint="remove the \\0 (in YAML, a double-quoted \"\\0\" is a NUL byte)")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _unusable_values(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _unusable_values(v, (*path, i))


def _translate(error: ValidationError, meant: set[YamlPath]) -> list[Diagnostic]:
    path: YamlPath = tuple(error.absolute_path)
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance
    where = ".".join(str(p) for p in path) or "the spec"
    if kind in {"oneOf", "not", "dependentRequired"} and not isinstance(instance, dict):
        return []  # the type error on the same node says what is wrong
    if path == ("qas",):  # one message, whatever is wrong with it (a string, 2, 1.0)
        return [diag("QAS207", f"spec format {instance!r} is not supported by this qas", path,
                     hint="this qas reads format 1: write `qas: 1`")]
    if kind == "additionalProperties":
        return [diag("QAS201", f"unknown key {k!r} in {where}", (*path, k), hint=hint, at_key=True)
                for k, hint, _paths in _unknown_keys(error)]
    if kind == "required":
        missing = [k for k in error.validator_value if k not in instance and (*path, k) not in meant]
        return [diag("QAS202", f"missing required key {k!r} in {where}", path,
                     hint=_describe(schema, k), at_key=bool(path)) for k in missing]
    if kind == "type" and _wants_integer(error.validator_value) and isinstance(instance, float):
        whole = instance.is_integer()
        return [diag("QAS203", f"{where} must be an integer, not {instance!r}", path,
                     hint=f"write {int(instance)}" if whole else "write a whole number, without a decimal point")]
    if kind == "type":
        return [diag("QAS203", f"{where} must be {_type_words(error.validator_value)}, "
                               f"not {_json_type(instance)}", path, hint=_field_hint(schema))]
    if kind == "enum":
        return [diag("QAS204", f"{instance!r} is not allowed for {where}", path,
                     hint=did_you_mean(str(instance), error.validator_value))]
    if kind == "const":
        return [diag("QAS204", f"{where} must be {error.validator_value!r}", path)]
    if kind == "maximum" and _is_duration(schema):  # the one message for both forms, naming the maximum
        return [diag("QAS205", f"{where} must be at most {error.validator_value} seconds "
                               f"({words(error.validator_value)}), not {instance!r}", path, hint=_field_hint(schema))]
    if kind in {"minimum", "maximum", "exclusiveMinimum"} and isinstance(instance, (int, float)):
        bound = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "above"}[kind]
        return [diag("QAS205", f"{where} must be {bound} {error.validator_value!r}, not {instance!r}", path,
                     hint=_field_hint(schema))]
    if kind in {"pattern", "minimum", "maximum", "minLength", "maxLength", "exclusiveMinimum", "minItems", "maxItems"}:
        return [diag("QAS205", f"{instance!r} is not a valid value for {where}", path,
                     hint=_field_hint(schema))]
    if kind == "oneOf":
        options = [alt["required"][0] for alt in error.validator_value if "required" in alt]
        if not any(k in instance for k in options) and any((*path, k) in meant for k in options):
            return []  # an unknown key stands for the missing alternative: its error says so
        return [_alternatives(error, path, where)]
    if kind == "not":
        return [diag("QAS206", f"{where} takes either 'metric' or 'evaluator', not both", path,
                     hint="drop one of them")]
    if kind == "dependentRequired":
        missing = [n for k, needs in error.validator_value.items() if k in instance for n in needs if n not in instance]
        if missing and all((*path, n) in meant for n in missing):
            return []  # the unknown key that stands for it says so
        return [diag("QAS206", f"{where}: {_dependent_words(error)}", path,
                     hint=None)]
    if kind == "anyOf" and _dependent_key(error) is not None:
        if any((*path, alt["required"][0]) in meant for alt in error.validator_value):
            return []  # the unknown key that stands for it says so
        needs = " or ".join(repr(alt["required"][0]) for alt in error.validator_value)
        return [diag("QAS206", f"{where}: {_dependent_key(error)!r} needs {needs}", path, hint=None)]
    return [diag("QAS205", f"{where}: {error.message}", path)]


def _alternatives(error: ValidationError, path: YamlPath, where: str) -> Diagnostic:
    options = [alt["required"][0] for alt in error.validator_value if "required" in alt]
    given = [k for k in options if isinstance(error.instance, dict) and k in error.instance]
    names = " or ".join(repr(o) for o in options)
    if len(given) > 1:
        found = "both" if len(options) == 2 else " and ".join(repr(k) for k in given)
        return diag("QAS206", f"{where} takes exactly one of {names}, found {found}", path,
                    hint=f"keep one of {names}")
    if not given:
        return diag("QAS206", f"{where} needs one of {names}", path,
                    hint=f"add {names}")
    # exactly one alternative given but it failed: its own errors say why
    return diag("QAS205", f"{where}: {error.message}", path)


def _is_duration(schema: dict[str, Any]) -> bool:
    """True for a duration field: a number of seconds or a string with a unit (its pattern ends in s, m or h)."""
    types = schema.get("type")
    return isinstance(types, list) and "string" in types and str(schema.get("pattern", "")).endswith("(s|m|h)$")


def _wants_integer(expected: Any) -> bool:
    return expected == "integer" or (isinstance(expected, list) and "integer" in expected)


def _dependent_key(error: ValidationError) -> str | None:
    """The key of a dependentSchemas entry whose anyOf failed (e.g. 'limit' needs 'folder' or 'images'), else None."""
    where = list(error.relative_schema_path)
    if len(where) >= 3 and where[-3] == "dependentSchemas" and where[-1] == "anyOf":
        return str(where[-2])
    return None


def _dependent_words(error: ValidationError) -> str:
    for key, needs in error.validator_value.items():
        if key in error.instance:
            missing = [n for n in needs if n not in error.instance]
            if missing:
                return f"{key!r} needs {', '.join(repr(m) for m in missing)}"
    return error.message


def _describe(schema: dict[str, Any], key: str) -> str | None:
    sub = schema.get("properties", {}).get(key, {})
    return sub.get("description")


def _field_hint(schema: dict[str, Any]) -> str | None:
    return schema.get("description")


_JSON_TYPES = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _type_words(expected: Any) -> str:
    names = {"object": "a mapping", "array": "a list", "string": "a string", "boolean": "true or false",
             "integer": "an integer", "number": "a number", "null": "null"}
    if isinstance(expected, list):
        return " or ".join(names.get(e, e) for e in expected)
    return names.get(expected, str(expected))


def _dedupe(found: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple] = set()
    out = []
    for d in found:
        key = (d.code, d.path, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
