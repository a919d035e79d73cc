"""Parses argv lists with vLLM's own server parser and prints each namespace as JSON.

Run in a subprocess with the interpreter that has vLLM (tunelab never imports
vLLM in-process). Reads a JSON list of argv lists on stdin; each is what
follows the program name: ``["serve", MODEL, ...]`` as ``vllm serve`` gets it,
or ``["--model=M", ...]`` as ``python -m vllm.entrypoints.openai.api_server``
gets it. The parser is vLLM 0.32's ``make_arg_parser(FlexibleArgumentParser())``
(vllm/entrypoints/launchers/cli_args.py), with its ``serve`` preprocessing
(vllm/utils/argparse_utils.py ``parse_args``). For ``serve`` argv the
subcommand word is dropped after preprocessing, as vLLM's CLI does. Prints one
line ``@@<json>``: per argv either ``{"ns": {dest: value}}`` or ``{"error": text}``.
Importing vLLM takes 10-20 s, so callers send many argv lists at once.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def main() -> None:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argvs = json.load(sys.stdin)
    out: list[dict[str, Any]] = []
    for argv in argvs:
        parser = make_arg_parser(FlexibleArgumentParser())
        try:
            if argv[:1] == ["serve"]:
                # FlexibleArgumentParser.parse_args does the serve-specific
                # rewriting when argv starts with "serve"; the server parser has
                # no "serve" positional, so a parent parser would consume it.
                top = FlexibleArgumentParser()
                sub = top.add_subparsers(dest="subcommand")
                make_arg_parser(sub.add_parser("serve"))
                ns = top.parse_args(argv)
            else:
                ns = parser.parse_args(argv)
            values = vars(ns)
            values.pop("subcommand", None)
            values.pop("dispatch_function", None)
            if values.get("model_tag"):
                values["model"] = values["model_tag"]
            values.pop("model_tag", None)
            out.append({"ns": {k: _jsonable(v) for k, v in values.items()}})
        except SystemExit as exc:
            out.append({"error": f"argparse exit {exc.code}"})
        except Exception as exc:
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    print("@@" + json.dumps(out))


if __name__ == "__main__":
    main()
