#!/bin/sh
# tests/server/t_deploy_docs.sh - docs/deploy.md's manifests and scripts
# are what the page says, and what can run here runs:
#   - tests/server/deploy_docs.py parses every block (the Kubernetes YAML
#     with python3-yaml, the systemd unit, the Slurm script) and checks the
#     fields the page promises (probes on /health, the model a read-only
#     volume, resources against the page's measured RSS, the Indexed Job's
#     --shard-count = completions, ...)
#   - haproxy -c accepts the HAProxy block (t_serve_replicas.sh runs it)
#   - systemd-analyze verify accepts the unit, without a word (skipped, said,
#     where systemd is not installed), its binary path pointed at $CIS2
#   - the Slurm script passes sh -n, and when this cis2 has `verify
#     --manifest`, runs as the four tasks of a job array (--array=0-3's
#     SLURM_ARRAY_TASK_* variables) over a manifest of receipts of the tiny
#     synthetic checkpoint, one of them doctored: `cis2 verify --merge` of
#     their verdict files prints exactly what the unsharded `cis2 verify
#     --manifest` prints, with its exit status; so does the Indexed Job's
#     command (its paths moved here) run as its pods 0..completions-1,
#     each exiting 0 once its verdicts are written (one receipt is bad)
set -u
. tests/lib.sh
PY=/usr/bin/python3
$PY -c 'import yaml' 2> /dev/null || skip "python3-yaml is not installed (tools/install-deps test)"
tmpdir d

echo "== the blocks hold what the page promises"
$PY tests/server/deploy_docs.py docs/deploy.md "$d" || fail "docs/deploy.md's manifests"

if command -v haproxy > /dev/null; then
    echo "== haproxy -c accepts the HAProxy block"
    awk '/^```haproxy$/ {on = 1; next} on && /^```$/ {exit} on' docs/deploy.md > "$d/haproxy.cfg"
    CIS2_LB_ADDR=127.0.0.1:1 CIS2_R1_ADDR=127.0.0.1:2 CIS2_R2_ADDR=127.0.0.1:3 \
        haproxy -c -q -f "$d/haproxy.cfg" > "$d/hc.err" 2>&1 || fail "haproxy -c: $(cat "$d/hc.err")"
else
    echo "haproxy is not installed: its config is checked by t_serve_replicas.sh where it is"
fi

if command -v systemd-analyze > /dev/null; then
    echo "== systemd-analyze verify accepts the unit"
    abs=$(cd "$(dirname "$CIS2")" && pwd)/$(basename "$CIS2")
    mkdir "$d/unit"
    sed "s|^ExecStart=/usr/local/bin/cis2 |ExecStart=$abs |" "$d/unit.service" > "$d/unit/cis2-serve@8081.service"
    grep -q "^ExecStart=$abs serve " "$d/unit/cis2-serve@8081.service" || fail "the unit's ExecStart is not /usr/local/bin/cis2 serve"
    systemd-analyze verify "$d/unit/cis2-serve@8081.service" > "$d/sa.out" 2>&1 || fail "systemd-analyze verify: $(cat "$d/sa.out")"
    [ ! -s "$d/sa.out" ] || fail "systemd-analyze verify has words for the unit: $(cat "$d/sa.out")"
else
    echo "systemd-analyze is not installed (systemd): the unit is only parsed"
fi

echo "== the Slurm script"
sh -n "$d/slurm.sh" || fail "sh -n refuses the Slurm script"
if ! "$CIS2" verify --help 2>&1 | grep -q -- '--manifest'; then
    echo "this cis2 has no verify --manifest yet: the Slurm script is not run"
    echo "PASS: docs/deploy.md's manifests (the Slurm script not run)"
    exit 0
fi
"$CIS2" synth --shape tiny --seed 5 --out "$d/tiny" > /dev/null || fail "synth tiny"
mkdir "$d/r" "$d/bin"
ln -s "$(cd "$(dirname "$CIS2")" && pwd)/$(basename "$CIS2")" "$d/bin/cis2"
k=0
for p in "Once upon a time" "The robot" "Stars over the sea"; do
    for seed in 1 2; do
        "$CIS2" run --model-dir "$d/tiny" --prompt "$p" --gen-toks 6 --temperature 0.8 --seed $seed \
            --receipt "$d/r/$k.receipt" > /dev/null || fail "cis2 run"
        echo "$k.receipt" >> "$d/r/manifest.txt"
        k=$((k + 1))
    done
