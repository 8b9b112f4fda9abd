"""sampling_ref.py - independent Python reference of docs/sampling.md.

Owns: the second, independent implementation of the cis2 sampling
extension (docs/sampling.md, "cis2 sampling extension, version 1"),
written from that document and the CIS-2 v0.3b spec text only (no C
sampling code).  It is the source of tests/vectors/sampling/ (through
tests/sampling/gen_vectors.py).

Contents, in document order:
  binary32 arithmetic with FTZ/DAZ          §S1.1, §S1.2 (spec §1.3)
  exp_pinned, ln_pinned, sum_seq, argmax    §S1.3 (spec §6.2, §6.5, §5.3, §11.2)
  parameter validation, decimal input       §S2.2, §S2.3
  candidate order, filters, Philox, draw    §S3
  logprobs                                  §S4
  stop rules                                §S5
  receipts: params block, digests, witness  §S7

binary32 semantics.  Every float operation is a numpy float32 operation
(IEEE round-to-nearest-even) followed by an explicit emulation of x86-64's
MXCSR FTZ+DAZ (the spec's §1.3 pin):
  * DAZ: a subnormal input is replaced by a zero of its sign, before every
    operation and every comparison;
  * FTZ: a result that is tiny *after rounding* (x86 semantics: rounded to
    24 bits as if the exponent were unbounded, then below 2^-126) becomes a
    zero of its sign.
numpy rounds to the subnormal grid instead, which differs from "after
rounding" only for exact results in [FLT_MIN*(1-2^-24), FLT_MIN); those
come out of numpy as FLT_MIN and are settled here with exact rational
arithmetic.  Results whose exact value lies in [FLT_MIN*(1-2^-25),
FLT_MIN) are FLT_MIN on x86-64 and 0 on aarch64 (§S1.6): every such event
is recorded in HAZARDS, and the vector generator refuses to emit a vector
that met one (except where §S1.6 proves it harmless, see HazardOk).
Only multiplications and divisions can produce them.
"""

import hashlib
import re
import struct
from fractions import Fraction

import numpy as np

F32 = np.float32
U32 = np.uint32


# ---------------------------------------------------------------- §S1 binary32

def f32(bits):
    """binary32 value of a bit pattern (int)."""
    return np.array([bits], dtype=U32).view(F32)[0]


def bits_of(x):
    """bit pattern (int) of a binary32 scalar."""
    return int(np.array([x], dtype=F32).view(U32)[0])


def arr_from_bits(bits_list):
    return np.array(bits_list, dtype=U32).view(F32)


def bits_arr(a):
    return np.ascontiguousarray(a, dtype=F32).view(U32)


FLT_MIN = f32(0x00800000)
ZERO = f32(0x00000000)
ONE = f32(0x3F800000)
HALF = f32(0x3F000000)
TWO_M24 = f32(0x33800000)      # §S1.5
QNAN_BITS = 0x7FC00000         # §S1.5
MIN_P_LOW_BITS = 0x1F800000    # §S1.5, §S2.2

_FLT_MIN_Q = Fraction(1, 2 ** 126)
_WINDOW_LO = _FLT_MIN_Q * (1 - Fraction(1, 2 ** 25))

HAZARDS = []        # (op, a_bits, b_bits) whose exact result is in the window
_hazard_ok = [0]    # >0 while a caller has proved the window harmless


class HazardOk:
    """Context: window results inside are harmless (the caller proves it)."""

    def __enter__(self):
        _hazard_ok[0] += 1

    def __exit__(self, *exc):
        _hazard_ok[0] -= 1
        return False


def daz(a):
    """§S1.1/§S1.2 DAZ: subnormal inputs read as a zero of their sign."""
    a = np.array(a, dtype=F32, copy=True, ndmin=1)
    b = a.view(U32)
    sub = ((b & 0x7F800000) == 0) & ((b & 0x007FFFFF) != 0)
    b[sub] &= 0x80000000
    return a


