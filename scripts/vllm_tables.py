"""Generates tunelab's table of what one vLLM release declares: its serve options, the fields of
its JSON-valued configs, and the environment variables it reads, each with its value type.

tunelab decides from this table, never from a hand-made copy, which ``vllm serve`` flags exist
(abbreviations are refused), and which settings are plain data a shared preset may carry: a flag
or a nested config field whose type is a bool, a number or a fixed set of choices is data; a
string, a path, a dict or an import name is refused unless tunelab's policy knows it to be data
(``tuner/policy/``). The table is read from vLLM's own objects:

- serve options: the parser of ``vllm serve`` (``make_arg_parser(FlexibleArgumentParser())``,
  vllm/entrypoints/launchers/cli_args.py; common/ from 0.33, openai/ before 0.29) — each
  action's type, choices and nargs, and the type its value is parsed into (the config dataclass
  behind ``--compilation-config`` ...);
- configs: every dataclass or pydantic config reachable from a JSON-valued option, field by
  field (``dataclasses.fields`` and the annotations, resolved where they resolve);
- environment variables: ``vllm/envs.py`` ``environment_variables``, each reader classified
  from its source (``bool(int(...))``, ``int(...)``, ``== "1"``, ``env_with_choices``);
- attention backends: what each backend class accepts (head sizes, KV-cache dtypes, block
  sizes, MLA, sinks, attention types, GPU architectures) and ROCm's priority order, from the
  classes' own predicates (``scripts/vllm_attention.py``);
- config refusals: whether the release's ``SchedulerConfig`` refuses a relation tunelab names
  (batched tokens below max-num-seqs ...) and its sentence (``scripts/vllm_config_checks.py``);
- platforms: whether each platform runs static CUDA graphs, and the attention backends the CPU
  platform can return whatever was asked (``scripts/vllm_platforms.py``, read with ``ast``).

Run it with the interpreter that has the vLLM release (it imports vLLM, so tunelab never does)::

    .venv/bin/python scripts/vllm_tables.py            # writes tuner/vllm_tables/<version>.json
    .venv/bin/python scripts/vllm_tables.py --print    # prints the table instead

``tests/test_vllm_tables.py`` regenerates the installed release's table and asserts it equals
the shipped one, so the day vLLM changes, the test says what changed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import enum
import json
import pathlib
import re
import sys
import types
import typing
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import vllm_attention  # the sibling modules, found from any working directory
import vllm_config_checks
import vllm_platforms

OUT_DIR = pathlib.Path(__file__).resolve().parent.parent / "tuner" / "vllm_tables"
_NONE = type(None)


# -- types -------------------------------------------------------------------------------------
def _is_config_class(tp: Any) -> bool:
    if not isinstance(tp, type):
        return False
    if dataclasses.is_dataclass(tp):
        return True
    return hasattr(tp, "model_fields") and hasattr(tp, "model_validate")


def describe(tp: Any, configs: dict[str, type], depth: int = 0) -> dict[str, Any]:
    """The JSON description of a type: its kind, and choices / items / alternatives / config."""
    if depth > 8:
        return {"kind": "unknown", "text": repr(tp)}
    if isinstance(tp, str | typing.ForwardRef):
        return {"kind": "unknown", "text": str(tp)}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return describe(args[0], configs, depth + 1)
    if origin in (typing.Union, types.UnionType):
        alts = [a for a in args if a is not _NONE]
        described = [describe(a, configs, depth + 1) for a in alts]
        out = described[0] if len(described) == 1 else {"kind": "union", "alts": described}
        return {**out, "optional": True} if len(alts) < len(args) else out
    if origin is typing.Literal:
        return {"kind": "choice", "choices": sorted({_jsonable(a) for a in args}, key=str)}
    if origin in (list, set, tuple, frozenset, typing.Sequence, typing.Iterable):
        item = args[0] if args else Any
        return {"kind": "list", "items": describe(item, configs, depth + 1)}
    if origin in (dict, typing.Mapping, typing.MutableMapping) or tp is dict:
        return {"kind": "dict"}
    if origin is type or tp is type:
        return {"kind": "class"}
    if origin is not None and callable(tp) and origin in (typing.Callable,):
        return {"kind": "callable"}
    if tp is bool:
        return {"kind": "bool"}
    if tp is int:
        return {"kind": "int"}
    if tp is float:
        return {"kind": "float"}
    if tp is str:
        return {"kind": "str"}
    if tp is Any:
        return {"kind": "any"}
    if isinstance(tp, type) and issubclass(tp, pathlib.PurePath):
        return {"kind": "path"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        names = [m.name for m in tp]
        values = [_jsonable(m.value) for m in tp]
        return {"kind": "choice", "choices": sorted({*names, *map(str, values)}, key=str)}
    if _is_config_class(tp):
        configs.setdefault(tp.__name__, tp)
        return {"kind": "config", "config": tp.__name__}
    if callable(tp) and getattr(tp, "__module__", "") == "typing":
        return {"kind": "unknown", "text": repr(tp)}
    if isinstance(tp, type) and tp.__module__.startswith("torch"):
        return {"kind": "str", "text": tp.__name__}  # torch.dtype given as its name
    return {"kind": "unknown", "text": getattr(tp, "__name__", repr(tp))}


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, bool | int | float | str) or value is None else str(value)


def field_hints(cls: type) -> dict[str, Any]:
    """The annotations of ``cls``'s fields, resolved one by one (a forward reference that does
    not resolve stays a string, so one bad annotation does not hide the others)."""
    module = sys.modules.get(cls.__module__)
    glob = dict(vars(module)) if module else {}
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, ann in getattr(klass, "__annotations__", {}).items():
            if isinstance(ann, str):
                with contextlib.suppress(Exception):  # an unresolvable name stays text
                    ann = eval(ann, glob, dict(vars(klass)))
            hints[name] = ann
    return hints


def config_fields(cls: type, configs: dict[str, type]) -> dict[str, Any]:
    """Every settable field of a config class with its type description."""
    hints = field_hints(cls)
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        names = list(getattr(cls, "model_fields", {}))
    return {n: describe(hints.get(n, Any), configs) for n in names if not n.startswith("_")}


# -- serve options -------------------------------------------------------------------------------
def _cli_args() -> types.ModuleType:
    """The module of ``vllm serve``'s parser: entrypoints/common/ from 0.33, launchers/ in
    0.29-0.32, openai/ before."""
    import importlib

    for package in ("common", "launchers", "openai"):
        try:
            return importlib.import_module(f"vllm.entrypoints.{package}.cli_args")
        except ImportError:
            continue
    raise ImportError("no vllm.entrypoints.*.cli_args module with vllm serve's parser")


def _inner_type(fn: Any) -> Any:
    """The type an argparse ``type=`` callable of vLLM's parses into (through its wrappers)."""
    for _ in range(4):
        if fn is None:
            return None
        defaults = getattr(fn, "__defaults__", None) or ()
        for value in defaults:
            if _is_config_class(value):
                return value  # parse_dataclass(val, cls=dataclass_cls)
        cells = {
            name: cell.cell_contents
            for name, cell in zip(
                getattr(getattr(fn, "__code__", None), "co_freevars", ()),
                getattr(fn, "__closure__", None) or (),
                strict=False,
            )
        }
        if "return_type" in cells:
            fn = cells["return_type"]
            continue
        return fn
    return fn


