"""vllm_engine.py CONFIG-JSON - one vLLM engine, driven by JSON lines.

Started by vllm_support.Engine (tests, bench).  Builds an LLM on CPU from
CONFIG (model dir, kvtier extra config or null for no connector, engine id,
max_model_len, prefix_caching), prints "@@" + {"startup_s": ...}, then
answers each stdin line with one "@@" + JSON line on stdout:

  {"op": "generate", "prompts": [{"prompt_token_ids": [...], "cache_salt": s,
   "params": {kv_transfer_params}}], "logprobs": N}
      -> {"results": [{"token", "logprobs": [N floats by token id] or null,
          "kv_transfer_params", "wall_s"}]}: prompts run one at a time, each
          with max_tokens=1, so wall_s is the request's time to first token.
  {"op": "stats", "rank": 0, "drain": true}
                               -> kvtier.vllm.query_stats of that worker (drain:
                                  once its loads and stores in flight are done)
  {"op": "serve", "prompts": [{"prompt_token_ids", "cache_salt", "params",
   "max_tokens"}]}             -> every prompt submitted at once to the engine
                                  (batched by vLLM's scheduler), greedy,
                                  max_tokens each (EOS ignored), stepped
                                  until done; a prompt with "after_steps": K
                                  is added once K engine steps returned:
                                  {"wall_s", "steps", "results": [{"t": [time
                                  of each output token after the first
                                  submission, s], "submitted": its own
                                  submission, s, "kv_transfer_params",
                                  "cached": tokens from vLLM's own prefix
                                  cache}]}
  {"op": "reset"}              -> LLM.reset_prefix_cache() (vLLM's own cache)
  {"op": "exit"}               -> shuts the engine down and exits 0
"""
import json
import os
import sys
import time
import traceback


def out(obj):
    sys.stdout.write("@@" + json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(llm, prompts):
    """All prompts at once through the engine's step loop, each output
    token's time recorded as the step that produced it returns."""
    from vllm import SamplingParams
    eng = llm.llm_engine
    times = {}
    submitted = {}
    t0 = time.perf_counter()

    def add(i, p):
        sp = SamplingParams(max_tokens=p["max_tokens"], temperature=0.0, ignore_eos=True,
                            detokenize=False,
                            extra_args={"kv_transfer_params": p.get("params") or {}})
        prompt = {"prompt_token_ids": p["prompt_token_ids"]}
        if p.get("cache_salt"):
            prompt["cache_salt"] = p["cache_salt"]
        rid = f"serve-{t0}-{i}"
        submitted[rid] = time.perf_counter() - t0
        eng.add_request(rid, prompt, sp)

    cached = {}  # request -> vLLM's num_cached_tokens (its own prefix cache)
    later = []  # (steps to wait, index, prompt): added once that many steps returned
    for i, p in enumerate(prompts):
        times[f"serve-{t0}-{i}"] = ([], None)
        if p.get("after_steps"):
            later.append((p["after_steps"], i, p))
        else:
            add(i, p)
    steps = 0
    while later or eng.has_unfinished_requests():
        for item in [x for x in later if x[0] <= steps]:
            later.remove(item)
            add(item[1], item[2])
        outs = eng.step()
        steps += 1
        now = time.perf_counter() - t0
        for o in outs:
            ts, _ = times.get(o.request_id, (None, None))
            if ts is None:
                continue
            n = len(o.outputs[0].token_ids) if o.outputs else 0
            ts.extend([now] * (n - len(ts)))
            if o.finished:
                times[o.request_id] = (ts, o.kv_transfer_params)
                cached[o.request_id] = getattr(o, "num_cached_tokens", None)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "steps": steps,
            "results": [{"t": ts, "kv_transfer_params": kvp, "submitted": submitted[rid],
                         "cached": cached.get(rid)}
                        for rid, (ts, kvp) in times.items()]}


def main():
    cfg = json.loads(sys.argv[1])
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    kw = {}
    if cfg.get("kvtier") is not None:
        kw["kv_transfer_config"] = KVTransferConfig(
            kv_connector="KVTierConnector", kv_connector_module_path="kvtier.vllm",
            kv_role="kv_both", engine_id=cfg["engine_id"],
            kv_load_failure_policy="recompute",
            kv_connector_extra_config=cfg["kvtier"])
    t0 = time.time()
    llm = LLM(model=cfg["model"], skip_tokenizer_init=True, enforce_eager=True,
              dtype="bfloat16", max_model_len=cfg["max_model_len"],
              enable_prefix_caching=cfg["prefix_caching"], seed=0,
              max_logprobs=cfg.get("max_logprobs", 20),
              num_gpu_blocks_override=cfg.get("num_blocks"), **kw)
    out({"startup_s": time.time() - t0})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "exit":
                break
            if req["op"] == "reset":  # empty vLLM's own prefix cache
                out({"reset": bool(llm.reset_prefix_cache())})
                continue
            if req["op"] == "stats":
                from kvtier.vllm import query_stats
                out(query_stats(cfg["engine_id"], req.get("rank", 0),
                                drain=req.get("drain", False)))
                continue
            if req["op"] == "serve":
                out(serve(llm, req["prompts"]))
                continue
            results = []
            for p in req["prompts"]:
                n_lp = req.get("logprobs", 0)
                sp = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False,
                                    logprobs=n_lp or None,
                                    extra_args={"kv_transfer_params": p.get("params") or {}})
                prompt = {"prompt_token_ids": p["prompt_token_ids"]}
                if p.get("cache_salt"):
                    prompt["cache_salt"] = p["cache_salt"]
                t = time.perf_counter()
                o = llm.generate([prompt], sp, use_tqdm=False)[0]
                wall = time.perf_counter() - t
                c = o.outputs[0]
                lps = None
                if n_lp and c.logprobs:
                    lps = [None] * n_lp
                    for tok, lp in c.logprobs[0].items():
                        if tok < n_lp:
                            lps[tok] = lp.logprob
                results.append({"token": c.token_ids[0], "logprobs": lps, "wall_s": wall,
                                "kv_transfer_params": o.kv_transfer_params})
            out({"results": results})
        except Exception:
            out({"error": traceback.format_exc()})
    # The engine's shutdown, explicit (not left to a finalizer): its core
    # and workers (the connector's worker side closes its store there) have
    # exited when this returns.
    llm.llm_engine.engine_core.shutdown()
    del llm
    # Then out without the interpreter's finalization: its garbage
    # collection of torch's and vLLM's modules took 3 to 8 s of each
    # engine's close (gdb: Py_FinalizeEx, finalize_modules), three closes a
    # run, with nothing of kvtier's left in this process to finish.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