def _ftz(r, a, b, op):
    """§S1.1 FTZ after rounding (x86-64), on numpy's gradual-underflow result."""
    rb = r.view(U32)
    mag = rb & 0x7FFFFFFF
    tiny = (mag != 0) & (mag < 0x00800000)
    rb[tiny] &= 0x80000000                  # tiny after rounding: x86 and numpy agree
    if op in ('mul', 'div'):
        edge = np.nonzero(mag == 0x00800000)[0]
        for i in edge:
            ai = Fraction(float(a[i if a.size > 1 else 0]))
            bi = Fraction(float(b[i if b.size > 1 else 0]))
            ex = abs(ai * bi if op == 'mul' else ai / bi)
            if ex >= _FLT_MIN_Q:
                continue                    # a true normal result
            if ex >= _WINDOW_LO:            # x86: FLT_MIN, aarch64: 0
                if not _hazard_ok[0]:
                    HAZARDS.append((op, bits_of(a[i if a.size > 1 else 0]),
                                    bits_of(b[i if b.size > 1 else 0])))
            else:                           # tiny after 24-bit rounding: flush
                rb[i] &= 0x80000000
    return r


def _binop(op, a, b):
    scalar = np.ndim(a) == 0 and np.ndim(b) == 0
    a = daz(a)
    b = daz(b)
    with np.errstate(all='ignore'):
        if op == 'add':
            r = a + b
        elif op == 'sub':
            r = a - b
        elif op == 'mul':
            r = a * b
        else:
            r = a / b
    r = np.array(r, dtype=F32, ndmin=1)
    r = _ftz(r, a, b, op)
    return r[0] if scalar else r


def add(a, b):
    return _binop('add', a, b)


def sub(a, b):
    return _binop('sub', a, b)


def mul(a, b):
    return _binop('mul', a, b)


def div(a, b):
    return _binop('div', a, b)


def _cmp(op, a, b):
    scalar = np.ndim(a) == 0 and np.ndim(b) == 0
    a = daz(a)
    b = daz(b)
    with np.errstate(invalid='ignore'):
        r = op(a, b)
    return bool(r[0]) if scalar else r


def eq(a, b):
    return _cmp(np.equal, a, b)      # §S1.2: -0 == +0, subnormal == 0, NaN false


def lt(a, b):
    return _cmp(np.less, a, b)


def ge(a, b):
    return _cmp(np.greater_equal, a, b)


def gt(a, b):
    return _cmp(np.greater, a, b)


def is_nan(a):
    return np.isnan(np.asarray(a, dtype=F32))


def key_value(x):
    """Python float of a binary32 after DAZ (exact), for ordering (§S1.2)."""
    return float(daz(x)[0])


# ------------------------------------------------- §S1.3 the spec's pinned functions

EXP_LOG2E = f32(0x3FB8AA3B)     # spec §6.2
EXP_C1 = f32(0x3F318000)
EXP_C2 = f32(0xB95E8083)
EXP_P = [f32(b) for b in (0x39506967, 0x3AB743CE, 0x3C088908,
                          0x3D2AA9C1, 0x3E2AAAAA, 0x3F000000)]
EXP_HI = f32(0x42B00000)        # 88.0
EXP_LO = f32(0xC2B00000)        # -88.0
EXP_TINY = f32(0x33000000)      # 2^-25: below it exp_pinned is 1.0 on both ISAs (§S1.6)

LOG_SQRTHF = f32(0x3F3504F3)    # spec §6.5
LOG_Q1 = f32(0xB95E8083)
LOG_Q2 = f32(0x3F318000)
LOG_P = [f32(b) for b in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251B, 0xBDFE5D4F,
                          0x3E11E9BF, 0xBE2AAE50, 0x3E4CCEAD, 0xBE7FFFFC,
                          0x3EAAAAAA)]


def ldexp_exact(x, k):
    """spec §6.2.1 on arrays: replace the exponent field; x != 0 here."""
    xb = np.array(x, dtype=F32, ndmin=1).view(U32).astype(np.int64)
    k = np.asarray(k, dtype=np.int64)
    exp_bits = (xb >> 23) & 0xFF
    new_exp = exp_bits + k
    out = (xb & ~(0xFF << 23)) | (np.clip(new_exp, 0, 0xFF) << 23)
    out = np.where(new_exp <= 0, 0x00000000, out)                     # 0.0
    out = np.where(new_exp >= 0xFF,
                   np.where(xb & 0x80000000, 0xFF800000, 0x7F800000), out)
    return out.astype(U32).view(F32)


