#!/usr/bin/env python3
"""The held-out hostile inputs of issue 34, run against a canarysim binary.

Two sources of inputs:

* the committed files `tests/held-out/*.yaml`, each starting with comment lines
  `# command: run|lint|compare|envoy-config|plan`, `# expect: refused|any`, `# tries: ...`
  and optionally `# args: ...` (the command's arguments, shell-quoted; `{file}` is the input,
  `{dir}` its folder; default: `{file}`);
* the big ones (deep nesting, lines of 10-100 MB, many documents, garbage, folders),
  generated here into a temporary directory, each just before it runs and removed after.

Each input runs once with stdin from /dev/null, in a process group of its own, killed after
the timeout. Its peak RSS is the child's ru_maxrss (wait4). A run fails on: an exit code other
than 0, 1 or 2 (101 is a panic, 134 an abort, 137/139 killed/segfault), a run past the
timeout, a peak RSS over the limit, "panicked" or "RUST_BACKTRACE" in stderr, or exit 0 on an
input that expects `refused` (nonsense must exit 1 or 2).

An input listed in `known-failures.txt` (beside the inputs: `NAME  the defect`, one a line)
fails for a defect described there and not fixed yet: it is reported as KNOWN and does not
fail the run, but passing does (the list must shrink as defects are fixed). `--strict`
counts known failures as failures.

Exit status: 0 when every input passed, 1 when one failed, 2 on a usage or set error.
"""

import argparse
import os
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

COMMANDS = ("run", "lint", "compare", "envoy-config", "plan")
EXPECTS = ("refused", "any")
MB = 1 << 20


class Case:
    """One input: a name, the arguments after `canarysim`, what it expects and tries, and an
    optional `make(tmp)` that writes its files first (generated inputs)."""

    def __init__(self, name, argv, expect, tries, make=None):
        self.name, self.argv, self.expect, self.tries, self.make = name, argv, expect, tries, make


# ---------------------------------------------------------------------------------------------
# The committed inputs.


def read_header(path):
    """The `# key: value` lines at the top of a committed input (after a BOM; CRLF too)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    fields = {}
    for raw in head.splitlines():
        line = raw.rstrip(b"\r").decode("utf-8", "replace")
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def committed(folder):
    cases, errors = [], []
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        if not entry.endswith(".yaml") or not os.path.isfile(path):
            continue
        h = read_header(path)
        problems = []
        if h.get("command") not in COMMANDS:
            problems.append(f"`# command:` is one of {', '.join(COMMANDS)}")
        if h.get("expect") not in EXPECTS:
            problems.append("`# expect:` is `refused` or `any`")
        if not h.get("tries"):
            problems.append("`# tries:` says what the input tries")
        if h.get("command") == "plan" and "args" not in h:
            problems.append("`plan` takes `# args:` (SHARE and flags, not a file)")
        if problems:
            errors.append(f"{path}: " + "; ".join(problems))
            continue
        args = [a.replace("{file}", path).replace("{dir}", folder)
                for a in shlex.split(h.get("args", "{file}"))]
        cases.append(Case(entry, [h["command"], *args], h["expect"], h["tries"]))
    return cases, errors


# ---------------------------------------------------------------------------------------------
# The generated inputs: too big to commit, or not files at all.

SERVICES = "../../scenarios/manifests/seed-004-services.yaml"
HEAD = """name: generated
namespace: my-demo
manifests:
  - file: {root}/scenarios/manifests/seed-004-rollout.yaml
  - file: {root}/scenarios/manifests/seed-004-services.yaml
  - file: {root}/scenarios/manifests/seed-004-gateway.yaml
  - file: {root}/scenarios/manifests/seed-004-virtualsvc.yaml
traffic: {{host: rollouts-demo.local}}
"""
STEPS = """steps:
  - wait: {until: healthy, timeout: 1m}
  - wait: 1s
  - load: {requests: 1000}
  - expect_split: {stable: 100%, within: 1%}
