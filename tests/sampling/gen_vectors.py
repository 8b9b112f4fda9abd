#!/usr/bin/python3
"""gen_vectors.py - writes tests/vectors/sampling/ from the Python reference.

Owns: the test vectors of docs/sampling.md §S10 (format documented in
tests/vectors/sampling/README.md).  Every value comes from
tests/sampling/sampling_ref.py, the independent implementation of
docs/sampling.md; nothing here computes a pinned value itself.  Output is
deterministic: rerunning reproduces the committed files byte for byte
(tests/sampling/test_sampling_ref.py checks it).  Refuses to write a vector
that met the cross-ISA flush window (§S1.6), so every vector holds on both
x86-64 and aarch64.

Usage: /usr/bin/python3 tests/sampling/gen_vectors.py [--out DIR] [--check]
  --out DIR   write there (default: tests/vectors/sampling next to tests/sampling)
  --check     compare with the files in DIR instead of writing; exit 1 on a difference
"""

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sampling_ref as R  # noqa: E402

FORMAT = 'cis2-sampling-vectors-1'
DEFAULT_OUT = os.path.join(HERE, '..', 'vectors', 'sampling')

# f32 bit patterns used below
B = {
    '0': 0x00000000, '-0': 0x80000000, '0.25': 0x3E800000, '0.5': 0x3F000000,
    '0.7': 0x3F333333, '0.8': 0x3F4CCCCD, '0.9': 0x3F666666, '0.95': 0x3F733333,
    '1': 0x3F800000, '1.3': 0x3FA66666, '2': 0x40000000, '1.5': 0x3FC00000,
    '0.05': 0x3D4CCCCD, '0.1': 0x3DCCCCCD, '0.02': 0x3CA3D70A, '0.3': 0x3E99999A,
    'inf': 0x7F800000, '-inf': 0xFF800000, 'nan': 0x7FC00000,
    'below1': 0x3F7FFFFF, 'flt_min': 0x00800000, 'flt_max': 0x7F7FFFFF,
    'min_p_low': 0x1F800000,
}

# (seed, sequence, step) triples every case is run with: small ones, the
# high key word and large counters, and the two extremes of u, found once
# by a vectorised search over steps with seed 0, sequence 0 (checked below):
U_ZERO = (0, 0, 14883995)       # out0 = 0x00000093: u = 0, target = 0
U_MAX = (0, 0, 38471471)        # out0 = 0xffffffec: u = 1 - 2^-24 (0x3f7fffff)
U_HALF = (0, 0, 9297664)        # out0 >> 8 = 0x800000: u = 0.5, target can equal a partial sum
DRAWS = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 0, 1),
         (0x0123456789ABCDEF, 3, 17),
         (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFE), U_ZERO, U_HALF, U_MAX]
DRAWS_BIG = [(0, 0, 0), (42, 0, 5), (0xFFFFFFFFFFFFFFFF, 7, 1), U_MAX]


def h8(b):
    return '%08x' % b


def params(T='1', top_k=0, top_p='1', min_p='0'):
    def b(v):
        return v if isinstance(v, int) else B[v]
    return {'temperature': b(T), 'top_k': top_k, 'top_p': b(top_p), 'min_p': b(min_p)}


def f32s(vals):
    """list of decimal strings / names / ints (bit patterns) -> f32 bits"""
    out = []
    for v in vals:
        if isinstance(v, int):
            out.append(v)
        elif v in B:
            out.append(B[v])
        else:
            out.append(R.bits_of(np.float32(float(v))))
    return out