def _exp_core(x):
    """spec §6.2 steps 4-6 on an array of finite x in [-88, 88]."""
    t = mul(x, EXP_LOG2E)
    z0 = add(t, HALF)
    k = np.floor(z0).astype(F32)        # floor of a binary32: exact
    kc1 = mul(k, EXP_C1)
    r0 = sub(x, kc1)
    kc2 = mul(k, EXP_C2)
    r = sub(r0, kc2)
    r2 = mul(r, r)
    poly = np.full(x.shape, EXP_P[0], dtype=F32)
    for i in range(1, 6):
        poly = add(mul(poly, r), EXP_P[i])
    m1 = mul(poly, r2)
    poly2 = add(m1, r)
    result = add(poly2, ONE)
    return ldexp_exact(result, k.astype(np.int64))


def exp_pinned(x):
    """spec §6.2 exp_pinned, elementwise; scalar in, scalar out."""
    scalar = np.ndim(x) == 0
    x = daz(x)
    out = np.empty_like(x)
    nan = np.isnan(x)
    with np.errstate(invalid='ignore'):
        big = x > EXP_HI
        small = x < EXP_LO
    out[nan] = x[nan]
    out[big] = np.inf
    out[small] = ZERO
    mid = ~(nan | big | small)
    with np.errstate(invalid='ignore'):
        tiny = mid & (np.abs(x) < EXP_TINY)
    rest = mid & ~tiny
    if tiny.any():
        # §S1.6: for |x| < 2^-25 the result is 1.0 on both ISAs whatever
        # the window does inside; check it rather than assume it.
        with HazardOk():
            out[tiny] = _exp_core(x[tiny])
        assert (out[tiny] == ONE).all()
    if rest.any():
        out[rest] = _exp_core(x[rest])
    return out[0] if scalar else out


def frexp_exact(x):
    """spec §6.5.1 on arrays of positive finite normals."""
    xb = np.array(x, dtype=F32, ndmin=1).view(U32).astype(np.int64)
    exp_bits = (xb >> 23) & 0xFF
    mant_bits = (xb & 0x807FFFFF) | (126 << 23)
    return mant_bits.astype(U32).view(F32), exp_bits - 126


def ln_pinned(x):
    """spec §6.5 ln_pinned, elementwise; scalar in, scalar out."""
    scalar = np.ndim(x) == 0
    x = daz(x)
    out = np.empty_like(x)
    with np.errstate(invalid='ignore'):
        bad = np.isnan(x) | (x < ZERO)
        zero = x == ZERO
    out.view(U32)[bad] = QNAN_BITS                    # canonical NaN (FACTS §1.7)
    out[zero] = -np.inf
    ok = ~(bad | zero)
    if ok.any():
        m, e = frexp_exact(x[ok])
        low = m < LOG_SQRTHF
        e = np.where(low, e - 1, e)
        m = np.where(low, sub(add(m, m), ONE), sub(m, ONE))
        z = mul(m, m)
        poly = np.full(m.shape, LOG_P[0], dtype=F32)
        for i in range(1, 9):
            poly = add(mul(poly, m), LOG_P[i])
        y = mul(poly, m)
        y = mul(y, z)
        fe = e.astype(F32)                            # exact: |e| < 2^24
        t1 = mul(fe, LOG_Q1)
        y = add(y, t1)
        half_z = mul(HALF, z)
        y = sub(y, half_z)
        result = add(m, y)
        t2 = mul(fe, LOG_Q2)
        result = add(result, t2)
        out[ok] = result
    return out[0] if scalar else out


def prefix_sums(a):
    """spec §5.3's loop with every partial sum kept: out[j] = out[j-1] + a[j],
    from +0.0, each add one binary32 operation (DAZ on a, FTZ on the sums;
    a sum cannot land in the §S1.6 window, so no hazard check is needed)."""
    a = daz(a)
    if a.size == 0:
        return a
    with np.errstate(all='ignore'):
        acc, sums = ZERO, []
        for v in a:                        # np.float32 + np.float32: binary32, RNE
            acc = acc + v
            sums.append(acc)
        out = np.array(sums, dtype=F32)
        mag = out.view(U32) & 0x7FFFFFFF
        if ((mag != 0) & (mag < 0x00800000)).any():
            acc, sums = ZERO, []           # a partial sum was subnormal: redo with FTZ
            for v in a:
                acc = acc + v
                if acc != 0 and abs(acc) < FLT_MIN:
                    acc = np.copysign(ZERO, acc)
                sums.append(acc)
            out = np.array(sums, dtype=F32)
    return out


def sum_seq(a):
    """spec §5.3: acc = +0.0; acc = acc + a[i], left to right."""
    a = np.asarray(a, dtype=F32)
    return prefix_sums(a)[-1] if a.size else ZERO