def option_types(dest_hints: dict[str, Any], configs: dict[str, type]) -> dict[str, Any]:
    """Every long option of ``vllm serve`` with what its value is."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = _cli_args().make_arg_parser(FlexibleArgumentParser())
    # Every string the parser accepts for an action: from 0.33 its EnableDisableAction pairs
    # --enable-x with --disable-x and keeps --no-enable-x registered but out of option_strings.
    accepted: dict[int, set[str]] = {}
    for string, act in parser._option_string_actions.items():
        accepted.setdefault(id(act), set()).add(string)
    out: dict[str, Any] = {}
    for action in parser._actions:
        strings = {*action.option_strings, *accepted.get(id(action), ())}
        negative = set(getattr(action, "negative_option_strings", ()))  # 0.33 --disable-x
        longs = [o[2:] for o in sorted(strings) if o.startswith("--")]
        names = [n for n in longs if not n.startswith("no-") and f"--{n}" not in negative]
        if not names or isinstance(action, argparse._HelpAction):
            continue
        negations = sorted(n for n in longs if n not in names)
        value = _option_value(action, dest_hints.get(action.dest), configs)
        for name in names:
            out[name] = {"dest": action.dest, "value": value, "negations": negations}
    return dict(sorted(out.items()))


def _option_value(action: argparse.Action, hint: Any, configs: dict[str, type]) -> dict[str, Any]:
    if action.nargs == 0:
        return {"kind": "bool"}
    if action.choices is not None:
        choices = sorted({str(c) for c in action.choices if c is not None})
        out: dict[str, Any] = {"kind": "choice", "choices": choices}
    else:
        inner = _inner_type(action.type)
        name = getattr(inner, "__name__", "")
        if _is_config_class(inner) or inner in (int, float, str, bool):
            out = describe(inner, configs)
        elif name in ("human_readable_int", "human_readable_int_or_auto"):
            out = {"kind": "int"}
        elif name == "loads" or name == "union_dict_and_str":
            out = describe(hint, configs) if hint is not None else {"kind": "dict"}
            if out["kind"] in ("unknown", "any"):
                out = {"kind": "dict"}
        elif hint is not None:
            out = describe(hint, configs)
        else:
            out = {"kind": "unknown", "text": name or repr(inner)}
    if action.nargs in ("+", "*") and out.get("kind") != "list":
        out = {"kind": "list", "items": out}
    return out


def dest_hints() -> dict[str, Any]:
    """Field annotations of the argument dataclasses behind the parser (EngineArgs, FrontendArgs)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    cli_args = _cli_args()
    hints = field_hints(AsyncEngineArgs)
    for name in dir(cli_args):
        obj = getattr(cli_args, name)
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            hints.update(field_hints(obj))
    # dict-typed options that vLLM turns into a config class by name (SpeculativeConfig(**d)).
    import vllm.config as vc

    for dest, hint in list(hints.items()):
        if dest.endswith("_config"):
            cls_name = "".join(p.capitalize() for p in dest.split("_")[:-1]) + "Config"
            cls = getattr(vc, cls_name, None)
            if _is_config_class(cls) and describe(hint, {})["kind"] in ("dict", "any", "unknown"):
                hints[dest] = cls
    return hints


