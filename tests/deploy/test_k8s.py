#!/usr/bin/env python3
"""test_k8s.py - deploy/k8s: every overlay renders with kustomize (kubectl's
built-in), validates against the Kubernetes OpenAPI schemas with
kubernetes-validate (pinned, PyPI) for Kubernetes K8S_VERSION, and every
kvtierd container's command line is accepted by `kvtierd --check-config`.

Usage: test_k8s.py SOURCE-DIR KVTIERD WORK-DIR.  The venv with the pinned
requirements is WORK-DIR/venv-k8s (made once); the script re-runs itself
in it.  For each overlay in deploy/k8s/overlays:

  1. `kubectl kustomize` renders it; the kinds are the ones expected;
  2. `kubernetes-validate --strict -k K8S_VERSION` passes every object;
     the one kind without a schema there, the Prometheus Operator's
     ServiceMonitor (a CRD), is the only one reported unvalidated;
  3. the shape holds: probes on /healthz, tenants and token from Secrets,
     for the pod store a headless Service, a PodDisruptionBudget, topology
     spread over kvtier.io/rack, a preStop hook, etcd registration;
  4. each kvtierd container's args, with $(VAR)s expanded as the kubelet
     would, the ConfigMap's kvtierd.conf written out, the paths of the
     mounted files moved under a temporary root where the test writes a
     tenants file and a token as the Secrets would hold them, and
     --config=F turned into --check-config F, pass `kvtierd
     --check-config` (exit 0); the same with a broken --etcd URL exits 2.

Skips (77) without kubectl, or when the package index cannot be reached
(tests/lib/pipvenv.py's probe; a bad pin fails).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import pipvenv  # noqa: E402

K8S_VERSION = "1.32.0"   # the kubectl this image ships (v1.32.4, kustomize v5.5.0; not a Debian package)
REQUIREMENTS = ["kubernetes-validate==1.37.0", "PyYAML==6.0.4", "jsonschema==4.26.0",
                "referencing==0.37.0"]
EXPECT = {
    "single-gpu": {"Namespace", "ConfigMap", "StorageClass", "PersistentVolume",
                   "PersistentVolumeClaim", "Deployment", "Service"},
    "pod": {"Namespace", "ConfigMap", "StatefulSet", "Service", "PodDisruptionBudget",
            "ServiceMonitor"},
    "pod-external-etcd": {"Namespace", "ConfigMap", "StatefulSet", "Service",
                          "PodDisruptionBudget", "ServiceMonitor"},
}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def venv(work):
    """WORK/venv-k8s with REQUIREMENTS (tests/lib/pipvenv.py: made once,
    pinned; exits 77 only when a separate probe cannot reach the index,
    1 with the installer's log on any other failed install)."""
    return pipvenv.venv(os.path.join(work, "venv-k8s"), [REQUIREMENTS])


def check_shape(name, objs):
    import yaml  # noqa: F401
    kinds = {o["kind"] for o in objs}
    if kinds != EXPECT[name]:
        fail(f"{name}: kinds {sorted(kinds)}, want {sorted(EXPECT[name])}")
    work = [o for o in objs if o["kind"] in ("Deployment", "StatefulSet")
            and o["metadata"]["name"] == "kvtierd"]
    if len(work) != 1:
        fail(f"{name}: no kvtierd workload")
    spec = work[0]["spec"]["template"]["spec"]
    c = [c for c in spec["containers"] if c["name"] == "kvtierd"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if c[probe]["httpGet"]["path"] != "/healthz":
            fail(f"{name}: {probe} not on /healthz")
    # A recovery longer than liveness's patience (periodSeconds x
    # failureThreshold) must not get the pod killed: the startup probe
    # allows at least 10 minutes.
    st = c["startupProbe"]
    if st.get("periodSeconds", 10) * st.get("failureThreshold", 3) < 600:
        fail(f"{name}: the startupProbe allows less than 10 minutes to start")
    secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    if secrets != {"kvtier-tenants", "kvtier-metrics-token"}:
        fail(f"{name}: secrets {secrets}")
    if name.startswith("pod"):
        svc = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "kvtierd"][0]
        if svc["spec"].get("clusterIP") != "None":
            fail(f"{name}: the kvtierd Service is not headless")
        keys = {t["topologyKey"] for t in spec["topologySpreadConstraints"]}
        if "kvtier.io/rack" not in keys:
            fail(f"{name}: no spread over racks")
        if "preStop" not in c.get("lifecycle", {}):
            fail(f"{name}: no preStop hook")
        if not any(a.startswith("--etcd=http") for a in c["args"]):
            fail(f"{name}: no etcd registration")
        etcd = [o for o in objs if o["metadata"]["name"] == "kvtier-etcd"]
        if bool(etcd) != (name == "pod"):
            fail(f"{name}: etcd objects {len(etcd)}")
    return c, objs


def check_command(name, c, objs, kvtierd, tmp):
    cm = [o for o in objs if o["kind"] == "ConfigMap"][0]
    root = os.path.join(tmp, name)
    os.makedirs(os.path.join(root, "etc/kvtier/tenants"))
    os.makedirs(os.path.join(root, "etc/kvtier/metrics"))
    os.makedirs(os.path.join(root, "var/lib/kvtierd"))

    def move(s):
        return s.replace("/etc/kvtier/", root + "/etc/kvtier/").replace(
            "/var/lib/kvtierd", root + "/var/lib/kvtierd")
    with open(os.path.join(root, "etc/kvtier/kvtierd.conf"), "w") as f:
        f.write(move(cm["data"]["kvtierd.conf"]))
    for rel, text in (("etc/kvtier/tenants/tenants", "alice secret-of-alice-0123456789 tenant\n"),
                      ("etc/kvtier/metrics/token", "metrics-token-0123456789abcdef\n")):
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
        os.chmod(os.path.join(root, rel), 0o400)
    env = {"POD_NAME": "kvtierd-0", "POD_NAMESPACE": "kvtier"}
    args = []
    for a in c["args"]:
        a = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], move(a))
        if a.startswith("--config="):
            args += ["--check-config", a[len("--config="):]]
        else:
            args.append(a)
    if not c["command"][0].endswith("/kvtierd") or "--check-config" not in args:
        fail(f"{name}: command {c['command']} {c['args']}")
    r = subprocess.run([kvtierd, *args], capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        fail(f"{name}: kvtierd {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    print(f"  {name}: kvtierd {' '.join(c['args'])}: accepted")
    bad = [re.sub(r"^--etcd=http://", "--etcd=", a) for a in args]
    if bad != args:
        r = subprocess.run([kvtierd, *bad], capture_output=True, text=True, cwd=tmp)
        if r.returncode != 2 or "--etcd" not in r.stderr:
            fail(f"{name}: a broken --etcd passed: {r.returncode} {r.stderr}")


def inner(src, kvtierd, tmp):
    import yaml
    kubectl = shutil.which("kubectl")
    validate = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    overlays = sorted(os.listdir(os.path.join(src, "deploy", "k8s", "overlays")))
    if set(overlays) != set(EXPECT):
        fail(f"overlays {overlays}, the test knows {sorted(EXPECT)}")
    for name in overlays:
        r = subprocess.run([kubectl, "kustomize", os.path.join(src, "deploy", "k8s", "overlays", name)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"kubectl kustomize {name}: {r.stderr}")
        path = os.path.join(tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(r.stdout)
        objs = [o for o in yaml.safe_load_all(r.stdout) if o]
        v = subprocess.run([validate, "--strict", "-k", K8S_VERSION, path], capture_output=True,
                           text=True)
        out = v.stdout + v.stderr
        passed = re.findall(r"passed for resource", out)
        unvalidated = re.findall(r"Couldn't find schema for kind (\w+)", out)
        if v.returncode != 0 or re.search(r"\b(ERROR|failed)\b", out):
            fail(f"kubernetes-validate {name}:\n{out}")
        if len(passed) + len(unvalidated) != len(objs) or set(unvalidated) - {"ServiceMonitor"}:
            fail(f"kubernetes-validate {name}: {len(passed)} passed, unvalidated {unvalidated}, "
                 f"{len(objs)} objects\n{out}")
        print(f"{name}: {len(objs)} objects; kubernetes-validate --strict -k {K8S_VERSION}: "
              f"{len(passed)} passed" + (f", no schema for {unvalidated}" if unvalidated else ""))
        c, objs = check_shape(name, objs)
        check_command(name, c, objs, kvtierd, tmp)


def main():
    src, kvtierd, work = (os.path.abspath(a) for a in sys.argv[1:4])
    if os.environ.get("KVT_K8S_INNER"):
        with tempfile.TemporaryDirectory(prefix="deploy-k8s-") as tmp:
            inner(src, kvtierd, tmp)
        return
    if not shutil.which("kubectl"):
        print("SKIP: kubectl not installed (scripts/deps.txt)")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    py = venv(work)
    r = subprocess.run([py, os.path.abspath(__file__), src, kvtierd, work],
                       env=dict(os.environ, KVT_K8S_INNER="1"))
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