def argmax(x):
    """spec §11.2: strict >, first occurrence; a NaN at 0 makes it 0."""
    vals = daz(x).tolist()       # exact doubles of the DAZ'd values
    best_idx, best_val = 0, vals[0]
    for idx, v in enumerate(vals):
        if v > best_val:         # NaN compares false, as in binary32
            best_val, best_idx = v, idx
    return best_idx


# ------------------------------------------------------------ §S2 parameters

class UsageError(ValueError):
    """A parameter outside §S2.2 (the CLI's exit 2)."""


def validate_params(T_bits, top_k, top_p_bits, min_p_bits, seed, sequence, N, V):
    """§S2.2: refuse, never clamp.  Raises UsageError naming the parameter."""
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)
    for name, v, hi in (('temperature', T_bits, 2 ** 32 - 1), ('top-p', top_p_bits, 2 ** 32 - 1),
                        ('min-p', min_p_bits, 2 ** 32 - 1), ('top-k', top_k, 2 ** 32 - 1),
                        ('seed', seed, 2 ** 64 - 1), ('sequence', sequence, 2 ** 32 - 1),
                        ('max-toks', N, 2 ** 32 - 1)):
        if not is_int(v) or v < 0 or v > hi:
            raise UsageError('%s: out of range' % name)
    if not (T_bits == 0x00000000 or 0x00800000 <= T_bits <= 0x7F7FFFFF):
        raise UsageError('temperature: must be +0.0 or a positive normal finite binary32')
    if not (0x00800000 <= top_p_bits <= 0x3F800000):
        raise UsageError('top-p: must be a positive normal binary32 <= 1.0')
    if not (min_p_bits == 0x00000000 or MIN_P_LOW_BITS <= min_p_bits <= 0x3F800000):
        raise UsageError('min-p: must be +0.0 or in [2^-64, 1.0]')
    if top_k > V:
        raise UsageError('top-k: greater than the vocabulary size')
    if N < 1:
        raise UsageError('max-toks: must be >= 1')


def sampler_of(T_bits, top_k):
    """§S2.4."""
    return 'greedy' if T_bits == 0x00000000 or top_k == 1 else 'philox4x32-10'


_DEC_RE = re.compile(r'^([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$')


def round_to_binary32(q):
    """Correctly rounded (RNE) binary32 bits of a rational q, with gradual
    underflow and overflow to inf (IEEE, no FTZ): what strtof returns."""
    sign = 0x80000000 if q < 0 else 0
    q = abs(q)
    if q == 0:
        return sign
    # exponent e with 2^e <= q < 2^(e+1)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126)                      # subnormal range: fixed quantum 2^-149
    quantum = Fraction(2) ** (e - 23)
    n = q / quantum
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    if fl == 2 ** 24:                     # carried into the next binade
        fl //= 2
        e += 1
    if e > 127:
        return sign | 0x7F800000
    if fl < 2 ** 23:                      # subnormal (e == -126)
        return sign | fl
    return sign | ((e + 127) << 23) | (fl - 2 ** 23)


def parse_decimal_f32(text, name):
    """§S2.3: decimal text -> binary32 bits, correctly rounded; refuses an
    underflow of a nonzero number.  Range checks are validate_params'."""
    mt = _DEC_RE.match(text)
    if not mt:
        raise UsageError('%s: not a decimal number: %r' % (name, text))
    q = Fraction(text)                    # exact rational of the decimal
    b = round_to_binary32(q)
    if q != 0 and (b & 0x7F800000) == 0:
        raise UsageError('%s: %r underflows binary32' % (name, text))
    if text.startswith('-') and q == 0:
        b = 0x80000000                    # "-0" is -0.0 (refused later)
    return b


def parse_uint(text, name, hi):
    """§S2.3 unsigned decimal integers: digits only."""
    if not re.fullmatch(r'[0-9]+', text):
        raise UsageError('%s: not an unsigned decimal integer: %r' % (name, text))
    v = int(text)
    if v > hi:
        raise UsageError('%s: out of range' % name)
    return v


def parse_cli_top_k(text):
    """§S2.3: an explicit --top-k 0 is refused."""
    v = parse_uint(text, 'top-k', 2 ** 32 - 1)
    if v == 0:
        raise UsageError('top-k: 0 is refused on the command line (omit the option)')
    return v