# -- environment variables --------------------------------------------------------------------
def env_table() -> dict[str, Any]:
    """vLLM's environment variables with the kind of value each reader parses."""
    import vllm.envs as envs

    tree = ast.parse(pathlib.Path(envs.__file__).read_text())
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    table_node = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.AnnAssign | ast.Assign)
        and isinstance(getattr(n, "target", None) or n.targets[0], ast.Name)
        and (getattr(n, "target", None) or n.targets[0]).id == "environment_variables"
    )
    assert isinstance(table_node, ast.Dict)
    out: dict[str, Any] = {}
    for key, value in zip(table_node.keys, table_node.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            continue
        reader = envs.environment_variables.get(key.value)
        out[key.value] = _env_kind(value, reader, funcs)
    return dict(sorted(out.items()))


def _env_kind(node: ast.AST, reader: Any, funcs: dict[str, ast.FunctionDef]) -> dict[str, Any]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in ("env_with_choices", "env_list_with_choices", "env_set_with_choices"):
            choices = _closure_choices(reader)
            kind: dict[str, Any] = {"kind": "choice", "choices": choices}
            return kind if node.func.id == "env_with_choices" else {"kind": "list", "items": kind}
        if node.func.id == "get_env_or_set_default":
            return {"kind": "str"}
    if isinstance(node, ast.Lambda):
        return _expr_kind(node.body, funcs)
    if isinstance(node, ast.Name) and node.id in funcs:
        return _function_kind(funcs[node.id], funcs)
    return {"kind": "unknown"}


def _closure_choices(reader: Any) -> list[str]:
    cells = dict(
        zip(reader.__code__.co_freevars, (c.cell_contents for c in reader.__closure__), strict=True)
    )
    choices = cells.get("choices", [])
    if callable(choices):
        try:
            choices = choices()
        except Exception:
            choices = []
    return sorted({str(c) for c in choices})


def _function_kind(fn: ast.FunctionDef, funcs: dict[str, ast.FunctionDef]) -> dict[str, Any]:
    kinds = [
        _expr_kind(n.value, funcs)
        for n in ast.walk(fn)
        if isinstance(n, ast.Return) and n.value is not None
    ]
    kinds = [k for k in kinds if k["kind"] != "none"]
    if kinds and all(k == kinds[0] for k in kinds):
        return kinds[0]
    return {"kind": "unknown"}


_ENV_NAME_RE = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]+$")
_BOOL_STRINGS = {"0", "1", "true", "false", "yes", "no", "on", "off"}