def logit_cases():
    """(name, description, logits bits, [param sets], draws, top_n)"""
    V = []
    V.append(('worked', 'docs/sampling.md Appendix A: two tied maxima, one lower, one NaN',
              f32s(['2', '1', '2', 'nan']),
              [params('1', top_p='0.5'), params('1'), params('0')], DRAWS, 4))
    V.append(('ties', 'exact ties at the maximum (ids 1, 2, 5) and -0.0 == +0.0 (ids 3, 4)',
              f32s(['1.5', '3', '3', '-0', '0', '3', '1.5', '-2.25']),
              [params('1'), params('1', top_k=2), params('1', top_k=4),
               params('1', top_k=1), params('0'), params('0.5', top_p='0.5')], DRAWS, 8))
    V.append(('neg_inf', '-inf logits below a finite maximum: weight 0, never chosen',
              f32s(['0.5', '-inf', '2', '-inf', '1', '-inf']),
              [params('0.7'), params('1', top_k=5), params('1', min_p='0.1'),
               params('2', top_p='0.95')], DRAWS, 6))
    V.append(('all_neg_inf', 'every logit -inf: d = +0.0 everywhere, all weights 1',
              f32s(['-inf', '-inf', '-inf']),
              [params('1'), params('1', top_p='0.5'), params('0')], DRAWS, 3))
    V.append(('pos_inf', 'two +inf logits (ids 1, 4): weight 1 each, every other weight 0',
              f32s(['1', 'inf', '3', '-inf', 'inf', 'nan']),
              [params('1'), params('0.5', top_k=3), params('1', min_p='0.5'), params('0')],
              DRAWS, 6))
    V.append(('nan_first', 'NaN at index 0 (and other NaN bit patterns): greedy argmax returns 0, '
              'sampling never does',
              [0x7FC00000, B['1'], B['2'], 0xFFC00000, B['0.5'], 0x7FA00000],
              [params('0'), params('1', top_k=1), params('1'), params('0.5', top_k=2)], DRAWS, 6))
    V.append(('all_nan', 'every logit NaN: token 0 by argmax, nothing drawn, logprobs NaN',
              [0x7FC00000, 0xFFC00000, 0x7F800001],
              [params('1'), params('0')], DRAWS[:2], 3))
    V.append(('single', 'a single non-NaN candidate (id 2): always chosen, u still drawn',
              [0x7FC00000, 0x7FC00000, B['0.25'], 0x7FC00000],
              [params('1'), params('1', top_p='0.1', min_p='0.5')], DRAWS, 4))
    V.append(('top_p_early', 'top-p just below 1.0: the running sum rounds to 1.0 before the '
              'tail, which is dropped',
              f32s(['10', '10', '9', '-10', '-10', '-12', '-15', '-20']),
              [params('1', top_p='below1'), params('1', top_p='0.9'),
               params('1', top_p='flt_min'), params('1')], DRAWS, 8))
    V.append(('top_p_exact', 'four equal weights: p = 0.25 exactly, so the top-p sum equals '
              'top_p (0.5, 0.75) exactly and the >= keeps 2 (3); min_p = 1.0 equals every '
              'w / S and keeps all; u = 0.5 makes target equal a partial sum (strict <)',
              f32s(['1', '1', '1', '1']),
              [params('1', top_p='0.5'), params('1', top_p=0x3F400000), params('1', min_p='1'),
               params('1')], DRAWS, 4))
    V.append(('top_k_tie', 'top-k = 3 cuts inside a four-way tie: ids 2, 4, 6 kept, 7 dropped',
              f32s(['-1', '0.5', '4', '0.5', '4', '-1', '4', '4', '3.5']),
              [params('1', top_k=3), params('1', top_k=5), params('1.5', top_k=3, top_p='0.5')],
              DRAWS, 9))
    V.append(('min_p', 'min-p alone and with top-k / top-p; min_p = 1.0 keeps only the maximum\'s '
              'ties; min_p = 2^-64 keeps every nonzero weight',
              f32s(['2', '1.75', '1', '0.5', '-0.5', '-1.5', '2', '-3', '0.25', '1.5']),
              [params('1', min_p='0.3'), params('1', min_p='0.05'), params('1', min_p='1'),
               params('1', min_p='min_p_low'), params('0.8', top_k=6, top_p='0.9', min_p='0.1')],
              DRAWS, 10))
    V.append(('tiny_T', 'T = 0x00800000 (smallest normal): only the maximum\'s ties (ids 0, 2) '
              'keep weight 1',
              f32s(['3', '1', '3', 0x403FFFFF, '-inf']),
              [params('flt_min'), params('flt_min', top_p='0.5')], DRAWS, 5))
    V.append(('huge_T', 'T = 0x7F7FFFFF (largest finite): every finite weight is 1, sampling is '
              'uniform over the kept set',
              f32s(['3', '1', '-50', '20', '0.5', '-inf']),
              [params('flt_max'), params('flt_max', top_k=3), params('flt_max', min_p='0.5')],
              DRAWS, 6))
    V.append(('daz', 'subnormal logits compare as zeros (DAZ, docs/sampling.md S1.2): ids 0-3 '
              'and 5 tie at 0',
              [0x00000001, 0x80000005, 0x00000000, 0x80000000, B['-inf'], 0x00400000,
               0xBF800000],
              [params('1'), params('1', top_k=3), params('0')], DRAWS, 7))
    rng = np.random.default_rng(20260101)
    big = (rng.standard_normal(49152) * 2.5).astype(np.float32)
    big[rng.integers(0, 49152, 40)] += np.float32(9.0)     # a head of likely tokens
    V.append(('vocab49152', 'a 49152-entry random vector (SmolLM2 vocabulary size)',
              [int(b) for b in R.bits_arr(big)],
              [params('1'), params('0.7', top_k=40), params('1', top_p='0.9'),
               params('1', min_p='0.05'), params('1.3', top_k=50, top_p='0.95', min_p='0.02'),
               params('0')], DRAWS_BIG, 20))
    return V


