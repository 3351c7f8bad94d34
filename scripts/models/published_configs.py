"""What the published-config writers share (write_wan_published_configs.py,
write_cogvideox_published_configs.py): reading a diffusers clone at a
commit, a class's __init__ defaults, a config as save_pretrained writes it,
and the write / --check driver. Not a script of its own."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path
from typing import Callable


def git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def init_defaults(source: str, class_name: str) -> dict:
    """The keyword defaults of class_name.__init__ in `source` (every parameter has one)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args[1:]
                    defaults = item.args.defaults
                    assert len(args) == len(defaults), f"{class_name}: a parameter without a default"
                    out = {}
                    for a, d in zip(args, defaults):
                        v = ast.literal_eval(d)
                        out[a.arg] = list(v) if isinstance(v, tuple) else v
                    return out
    raise KeyError(class_name)


def version(repo: Path, commit: str) -> str:
    for line in git_show(repo, commit, "src/diffusers/__init__.py").splitlines():
        if line.startswith("__version__"):
            return line.split('"')[1]
    raise KeyError("__version__")


def diffusers_config(repo: Path, commit: str, path: str, class_name: str, values: dict, ver: str | None = None) -> dict:
    """class_name's config as save_pretrained writes it: its __init__ defaults at `commit` with `values`
    (keys it takes), _class_name and _diffusers_version (`ver`, default the commit's version)."""
    cfg = init_defaults(git_show(repo, commit, path), class_name)
    unknown = set(values) - set(cfg)
    assert not unknown, f"{class_name}@{commit}: {unknown}"
    cfg.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()})
    return {"_class_name": class_name, "_diffusers_version": ver or version(repo, commit), **cfg}


def dumps(obj) -> str:
    """As diffusers and transformers serialise a config."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def main(doc: str, out: Path, build: Callable[[Path], dict]) -> int:
    """Writes build(repo)'s {relative path: config} under `out`, or with --check compares (exit 1 on a difference)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diffusers-repo", required=True, type=Path, help="a git clone of huggingface/diffusers")
    ap.add_argument("--check", action="store_true", help="compare with configs/models, write nothing")
    args = ap.parse_args()
    files = build(args.diffusers_repo)
    bad = 0
    for rel, obj in sorted(files.items()):
        path = out / rel
        text = dumps(obj)
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            bad += not same
            print(("same   " if same else "DIFFERS"), f"{len(text.encode()):>5d}", rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"{len(text.encode()):>5d} {text.count(chr(10)):>3d} lines  {rel}")
    return 1 if bad else 0
