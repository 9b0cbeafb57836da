#!/usr/bin/env python3
"""test_prometheus.py - deploy/prometheus/kvtier-rules.yml and the Grafana
dashboard against the real tools.

Usage: test_prometheus.py MODE SOURCE-DIR KVTIERD KVTIER, MODE one of:

  rules   `promtool check rules` and `promtool test rules` (the fixed-series
          unit tests in kvtier-rules.test.yml); every metric name the rules
          and the dashboard use is in doc/metrics.md, and every one that a
          plain kvtierd always exports is in a real kvtierd's /metrics (the
          rest are the per-tenant, KV-events and etcd series, which appear
          with tenants, events on and --etcd: the server mode scrapes the
          tenant and events ones).
  doc     every metric doc/metrics.md lists against a real /metrics, type
          and label names, both ways (t_doc); never skips.
  server  (suite deploy-slow) a real Prometheus server (Debian's
          `prometheus`, on 127.0.0.1) scrapes a real kvtierd with a tenants
          file every second while `kvtier replay` drives a small synthetic
          trace through it as tenant "alice"; then, through Prometheus's
          HTTP API, every recording rule, every query of every dashboard
          panel and every PromQL example of doc/metrics.md returns data, and
          every rule's health is "ok".

Skips (77) only when promtool or prometheus is not installed, or (dashboard)
when the package index cannot be reached (tests/lib/pipvenv.py's probe).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pipvenv  # noqa: E402


# Series a kvtierd exports only in some configurations.
CONDITIONAL = re.compile(r"^kvtier_(tenant_|cluster_etcd_|cluster_changes_|events_)")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rule_metric_names(text):
    """Metric names (kvtier_*, without histogram suffixes) in PromQL text."""
    names = set(re.findall(r"\bkvtier_[a-z0-9_]+", text))
    return {re.sub(r"_(bucket|sum|count)$", "", n) if "duration" in n else n for n in names}


def documented(src):
    doc = open(os.path.join(src, "doc", "metrics.md")).read()
    names = set()
    for n in re.findall(r"`(kvtier_[a-z0-9_<>]+)", doc):
        for tier in ("dram", "ssd"):
            names.add(n.replace("<tier>", tier))
    return names


def scrape(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    return urllib.request.urlopen(req, timeout=10).read().decode()


def start_kvtierd(kvtierd, tmp, *extra):
    log = open(os.path.join(tmp, "kvtierd.log"), "w+")
    p = subprocess.Popen([kvtierd, "--dir", os.path.join(tmp, "data"), "--listen",
                          "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--dram", "64M", "--ssd",
                          "64M", "--set", "ssd.segment=8M", "--threads", "2", *extra],
                         stdout=subprocess.DEVNULL, stderr=log, cwd=tmp)
    native = metrics = None
    deadline = time.time() + 60
    while time.time() < deadline and not (native and metrics):
        if p.poll() is not None:
            log.seek(0)
            fail("kvtierd exited: " + log.read())
        log.seek(0)
        text = log.read()
        m = re.search(r'msg="listening on ([0-9.:]+)"', text)
        native = m and m.group(1)
        m = re.search(r'msg="metrics listener on ([0-9.:]+)"', text)
        metrics = m and m.group(1)
        time.sleep(0.1)
    if not (native and metrics):
        p.kill()
        fail("kvtierd did not start")
    return p, native, metrics


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def dashboard_queries(src):
    path = os.path.join(src, "deploy", "grafana", "kvtier-dashboard.json")
    if not os.path.exists(path):
        return []
    d = json.load(open(path))
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
    walk(d.get("panels", []) + [p for r in d.get("rows", []) for p in r.get("panels", [])])
    return out


def doc_queries(src):
    """The PromQL examples of doc/metrics.md (its code spans with a rate())."""
    doc = open(os.path.join(src, "doc", "metrics.md")).read()
    return [("doc/metrics.md", q) for q in re.findall(r"`([^`\n]*\brate\([^`\n]*)`", doc)]


def t_rules(src, kvtierd, kvtier, tmp):
    promtool = shutil.which("promtool")
    if not promtool:
        print("SKIP: promtool not installed (Debian package prometheus)")
        sys.exit(77)
    d = os.path.join(src, "deploy", "prometheus")
    for args in (["check", "rules", "kvtier-rules.yml"],
                 ["test", "rules", "kvtier-rules.test.yml"]):
        r = subprocess.run([promtool, *args], cwd=d, capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0 or "SUCCESS" not in r.stdout:
            fail(f"promtool {' '.join(args)}: {r.stdout}{r.stderr}")
    rules = open(os.path.join(d, "kvtier-rules.yml")).read()
    used = rule_metric_names(rules)
    for _, expr in dashboard_queries(src):
        used |= rule_metric_names(expr)
    doc = documented(src)
    undocumented = sorted(used - doc)
    if undocumented:
        fail(f"used but not in doc/metrics.md: {undocumented}")
    p, native, metrics = start_kvtierd(kvtierd, tmp)
    try:
        text = scrape(f"http://{metrics}/metrics")
    finally:
        stop(p)
    exported = set(re.findall(r"^(kvtier_[a-z0-9_]+?)(?:_bucket|_sum|_count)?[{ ]", text, re.M))
    exported |= set(re.findall(r"^(kvtier_[a-z0-9_]+)[{ ]", text, re.M))
    missing = sorted(n for n in used if n not in exported and not CONDITIONAL.match(n))
    if missing:
        fail(f"used but not exported by kvtierd: {missing}")
    print(f"{len(used)} metric names used by the rules and dashboard: documented, "
          f"and exported ({len([n for n in used if CONDITIONAL.match(n)])} conditional)")


def prom_query(base, q):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    r = json.loads(urllib.request.urlopen(url, timeout=10).read())
    if r.get("status") != "success":
        fail(f"query {q}: {r}")
    return r["data"]["result"]


def t_server(src, kvtierd, kvtier, tmp):
    prom = shutil.which("prometheus")
    if not prom:
        print("SKIP: prometheus not installed")
        sys.exit(77)
    secret = "s3cret-for-the-prometheus-test"
    tenants = os.path.join(tmp, "tenants")
    with open(os.path.join(tmp, "secret"), "w") as f:
        f.write(secret)
    with open(tenants, "w") as f:
        f.write(f"alice {secret} tenant\n")
    os.chmod(tenants, 0o600)
    os.chmod(os.path.join(tmp, "secret"), 0o600)
    p, native, metrics = start_kvtierd(kvtierd, tmp, "--tenants", tenants)
    # The rules as shipped, but evaluated every second instead of 30 s.
    rules = open(os.path.join(src, "deploy", "prometheus", "kvtier-rules.yml")).read()
    with open(os.path.join(tmp, "rules.yml"), "w") as f:
        f.write(rules.replace("interval: 30s", "interval: 1s"))
    port = free_port()
    with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
        f.write(f"""global: {{ scrape_interval: 1s, evaluation_interval: 1s }}
