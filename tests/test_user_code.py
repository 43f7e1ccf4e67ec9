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