# ---------------------------------------------------------------- §S3 Philox

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57     # §S1.5
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
M32 = 0xFFFFFFFF


def philox_round(C, K):
    """§S3.5.1 one round."""
    p0 = PHILOX_M0 * C[0]
    p1 = PHILOX_M1 * C[2]
    return ((p1 >> 32) ^ C[1] ^ K[0], p1 & M32, (p0 >> 32) ^ C[3] ^ K[1], p0 & M32)


def philox4x32_10(C, K):
    """§S3.5.2 ten rounds, key bumped after every round but the last."""
    C = tuple(C)
    k0, k1 = K
    for r in range(10):
        C = philox_round(C, (k0, k1))
        if r < 9:
            k0 = (k0 + PHILOX_W0) & M32
            k1 = (k1 + PHILOX_W1) & M32
    return C


def philox_draw(seed, sequence, step):
    """§S3.5.3: (key, counter, outputs, u)."""
    K = (seed & M32, seed >> 32)
    C = (step, sequence, 0, 0)
    out = philox4x32_10(C, K)
    u = mul(F32(out[0] >> 8), TWO_M24)                # exact (§S3.5.3)
    return K, C, out, u


# ------------------------------------------------------- §S3 one step's token

_order_cache = {}


def candidate_order(x):
    """§S3.3: non-NaN ids by logit descending (DAZ, -0 == +0), ties by id."""
    key = np.asarray(x, dtype=F32).tobytes()
    if key not in _order_cache:
        vals = daz(x).tolist()             # exact doubles; -0.0 == 0.0 in Python too
        ids = [i for i, v in enumerate(vals) if v == v]
        ids.sort(key=lambda i: (-vals[i], i))
        if len(_order_cache) > 16:
            _order_cache.clear()
        _order_cache[key] = ids
    return list(_order_cache[key])


_filter_cache = {}


def filtered(x, T_bits, top_k, top_p_bits, min_p_bits):
    """§S3.3-§S3.4 for a philox4x32-10 sampler: the finally kept candidates.
    Returns a dict (cached per logits and parameters: it does not depend on
    seed, sequence or step) with the kept ids f, their weights wf, S, S'
    and the set sizes; None when there is no candidate."""
    x = np.asarray(x, dtype=F32)
    key = (x.tobytes(), T_bits, top_k, top_p_bits, min_p_bits)
    if key in _filter_cache:
        return _filter_cache[key]
    cand = candidate_order(x)                         # §S3.3
    if not cand:
        return None
    # §S3.4.1 top-k
    kept = cand[:top_k] if 0 < top_k < len(cand) else list(cand)
    K = len(kept)
    # §S3.4.2 weights
    T = f32(T_bits)
    xs = x[kept]
    m = xs[0]
    d = np.where(eq(xs, m), ZERO, sub(xs, m)).astype(F32)   # d = (x == m) ? +0.0 : x - m
    with HazardOk():              # §S1.6: z only feeds exp_pinned, harmless there
        z = div(d, T)
    w = exp_pinned(z)
    S = sum_seq(w)
    # §S3.4.3 top-p
    n_p = K
    if top_p_bits != 0x3F800000:
        p = div(w, S)                                 # p = w / S, per candidate
        c = prefix_sums(p)                            # c = c + p, in order
        hit = np.nonzero(ge(c, f32(top_p_bits)))[0]   # first c >= top_p
        if hit.size:
            n_p = int(hit[0]) + 1
    sel = list(range(n_p))
    # §S3.4.4 min-p
    if min_p_bits != 0x00000000:
        p_first = div(w[0], S)
        t = mul(f32(min_p_bits), p_first)
        q = div(w[:n_p], S)
        keep = ge(q, t)                               # (w / S) >= t, each on its own
        keep[0] = True                                # the first is always kept
        sel = [j for j in sel if keep[j]]
    # §S3.4.5 final sum
    wf = w[sel]
    Sp = sum_seq(wf)
    res = {'f': [kept[j] for j in sel], 'wf': wf, 'acc': prefix_sums(wf),
           'S': S, 'S_prime': Sp, 'n_candidates': len(cand),
           'n_after_top_k': K, 'n_after_top_p': n_p, 'n_kept': len(sel)}
    assert res['acc'][-1] == Sp                       # §S3.7: the same additions
    if len(_filter_cache) > 64:
        _filter_cache.clear()
    _filter_cache[key] = res
    return res


