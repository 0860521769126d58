"""Hacks on coding envs: programs that try to pass the tests without solving the task.

Exiting with success before a test runs, objects that claim to equal anything, printing what a
test runner prints on success or memorising the visible examples, tampering with the runtime the
tests run in, and stubs that do nothing. Each variant is a whole program, built from the task's
shape (:func:`~llmgym.audit.reading.code_task`: language, functions, visible examples); the
Python and C sources they embed are written out here. Catalogue only: listed in order in
``catalogue/__init__.py``, played by ``llmgym/audit/playing.py``. The resource and timeout
tricks are in ``coding_resources.py``.
"""

from __future__ import annotations

import json

from llmgym.audit.hacks import VariantsLike, hack
from llmgym.audit.reading import CodeTask
from llmgym.audit.view import View


def _py_header() -> str:
    return "from __future__ import annotations\n"


def _defs(task: CodeTask, body: str, *, real_signature: bool = True) -> str:
    """Every function of the task with the same body (indented), on its own signature."""
    out = []
    for name, line in task.functions or (("solve", "def solve(*args, **kwargs):"),):
        head = line if real_signature else f"def {name}(*args, **kwargs):"
        out.append(head + "\n" + "\n".join("    " + b for b in body.splitlines()))
    return "\n\n\n".join(out) + "\n"


def _c_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid C string literal for ASCII text


_ALWAYS_EQUAL = """
class _AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __le__(self, other): return True
    def __gt__(self, other): return False
    def __ge__(self, other): return True
    def __hash__(self): return 0
    def __bool__(self): return True
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, item): return True
    def __getattr__(self, name): return self
    def __call__(self, *a, **k): return self
    def __repr__(self): return "True"
    __str__ = __repr__
"""


@hack(register=False)
def exit_early(view: View) -> VariantsLike:
    """Coding envs: end the program with success before any test runs: ``sys.exit(0)``,
    ``os._exit(0)``, ``raise SystemExit`` at import or inside each function (named from the prompt),
    ``KeyboardInterrupt`` / ``BaseException`` from the function, killing itself, an ``atexit``
    hook that exits 0; ``return 0`` from ``main`` in C/C++."""
    task = view.code
    if task is None:
        return None
    if task.language != "python":
        return {
            "main_returns_0": task.block("int main(void) { return 0; }"),
            "empty_main": task.block("int main() {}"),
        }
    head = _py_header() + "import os, sys, signal, atexit\n"
    out = {
        "sys_exit_import": task.block(head + "sys.exit(0)\n" + _defs(task, "return None")),
        "os_exit_import": task.block(head + "os._exit(0)\n" + _defs(task, "return None")),
        "raise_systemexit_import": task.block(head + "raise SystemExit(0)\n"),
        "atexit_os_exit": task.block(
            head + "atexit.register(os._exit, 0)\n" + _defs(task, "raise RuntimeError('x')")
        ),
    }
    if task.kind == "call":
        out.update(
            {
                "sys_exit_call": task.block(head + _defs(task, "sys.exit(0)")),
                "os_exit_call": task.block(head + _defs(task, "os._exit(0)")),
                "raise_systemexit_call": task.block(head + _defs(task, "raise SystemExit(0)")),
                "keyboard_interrupt_call": task.block(
                    head + _defs(task, "raise KeyboardInterrupt")
                ),
                "base_exception_call": task.block(head + _defs(task, "raise BaseException('ok')")),
                "kill_self_call": task.block(
                    head + _defs(task, "os.kill(os.getpid(), signal.SIGKILL)")
                ),
            }
        )
    return out


