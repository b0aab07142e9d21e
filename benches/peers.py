#!/usr/bin/env python3
"""canarysim beside its peers, in one run on this machine (issue 31).

Starts two pods (`canarysim backend`, blue and yellow) and, in front of them at 80/20,
nginx, HAProxy and Envoy (as .ci/run installs them), plus canarysim's own live router
(`canarysim serve`, a scenario held at the seed's 20 % pause; its pods are served in its
own process). Each front end is driven by wrk and by `canarysim load`, in interleaved rounds
so that the machine's noise falls on all alike, and the script prints medians and ratios:

* front ends: req/s (wrk, -c CONNS), wrk's p99, and CPU µs per request of the front end
  with its pods (canarysim's router process does both);
* load generators: req/s and CPU µs per request of `canarysim load` over wrk's, against
  each front end.

    benches/peers.py [--rounds 3] [--seconds 5] [--connections 20] [--bin target/release/canarysim]

Every process listens on 127.0.0.1, on ports picked at run time, and is stopped at exit.
A front end that is not installed is skipped with a note. Timings stay out of the tests:
this is a benchmark, read by people (README "Performance").
"""

import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "rollouts-demo.local"
TICK = os.sysconf("SC_CLK_TCK")
# Loopback only: a configured HTTP proxy must not carry the readiness probe.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, name, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"peers: {name} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"peers: {name} did not listen on {port} within {seconds} s")