def sample_step(x, T_bits, top_k, top_p_bits, min_p_bits, seed, sequence, step):
    """§S3.1: the token of one step, with the values the vectors record."""
    x = np.asarray(x, dtype=F32)
    res = {'sampler': sampler_of(T_bits, top_k), 'drew': False}
    if res['sampler'] == 'greedy':                    # §S3.2
        res['token'] = argmax(x)
        return res
    fl = filtered(x, T_bits, top_k, top_p_bits, min_p_bits)
    if fl is None:                                    # §S3.1 step 2: no candidate
        res['n_candidates'] = 0
        res['token'] = argmax(x)
        return res
    for k in ('n_candidates', 'n_after_top_k', 'n_after_top_p', 'n_kept'):
        res[k] = fl[k]
    res['S_bits'] = bits_of(fl['S'])
    res['S_prime_bits'] = bits_of(fl['S_prime'])
    # §S3.5 draw
    Kk, C, out, u = philox_draw(seed, sequence, step)
    res.update(drew=True, philox_key=list(Kk), philox_counter=list(C),
               philox_out=list(out), u_bits=bits_of(u))
    # §S3.6 inverse CDF: acc = acc + w in order; the first with target < acc
    target = mul(u, fl['S_prime'])
    res['target_bits'] = bits_of(target)
    hit = np.nonzero(lt(target, fl['acc']))[0]
    res['fallback'] = not hit.size
    res['token'] = fl['f'][int(hit[0])] if hit.size else fl['f'][-1]
    res['kept_ids'] = list(fl['f'])
    return res


# --------------------------------------------------------------- §S4 logprobs

_logprob_cache = {}


def logprobs(x):
    """§S4: array of V logprobs (binary32; NaN logits give QNAN), plus M, E, L.
    Cached per logit vector (logprobs depend on nothing else)."""
    x = np.asarray(x, dtype=F32)
    key = x.tobytes()
    if key not in _logprob_cache:
        if len(_logprob_cache) > 16:
            _logprob_cache.clear()
        _logprob_cache[key] = _logprobs(x)
    out, info = _logprob_cache[key]
    return out.copy(), info


def _logprobs(x):
    V = len(x)
    out = np.empty(V, dtype=F32)
    out.view(U32)[:] = QNAN_BITS
    cand = candidate_order(x)
    if not cand:
        return out, None
    M = x[cand[0]]
    ok = ~np.isnan(x)
    xv = x[ok]
    d = np.where(eq(xv, M), ZERO, sub(xv, M)).astype(F32)
    E = sum_seq(exp_pinned(d))                        # vocab order, NaN skipped
    L = ln_pinned(E)
    out[ok] = sub(d, L)
    return out, {'M_bits': bits_of(M), 'E_bits': bits_of(E), 'L_bits': bits_of(L),
                 'candidates': cand}


def logprob_report(x, token, n):
    """§S4 report: chosen token's logprob and the top-n (id, logprob) bits."""
    assert 0 <= n <= 20
    lp, info = logprobs(x)
    bits = bits_arr(lp)
    cand = info['candidates'] if info else []
    rep = {'chosen_bits': int(bits[token]),
           'top': [[i, int(bits[i])] for i in cand[:n]]}
    if info:
        rep.update(M_bits=info['M_bits'], E_bits=info['E_bits'], L_bits=info['L_bits'])
    return rep


# ------------------------------------------------------------- §S5 stop rules

class StopRules:
    """§S5.1.  eos_ids None = stop-at-eos off."""

    def __init__(self, eos_ids=None, stop_ids=(), stop_strings=()):
        if eos_ids is not None:
            if not eos_ids:
                raise UsageError('stop-at-eos: the config has no eos_token_id')
            if len(eos_ids) > 64 or any(not 0 <= e <= M32 for e in eos_ids):
                raise UsageError('stop-at-eos: bad eos_token_id list')
        if len(stop_ids) > 64 or any(not 0 <= e <= M32 for e in stop_ids):
            raise UsageError('stop ids: at most 64 u32 ids')
        if len(stop_strings) > 16 or any(not 1 <= len(s) <= 256 for s in stop_strings):
            raise UsageError('stop strings: at most 16, each 1..256 bytes')
        self.eos_ids = None if eos_ids is None else list(eos_ids)
        self.stop_ids = list(stop_ids)
        self.stop_strings = [bytes(s) for s in stop_strings]

    def any(self):
        return self.eos_ids is not None or bool(self.stop_ids) or bool(self.stop_strings)