def case_record(x, p, draw, top_n):
    seed, seq, step = draw
    r = R.sample_step(x, p['temperature'], p['top_k'], p['top_p'], p['min_p'], seed, seq, step)
    lp = R.logprob_report(x, r['token'], top_n)
    exp = {'sampler': r['sampler'], 'drew': r['drew']}
    if r['drew']:
        exp['philox_key'] = [h8(v) for v in r['philox_key']]
        exp['philox_counter'] = [h8(v) for v in r['philox_counter']]
        exp['philox_out'] = [h8(v) for v in r['philox_out']]
        exp['u'] = h8(r['u_bits'])
    for k in ('n_candidates', 'n_after_top_k', 'n_after_top_p', 'n_kept'):
        if k in r:
            exp[k] = r[k]
    if r['drew']:
        exp['S'] = h8(r['S_bits'])
        exp['S_prime'] = h8(r['S_prime_bits'])
        exp['target'] = h8(r['target_bits'])
        if len(r['kept_ids']) <= 64:
            exp['kept_ids'] = r['kept_ids']
        assert not r['fallback']
    exp['token'] = r['token']
    exp['logprob'] = h8(lp['chosen_bits'])
    exp['top_logprobs'] = [[i, h8(b)] for i, b in lp['top']]
    return {'temperature': h8(p['temperature']), 'top_k': p['top_k'],
            'top_p': h8(p['top_p']), 'min_p': h8(p['min_p']),
            'seed': str(seed), 'sequence': seq, 'step': step, 'top_n': top_n,
            'expect': exp}


def logits_file(name, desc, bits, psets, draws, top_n):
    x = R.arr_from_bits(bits)
    V = len(bits)
    obj = {'format': FORMAT, 'name': name, 'description': desc, 'vocab': V}
    if V <= 64:
        obj['logits'] = [h8(b) for b in bits]
    else:
        obj['logits_le_hex'] = np.asarray(bits, dtype='<u4').tobytes().hex()
    lp, info = R.logprobs(x)
    lpb = R.bits_arr(lp)
    obj['logprobs'] = {'M': h8(info['M_bits']) if info else None,
                       'E': h8(info['E_bits']) if info else None,
                       'L': h8(info['L_bits']) if info else None}
    if V <= 64:
        obj['logprobs']['all'] = [h8(int(b)) for b in lpb]
    obj['logprobs']['sha256_le'] = hashlib.sha256(lpb.astype('<u4').tobytes()).hexdigest()
    obj['cases'] = [case_record(x, p, d, top_n) for p in psets for d in draws]
    return obj


