#!/usr/bin/python3
"""check_run.py - a `cis2 run --json --dump-logits` of a sampled run against
the independent reference (sampling_ref.py, written from docs/sampling.md
alone): every step's token is what sample_step chooses from the dumped
logits with the run's parameters, and every logprob (chosen and top
alternatives) has the reference's bits.

usage: check_run.py RUN_JSON DUMP T_BITS TOP_K TOP_P_BITS MIN_P_BITS SEED SEQUENCE TOP_N
TOP_N: the alternatives asked per step (`cis2 run --logprobs N`, the server's N).
Exits 0 when every step agrees, 1 (naming the step) otherwise.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampling_ref as ref  # noqa: E402


def main():
    run_json, dump = sys.argv[1], sys.argv[2]
    T, top_k, top_p, min_p = int(sys.argv[3], 16), int(sys.argv[4]), int(sys.argv[5], 16), int(sys.argv[6], 16)
    seed, sequence, top_n = int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
    run = json.load(open(run_json))
    if isinstance(run, list):
        run = run[0]
    gen = run["generated_token_ids"]
    raw = np.fromfile(dump, dtype="<u4")
    steps = len(gen)
    assert raw.size % steps == 0, "dump size is not steps x vocab"
    V = raw.size // steps
    logits = raw.reshape(steps, V)
    for s in range(steps):
        x = ref.arr_from_bits(logits[s].tolist())
        want = ref.sample_step(x, T, top_k, top_p, min_p, seed, sequence, s)["token"]
        if want != gen[s]:
            print(f"step {s}: cis2 chose {gen[s]}, the reference {want}")
            return 1
        if top_n or "logprobs" in run:
            rep = ref.logprob_report(x, gen[s], top_n)
            got = run["logprobs"][s]
            if int(got["bits"], 16) != rep["chosen_bits"]:
                print(f"step {s}: logprob {got['bits']}, the reference {rep['chosen_bits']:08x}")
                return 1
            tops = [[t["id"], int(t["bits"], 16)] for t in got["top"]]
            if tops != rep["top"]:
                print(f"step {s}: top logprobs {tops}, the reference {rep['top']}")
                return 1
    print(f"{steps} steps agree with the reference (V = {V})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