done
# doctored: receipt 3 claims another first token
awk '/^generated-token-ids / {split($2, t, ","); t[1] = (t[1] + 1) % 256; s = t[1]; for (i = 2; i in t; i++) s = s "," t[i]; $0 = "generated-token-ids " s} 1' \
    "$d/r/3.receipt" > "$d/r/3.doctored" && mv "$d/r/3.doctored" "$d/r/3.receipt"
rc_one=0; "$CIS2" verify --model-dir "$d/tiny" --manifest "$d/r/manifest.txt" > "$d/one.out" 2>&1 || rc_one=$?
[ $rc_one -ne 0 ] || fail "the unsharded run passed a doctored receipt: $(cat "$d/one.out")"
for id in 0 1 2 3; do
    rc=0
    env PATH="$d/bin:$PATH" MODEL_DIR="$d/tiny" MANIFEST="$d/r/manifest.txt" OUT="$d/verdicts" \
        SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_STEP=1 \
        SLURM_ARRAY_TASK_COUNT=4 sh "$d/slurm.sh" > "$d/task$id.out" 2>&1 || rc=$?
    [ $rc -le 1 ] || fail "array task $id exited $rc: $(cat "$d/task$id.out")"
    [ -s "$d/verdicts/shard-$id.jsonl" ] || fail "array task $id wrote no verdicts/shard-$id.jsonl"
done
rc_merge=0; "$CIS2" verify --merge "$d"/verdicts/shard-*.jsonl > "$d/merge.out" 2>&1 || rc_merge=$?
[ $rc_merge -eq $rc_one ] || fail "the merge exits $rc_merge, the unsharded run $rc_one"
cmp -s "$d/merge.out" "$d/one.out" || fail "the merge prints otherwise than the unsharded run: $(diff "$d/one.out" "$d/merge.out" | head)"
echo "== the Indexed Job's command, as its pods 0..completions-1 run it"
# its paths moved here: the model to the tiny checkpoint, /work/ to $d/work/
. "$d/job.env"
mkdir -p "$d/work/verdicts"
cp "$d"/r/*.receipt "$d/work/"
cp "$d/r/manifest.txt" "$d/work/${JOB_MANIFEST##*/}"
sed -e "s|$JOB_MODEL_DIR|$d/tiny|g" -e "s|/work/|$d/work/|g" "$d/job.sh" > "$d/job2.sh"
! grep -q -e "$JOB_MODEL_DIR" -e ' /work/' "$d/job2.sh" || fail "the Job's paths were not all moved: $(cat "$d/job2.sh")"
id=0
while [ $id -lt "$JOB_COMPLETIONS" ]; do
    rc=0
    env PATH="$d/bin:$PATH" JOB_COMPLETION_INDEX=$id sh "$d/job2.sh" > "$d/pod$id.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] || fail "pod $id exited $rc (0 once its verdicts are written): $(cat "$d/pod$id.out")"
    id=$((id + 1))
done
rc_merge=0; "$CIS2" verify --merge "$d"/work/verdicts/shard-*.jsonl > "$d/merge2.out" 2>&1 || rc_merge=$?
[ $rc_merge -eq $rc_one ] || fail "the Job's merge exits $rc_merge, the unsharded run $rc_one"
# the names are the receipts' paths: here under $d/work, there under $d/r
sed "s|$d/work/|$d/r/|g" "$d/merge2.out" > "$d/merge2.norm"
cmp -s "$d/merge2.norm" "$d/one.out" || fail "the Job's merge prints otherwise than the unsharded run: $(diff "$d/one.out" "$d/merge2.norm" | head)"
echo "PASS: docs/deploy.md's manifests; its Slurm script as a 4-task array and its Indexed Job's $JOB_COMPLETIONS pods each equal one unsharded run"