def philox_file():
    kat = [((0, 0, 0, 0), (0, 0)),
           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2),
           ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0))]
    rows = [{'counter': [h8(v) for v in c], 'key': [h8(v) for v in k],
             'output': [h8(v) for v in R.philox4x32_10(c, k)]} for c, k in kat]
    draws = []
    for seed, seq, step in DRAWS + [(2 ** 32, 0, 0), (2 ** 32 - 1, 1, 2), (12345, 0, 255)]:
        K, C, out, u = R.philox_draw(seed, seq, step)
        draws.append({'seed': str(seed), 'sequence': seq, 'step': step,
                      'key': [h8(v) for v in K], 'counter': [h8(v) for v in C],
                      'output': [h8(v) for v in out], 'u': h8(R.bits_of(u))})
    return {'format': FORMAT, 'name': 'philox',
            'description': 'Philox4x32-10 known answers (FACTS-sampling.md S1, Random123 '
                           'kat_vectors) and the seed/sequence/step -> key/counter/u mapping '
                           'of docs/sampling.md S3.5.3',
            'kat': rows, 'draws': draws}


def stop_file():
    def tb(*strs):
        return [s.encode('latin-1') if isinstance(s, str) else s for s in strs]

    cases = []

    def run_case(name, desc, tokens, N, eos=None, stop_ids=(), stop_strings=()):
        rules = R.StopRules(eos, list(stop_ids), [bytes(s) for s in stop_strings])
        table = {i: b for i, b in tokens}
        gen, reason = [], None
        for s in range(N):
            gen.append(tokens[s][0])
            reason = R.stop_check(rules, gen, lambda i: table[i], N)
            if reason:
                break
        cases.append({'name': name, 'description': desc, 'kind': 'run',
                      'eos_ids': eos, 'stop_ids': list(stop_ids),
                      'stop_strings': [bytes(s).hex() for s in stop_strings], 'max_toks': N,
                      'tokens': [{'id': i, 'bytes': b.hex()} for i, b in tokens],
                      'expect': {'gen_toks': len(gen), 'finish_reason': reason,
                                 'completion_hex': R.completion_cut(
                                     rules, gen, lambda i: table[i], reason).hex()}})

    def step_case(name, desc, prev, new, stop_strings, eos=None, stop_ids=()):
        rules = R.StopRules(eos, list(stop_ids), [bytes(s) for s in stop_strings])
        toks = prev + [new]
        table = {k: b for k, (i, b) in enumerate(toks)}
        gen = list(range(len(toks)))
        reason = R.stop_check(rules, gen, lambda i: table[i], 1 << 30)
        cases.append({'name': name, 'description': desc, 'kind': 'step',
                      'eos_ids': eos, 'stop_ids': list(stop_ids),
                      'stop_strings': [bytes(s).hex() for s in stop_strings],
                      'previous_bytes': [b.hex() for i, b in prev], 'new_bytes': new[1].hex(),
                      'expect': {'stops': reason}})

    T = [(10, b'He'), (11, b'llo'), (12, b','), (13, b' wor'), (14, b'ld'), (0, b'<|endoftext|>'),
         (15, b'!')]
    run_case('length', 'no stop rule: exactly N tokens', T, 3)
    run_case('eos_wins', 'token 0 is an eos id and a stop id: eos comes first', T, 7,
             eos=[0], stop_ids=[99, 0])
    run_case('stop_id', 'stop id 14 at step 4', T, 7, stop_ids=[14])
    run_case('eos_off', 'eos id generated with stop-at-eos off: continues to N', T, 7)
    run_case('eos_list', 'a list of eos ids (config.json "eos_token_id": [2, 0])', T, 7, eos=[2, 0])
    run_case('string_across', 'stop string "lo, w" spans three tokens', T, 7,
             stop_strings=[b'lo, w'])
    run_case('string_first_token', 'stop string inside the first token', T, 7,
             stop_strings=[b'e'])
    run_case('string_earliest_cut', 'two stop strings; completion cut at the earliest start',
             T, 7, stop_strings=[b'world', b'o, '])
    run_case('string_beats_length', 'the N-th token completes a stop string: stop-string wins',
             T, 3, stop_strings=[b'o,'])
    run_case('id_beats_length', 'the N-th token is a stop id: stop-id wins', T, 5,
             stop_ids=[13, 99])
    run_case('eos_at_step0', 'the first token is eos', [(0, b'<|endoftext|>'), (10, b'He')], 2,
             eos=[0])
    run_case('special_token_bytes', 'an added token\'s content bytes take part in stop strings',
             T, 7, stop_strings=[b'ld<|end'])
    run_case('utf8_split', 'raw bytes: a stop string made of the two bytes of U+00E9 split '
             'across tokens', [(20, b'caf\xc3'), (21, b'\xa9 au'), (22, b' lait')], 3,
             stop_strings=[b'\xc3\xa9'])
    run_case('no_prompt_bytes', 'prompt bytes never take part: with the prompt "Hi", the stop '
             'string "Hi there" would span prompt and output, and does not stop',
             [(30, b' there'), (31, b' Hi')], 2, stop_strings=[b'Hi there'])
    run_case('empty_token', 'a token with no bytes creates no occurrence',
             [(40, b'ab'), (41, b''), (42, b'c')], 3, stop_strings=[b'abc'])
    run_case('empty_first_token', 'the first token has no bytes: nothing is held yet, and a '
             'later occurrence still stops', [(41, b''), (40, b'ab'), (42, b'c')], 3,
             stop_strings=[b'abc'])
    step_case('old_occurrence', 'an occurrence inside earlier bytes does not need the new '
              'token: no stop', [(0, b'xxab')], (1, b'c'), [b'ab'])
    step_case('ends_in_new', 'occurrence ending in the new token', [(0, b'xxab')], (1, b'c'),
              [b'bc'])
    step_case('all_in_new', 'occurrence wholly inside the new token', [(0, b'xxab')],
              (1, b'zcz'), [b'c'])
    step_case('long_across', 'occurrence starting in the first previous token',
              [(0, b'xx'), (1, b'ab')], (2, b'c'), [b'xxabc'])
    step_case('not_yet', 'only a prefix of the stop string so far', [(0, b'xxab')], (1, b'c'),
              [b'abcd'])
    step_case('empty_new', 'the new token has no bytes', [(0, b'xxab')], (1, b''), [b'ab', b'b'])
    return {'format': FORMAT, 'name': 'stop_rules',
            'description': 'docs/sampling.md S5.3 with token bytes given explicitly', 'cases': cases}