def _eos_value(v, name):
    """An eos_token_id's ids: None -> [], an int -> [it], a list of ints -> it."""
    if v is None:
        return []
    lst = v if isinstance(v, list) else [v]
    for e in lst:
        if not isinstance(e, int) or isinstance(e, bool) or not 0 <= e <= M32:
            raise ValueError(name + ': eos_token_id is not a u32 or a list of u32')
    if len(lst) > 64:
        raise ValueError(name + ': more than 64 eos ids')
    return list(lst)


def eos_ids_from_config(cfg, gen=None):
    """§S5.1: config.json's eos_token_id (parsed JSON object) -> list; with
    gen (generation_config.json's parsed JSON, when the model directory has
    one) its eos ids not yet listed follow, in its order."""
    lst = _eos_value(cfg.get('eos_token_id'), 'config.json')
    if gen is not None:
        if not isinstance(gen, dict):
            raise ValueError('generation_config.json: not a JSON object')
        for e in _eos_value(gen.get('eos_token_id'), 'generation_config.json'):
            if e not in lst:
                lst.append(e)
        if len(lst) > 64:
            raise ValueError('generation_config.json: more than 64 eos ids in all')
    if not lst:
        raise UsageError('stop-at-eos: the config has no eos_token_id')
    return lst


def stop_check(rules, gen_ids, token_bytes, N):
    """§S5.3 after step s = len(gen_ids)-1 (gen_ids already has token s).
    token_bytes(id) -> bytes.  Returns a finish reason or None."""
    s = len(gen_ids) - 1
    t = gen_ids[-1]
    if rules.eos_ids is not None and t in rules.eos_ids:
        return 'eos'
    if t in rules.stop_ids:
        return 'stop-id'
    if rules.stop_strings:
        prev = b''.join(token_bytes(i) for i in gen_ids[:-1])
        B = prev + token_bytes(t)
        b = len(prev)
        for q in rules.stop_strings:
            # an occurrence at j with j + len(q) > b: search from b - len(q) + 1
            if B.find(q, max(0, b - len(q) + 1)) >= 0:
                return 'stop-string'
    if s + 1 == N:
        return 'length'
    return None


def completion_cut(rules, gen_ids, token_bytes, reason):
    """§S5.4 (informative): the bytes shown to a user."""
    if reason in ('eos', 'stop-id'):
        return b''.join(token_bytes(i) for i in gen_ids[:-1])
    B = b''.join(token_bytes(i) for i in gen_ids)
    if reason == 'stop-string':
        return B[:min(p for p in (B.find(q) for q in rules.stop_strings) if p >= 0)]
    return B


# ---------------------------------------------------------------- §S7 receipts

def hex8(b):
    return '%08x' % b


def params_block(N, T_bits, top_k, top_p_bits, min_p_bits, seed, sequence, rules):
    """§S7.2/§S7.5: the 11 lines max-toks..stop-strings, each with its LF."""
    def csv(lst):
        return ','.join(str(i) for i in lst) if lst else 'none'
    lines = [
        ('max-toks', str(N)),
        ('sampler', sampler_of(T_bits, top_k)),
        ('temperature', hex8(T_bits)),
        ('top-k', str(top_k)),
        ('top-p', hex8(top_p_bits)),
        ('min-p', hex8(min_p_bits)),
        ('seed', str(seed)),
        ('sequence', str(sequence)),
        ('stop-eos', 'none' if rules.eos_ids is None else csv(rules.eos_ids)),
        ('stop-ids', csv(rules.stop_ids)),
        ('stop-strings', ','.join(s.hex() for s in rules.stop_strings) or 'none'),
    ]
    return ''.join('%s %s\n' % kv for kv in lines)


def params_digest(block):
    """§S7.5."""
    return hashlib.sha256(block.encode('ascii')).digest()


def uses_extension_receipt(T_bits, rules):
    """§S7.1: v1 for T == +0.0 with no stop rule, else the extension."""
    return T_bits != 0x00000000 or rules.any()


def canonical_logit_bytes(x):
    """§S7.6 / spec §12.1 item 7a: u32 LE bits, every NaN as 0x7FC00000."""
    b = bits_arr(np.asarray(x, dtype=F32)).copy()
    b[np.isnan(np.asarray(x, dtype=F32))] = QNAN_BITS
    return b.astype('<u4').tobytes()