rule_files: [rules.yml]
scrape_configs:
  - job_name: kvtierd
    static_configs: [{{ targets: ["{metrics}"] }}]
""")
    plog = open(os.path.join(tmp, "prometheus.log"), "w")
    pp = subprocess.Popen([prom, "--config.file=prometheus.yml", "--storage.tsdb.path=tsdb",
                           f"--web.listen-address=127.0.0.1:{port}"], cwd=tmp,
                          stdout=plog, stderr=plog)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if urllib.request.urlopen(base + "/-/ready", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or pp.poll() is not None:
                fail("prometheus did not become ready: " + open(plog.name).read()[-2000:])
            time.sleep(0.5)
        # One scrape before the load, so that rates have a "before".
        while not prom_query(base, 'up{job="kvtierd"} == 1'):
            if time.time() > deadline:
                fail("prometheus never scraped kvtierd: " + open(plog.name).read()[-2000:])
            time.sleep(0.5)
        # The engine's DRAM (4 MiB) holds a tenth of the trace's 1782
        # distinct 32 KiB blocks: its misses go to kvtierd.  The second
        # pass starts cold and reads back what the first stored there.
        replay = [kvtier, "replay", "--synth=400", "--dram", "4M", "--bytes-per-token", "64",
                  "--server", native, "--tenant", "alice", "--secret-file",
                  os.path.join(tmp, "secret"), "--no-progress", "--dir", tmp]
        for _ in range(2):
            t0 = time.time()
            r = subprocess.run(replay, capture_output=True, text=True, timeout=300, cwd=tmp)
            if r.returncode != 0:
                fail(f"replay: {r.stdout[-2000:]}{r.stderr[-2000:]}")
            m = re.search(r"hits from kvtierd\s+(\d+)", r.stdout)
            print(f"replay: {time.time() - t0:.1f} s, hits from kvtierd: {m and m.group(1)}")
            time.sleep(2)
        # Then the rules and panels are checked, again every second until
        # all pass or 60 s are up (Prometheus scrapes and evaluates every
        # second; on a loaded machine some take longer than the usual
        # few seconds): what must hold is the same, only the wait is bounded
        # by the outcome instead of a fixed sleep.
        records = re.findall(r"^\s*- record: (\S+)", rules, re.M)
        queries = dashboard_queries(src) + doc_queries(src)
        if len(doc_queries(src)) < 2:
            fail(f"doc/metrics.md's PromQL examples not found: {doc_queries(src)}")
        skipped = [(t, e) for t, e in queries if "etcd" in e]
        queries = [(t, e) for t, e in queries if "etcd" not in e]
        for title, expr in skipped:
            print(f"  not evaluated (needs kvtierd --etcd): panel '{title}': {expr}")
        t_wait = time.time()
        deadline = t_wait + 60
        while True:
            time.sleep(1)
            empty, shown, not_positive = [], [], []
            for name in records:
                res = prom_query(base, name)
                if not res:
                    empty.append(name)
                else:
                    shown.append(f"  {name}: {len(res)} series, e.g. {res[0]['metric']} = "
                                 f"{res[0]['value'][1]}")
            # The load shows: these must be positive, not just present.
            for q in ('kvtier:tier_hits:rate5m{tier="dram"}', 'kvtier:reads:rate5m',
                      'kvtier:tier_bytes_in:rate5m{tier="dram"}',
                      'kvtier:tenant_requests:rate5m{tenant="alice"}',
                      'kvtier:tenant_bytes_in:rate5m{tenant="alice"}',
                      'kvtier:request_duration_seconds:p99_5m{op="read",tier="dram"}',
                      'kvtier:request_duration_seconds:p50_5m{op="write"}',
                      'kvtier:hit_ratio:rate5m'):
                if not prom_query(base, q + " > 0"):
                    not_positive.append(f"{q} is not positive: {prom_query(base, q)}")
            for title, expr in queries:
                q = expr.replace("$instance", ".*").replace("$job", "kvtierd").replace(
                    "$__rate_interval", "1m").replace("$__interval", "5s")
                if not prom_query(base, q):
                    empty.append(f"panel '{title}': {expr}")
            rules_api = json.loads(urllib.request.urlopen(base + "/api/v1/rules",
                                                          timeout=10).read())
            bad = [(r["name"], r.get("lastError")) for g in rules_api["data"]["groups"]
                   for r in g["rules"] if r.get("health") != "ok"]
            n_rules = sum(len(g["rules"]) for g in rules_api["data"]["groups"])
            if not (empty or not_positive or bad) or time.time() > deadline:
                break
        print("\n".join(shown))
        print(f"rules and panels checked {time.time() - t_wait:.0f} s after the load")
        if not_positive:
            fail("; ".join(not_positive))
        if bad:
            fail(f"rules not healthy: {bad}")
        if empty:
            fail("no data for: " + "; ".join(empty))
        print(f"{len(records)} recording rules and {len(queries)} dashboard queries return data; "
              f"{n_rules} rules healthy")
    finally:
        pp.send_signal(signal.SIGTERM)
        try:
            pp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pp.kill()
        stop(p)


def t_dashboard(src, kvtierd, kvtier, tmp):
    """deploy/grafana/kvtier-dashboard.json is what dashboard.py generates
    with the pinned grafanalib (a venv under the build directory)."""
    here = os.path.join(src, "deploy", "grafana")
    reqs = re.search(r"^REQUIREMENTS = (\[.*\])$", open(os.path.join(here, "dashboard.py")).read(),
                     re.M)
    reqs = json.loads(reqs.group(1).replace("'", '"'))
    # Pinned, made once (tests/lib/pipvenv.py: 77 only when a separate
    # probe cannot reach the package index, else 1 with the log).
    py = pipvenv.venv(os.path.join(os.environ.get("KVT_DEPLOY_VENVS", tmp), "venv-grafanalib"),
                      [reqs])
    r = subprocess.run([py, os.path.join(here, "dashboard.py")], capture_output=True, text=True)
    if r.returncode != 0:
        fail("dashboard.py: " + r.stderr[-2000:])
    committed = open(os.path.join(here, "kvtier-dashboard.json")).read()
    if r.stdout != committed:
        fail("deploy/grafana/kvtier-dashboard.json is not what dashboard.py generates: "
             "run it and commit the output")
    d = json.loads(committed)
    panels = [p for p in d["panels"] if p["type"] != "row"]
    kinds = sorted(set(p["type"] for p in panels))
    n = len(dashboard_queries(src))
    if n < 20 or "heatmap" not in kinds:
        fail(f"{n} queries, panel types {kinds}")
    print(f"kvtier-dashboard.json regenerated identically: {len(panels)} panels {kinds}, "
          f"{n} queries")


# Exported only with --etcd (a running etcd): documented, not scraped here.
ETCD_ONLY = {"kvtier_cluster_etcd_up", "kvtier_cluster_etcd_errors_total",
             "kvtier_cluster_changes_total"}
# Families whose series come only with an event (a tenant's KV events
# dropped): exported with their TYPE, their labels checked when they have
# a sample (test_hostile kvevents_metrics checks them).
SAMPLES_ON_EVENT = {"kvtier_events_tenant_dropped_total"}


def doc_tables(src):
    """doc/metrics.md's "Every metric" tables: {name: (type, labels)} for the
    names of each row's first column (<tier> expanded; labels from {...},
    without values), and every kvtier_ name written anywhere in the page."""
    doc = open(os.path.join(src, "doc", "metrics.md")).read()
    body = doc[doc.index("## Every metric"):doc.index("## Tested")]
    rows = {}
    for line in body.splitlines():
        cols = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cols) < 3 or cols[1] not in ("counter", "gauge", "histogram"):
            continue
        for name, labels in re.findall(r"`(kvtier_[a-z0-9_<>]+)(?:\{([^}`]*)\})?`", cols[0]):
            lset = frozenset(re.sub(r"=.*", "", l).strip()
                             for l in re.split(r",(?![^\"]*\")", labels) if l.strip())
            for tier in ("dram", "ssd"):
                rows[name.replace("<tier>", tier)] = (cols[1], lset)
    anywhere = set()
    for n in re.findall(r"`(kvtier_[a-z0-9_<>]+)", doc):
        anywhere |= {n.replace("<tier>", t) for t in ("dram", "ssd")}
    kinds = re.search(r"`kvtier_errors_total\{kind\}` \| counter \|([^\n]*)", doc)
    return rows, anywhere, set(re.findall(r"`([a-z_]+)`", kinds.group(1))) if kinds else set()


def exposition(text):
    """{family: (type, label names)} from a /metrics page (histograms'
    _bucket, _sum and _count folded into their family, le left out)."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    fams = {n: (t, set()) for n, t in types.items()}
    for name, labels in re.findall(r"^(kvtier_[a-z0-9_]+)(?:\{([^}]*)\})? ", text, re.M):
        fam = name if name in types else re.sub(r"_(bucket|sum|count)$", "", name)
        if fam not in fams:
            fail(f"sample {name} has no # TYPE line")
        fams[fam][1].update(re.findall(r"([a-z_]+)=\"", labels))
    return {n: (t, frozenset(l - {"le"})) for n, (t, l) in fams.items()}