def params_file():
    blocks = []
    sets = [
        ('defaults_T1', 16, B['1'], 0, B['1'], B['0'], 0, 0, R.StopRules()),
        ('all_set', 256, B['0.7'], 40, B['0.9'], B['0.05'], 0xFFFFFFFFFFFFFFFF, 4294967295,
         R.StopRules([0, 2], [7, 0, 49151], [b'\n\n', b'User:', b'\xff'])),
        ('greedy_with_stop', 32, B['0'], 0, B['1'], B['0'], 0, 0, R.StopRules([0])),
        ('top_k_1', 8, B['1.5'], 1, B['1'], B['0'], 9, 2, R.StopRules(None, [], [b'END'])),
    ]
    for name, N, T, k, tp, mp, seed, seq, rules in sets:
        blk = R.params_block(N, T, k, tp, mp, seed, seq, rules)
        blocks.append({'name': name, 'max_toks': N, 'temperature': h8(T), 'top_k': k,
                       'top_p': h8(tp), 'min_p': h8(mp), 'seed': str(seed), 'sequence': seq,
                       'eos_ids': rules.eos_ids, 'stop_ids': rules.stop_ids,
                       'stop_strings': [s.hex() for s in rules.stop_strings],
                       'extension_receipt': R.uses_extension_receipt(T, rules),
                       'block': blk, 'params_digest': R.params_digest(blk).hex()})
    valid = []
    V = 49152

    def chk(field, value, **kw):
        p = dict(T_bits=B['1'], top_k=0, top_p_bits=B['1'], min_p_bits=0, seed=0,
                 sequence=0, N=16, V=V)
        p[field] = value
        try:
            R.validate_params(**p)
            ok = True
        except R.UsageError:
            ok = False
        name = {'T_bits': 'temperature', 'top_p_bits': 'top_p', 'min_p_bits': 'min_p',
                'N': 'max_toks'}.get(field, field)
        valid.append({'field': name, 'value': h8(value) if field.endswith('_bits') else
                      str(value), 'valid': ok})
    for v in (0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000,
              0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0xBF800000):
        chk('T_bits', v)
    for v in (0x00000000, 0x80000000, 0x00000001, 0x00800000, 0x3F000000, 0x3F7FFFFF,
              0x3F800000, 0x3F800001, 0x7F800000, 0x7FC00000):
        chk('top_p_bits', v)
    for v in (0x00000000, 0x80000000, 0x00000001, 0x00800000, 0x1F7FFFFF, 0x1F800000,
              0x3D4CCCCD, 0x3F800000, 0x3F800001, 0x7FC00000):
        chk('min_p_bits', v)
    for v in (0, 1, V, V + 1):
        chk('top_k', v)
    for v in (0, 2 ** 64 - 1, 2 ** 64):
        chk('seed', v)
    for v in (0, 2 ** 32 - 1, 2 ** 32):
        chk('sequence', v)
    for v in (0, 1, 2 ** 32 - 1, 2 ** 32):
        chk('N', v)
    dec = []
    for text in ('1', '0.7', '0.1', '1e-5', '0', '0.0', '-0', '-1', '1.0000000596046447762',
                 '1.00000005960464477539', '1.17549435e-38', '1.1754942e-38', '1e-40', '1e-50',
                 '3.4028235e38', '3.4028236e38', '1e39', '.5', '5.', '+0.25', 'abc',
                 'nan', 'inf', '1e', ''):
        try:
            b = R.parse_decimal_f32(text, 'temperature')
            R.validate_params(b, 0, B['1'], 0, 0, 0, 16, V)
            res = {'accepted': True, 'bits': h8(b)}
        except R.UsageError:
            res = {'accepted': False}
        dec.append(dict(text=text, **res))
    samplers = [{'temperature': h8(T), 'top_k': k, 'sampler': R.sampler_of(T, k)}
                for T, k in ((0, 0), (0, 1), (0, 5), (B['1'], 0), (B['1'], 1), (B['1'], 2),
                             (B['flt_min'], 0))]
    return {'format': FORMAT, 'name': 'params',
            'description': 'docs/sampling.md S2 validity, S2.3 decimal input, S2.4 sampler, '
                           'S7.5 params blocks and digests',
            'blocks': blocks, 'validity': valid, 'decimal': dec, 'sampler': samplers}


