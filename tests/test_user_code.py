"""check/user_code.py: whether a user's function is a generator, read with ast (the file is never imported)."""

from __future__ import annotations

from pathlib import Path

from compiler.check.user_code import yields

SOURCE = '''\
import sys

def returns(path):
    def inner():
        yield 1  # a nested function's yield is its own
    return 0.5

def generates(path):
    for i in range(3):
        if i:
            yield from [i]

lambda_only = lambda path: (yield)
'''


def test_only_a_yield_in_the_functions_own_body_makes_it_a_generator(tmp_path: Path) -> None:
    file = tmp_path / "evals.py"
    file.write_text(SOURCE)
    assert yields(file, "returns") is False
    assert yields(file, "generates") is True
    assert yields(file, "lambda_only") is None  # not a def: the data pass decides what it is
    assert yields(file, "missing") is None
    (tmp_path / "broken.py").write_text("def f(:\n")
    assert yields(tmp_path / "broken.py", "f") is None
    assert yields(tmp_path / "absent.py", "f") is None


def test_the_last_binding_of_the_name_decides(tmp_path: Path) -> None:
    file = tmp_path / "evals.py"
    file.write_text("def score(p):\n    yield 1\n\ndef score(p):\n    return 1\n\n"
                    "def other(p):\n    return 1\n\ndef other(p):\n    yield 1\n\n"
                    "def base(p):\n    yield 1\n\nalias = base\n\nasync def coro(p):\n    return 1\n")
    assert yields(file, "score") is False  # redefined: the second, returning one, is what Python keeps
    assert yields(file, "other") is True
    assert yields(file, "alias") is None  # an alias: the script checks it when it loads it
    assert yields(file, "coro") is False