def resp(addr, *cmds):
    """RESP2 commands over one connection; the raw answers."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for c in cmds:
            s.sendall(f"*{len(c)}\r\n".encode() +
                      b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in c))
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def t_doc(src, kvtierd, kvtier, tmp):
    """Every metric doc/metrics.md lists is exported with its documented type
    and label names, and every metric kvtierd exports is in doc/metrics.md,
    by a server with every conditional family but etcd's: a tenants file
    (per-tenant series after a request), a member list (kvtier_repair_*),
    RESP and S3 listeners, and namespaces that counted something
    (kvtier_ns_*).  The error kinds the page lists are the ones exported.
    The rules and the dashboard use only exported names (etcd's aside)."""
    secret = "s3cret-for-the-metrics-doc-test"
    tenants = os.path.join(tmp, "tenants")
    with open(tenants, "w") as f:
        f.write(f"alice {secret} admin\n")
    os.chmod(tenants, 0o600)
    sec = os.path.join(tmp, "secret")
    with open(sec, "w") as f:
        f.write(secret)
    os.chmod(sec, 0o600)
    port = free_port()
    p, native, metrics = start_kvtierd(kvtierd, tmp, "--tenants", tenants, "--resp",
                                       "127.0.0.1:0", "--s3", "127.0.0.1:0", "--members",
                                       f"127.0.0.1:{port}", "--advertise", f"127.0.0.1:{port}")
    try:
        log = open(os.path.join(tmp, "kvtierd.log")).read()
        raddr = re.search(r'msg="RESP listener on ([0-9.:]+)"', log).group(1)
        out = resp(raddr, ["AUTH", "alice", secret], ["SET", "k", "v"], ["GET", "k"],
                   ["GET", "missing"])
        if out != b"+OK\r\n+OK\r\n$1\r\nv\r\n$-1\r\n":
            fail(f"RESP answers: {out!r}")
        blob = os.path.join(tmp, "blob")
        with open(blob, "wb") as f:
            f.write(os.urandom(3000))
        for args in (["put", "-i", blob, "k1"], ["get", "-o", os.devnull, "k1"]):
            r = subprocess.run([kvtier, args[0], "--server", native, "--tenant", "alice",
                                "--secret-file", sec, *args[1:]], capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"kvtier {args[0]}: {r.stderr}")
        text = scrape(f"http://{metrics}/metrics")
    finally:
        stop(p)
    rows, anywhere, kinds = doc_tables(src)
    fams = exposition(text)
    if len(rows) < 60 or len(fams) < 80:
        fail(f"only {len(rows)} documented rows, {len(fams)} exported families parsed")
    problems = []
    for name, (typ, labels) in sorted(rows.items()):
        if name in ETCD_ONLY:
            continue
        if name not in fams:
            problems.append(f"{name}: documented, not exported")
        elif name in SAMPLES_ON_EVENT and fams[name] == (typ, frozenset()):
            continue
        elif fams[name] != (typ, labels):
            problems.append(f"{name}: documented {typ} {sorted(labels)}, exported "
                            f"{fams[name][0]} {sorted(fams[name][1])}")
    for name, (typ, _) in sorted(fams.items()):
        if name not in anywhere:
            problems.append(f"{name}: exported ({typ}), not in doc/metrics.md")
        if (typ == "counter") != name.endswith("_total"):
            problems.append(f"{name}: a {typ}; counters, and only they, end in _total")
    got = set(re.findall(r'^kvtier_errors_total\{kind="([a-z_]+)"\}', text, re.M))
    if got != kinds:
        problems.append(f"kvtier_errors_total kinds: exported {sorted(got)}, documented "
                        f"{sorted(kinds)}")
    rules = open(os.path.join(src, "deploy", "prometheus", "kvtier-rules.yml")).read()
    used = rule_metric_names(rules)
    for _, expr in dashboard_queries(src):
        used |= rule_metric_names(expr)
    for name in sorted(used - set(fams) - ETCD_ONLY):
        problems.append(f"{name}: used by the rules or the dashboard, not exported")
    if problems:
        fail("doc/metrics.md and /metrics differ:\n  " + "\n  ".join(problems))
    print(f"{len(rows)} documented metrics exported with their types and labels "
          f"({len(ETCD_ONLY)} etcd-only aside); all {len(fams)} exported families documented; "
          f"{len(kinds)} error kinds; {len(used)} names of the rules and dashboard exported")


def main():
    mode, src, kvtierd, kvtier = sys.argv[1:5]
    with tempfile.TemporaryDirectory(prefix="deploy-prom-") as tmp:
        globals()["t_" + mode](os.path.abspath(src), os.path.abspath(kvtierd),
                               os.path.abspath(kvtier), tmp)


if __name__ == "__main__":
    main()