def _expr_kind(node: ast.AST, funcs: dict[str, ast.FunctionDef]) -> dict[str, Any]:
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"kind": "none"}
        return {"kind": type(node.value).__name__}
    if isinstance(node, ast.Compare):
        consts = {
            str(c.value).lower()
            for c in ast.walk(node)
            if isinstance(c, ast.Constant)
            and isinstance(c.value, str)
            and not _ENV_NAME_RE.match(c.value)  # the variable's own name, not a value
        }
        if consts and consts <= _BOOL_STRINGS:
            return {"kind": "bool"}
        return {"kind": "unknown"}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return {"kind": "bool"}
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in ("bool", "maybe_convert_bool"):
            return {"kind": "bool"}
        if name in ("int", "maybe_convert_int"):
            return {"kind": "int"}
        if name == "float":
            return {"kind": "float"}
        if attr in ("getenv", "get") or attr in ("lower", "upper", "strip"):
            return {"kind": "str"}
        if attr == "expanduser" or attr == "join":
            return {"kind": "path"}
        if name in funcs:
            return _function_kind(funcs[name], funcs)
        return {"kind": "unknown"}
    if isinstance(node, ast.BoolOp | ast.IfExp):
        parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
        kinds = [_expr_kind(p, funcs) for p in parts]
        kinds = [k for k in kinds if k["kind"] != "none"]
        if kinds and all(k == kinds[0] for k in kinds):
            return kinds[0]
    return {"kind": "unknown"}


# -- the table --------------------------------------------------------------------------------
def build() -> dict[str, Any]:
    """The whole table of the installed vLLM."""
    import vllm

    configs: dict[str, type] = {}
    options = option_types(dest_hints(), configs)
    described: dict[str, Any] = {}
    while len(described) < len(configs):  # nested configs are found while describing
        for name, cls in sorted(configs.items()):
            if name not in described:
                described[name] = {
                    "module": cls.__module__,
                    "fields": config_fields(cls, configs),
                }
    return {
        "vllm_version": str(vllm.__version__).split("+")[0],
        "generated_by": "scripts/vllm_tables.py",
        "serve_options": options,
        "configs": dict(sorted(described.items())),
        "env": env_table(),
        "attention": vllm_attention.attention_table(),
        "config_refusals": {
            **vllm_config_checks.scheduler_refusals(),
            "async_scheduling_speculative": vllm_config_checks.async_scheduling(),
        },
        "quantization": vllm_config_checks.quantization(),
        "platforms": vllm_platforms.platform_table(pathlib.Path(vllm.__file__).parent),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--print", action="store_true", help="print the table, write nothing")
    parser.add_argument("--out", type=pathlib.Path, help="file to write (default: by version)")
    args = parser.parse_args(argv)
    table = build()
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if args.print:
        sys.stdout.write("@@" + text)
        return 0
    out = args.out or OUT_DIR / f"{table['vllm_version']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(
        f"wrote {out} ({len(table['serve_options'])} options, {len(table['configs'])} configs, "
        f"{len(table['env'])} environment variables)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
