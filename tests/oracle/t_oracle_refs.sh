#!/bin/sh
# t_oracle_refs.sh - the torch oracle's own proofs for the families added
# to it after its first self-test: test_moe_ref.py (qwen3_moe, gpt_oss:
# MXFP4 against the OCP table, YaRN against mpmath, a hand-computed sink
# softmax, the router tie rule, f32 vs f64 vs numpy, every ablation moving
# the logits) and test_hybrid_ref.py (qwen3_5, qwen3_5_moe, qwen3_next:
# the Gated DeltaNet recurrent and chunked forms agreeing in float64,
# decode with carried state equal to prefill, a hand-computed delta-rule
# step, every ablation moving the logits).  The oracle decides what
# t_torch_families accepts, so it is checked here by second routes.
# About 40 s.  Skips without Debian's torch, numpy and pytest.
# san: skip - Python only: no cis2 code runs
set -u
. tests/lib.sh
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import torch, numpy, pytest, mpmath' > /dev/null 2>&1 \
    || skip "Debian's python3 lacks torch, numpy, pytest or mpmath"
cd tests/oracle || fail "no tests/oracle"
PYTHONDONTWRITEBYTECODE=1 "$PY" -m pytest -q -p no:cacheprovider test_moe_ref.py test_hybrid_ref.py \
    || fail "the oracle's self-tests fail"
echo ok
