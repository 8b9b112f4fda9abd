#!/usr/bin/python3
"""tests/server/deploy_docs.py DEPLOY_MD OUTDIR - docs/deploy.md's manifests
hold what the page promises of them (tests/server/t_deploy_docs.sh).

Parses every fenced block of the page by its language: ```yaml with
python3-yaml (yaml.safe_load_all), ```ini (the systemd unit) with
configparser, ```sh (the Slurm script), ```haproxy, and checks:

  Deployment + Service: >= 2 replicas; `cis2 serve` with --model-dir under a
    read-only mount of a read-only PersistentVolumeClaim, --host 0.0.0.0,
    --port = the container port named http; startup, readiness and liveness
    probes all GET /health on that port; requests.cpu = --threads;
    requests.memory >= the measured peak RSS and limits.memory >= the
    loaded RSS + --kv-budget (both read from the page's sizing table);
    terminationGracePeriodSeconds >= preStop sleep + --drain-timeout + 5;
    the Service selects the pods' labels and targets that port
  Indexed Job: completionMode Indexed; `cis2 verify --manifest ... --shard
    auto --shard-count N` with N = completions, --verdicts named by
    $JOB_COMPLETION_INDEX, the pod a success once that file is written;
    restartPolicy Never; the model mounted read-only
  Slurm script: #SBATCH --array=0-(N-1); `cis2 verify --manifest --shard
    auto --verdicts` named by $SLURM_ARRAY_TASK_ID, no --shard-count
  systemd unit: ExecStart `cis2 serve --port %i --model-dir D` with D under
    ReadOnlyPaths; KillSignal=SIGTERM; TimeoutStopSec >= --drain-timeout + 5
  HAProxy: the backend checks GET /health expecting 200

Writes OUTDIR/slurm.sh, OUTDIR/unit.service and OUTDIR/job.sh (the Job's
sh -c command) as written, and OUTDIR/job.env (its completions, model
directory and manifest), for the shell test to run and to hand to
systemd-analyze.  Exit 1 naming the
first broken promise.
"""
import configparser
import os
import re
import shlex
import sys

import yaml

page, outdir = sys.argv[1], sys.argv[2]
text = open(page).read()