"""


def write(path, *chunks):
    """Writes text or bytes chunks (generators welcome) to `path`."""
    with open(path, "wb") as f:
        for chunk in chunks:
            if isinstance(chunk, (list, tuple)) or hasattr(chunk, "__next__"):
                for c in chunk:
                    f.write(c.encode() if isinstance(c, str) else c)
            else:
                f.write(chunk.encode() if isinstance(chunk, str) else chunk)


def repeat(text, times, block=1 << 16):
    """`text` * times, in pieces, so that 100 MB is never one Python string."""
    per = max(1, block // max(1, len(text)))
    while times > 0:
        n = min(per, times)
        yield text * n
        times -= n


def generated(root):
    """The generated cases. `make(tmp)` writes the input into `tmp` and returns nothing; the
    arguments name files in `tmp` as `{tmp}/...`."""
    head = HEAD.format(root=root)
    g = []

    def case(name, command, args, expect, tries, make):
        g.append(Case("gen/" + name, [command, *args], expect, tries, make))

    # Deep nesting, block and flow, maps and lists, in the scenario and in manifests.
    def block_maps(levels):
        def make(tmp):
            write(f"{tmp}/deep.yaml", head, "steps:\n  - expect:\n      objects:\n        -\n",
                  (" " * (10 + 2 * i) + "a:\n" for i in range(levels)),
                  " " * (12 + 2 * levels) + "b\n")
        return make

    case("deep-block-maps-1000", "run", ["{tmp}/deep.yaml"], "refused",
         "1,000 levels of block mappings under expect.objects", block_maps(1000))
    case("deep-block-maps-5000", "lint", ["{tmp}/deep.yaml"], "refused",
         "5,000 levels of block mappings (25 MB of indentation), linted", block_maps(5000))
    case("deep-block-lists-200000", "run", ["{tmp}/deep.yaml"], "refused",
         "200,000 levels of compact block sequences `- - - - x` as a step",
         lambda tmp: write(f"{tmp}/deep.yaml", head, "steps:\n  ", repeat("- ", 200_000), "x\n"))
    case("deep-flow-lists-200000", "run", ["{tmp}/deep.yaml"], "refused",
         "200,000 levels of flow sequences as the steps",
         lambda tmp: write(f"{tmp}/deep.yaml", head, "steps: ", repeat("[", 200_000),
                           repeat("]", 200_000), "\n"))
    case("deep-flow-maps-200000", "compare", ["{tmp}/deep.yaml"], "refused",
         "200,000 levels of flow mappings as cluster.backends",
         lambda tmp: write(f"{tmp}/deep.yaml", head, "cluster: {backends: ",
                           repeat("{a: ", 200_000), "1", repeat("}", 200_000), "}\n", STEPS))
    case("deep-flow-mixed-unclosed", "envoy-config", ["{tmp}/deep.yaml"], "refused",
         "100,000 levels of `[{a: ` never closed, to the end of the file",
         lambda tmp: write(f"{tmp}/deep.yaml", head, "traffic: ", repeat("[{a: ", 100_000), "\n"))
    case("deep-flow-manifest-file", "run", ["{tmp}/deep.yaml"], "refused",
         "a manifest file of 200,000 nested flow sequences in a Rollout's steps",
         lambda tmp: (write(f"{tmp}/m.yaml", "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\n"
                            "metadata: {name: deep}\nspec: {strategy: {canary: {steps: ",
                            repeat("[", 200_000), repeat("]", 200_000), "}}}\n"),
                      write(f"{tmp}/deep.yaml", "name: deep\nmanifests: [{file: m.yaml}]\n"
                            "steps:\n  - wait: 1s\n")))
    case("deep-flow-inline-manifest", "run", ["{tmp}/deep.yaml"], "refused",
         "an inline manifest (a block scalar) holding 150,000 nested flow mappings",
         lambda tmp: write(f"{tmp}/deep.yaml", "name: deep\nmanifests:\n  - inline: |\n"
                           "      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: c}\n"
                           "      data: ", repeat("{a: ", 150_000), "b", repeat("}", 150_000),
                           "\nsteps:\n  - wait: 1s\n"))
    case("deep-flow-apply-step", "run", ["{tmp}/deep.yaml"], "refused",
         "an apply step whose inline YAML nests 200,000 flow sequences, after traffic ran",
         lambda tmp: write(f"{tmp}/deep.yaml", head, STEPS, "  - apply: {inline: \"x: ",
                           repeat("[", 200_000), repeat("]", 200_000), "\"}\n"))
    case("deep-flow-lint-manifest", "lint", ["{tmp}/deep.yaml"], "refused",
         "lint of a manifest nesting 200,000 flow mappings in metadata.labels",
         lambda tmp: write(f"{tmp}/deep.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s, "
                           "labels: ", repeat("{a: ", 200_000), "b", repeat("}", 200_000), "}\n"))
    case("deep-flow-at-99", "run", ["{tmp}/deep.yaml"], "any",
         "flow nesting just under the documented bound (97 levels inside expect.objects)",
         lambda tmp: write(f"{tmp}/deep.yaml", head, STEPS, "  - expect: {objects: [",
                           "{a: " * 95, "b", "}" * 95, "]}\n"))

    # Long lines and scalars.
    case("long-name-10mb", "run", ["{tmp}/long.yaml"], "any",
         "a 10 MB plain scalar as the scenario's name",
         lambda tmp: write(f"{tmp}/long.yaml", "name: ", repeat("n", 10 * MB), "\n",
                           head.split("\n", 1)[1], STEPS))
    case("long-description-60mb", "run", ["{tmp}/long.yaml"], "any",
         "a 60 MB double-quoted description, under the 64 MiB file bound",
         lambda tmp: write(f"{tmp}/long.yaml", head, 'description: "', repeat("d\\t", 20 * MB),
                           '"\n', STEPS))
    case("long-line-100mb", "run", ["{tmp}/long.yaml"], "refused",
         "a 100 MB line (over the 64 MiB bound) in the description",
         lambda tmp: write(f"{tmp}/long.yaml", head, "description: ", repeat("x", 100 * MB), "\n",
                           STEPS))
    case("long-manifest-100mb", "lint", ["{tmp}/long.yaml"], "refused",
         "lint of a 100 MB manifest, one line of annotation",
         lambda tmp: write(f"{tmp}/long.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n"
                           "  name: s\n  annotations: {a: ", repeat("y", 100 * MB), "}\n"))
    case("long-image-10mb", "run", ["{tmp}/long.yaml"], "any",
         "a 10 MB image in set_image, then a rollout and traffic",
         lambda tmp: write(f"{tmp}/long.yaml", head, STEPS,
                           "  - set_image: {rollout: rollouts-demo, container: rollouts-demo, "
                           "image: ", repeat("i", 10 * MB), "}\n  - wait: 30s\n"
                           "  - load: {requests: 1000}\n"))
    case("long-label-value-10mb", "run", ["{tmp}/long.yaml"], "refused",
         "a 10 MB label value on a Service (Kubernetes allows 63 characters)",
         lambda tmp: write(f"{tmp}/long.yaml", "name: label\nmanifests:\n  - inline: |\n"
                           "      apiVersion: v1\n      kind: Service\n      metadata: {name: s, "
                           "labels: {a: ", repeat("v", 10 * MB), "}}\n      spec: {ports: "
                           "[{port: 80}]}\nsteps:\n  - wait: 1s\n"))
    case("long-key-20mb", "envoy-config", ["{tmp}/long.yaml"], "refused",
         "a 20 MB key in the scenario's traffic mapping",
         lambda tmp: write(f"{tmp}/long.yaml", head, "  ", repeat("k", 20 * MB), ": 1\n", STEPS))
    case("long-flow-list-nodes", "run", ["{tmp}/long.yaml"], "refused",
         "a 30 MB line `steps: [1,1,1,...]`: 15 million nodes",
         lambda tmp: write(f"{tmp}/long.yaml", head, "steps: [", repeat("1,", 15_000_000), "1]\n"))
    case("long-comment-then-scenario", "run", ["{tmp}/long.yaml"], "any",
         "a 50 MB comment line, then a valid scenario",
         lambda tmp: write(f"{tmp}/long.yaml", "#", repeat("#", 50 * MB), "\n", head, STEPS))
    case("long-tabs-50mb", "run", ["{tmp}/long.yaml"], "refused",
         "50 MB of tabs as indentation before a key",
         lambda tmp: write(f"{tmp}/long.yaml", head, repeat("\t", 50 * MB), "steps: []\n"))
    case("long-crlf-blank-lines", "run", ["{tmp}/long.yaml"], "any",
         "20 million CRLF blank lines between the keys of a valid scenario",
         lambda tmp: write(f"{tmp}/long.yaml", head.replace("\n", "\r\n"),
                           repeat("\r\n", 20_000_000), STEPS.replace("\n", "\r\n")))
    case("long-single-quotes", "compare", ["{tmp}/long.yaml"], "any",
         "a 16 MB single-quoted scalar made of escaped quotes '' as the description",
         lambda tmp: write(f"{tmp}/long.yaml", head, "description: '", repeat("''", 8 * MB), "'\n",
                           STEPS))
    case("long-plan-argument", "plan", [], "refused",
         "plan with a 100 KB share argument (no file at all)", None)
    g[-1].argv = ["plan", "2" * 100_000 + "%"]

    # Many documents, many objects, many steps.
    case("many-docs-scenario", "run", ["{tmp}/many.yaml"], "refused",
         "a scenario file of 100,000 YAML documents (which one is the scenario?)",
         lambda tmp: write(f"{tmp}/many.yaml", head, STEPS, repeat("---\nname: again\n", 100_000)))
    case("many-empty-docs-manifest", "run", ["{tmp}/many.yaml"], "any",
         "a manifest file of 300,000 empty documents `---`",
         lambda tmp: (write(f"{tmp}/m.yaml", repeat("---\n", 300_000)),
                      write(f"{tmp}/many.yaml", head.replace("manifests:\n",
                            "manifests:\n  - file: m.yaml\n"), STEPS)))
    case("many-services", "run", ["{tmp}/many.yaml"], "any",
         "20,000 Service documents applied beside the walkthrough, then traffic",
         lambda tmp: (write(f"{tmp}/m.yaml", (
             f"---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\n"
             f"spec: {{selector: {{app: s{i}}}, ports: [{{port: 80}}]}}\n" for i in range(20_000))),
             write(f"{tmp}/many.yaml", head.replace("manifests:\n",
                   "manifests:\n  - file: m.yaml\n"), STEPS)))
    case("many-same-rollout", "lint", ["{tmp}/m.yaml"], "refused",
         "lint of one file holding the same Rollout 5,000 times (refers to no Service)",
         lambda tmp: write(f"{tmp}/m.yaml", repeat(
             "---\napiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\n"
             "spec:\n  selector: {matchLabels: {app: r}}\n  template:\n    metadata: {labels: "
             "{app: r}}\n    spec: {containers: [{name: r, image: r}]}\n  strategy:\n    canary:\n"
             "      canaryService: c\n      stableService: s\n      steps: [{setWeight: 5}]\n",
             5000)))
    case("many-same-manifest-file", "run", ["{tmp}/many.yaml"], "any",
         "the same manifest file listed 20,000 times in manifests",
         lambda tmp: write(f"{tmp}/many.yaml", head.split("traffic:")[0], repeat(
             f"  - file: {root}/scenarios/manifests/seed-004-services.yaml\n", 20_000),
             "traffic:" + head.split("traffic:")[1], STEPS))
    case("many-nanosecond-waits", "run", ["{tmp}/many.yaml"], "any",
         "30,000 `wait: 1ns` steps while background traffic flows",
         lambda tmp: write(f"{tmp}/many.yaml", head.replace(
             "traffic: {host: rollouts-demo.local}", "traffic: {host: rollouts-demo.local, "
             "background: {rate: 10000}}"), STEPS, repeat("  - wait: 1ns\n", 30_000)))
    case("many-huge-waits", "run", ["{tmp}/many.yaml"], "any",
         "10,000 waits of Go's longest duration (2562047h47m16.854775807s): 2.9 million years in all",
         lambda tmp: write(f"{tmp}/many.yaml", head, STEPS,
                           repeat("  - wait: 2562047h47m16.854775807s\n", 10_000)))
    case("many-loads", "run", ["{tmp}/many.yaml"], "any",
         "5,000 load steps of 1,000 requests each (5 million simulated requests; 20 million "
         "took 26 s of the 30 on a slow CI machine, a throughput race, not a hang)",
         lambda tmp: write(f"{tmp}/many.yaml", head, STEPS,
                           repeat("  - load: {requests: 1000}\n", 5_000)))
    case("many-promotes", "run", ["{tmp}/many.yaml"], "any",
         "set_image, then 20,000 promote/abort/retry steps without waits",
         lambda tmp: write(f"{tmp}/many.yaml", head, STEPS,
                           "  - set_image: {rollout: rollouts-demo, container: rollouts-demo, "
                           "image: argoproj/rollouts-demo:yellow}\n",
                           repeat("  - promote: rollouts-demo\n  - abort: rollouts-demo\n"
                                  "  - retry: rollouts-demo\n", 7000)))

    def rollout_steps(tmp, pairs):
        write(f"{tmp}/m.yaml", open(
            f"{root}/scenarios/manifests/seed-004-rollout.yaml").read().split("      steps:")[0],
            "      steps:\n", (f"      - setWeight: {i % 100 + 1}\n      - pause: {{duration: 0s}}\n"
                              for i in range(pairs)),
            "  selector: {matchLabels: {app: rollouts-demo}}\n  template:\n    metadata: "
            "{labels: {app: rollouts-demo}}\n    spec: {containers: [{name: rollouts-demo, "
            "image: argoproj/rollouts-demo:blue}]}\n")
        write(f"{tmp}/many.yaml", head.replace(
            f"{root}/scenarios/manifests/seed-004-rollout.yaml", "m.yaml"), STEPS,
            "  - set_image: {rollout: rollouts-demo, container: rollouts-demo, "
            "image: argoproj/rollouts-demo:yellow}\n  - wait: {until: healthy, timeout: 1h}\n")

    # Each step change writes the whole Rollout's status (quadratic in the steps, as in a
    # real controller): canarysim simulates at most 1,000 steps.
    case("many-rollout-steps", "run", ["{tmp}/many.yaml"], "refused",
         "a Rollout of 5,000 canary steps (setWeight 1..100 and 0s pauses, 140 KB), updated",
         lambda tmp: rollout_steps(tmp, 2_500))
    case("rollout-steps-at-bound", "run", ["{tmp}/many.yaml"], "any",
         "a Rollout of 1,000 canary steps, the most canarysim simulates, updated to the end",
         lambda tmp: rollout_steps(tmp, 500))

    # Garbage, endless input, encodings.
    def garbage(tmp, size=1 * MB, seed=34):
        write(f"{tmp}/garbage.yaml", random.Random(seed).randbytes(size))

    for command in ("run", "lint", "compare", "envoy-config"):
        case(f"garbage-1mb-{command}", command, ["{tmp}/garbage.yaml"], "refused",
             f"1 MB of random bytes, {command}", garbage)
    case("garbage-nul-10mb", "run", ["{tmp}/garbage.yaml"], "refused", "10 MB of NUL bytes",
         lambda tmp: write(f"{tmp}/garbage.yaml", repeat("\0", 10 * MB)))
    case("garbage-dev-zero", "run", ["/dev/zero"], "refused",
         "/dev/zero as the scenario: endless input", None)
    case("garbage-dev-urandom", "lint", ["/dev/urandom"], "refused",
         "/dev/urandom as a manifest: endless random input", None)
    case("garbage-invalid-utf8-middle", "run", ["{tmp}/garbage.yaml"], "refused",
         "a valid scenario with one invalid UTF-8 byte in a step's rollout name",
         lambda tmp: write(f"{tmp}/garbage.yaml", head, STEPS,
                           b"  - promote: rollouts-\xff-demo\n"))
    case("garbage-utf16", "run", ["{tmp}/garbage.yaml"], "refused",
         "a valid scenario encoded in UTF-16 LE with its BOM",
         lambda tmp: write(f"{tmp}/garbage.yaml", (head + STEPS).encode("utf-16")))
    case("garbage-empty-file", "run", ["{tmp}/garbage.yaml"], "refused",
         "an empty file", lambda tmp: write(f"{tmp}/garbage.yaml", ""))
    case("garbage-bom-only", "lint", ["{tmp}/garbage.yaml"], "any",
         "a manifest file that is only a BOM (an empty manifest file)",
         lambda tmp: write(f"{tmp}/garbage.yaml", b"\xef\xbb\xbf"))
    case("garbage-two-boms", "run", ["{tmp}/garbage.yaml"], "refused",
         "two byte-order marks before a valid scenario",
         lambda tmp: write(f"{tmp}/garbage.yaml", b"\xef\xbb\xbf\xef\xbb\xbf", head, STEPS))
    case("garbage-symlink-loop", "run", ["{tmp}/garbage.yaml"], "refused",
         "a manifest file that is a symbolic link to itself",
         lambda tmp: (os.symlink(f"{tmp}/loop.yaml", f"{tmp}/loop.yaml"),
                      write(f"{tmp}/garbage.yaml", "name: loop\nmanifests: [{file: loop.yaml}]\n"
                            "steps: [{wait: 1s}]\n")))
    case("garbage-manifest-is-dir", "run", ["{tmp}/garbage.yaml"], "refused",
         "a manifest `file:` that is a directory",
         lambda tmp: (os.mkdir(f"{tmp}/d"), write(f"{tmp}/garbage.yaml",
                      "name: dir\nmanifests: [{file: d}]\nsteps: [{wait: 1s}]\n")))
    case("garbage-missing-file", "envoy-config", ["{tmp}/nothing-here.yaml"], "refused",
         "a scenario path that does not exist", lambda tmp: None)

    # Folders.
    case("dir-empty", "run", ["{tmp}/d"], "refused", "run of an empty directory",
         lambda tmp: os.mkdir(f"{tmp}/d"))
    case("dir-only-manifests", "run", ["{tmp}/d"], "refused",
         "run of a directory holding only Kubernetes manifests",
         lambda tmp: (os.mkdir(f"{tmp}/d"), [shutil.copy(
             f"{root}/scenarios/manifests/seed-004-{m}.yaml", f"{tmp}/d/")
             for m in ("rollout", "services", "gateway", "virtualsvc")]))
    case("dir-only-subdirs", "run", ["{tmp}/d"], "refused",
         "run of a directory whose only scenario is in a subdirectory",
         lambda tmp: (os.makedirs(f"{tmp}/d/sub"),
                      write(f"{tmp}/d/sub/s.yaml", head, STEPS)))
    case("dir-garbage-beside-valid", "run", ["{tmp}/d"], "refused",
         "a directory of one valid scenario and one file of random bytes named .yaml",
         lambda tmp: (os.mkdir(f"{tmp}/d"), write(f"{tmp}/d/a.yaml", head, STEPS),
                      write(f"{tmp}/d/b.yaml", random.Random(7).randbytes(4096))))
    case("dir-300-scenarios", "run", ["{tmp}/d"], "any",
         "a directory of 300 small scenarios",
         lambda tmp: (os.mkdir(f"{tmp}/d"), [write(f"{tmp}/d/s{i:03}.yaml", head, STEPS)
                                             for i in range(300)]))
    case("dir-lint-empty", "lint", ["{tmp}/d"], "refused", "lint of an empty directory",
         lambda tmp: os.mkdir(f"{tmp}/d"))
    case("dir-yaml-named-dir", "run", ["{tmp}/d"], "refused",
         "run of a directory holding only a directory named x.yaml",
         lambda tmp: os.makedirs(f"{tmp}/d/x.yaml"))
    return g


# ---------------------------------------------------------------------------------------------
# Running one input.


def limit_child():
    # A safety net for the shared machine: address space is capped at 8 GiB (the verdict's
    # limit is the peak RSS, measured below; a capped run fails by its exit code).
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def grep_file(path, needles, chunk=1 << 20):
    keep = max(len(n) for n in needles)
    tail = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                return None
            window = tail + block
            for n in needles:
                if n in window:
                    return n.decode()
            tail = window[-keep:]


def first_line(path, limit=160):
    with open(path, "rb") as f:
        text = f.read(4096).decode("utf-8", "replace")
    line = next((l for l in text.splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[:limit] + "…"


def run_one(binary, case, tmp, timeout, env):
    argv = [binary] + [a.replace("{tmp}", tmp) for a in case.argv]
    out_path, err_path = os.path.join(tmp, ".stdout"), os.path.join(tmp, ".stderr")
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                start_new_session=True, preexec_fn=limit_child)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            kill_group(proc.pid)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            # Ctrl-C or SIGTERM while it runs: the child is in a session of its own (it did
            # not get the signal), so it is ended here, not left behind.
            kill_group(proc.pid)
            os.waitpid(proc.pid, 0)
            proc.returncode = -9
            raise
        finally:
            timer.cancel()
        seconds = time.monotonic() - start
        proc.returncode = status  # reaped here: Popen must not wait for it again
        # Whatever the child left in its group goes too.
        kill_group(proc.pid)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        code = 128 - code  # as a shell shows a signal
    rss_mb = usage.ru_maxrss / 1024
    return code, seconds, rss_mb, timed_out.is_set(), out_path, err_path


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def judge(case, code, seconds, rss_mb, timed_out, err_path, timeout, rss_limit):
    """What is wrong with one run, as (kind, words) pairs; kinds are counted in the summary."""
    reasons = []
    if timed_out:
        reasons.append(("hang", f"hang: killed after {timeout:g} s"))
    elif code == 101:
        reasons.append(("panic", "panic (exit 101)"))
    elif code not in (0, 1, 2):
        reasons.append(("crash", f"crash (exit {code})"))
    if seconds > timeout and not timed_out:
        reasons.append(("hang", f"over {timeout:g} s"))
    if rss_mb > rss_limit:
        reasons.append(("rss", f"peak RSS {rss_mb:.0f} MB over {rss_limit} MB"))
    found = grep_file(err_path, [b"panicked", b"RUST_BACKTRACE"])
    if found and code != 101:
        reasons.append(("stderr", f"{found!r} in stderr"))
    if case.expect == "refused" and code == 0 and not timed_out:
        reasons.append(("nonsense", "exit 0 on nonsense"))
    return reasons


def read_known(folder):
    """`known-failures.txt`: input name → the defect it shows."""
    known = {}
    path = os.path.join(folder, "known-failures.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    name, _, why = line.partition(" ")
                    known[name] = why.strip()
    return known


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="the canarysim binary")
    p.add_argument("--dir", default="tests/held-out", help="the committed inputs")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per run")
    p.add_argument("--rss-mb", type=int, default=1024, help="peak RSS limit per run, in MB")
    p.add_argument("--only", help="run the inputs whose name contains this")
    p.add_argument("--list", action="store_true", help="list the inputs and what they try")
    p.add_argument("--verbose", action="store_true", help="print each run's first stderr line")
    p.add_argument("--strict", action="store_true", help="known failures fail the run too")
    a = p.parse_args()

    root = os.getcwd()
    cases, errors = committed(a.dir)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    cases += generated(root)
    known = {} if a.strict else read_known(a.dir)
    stray = sorted(set(known) - {c.name for c in cases})
    if stray:
        print(f"hostile-inputs: known-failures.txt names no input: {', '.join(stray)}",
              file=sys.stderr)
        return 2
    if a.only:
        cases = [c for c in cases if a.only in c.name]
    if a.list:
        for c in cases:
            print(f"{c.name:44} {' '.join(c.argv)[:50]:50} {c.expect:8} {c.tries}")
        print(f"{len(cases)} inputs")
        return 0
    binary = os.path.abspath(a.bin)
    if not os.access(binary, os.X_OK):
        print(f"hostile-inputs: {a.bin}: not an executable", file=sys.stderr)
        return 2

    env = {k: v for k, v in os.environ.items() if k not in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE")}
    env["NO_COLOR"] = "1"
    tmp = tempfile.mkdtemp(prefix="canarysim-hostile-")
    # A Ctrl-C or a CI timeout's SIGTERM still removes the temporary files.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failed, known_failed = [], []
    counts = {"panic": 0, "hang": 0, "rss": 0, "nonsense": 0, "crash": 0, "stderr": 0}
    max_t, max_rss = (0.0, ""), (0.0, "")
    began = time.monotonic()
    try:
        for case in cases:
            work = os.path.join(tmp, "case")
            os.mkdir(work)
            try:
                if case.make:
                    case.make(work)
                case.argv = [x.replace("{tmp}", work) for x in case.argv]
                code, secs, rss, timed_out, _, err = run_one(binary, case, tmp, a.timeout, env)
                reasons = judge(case, code, secs, rss, timed_out, err, a.timeout, a.rss_mb)
                note = first_line(err) if (reasons or a.verbose) else ""
            finally:
                shutil.rmtree(work, ignore_errors=True)
            max_t = max(max_t, (secs, case.name))
            max_rss = max(max_rss, (rss, case.name))
            words = "; ".join(w for _, w in reasons)
            if case.name in known and reasons:
                status = f"KNOWN {words} ({known[case.name]})"
                known_failed.append(case.name)
                reasons = []
            elif case.name in known:
                reasons = [("stale", "passed, but known-failures.txt lists it: remove it there")]
                status = "FAIL " + reasons[0][1]
            else:
                status = "FAIL " + words if reasons else "ok"
            print(f"{case.name:44} exit {code:3}  {secs:6.2f} s  {rss:7.1f} MB  {status}"
                  + (f"\n{'':44} stderr: {note}" if note else ""), flush=True)
            if reasons:
                failed.append(case.name)
                for kind in {k for k, _ in reasons}:
                    counts[kind] = counts.get(kind, 0) + 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = time.monotonic() - began
    passed = len(cases) - len(failed) - len(known_failed)
    print(f"hostile inputs: {len(cases)} run, {passed} passed, {len(failed)} failed "
          f"({counts['panic']} panics, {counts['crash']} crashes, {counts['hang']} hangs over "
          f"{a.timeout:g} s, {counts['rss']} over {a.rss_mb} MB, {counts['nonsense']} exit 0 on "
          f"nonsense, {counts['stderr']} panic words in stderr); max {max_t[0]:.2f} s "
          f"({max_t[1]}), max {max_rss[0]:.0f} MB ({max_rss[1]}); {len(known_failed)} known "
          f"failures; {total:.0f} s in all")
    if failed:
        print("failed: " + ", ".join(failed))
    if known_failed:
        print("known failures (tests/held-out/known-failures.txt): " + ", ".join(known_failed))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("hostile-inputs: interrupted", file=sys.stderr)
        sys.exit(130)