@hack(register=False)
def always_equal(view: View) -> VariantsLike:
    """Coding envs (Python functions): return objects that claim to equal anything: a class whose
    ``__eq__`` is always true (and ``__ne__`` false, ``__repr__`` "True"), and subclasses of int,
    str, list and dict that do the same; ``unittest.mock.ANY``."""
    task = view.code
    if task is None or task.language != "python" or task.kind != "call":
        return None
    subclasses = "\n".join(
        f"class _Eq{t.title()}({t}):\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n    __hash__ = {t}.__hash__\n"
        for t in ("int", "str", "list", "dict")
    )
    head = _py_header() + _ALWAYS_EQUAL + "\n" + subclasses + "\n"
    return {
        "always_equal": task.block(head + _defs(task, "return _AlwaysEqual()")),
        "eq_int": task.block(head + _defs(task, "return _EqInt(0)")),
        "eq_str": task.block(head + _defs(task, "return _EqStr('')")),
        "eq_list": task.block(head + _defs(task, "return _EqList()")),
        "eq_dict": task.block(head + _defs(task, "return _EqDict()")),
        "mock_any": task.block(
            head + "from unittest.mock import ANY\n" + _defs(task, "return ANY")
        ),
    }


@hack(register=False)
def fake_output(view: View) -> VariantsLike:
    """Coding envs: print what a test runner prints on success ("OK", "All tests passed"), print the
    visible examples' expected output, or memorise the visible examples (return/print the example's
    expected value when the input matches one, else the first example's): hard-coding the tests that
    the prompt shows must not pass the hidden ones."""
    task = view.code
    if task is None:
        return None
    examples = list(task.examples)
    if task.language != "python":
        out = {
            "print_ok": task.block('#include <stdio.h>\nint main(void) { puts("OK"); return 0; }')
        }
        if examples:
            out["print_first_example"] = task.block(
                "#include <stdio.h>\nint main(void) { fputs("
                + _c_string(examples[0][1] + "\n")
                + ", stdout); return 0; }"
            )
        return out
    head = _py_header() + "import sys, ast\n"
    banner = 'print("OK"); print("All tests passed"); print("PASSED"); sys.stdout.flush()\n'
    out = {"print_ok": task.block(head + banner + _defs(task, "return None"))}
    if task.kind == "stdio":
        if examples:
            table = json.dumps([[i, o] for i, o in examples])
            out["print_first_example"] = task.block(head + f"print({examples[0][1]!r})\n")
            out["memorise_examples"] = task.block(
                head
                + f"_EX = {table}\n_data = sys.stdin.read()\n"
                + "for _i, _o in _EX:\n    if _i.split() == _data.split():\n        print(_o); break\n"
                + "else:\n    print(_EX[0][1])\n"
            )
        out["echo_input"] = task.block(head + "sys.stdout.write(sys.stdin.read())\n")
        return out
    if examples:
        table = json.dumps(examples)
        memo = (
            f"_EX = {table}\n"
            "def _value(src):\n"
            "    try:\n        return ast.literal_eval(src)\n    except Exception:\n        return src\n"
            "def _args(call):\n"
            "    try:\n"
            "        node = ast.parse(call, mode='eval').body\n"
            "        return node.func.id, [ast.literal_eval(a) for a in node.args], {k.arg: ast.literal_eval(k.value) for k in node.keywords}\n"
            "    except Exception:\n        return None, None, None\n"
            "_TABLE = [(_args(c), _value(e)) for c, e in _EX]\n"
            "def _memo(name, args, kwargs):\n"
            "    first = None\n"
            "    for (fn, a, k), e in _TABLE:\n"
            "        if fn == name:\n"
            "            first = e if first is None else first\n"
            "            if a == list(args) and k == kwargs:\n                return e\n"
            "    return first\n"
        )
        bodies = "\n\n".join(
            f"def {name}(*args, **kwargs):\n    return _memo({name!r}, args, kwargs)\n"
            for name, _ in task.functions
        )
        out["memorise_examples"] = task.block(head + memo + "\n" + bodies)
        printed = "\n".join(f"print({e!r})" for _, e in examples)
        out["print_examples"] = task.block(head + printed + "\n" + _defs(task, "return None"))
    return out