def witness_digest(weights_sha, tokenizer_sha, config_sha, table_digest,
                   inv_freq_digest, prompt_ids, pdigest, steps):
    """§S7.6.  steps = [(logits, token), ...] for the gen-toks steps."""
    h = hashlib.sha256()
    for d in (weights_sha, tokenizer_sha, config_sha, table_digest, inv_freq_digest):
        assert len(d) == 32
        h.update(d)
    h.update(struct.pack('<%dI' % len(prompt_ids), *prompt_ids))
    h.update(pdigest)
    for logits, tok in steps:
        h.update(canonical_logit_bytes(logits))
        h.update(struct.pack('<I', tok))
    return h.digest()


def token_digest(prompt_ids, gen_ids):
    """§S7.7 = spec §12.2 over prompt ++ generated."""
    ids = list(prompt_ids) + list(gen_ids)
    return hashlib.sha256(struct.pack('<%dI' % len(ids), *ids)).digest()


def render_receipt(f):
    """§S7.2: the extension receipt text from a dict of field values."""
    keys = ['spec-version', 'extension', 'weights-sha256', 'config-sha256',
            'tokenizer-sha256', 'prompt-hex', 'prompt-token-ids', 'dtype']
    out = 'CIS-2-RECEIPT ext-sampling-1\n'
    out += ''.join('%s %s\n' % (k, f[k]) for k in keys)
    out += f['params-block']
    for k in ('params-digest', 'table-digest', 'inv-freq-table-digest', 'gen-toks',
              'finish-reason', 'generated-token-ids', 'token-digest', 'witness-digest'):
        out += '%s %s\n' % (k, f[k])
    return out


def run_decode(step_logits, prompt_ids, N, T_bits, top_k, top_p_bits, min_p_bits,
               seed, sequence, rules, token_bytes):
    """§S6 with the logits supplied per step (step_logits[s] is used only if
    step s is reached).  Returns (gen_ids, reason, per-step results)."""
    gen, per = [], []
    for s in range(N):
        r = sample_step(step_logits[s], T_bits, top_k, top_p_bits, min_p_bits,
                        seed, sequence, s)
        gen.append(r['token'])
        per.append(r)
        reason = stop_check(rules, gen, token_bytes, N)
        if reason:
            return gen, reason, per
    raise AssertionError('unreachable: step N-1 always finishes')


def build_receipt(art, prompt_bytes, prompt_ids, step_logits, N, T_bits, top_k,
                  top_p_bits, min_p_bits, seed, sequence, rules, token_bytes):
    """§S7: a whole extension receipt for a run whose logits are given.
    art: dict weights/config/tokenizer/table/inv_freq -> 32 raw bytes."""
    V = len(step_logits[0])
    validate_params(T_bits, top_k, top_p_bits, min_p_bits, seed, sequence, N, V)
    assert uses_extension_receipt(T_bits, rules)
    block = params_block(N, T_bits, top_k, top_p_bits, min_p_bits, seed, sequence, rules)
    pd = params_digest(block)
    gen, reason, per = run_decode(step_logits, prompt_ids, N, T_bits, top_k, top_p_bits,
                                  min_p_bits, seed, sequence, rules, token_bytes)
    steps = [(step_logits[s], gen[s]) for s in range(len(gen))]
    wd = witness_digest(art['weights'], art['tokenizer'], art['config'], art['table'],
                        art['inv_freq'], prompt_ids, pd, steps)
    fields = {
        'spec-version': '0.3b', 'extension': 'sampling-1',
        'weights-sha256': art['weights'].hex(), 'config-sha256': art['config'].hex(),
        'tokenizer-sha256': art['tokenizer'].hex(), 'prompt-hex': prompt_bytes.hex(),
        'prompt-token-ids': ','.join(map(str, prompt_ids)), 'dtype': 'fp32',
        'params-block': block, 'params-digest': pd.hex(),
        'table-digest': art['table'].hex(), 'inv-freq-table-digest': art['inv_freq'].hex(),
        'gen-toks': str(len(gen)), 'finish-reason': reason,
        'generated-token-ids': ','.join(map(str, gen)),
        'token-digest': token_digest(prompt_ids, gen).hex(), 'witness-digest': wd.hex(),
    }
    return render_receipt(fields), gen, reason, per