def cpu_seconds(pids):
    """User + system CPU of these processes (all their threads), from /proc."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICK


class Processes:
    def __init__(self, work):
        self.work = work
        self.running = []

    def start(self, name, argv, port=None, stdout=subprocess.DEVNULL):
        with open(os.path.join(self.work, f"{name}.log"), "w") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=log,
                                    cwd=self.work, start_new_session=True)
        self.running.append(proc)
        if port:
            wait_for_port(port, proc, name)
        return proc

    def stop(self):
        for proc in self.running:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def nginx_conf(work, port, blue, yellow):
    return f"""master_process off;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {work}/body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  upstream app {{
    server 127.0.0.1:{blue} weight=80;
    server 127.0.0.1:{yellow} weight=20;
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    keepalive_requests 1000000;
    location / {{
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""


def haproxy_conf(port, blue, yellow):
    return f"""global
  maxconn 4096
  nbthread 1
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend front
  bind 127.0.0.1:{port}
  default_backend pods
backend pods
  balance roundrobin
  http-reuse always
  server blue 127.0.0.1:{blue} weight 80
  server yellow 127.0.0.1:{yellow} weight 20
"""


def envoy_conf(port, blue, yellow):
    def cluster(name, p):
        return {"name": name, "type": "STATIC", "connect_timeout": "5s",
                "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {
                        "address": "127.0.0.1", "port_value": p}}}}]}]}}
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network"
                 ".http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "ingress",
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
        "route_config": {"virtual_hosts": [{"name": "rollouts-demo", "domains": ["*"],
            "routes": [{"match": {"prefix": "/"}, "route": {"weighted_clusters": {"clusters": [
                {"name": "stable", "weight": 80}, {"name": "canary", "weight": 20}]}}}]}]},
    }
    return {"static_resources": {
        "listeners": [{"name": "ingress", "address": {"socket_address": {
            "address": "127.0.0.1", "port_value": port}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": manager}]}]}],
        "clusters": [cluster("stable", blue), cluster("canary", yellow)]}}


def serve_scenario(work):
    """The seed walkthrough up to its 20 % pause (indefinite): `serve` holds it there."""
    manifests = os.path.join(ROOT, "scenarios", "manifests")
    path = os.path.join(work, "held-at-20.yaml")
    with open(path, "w") as f:
        f.write(f"""name: held-at-20
seed: 1
namespace: my-demo
manifests:
  - file: {manifests}/seed-004-rollout.yaml
  - file: {manifests}/seed-004-services.yaml
  - file: {manifests}/seed-004-gateway.yaml
  - file: {manifests}/seed-004-virtualsvc.yaml
cluster:
  pod_ready_after: 5s
  push_delay: 100ms
  # As `canarysim backend` answers: at once.
  backends:
    argoproj/rollouts-demo:blue: {{latency: 0ms}}
    argoproj/rollouts-demo:yellow: {{latency: 0ms}}
traffic: {{host: {HOST}, port: 80, connections: 16}}
steps:
  - wait: {{until: healthy, rollout: rollouts-demo, timeout: 2m}}
  - apply: {manifests}/seed-004-rollout-update.yaml
  - wait: {{until: paused, timeout: 5m}}
""")
    return path


def start_front_ends(procs, binary, work):
    """name -> (port, pids whose CPU counts: the front end and its pods)."""
    blue, yellow = free_port(), free_port()
    pods = [procs.start(name, [binary, "backend", "--name", name, "--port", str(port)], port)
            for name, port in [("blue", blue), ("yellow", yellow)]]
    pod_pids = [p.pid for p in pods]
    fronts = {}

    # canarysim's router: its process serves the pods too.
    serve = procs.start("canarysim-serve", [binary, "serve", serve_scenario(work),
                                            "--time-scale", "100"], stdout=subprocess.PIPE)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in serve.stdout], daemon=True).start()
    port, deadline = None, time.time() + 60
    while port is None and time.time() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if serve.poll() is not None:
                break
            continue
        m = re.search(r"router listening on http://127\.0\.0\.1:(\d+)", line.decode())
        if m:
            port = int(m.group(1))
    if port is None:
        sys.exit("peers: canarysim serve printed no router address within 60 s")
    wait_until_canary_served(port)
    fronts["canarysim"] = (port, [serve.pid])

    # name -> (configuration file, its text for a port, the command line that reads it)
    peers = {
        "nginx": ("nginx.conf", lambda port: nginx_conf(work, port, blue, yellow),
                  lambda conf: ["nginx", "-p", work, "-c", conf]),
        "haproxy": ("haproxy.cfg", lambda port: haproxy_conf(port, blue, yellow),
                    lambda conf: ["haproxy", "-db", "-f", conf]),
        "envoy": ("envoy.json", lambda port: json.dumps(envoy_conf(port, blue, yellow)),
                  lambda conf: ["envoy", "-c", conf, "--concurrency", "1", "-l", "error",
                                "--use-dynamic-base-id"]),
    }
    for name, (file, text, argv) in peers.items():
        if not shutil.which(name):
            print(f"peers: {name} is not installed: skipped")
            continue
        port = free_port()
        conf = os.path.join(work, file)
        with open(conf, "w") as f:
            f.write(text(port))
        fronts[name] = (port, [procs.start(name, argv(conf), port).pid] + pod_pids)
    return fronts


def wait_until_canary_served(port, seconds=60):
    """The scenario reaches its pause in about a wall second at --time-scale 100."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        seen = set()
        for _ in range(50):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Host": HOST})
            try:
                seen.add(json.loads(DIRECT.open(request, timeout=5).read())["version"])
            except (OSError, ValueError, KeyError):
                pass
        if {"blue", "yellow"} <= seen:
            return
        time.sleep(0.5)
    sys.exit("peers: canarysim's router never served both versions")


def timed(argv):
    """Runs argv; returns (stdout, CPU seconds it used)."""
    before = os.times()
    out = subprocess.run(argv, capture_output=True, check=True).stdout.decode()
    after = os.times()
    return out, (after.children_user - before.children_user) + (
        after.children_system - before.children_system)


def run_wrk(port, seconds, connections):
    out, cpu = timed(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                      "-H", f"Host: {HOST}", f"http://127.0.0.1:{port}/"])
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    p99_us = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rate": rate, "requests": requests, "p99_us": p99_us, "cpu": cpu,
            "errors": int(errors.group(1)) if errors else 0}


def run_canarysim_load(binary, port, seconds, connections):
    out, cpu = timed([binary, "load", f"http://127.0.0.1:{port}/", "-z", f"{seconds}s",
                      "-c", str(connections), "--host", HOST, "--format", "json", "--quiet"])
    d = json.loads(out)
    return {"rate": d["throughput"], "requests": d["sent"], "p99_us": d["latency"]["p99"],
            "cpu": cpu,
            # Requests in flight when -z ends are cut ("deadline"), not the front end's errors.
            "errors": d["sent"] - d["classes"]["2xx"] - d["classes"]["deadline"]}


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "canarysim"))
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("peers: wrk is not installed (apt-get install wrk)")
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"peers: {args.bin} not found: cargo build --release first")

    # A kill (a CI timeout) unwinds through the cleanup below: the children run in
    # sessions of their own, which a signal to this process group does not reach.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    work = tempfile.mkdtemp(prefix="canarysim-peers-")
    procs = Processes(work)
    try:
        fronts = start_front_ends(procs, args.bin, work)
        results = {(f, g): [] for f in fronts for g in ("wrk", "canarysim load")}
        for r in range(args.rounds):
            for front, (port, pids) in fronts.items():
                for gen in ("wrk", "canarysim load"):
                    before = cpu_seconds(pids)
                    if gen == "wrk":
                        res = run_wrk(port, args.seconds, args.connections)
                    else:
                        res = run_canarysim_load(args.bin, port, args.seconds, args.connections)
                    res["front_cpu"] = cpu_seconds(pids) - before
                    if res["errors"] or not res["rate"]:
                        sys.exit(f"peers: {front} answered {res['errors']} of "
                                 f"{res['requests']} requests with an error ({gen})")
                    results[(front, gen)].append(res)
                    print(f"round {r + 1} {front:10} {gen:15} {res['rate']:9.0f} req/s "
                          f"p99 {res['p99_us']:7.0f} µs", flush=True)
        report(results, fronts, args)
    finally:
        procs.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(results, fronts, args):
    def med(front, gen, f):
        return median([f(r) for r in results[(front, gen)]])

    rate = lambda r: r["rate"]
    p99 = lambda r: r["p99_us"]
    front_cpu = lambda r: 1e6 * r["front_cpu"] / max(r["requests"], 1)
    gen_cpu = lambda r: 1e6 * r["cpu"] / max(r["requests"], 1)

    print(f"\nfront ends, driven by wrk -t1 -c{args.connections} "
          f"({args.rounds} rounds of {args.seconds} s, medians)")
    print(f"{'front end':12}{'req/s':>10}{'p99 µs':>10}{'CPU µs/req':>12}  (front end + pods)")
    for front in fronts:
        print(f"{front:12}{med(front, 'wrk', rate):10.0f}{med(front, 'wrk', p99):10.0f}"
              f"{med(front, 'wrk', front_cpu):12.1f}")
    ours = med("canarysim", "wrk", rate)
    for peer in ("nginx", "haproxy", "envoy"):
        if peer in fronts:
            print(f"canarysim's router / {peer}: {ours / med(peer, 'wrk', rate):.2f}× req/s, "
                  f"p99 {med('canarysim', 'wrk', p99):.0f} vs {med(peer, 'wrk', p99):.0f} µs")

    print(f"\nload generators, -c {args.connections} (medians): canarysim load / wrk")
    print(f"{'front end':12}{'req/s ratio':>12}{'wrk CPU µs/req':>16}{'ours':>8}")
    for front in fronts:
        ratio = median([c["rate"] / w["rate"] for c, w in
                        zip(results[(front, "canarysim load")], results[(front, "wrk")])])
        print(f"{front:12}{ratio:12.2f}{med(front, 'wrk', gen_cpu):16.1f}"
              f"{med(front, 'canarysim load', gen_cpu):8.1f}")


if __name__ == "__main__":
    main()
