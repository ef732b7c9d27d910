#!/usr/bin/env python3
"""Where a cold pod's start goes: create N pods from a pool Deployment's template, one
at a time, and note with this host's clock when each status change first arrives by
watch (the pod's own status times have 1 s resolution; these are what a driver
waiting on a watch sees). Prints each pod's timeline and a Markdown table of medians.

usage: KUBECONFIG=... scripts/cold-timeline.py NAMESPACE DEPLOYMENT N
(kubectl from $KUBECTL, else PATH). The pods are labelled warmpod-timeline=1, get
restartPolicy Never, and are deleted after each is Ready. bench/cold-pod-timeline.md
says what it showed on the kube-e2e cluster.
"""
import json
import os
import subprocess
import sys
import time

K = [os.environ.get("KUBECTL", "kubectl")]


def one(ns, dep, tmpl):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": dep + "-timeline-", "labels": {"warmpod-timeline": "1"},
                        "annotations": tmpl["metadata"].get("annotations", {})},
           "spec": dict(tmpl["spec"], restartPolicy="Never")}
    w = subprocess.Popen(K + ["-n", ns, "get", "pods", "-l", "warmpod-timeline=1", "-w", "-o", "json",
                              "--output-watch-events"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the watch is open before the create
    t0 = time.time()
    out = subprocess.run(K + ["-n", ns, "create", "-o", "json", "-f", "-"], input=json.dumps(pod),
                         capture_output=True, text=True, check=True)
    name = json.loads(out.stdout)["metadata"]["name"]
    seen = {"create returned": time.time() - t0}
    buf, dec = "", json.JSONDecoder()
    try:
        for line in w.stdout:
            buf += line
            try:
                ev, _ = dec.raw_decode(buf.strip())
            except ValueError:
                continue  # an event spans several lines
            buf = ""
            now = time.time() - t0
            p = ev["object"]
            if p["metadata"]["name"] != name:
                continue
            st = p.get("status", {})
            for c in st.get("conditions", []):
                if c["status"] == "True":
                    seen.setdefault("condition " + c["type"], now)
            for kind in ("initContainerStatuses", "containerStatuses"):
                for cs in st.get(kind, []):
                    for s in ("running", "terminated"):
                        if s in cs.get("state", {}):
                            seen.setdefault("container " + cs["name"] + " " + s, now)
            if "condition Ready" in seen or st.get("phase") in ("Failed", "Succeeded"):
                break
    finally:
        w.kill()
        subprocess.run(K + ["-n", ns, "delete", "pod", name, "--wait=false"], capture_output=True)
    return seen


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ns, dep, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tmpl = json.loads(subprocess.check_output(K + ["-n", ns, "get", "deploy", dep, "-o", "json"]))["spec"]["template"]
    rows = []
    for i in range(n):
        seen = one(ns, dep, tmpl)
        rows.append(seen)
        print(i, {k: round(v * 1000) for k, v in sorted(seen.items(), key=lambda kv: kv[1])}, flush=True)
        time.sleep(3)  # the last pod's teardown out of the way
    med = lambda v: sorted(v)[len(v) // 2]
    keys = sorted({k for r in rows for k in r}, key=lambda k: med([r[k] for r in rows if k in r]))
    print("| first seen by watch, ms from the create call (median, min-max of %d pods) | |" % n)
    print("|---|---|")
    for k in keys:
        v = [r[k] for r in rows if k in r]
        print("| %s | %d (%d-%d) |" % (k, med(v) * 1000, min(v) * 1000, max(v) * 1000))


if __name__ == "__main__":
    main()