def fail(msg):
    print("FAIL: docs/deploy.md: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


blocks = {}
for lang, body in re.findall(r"^```(\w+)\n(.*?)^```$", text, re.S | re.M):
    blocks.setdefault(lang, []).append(body)
for lang, n in (("yaml", 2), ("sh", 1), ("ini", 1), ("haproxy", 1)):
    check(len(blocks.get(lang, [])) == n, "%d ```%s blocks, expected %d" % (len(blocks.get(lang, [])), lang, n))


def mib(q):
    m = re.fullmatch(r"(\d+)(Mi|Gi)", str(q))
    check(m, "memory quantity %r is not NMi or NGi" % q)
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


def opts(argv, what):
    """--flag value pairs of a command line (flags without a value: True)."""
    o = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                o[a] = argv[i + 1]
                i += 1
            else:
                o[a] = True
        i += 1
    return o


def sizing():
    """The sizing table's figures: loaded RSS, peak RSS (MiB)."""
    loaded = re.search(r"^\| loaded, idle .*\| (\d+) MiB \|$", text, re.M)
    peak = re.search(r"^\| peak under .*\| (\d+) MiB \|$", text, re.M)
    check(loaded and peak, "the sizing table has no `loaded, idle` and `peak under` rows in MiB")
    return int(loaded.group(1)), int(peak.group(1))


def mounts_readonly(pod, c, path):
    """The container mounts path (or a directory above it) read-only, from a read-only PVC."""
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/") + "/"
        if (path.rstrip("/") + "/").startswith(mp):
            check(m.get("readOnly") is True, "the mount %s of %s is not readOnly" % (m["mountPath"], path))
            pvc = vols.get(m["name"], {}).get("persistentVolumeClaim")
            check(pvc and pvc.get("readOnly") is True, "volume %s is not a read-only PersistentVolumeClaim" % m["name"])
            return
    fail("no volume is mounted at %s" % path)


# ---- Deployment + Service
docs = list(yaml.safe_load_all(blocks["yaml"][0]))
check([d.get("kind") for d in docs] == ["Deployment", "Service"], "the first YAML block is not a Deployment and a Service")
dep, svc = docs
spec = dep["spec"]
pod = spec["template"]["spec"]
labels = spec["template"]["metadata"]["labels"]
check(spec.get("replicas", 1) >= 2, "the Deployment runs fewer than 2 replicas")
check(all(labels.get(k) == v for k, v in spec["selector"]["matchLabels"].items()), "the selector misses the pod labels")
check(len(pod["containers"]) == 1, "the pod has more than one container")
c = pod["containers"][0]
cmd = c["command"]
check(cmd[:2] == ["cis2", "serve"], "the container does not run `cis2 serve`: %s" % cmd[:2])
o = opts(cmd[2:], "serve")
check(o.get("--host") == "0.0.0.0", "serve binds %s, not 0.0.0.0 (the pod's address)" % o.get("--host"))
port = int(o.get("--port", 8080))
http = [p for p in c["ports"] if p.get("name") == "http"]
check(http and http[0]["containerPort"] == port, "no container port named http = serve's --port %d" % port)
mounts_readonly(pod, c, o["--model-dir"])
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    g = c.get(probe, {}).get("httpGet", {})
    check(g.get("path") == "/health" and g.get("port") in ("http", port), "%s is not GET /health on port http" % probe)
res = c["resources"]
check(str(res["requests"]["cpu"]) == o.get("--threads"), "requests.cpu %s != --threads %s" % (res["requests"]["cpu"], o.get("--threads")))
loaded, peak = sizing()
kv = int(o.get("--kv-budget", 1024))
check(mib(res["requests"]["memory"]) >= peak, "requests.memory %s is below the measured peak %d MiB" % (res["requests"]["memory"], peak))
check(mib(res["limits"]["memory"]) >= loaded + kv,
      "limits.memory %s is below loaded %d MiB + --kv-budget %d MiB" % (res["limits"]["memory"], loaded, kv))
pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", ["sleep", "0"])
need = int(pre[1]) + int(o.get("--drain-timeout", 10)) + 5
check(pod.get("terminationGracePeriodSeconds", 30) >= need,
      "terminationGracePeriodSeconds %s < preStop + drain + 5 = %d" % (pod.get("terminationGracePeriodSeconds"), need))
check(svc["spec"]["selector"] == labels, "the Service does not select the pods' labels")
check(any(p.get("targetPort") in ("http", port) for p in svc["spec"]["ports"]), "the Service does not target port http")

# ---- Indexed Job
docs = list(yaml.safe_load_all(blocks["yaml"][1]))
check([d.get("kind") for d in docs] == ["Job"], "the second YAML block is not one Job")
job = docs[0]["spec"]
jpod = job["template"]["spec"]
check(job.get("completionMode") == "Indexed", "the Job is not Indexed")
check(jpod.get("restartPolicy") == "Never", "the Job's pods restart (restartPolicy is not Never)")
jc = jpod["containers"][0]
check(jc["command"][:2] == ["sh", "-c"], "the Job's command is not sh -c")
runs = [shlex.split(part) for part in jc["command"][2].split(";")]
runs = [a for a in runs if a[:2] == ["cis2", "verify"]]
check(len(runs) == 1, "the Job does not run `cis2 verify` once")
out = re.match(r"\s*out=(\S+);", jc["command"][2])
check(out, "the Job's command does not start by naming its verdict file (out=...)")
jo = opts(runs[0][2:], "verify")
check(jo.get("--verdicts") == "$out" and "$JOB_COMPLETION_INDEX" in out.group(1),
      "the Job's --verdicts is not $out, named by $JOB_COMPLETION_INDEX")
check(re.search(r"\[ -s \$out \] && exit 0; exit \$rc\"?$", jc["command"][2]), "the Job does not exit 0 when its verdicts are written")
check(jo.get("--shard") == "auto", "the Job does not verify with --shard auto")
check(int(jo.get("--shard-count", -1)) == job["completions"],
      "--shard-count %s != completions %s" % (jo.get("--shard-count"), job["completions"]))
check("--manifest" in jo, "the Job needs --manifest")
check(str(jc["resources"]["requests"]["cpu"]) == jo.get("--threads"), "the Job's requests.cpu != --threads")
mounts_readonly(jpod, jc, jo["--model-dir"])
open(os.path.join(outdir, "job.sh"), "w").write(jc["command"][2] + "\n")
open(os.path.join(outdir, "job.env"), "w").write("JOB_COMPLETIONS=%d\nJOB_MODEL_DIR=%s\nJOB_MANIFEST=%s\n" % (
    job["completions"], jo["--model-dir"], jo["--manifest"]))

# ---- Slurm array
sh = blocks["sh"][0]
check(sh.startswith("#!/bin/sh\n"), "the Slurm script does not start with #!/bin/sh")
arr = re.search(r"^#SBATCH --array=0-(\d+)$", sh, re.M)
check(arr, "the Slurm script has no #SBATCH --array=0-N")
m = re.search(r"^exec (cis2 verify .*?)$", sh.replace("\\\n", " "), re.M)
check(m, "the Slurm script does not exec cis2 verify")
so = opts(shlex.split(m.group(1))[2:], "verify")
check(so.get("--shard") == "auto" and "--shard-count" not in so, "Slurm: --shard auto without --shard-count")
check("--manifest" in so and "$SLURM_ARRAY_TASK_ID" in so.get("--verdicts", ""), "Slurm: --manifest and --verdicts by task id")
open(os.path.join(outdir, "slurm.sh"), "w").write(sh)

# ---- systemd unit
ini = blocks["ini"][0]
u = configparser.ConfigParser(interpolation=None, strict=True)
u.optionxform = str
u.read_string(ini)
s = u["Service"]
ex = shlex.split(s["ExecStart"])
check(os.path.basename(ex[0]) == "cis2" and ex[1] == "serve", "ExecStart is not cis2 serve")
uo = opts(ex[2:], "serve")
check(uo.get("--port") == "%i", "the unit's port is not its instance (%i)")
check(any(uo["--model-dir"].startswith(p.rstrip("/") + "/") for p in s["ReadOnlyPaths"].split()),
      "the unit's --model-dir is not under ReadOnlyPaths")
check(s.get("KillSignal") == "SIGTERM", "KillSignal is not SIGTERM")
check(int(s["TimeoutStopSec"]) >= int(uo.get("--drain-timeout", 10)) + 5, "TimeoutStopSec < --drain-timeout + 5")
check(u["Install"].get("WantedBy") == "multi-user.target", "the unit is not WantedBy multi-user.target")
open(os.path.join(outdir, "unit.service"), "w").write(ini)

# ---- HAProxy
hp = blocks["haproxy"][0]
check(re.search(r"^\s+option httpchk GET /health$", hp, re.M) and re.search(r"^\s+http-check expect status 200$", hp, re.M),
      "the HAProxy backend does not check GET /health for 200")
print("deploy_docs: Deployment, Service, Indexed Job, Slurm script, systemd unit and HAProxy config hold the page's promises")