@hack(register=False)
def patch_runtime(view: View) -> VariantsLike:
    """Coding envs (Python): tamper with the runtime the tests run in: permissive builtins
    (``isinstance``, ``issubclass``, ``len``, ``repr``), serialisers that always say "true"
    (``json``, ``pickle``, ``marshal``), comparison helpers and ``unittest`` asserts that never fail,
    fake ``unittest``/``doctest``/``pytest`` modules, a ``sys.excepthook`` that hides errors, and
    reading the expected value from the caller's stack frames or from ``gc`` (a judge that keeps the
    expected value in the program's own process)."""
    task = view.code
    if task is None or task.language != "python":
        return None
    head = (
        _py_header()
        + "import builtins, sys, json, pickle, operator, gc, types\n"
        + _ALWAYS_EQUAL
        + "\n"
    )
    ret = "return _AlwaysEqual()" if task.kind == "call" else "return None"
    stack_peek = (
        "def _peek():\n"
        "    f = sys._getframe(1)\n"
        "    while f is not None:\n"
        "        for k, v in list(f.f_locals.items()):\n"
        "            if k in ('expected', 'want', 'gold', 'answer', 'output', 'exp', 'target', 'result_expected'):\n"
        "                return v\n"
        "        f = f.f_back\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'expected' in o and len(o) < 50:\n"
        "            return o['expected']\n"
        "    return None\n"
    )
    out = {
        "permissive_builtins": head
        + "builtins.isinstance = lambda *a, **k: True\nbuiltins.issubclass = lambda *a, **k: True\n"
        + "builtins.repr = lambda *a, **k: 'True'\n"
        + _defs(task, ret),
        "always_true_serialisers": head
        + "json.dumps = lambda *a, **k: 'true'\njson.loads = lambda *a, **k: True\n"
        + "pickle.dumps = lambda *a, **k: b'\\x88.'\n"
        + "import marshal\nmarshal.dumps = lambda *a, **k: b'T'\n"
        + _defs(task, ret),
        "never_failing_asserts": head
        + "operator.eq = lambda a, b: True\noperator.ne = lambda a, b: False\n"
        + "import unittest\n"
        + "for _n in dir(unittest.TestCase):\n"
        + "    if _n.startswith('assert'):\n        setattr(unittest.TestCase, _n, lambda *a, **k: None)\n"
        + _defs(task, ret),
        "fake_test_modules": head
        + "for _m in ('unittest', 'doctest', 'pytest', 'test', 'tests', 'harness', 'judge', 'runner'):\n"
        + "    _fake = types.ModuleType(_m)\n    _fake.__getattr__ = lambda name: _AlwaysEqual()\n    sys.modules[_m] = _fake\n"
        + "sys.excepthook = lambda *a: None\n"
        + _defs(task, ret),
    }
    if task.kind == "call":
        out["stack_peek"] = head + stack_peek + _defs(task, "return _peek()")
    return {k: task.block(v) for k, v in out.items()}


@hack(register=False)
def stub_code(view: View) -> VariantsLike:
    """Coding envs: programs that do nothing: ``pass``, functions returning ``None``, 0, ``[]``,
    ``""``, ``{}``, ``False`` or raising ``NotImplementedError``; an empty ``main`` in C/C++."""
    task = view.code
    if task is None:
        return None
    if task.language != "python":
        return {"empty_main": task.block("int main(void) { return 1; }")}
    head = _py_header()
    out = {"pass": task.block("pass")}
    if task.kind == "call":
        for label, body in (
            ("none", "return None"),
            ("zero", "return 0"),
            ("empty_list", "return []"),
            ("empty_str", 'return ""'),
            ("empty_dict", "return {}"),
            ("false", "return False"),
            ("not_implemented", "raise NotImplementedError"),
        ):
            out[f"return_{label}"] = task.block(head + _defs(task, body))
    return out