def receipt_file():
    art = {k: hashlib.sha256(k.encode()).digest() for k in ('weights', 'config', 'tokenizer')}
    art['table'] = bytes.fromhex('23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d')
    art['inv_freq'] = bytes.fromhex('da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12')
    vocab_bytes = [b'<|endoftext|>', b'\n', b'Hi', b' there', b'!', b' How', b' are', b' you',
                   b'?', b'\n\n', b' I', b' am']
    table = dict(enumerate(vocab_bytes))
    V = len(vocab_bytes)
    rng = np.random.default_rng(7)
    out = []
    runs = [
        ('sampled', dict(N=8, T=B['0.8'], top_k=6, top_p=B['0.95'], min_p=B['0.05'], seed=42,
                         sequence=1, rules=R.StopRules([0], [8], [b'\n\n']))),
        ('sampled_length', dict(N=4, T=B['1.5'], top_k=0, top_p=B['1'], min_p=B['0'], seed=7,
                                sequence=0, rules=R.StopRules())),
        ('greedy_stop', dict(N=8, T=B['0'], top_k=0, top_p=B['1'], min_p=B['0'], seed=0,
                             sequence=0, rules=R.StopRules(None, [6], []))),
    ]
    for name, p in runs:
        logits = []
        for s in range(p['N']):
            x = (rng.standard_normal(V) * 2).astype(np.float32)
            if s == 1:
                x[3] = np.float32('nan')                   # hashed as 0x7FC00000
                x.view(np.uint32)[5] = 0xFFC00000
            logits.append(x)
        prompt = b'Hi'
        prompt_ids = [2]
        text, gen, reason, per = R.build_receipt(
            art, prompt, prompt_ids, logits, p['N'], p['T'], p['top_k'], p['top_p'],
            p['min_p'], p['seed'], p['sequence'], p['rules'], lambda i: table[i])
        out.append({'name': name,
                    'inputs': {'weights_sha256': art['weights'].hex(),
                               'config_sha256': art['config'].hex(),
                               'tokenizer_sha256': art['tokenizer'].hex(),
                               'table_digest': art['table'].hex(),
                               'inv_freq_table_digest': art['inv_freq'].hex(),
                               'prompt_hex': prompt.hex(), 'prompt_token_ids': prompt_ids,
                               'token_bytes': [b.hex() for b in vocab_bytes],
                               'max_toks': p['N'], 'temperature': h8(p['T']),
                               'top_k': p['top_k'], 'top_p': h8(p['top_p']),
                               'min_p': h8(p['min_p']), 'seed': str(p['seed']),
                               'sequence': p['sequence'], 'eos_ids': p['rules'].eos_ids,
                               'stop_ids': p['rules'].stop_ids,
                               'stop_strings': [s.hex() for s in p['rules'].stop_strings],
                               'step_logits': [[h8(int(b)) for b in R.bits_arr(x)]
                                               for x in logits[:len(gen)]]},
                    'expect': {'generated_token_ids': gen, 'finish_reason': reason,
                               'receipt': text}})
    return {'format': FORMAT, 'name': 'receipts',
            'description': 'docs/sampling.md S7: whole extension receipts for runs whose '
                           'per-step logits are given (no model); NaN logits at step 1',
            'receipts': out}


def render(obj):
    return json.dumps(obj, indent=1, ensure_ascii=True) + '\n'


def all_files():
    for draw, u in ((U_ZERO, 0x00000000), (U_HALF, 0x3F000000), (U_MAX, 0x3F7FFFFF)):
        if R.bits_of(R.philox_draw(*draw)[3]) != u:
            raise SystemExit('gen_vectors: draw %r no longer gives u = %08x' % (draw, u))
    files = {'philox.json': philox_file(), 'stop_rules.json': stop_file(),
             'params.json': params_file(), 'receipts.json': receipt_file()}
    for name, desc, bits, psets, draws, top_n in logit_cases():
        files['logits_%s.json' % name] = logits_file(name, desc, bits, psets, draws, top_n)
    if R.HAZARDS:
        raise SystemExit('gen_vectors: a vector met the cross-ISA flush window: %r' % R.HAZARDS)
    return {k: render(v) for k, v in files.items()}


def main(argv):
    out = DEFAULT_OUT
    check = '--check' in argv
    if '--out' in argv:
        out = argv[argv.index('--out') + 1]
    files = all_files()
    if check:
        bad = 0
        present = sorted(f for f in os.listdir(out) if f.endswith('.json'))
        for name in sorted(set(present) | set(files)):
            path = os.path.join(out, name)
            old = open(path).read() if os.path.exists(path) else None
            if old != files.get(name):
                print('gen_vectors: %s differs from a fresh generation' % path)
                bad = 1
        if not bad:
            print('gen_vectors: all %d files in %s equal a fresh generation' % (len(files), out))
        return bad
    os.makedirs(out, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(out, name), 'w') as f:
            f.write(text)
    print('gen_vectors: wrote %d files to %s' % (len(files), out))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
