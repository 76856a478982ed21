"""Cases for the onnx2 group (ops_onnx2.c): RNN, GRU, LSTM, GridSample, AffineGrid, RoiAlign, Col2Im,
MaxUnpool, NonMaxSuppression, Unique, DFT and BitCast. References are numpy written from the ONNX spec
and computed in float64; torch cross-checks the recurrent and GridSample references where it has the
same op (torch.nn.GRU is ONNX's GRU with linear_before_reset=1)."""
import numpy as np

from opcase import Case, DType

F32, F64, I64 = np.float32, np.float64, np.int64
ERR = "INVALID_ARGUMENT"
TOL = (1e-5, 1e-5)


def rnd(rng, shape, dt=F32, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(dt)


def err(name, op, inputs, text, attrs=None):
    return Case(name, op, inputs, attrs=attrs, error=(ERR, text))


# ---- RNN, GRU, LSTM ------------------------------------------------------------------------------------

def sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTS = {"Tanh": np.tanh, "Sigmoid": sigmoid, "Relu": lambda x: np.maximum(x, 0),
        "HardSigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1)}


def ref_rnn(op, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, direction="forward", layout=0,
            lbr=0, clip=None, acts=None, odt=F32):
    """Returns Y, Y_h(, Y_c) following the ONNX equations (computed in float64, returned as odt), per
    batch entry with its length."""
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    X = X.astype(F64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    S, Bn, _ = X.shape
    nd, H = W.shape[0], R.shape[2]
    B = np.zeros((nd, 2 * G * H)) if B is None else B.astype(F64)
    P = np.zeros((nd, 3 * H)) if P is None else P.astype(F64)
    h0 = np.zeros((nd, Bn, H)) if h0 is None else h0.astype(F64)
    c0 = np.zeros((nd, Bn, H)) if c0 is None else c0.astype(F64)
    lens = np.full(Bn, S) if lens is None else lens
    per = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[op]
    acts = acts or per
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    Y = np.zeros((S, nd, Bn, H))
    Yh = np.zeros((nd, Bn, H))
    Yc = np.zeros((nd, Bn, H))
    for d in range(nd):
        f = [ACTS[a] for a in acts[d * len(per):(d + 1) * len(per)]] if len(acts) > len(per) else [ACTS[a] for a in acts]
        act = [lambda v, g=g: g(cl(v)) for g in f]
        Wd, Rd = W[d].astype(F64), R[d].astype(F64)
        Wb, Rb = B[d, :G * H], B[d, G * H:]
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        for b in range(Bn):
            h, c = h0[d, b].copy(), c0[d, b].copy()
            L = lens[b]
            for s in range(L):
                t = L - 1 - s if rev else s
                xw = Wd @ X[t, b] + Wb
                if op == "RNN":
                    h = act[0](xw + Rd @ h + Rb)
                elif op == "GRU":
                    z = act[0](xw[:H] + Rd[:H] @ h + Rb[:H])
                    r = act[0](xw[H:2 * H] + Rd[H:2 * H] @ h + Rb[H:2 * H])
                    if lbr:
                        hh = act[1](xw[2 * H:] + r * (Rd[2 * H:] @ h + Rb[2 * H:]))
                    else:
                        hh = act[1](xw[2 * H:] + Rd[2 * H:] @ (r * h) + Rb[2 * H:])
                    h = (1 - z) * hh + z * h
                else:
                    g = xw + Rd @ h + Rb
                    i = act[0](g[:H] + P[d, :H] * c)
                    fg = act[0](g[2 * H:3 * H] + P[d, 2 * H:] * c)
                    cc = act[1](g[3 * H:])
                    c = fg * c + i * cc
                    o = act[0](g[H:2 * H] + P[d, H:2 * H] * c)
                    h = o * act[2](c)
                Y[t, d, b] = h
            Yh[d, b], Yc[d, b] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    out = [Y.astype(odt), Yh.astype(odt)]
    if op == "LSTM":
        out.append(Yc.astype(odt))
    return out


def torch_check(op, X, W, R, B, out):
    """The numpy reference against torch for a forward, single-layer, layout-0 case."""
    import torch
    H = R.shape[2]
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    perm = {"RNN": [0], "GRU": [1, 0, 2], "LSTM": [0, 2, 3, 1]}[op]  # ONNX gate order -> torch's
    reorder = lambda m: np.concatenate([m[p * H:(p + 1) * H] for p in perm])
    mod = {"RNN": torch.nn.RNN, "GRU": torch.nn.GRU, "LSTM": torch.nn.LSTM}[op](W.shape[2], H)
    with torch.no_grad():
        mod.weight_ih_l0.copy_(torch.tensor(reorder(W[0])))
        mod.weight_hh_l0.copy_(torch.tensor(reorder(R[0])))
        mod.bias_ih_l0.copy_(torch.tensor(reorder(B[0, :G * H])))
        mod.bias_hh_l0.copy_(torch.tensor(reorder(B[0, G * H:])))
        y = mod(torch.tensor(X))[0].numpy()
    assert np.allclose(y, out[0][:, 0], atol=1e-5), "numpy %s reference disagrees with torch" % op


def rnn_cases(rng):
    out = []
    I, S, Bn = 3, 4, 2
    for op, G in (("RNN", 1), ("GRU", 3), ("LSTM", 4)):
        H = 5
        for direction in ("forward", "reverse", "bidirectional"):
            nd = 2 if direction == "bidirectional" else 1
            for layout in (0, 1):
                X = rnd(rng, (S, Bn, I) if not layout else (Bn, S, I))
                W, R = rnd(rng, (nd, G * H, I)), rnd(rng, (nd, G * H, H))
                B = rnd(rng, (nd, 2 * G * H))
                hshape = (nd, Bn, H) if not layout else (Bn, nd, H)
                h0 = rnd(rng, hshape)
                lens = np.array([S, S - 2], np.int32)
                ins = [X, W, R, B, lens, h0]
                kw = dict(B=B, lens=lens, h0=h0, direction=direction, layout=layout)
                attrs = {"direction": direction, "layout": layout, "hidden_size": H}
                if op == "LSTM":
                    c0, P = rnd(rng, hshape), rnd(rng, (nd, 3 * H))
                    ins += [c0, P]
                    kw.update(c0=c0, P=P)
                ref = ref_rnn(op, X, W, R, **kw)
                out.append(Case("%s_%s_l%d" % (op, direction, layout), op, ins, ref, attrs=attrs, rtol=TOL[0],
                                atol=TOL[1]))
        # defaults: no optional inputs, outputs for the whole sequence
        X, W, R = rnd(rng, (S, Bn, I)), rnd(rng, (1, G * H, I)), rnd(rng, (1, G * H, H))
        out.append(Case("%s_defaults" % op, op, [X, W, R], ref_rnn(op, X, W, R), rtol=TOL[0], atol=TOL[1]))
        B = rnd(rng, (1, 2 * G * H))
        ref = ref_rnn(op, X, W, R, B=B, lbr=1)
        torch_check(op, X, W, R, B, ref)
        attrs = {"linear_before_reset": 1} if op == "GRU" else {}
        out.append(Case("%s_torch" % op, op, [X, W, R, B], ref, attrs=attrs, rtol=TOL[0], atol=TOL[1]))
        # clip and explicit activations (comma-separated: weft has no list-of-strings attribute)
        acts = {"RNN": ["Relu"], "GRU": ["HardSigmoid", "Tanh"], "LSTM": ["Sigmoid", "Relu", "Tanh"]}[op]
        ref = ref_rnn(op, X, W, R, B=B, clip=0.5, acts=acts)
        out.append(Case("%s_clip_acts" % op, op, [X, W, R, B], ref, attrs={"clip": 0.5, "activations": ",".join(acts)},
                        rtol=TOL[0], atol=TOL[1]))
        # omitted optional inputs in the middle (sequence_lens given, B omitted)
        lens = np.array([1, 3], np.int64)
        ref = ref_rnn(op, X, W, R, lens=lens)
        out.append(Case("%s_lens_noB" % op, op, [X, W, R, None, lens], ref, rtol=TOL[0], atol=TOL[1]))
        out.append(err("%s_bad_dir" % op, op, [X, W, R], "direction 'sideways'", attrs={"direction": "sideways"}))
    out += rnn_full_length_cases(rng)
    # GRU with linear_before_reset=0 (the default) vs 1 differ
    X, W, R, B = rnd(rng, (S, Bn, I)), rnd(rng, (1, 9, I)), rnd(rng, (1, 9, 3)), rnd(rng, (1, 18))
    out.append(Case("GRU_lbr0", "GRU", [X, W, R, B], ref_rnn("GRU", X, W, R, B=B), rtol=TOL[0], atol=TOL[1]))
    # LSTM input_forget is not in the numpy reference; a bad W shape is an error at build time
    out.append(err("LSTM_bad_W", "LSTM", [X, rnd(rng, (1, 7, I)), R], "rows", attrs={"hidden_size": 3}))
    return out


def rnn_full_length_cases(rng):
    """Every sequence as long as X and the default activations: the shapes the CPU backend runs through
    oneDNN's RNN primitives (k_rnn.c), each direction and layout with initial states, peepholes, batch 3,
    sequence_lens all equal to the length or omitted, and GRU with and without linear_before_reset."""
    out = []
    I, S, Bn, H = 6, 5, 3, 7
    for op, G in (("RNN", 1), ("GRU", 3), ("LSTM", 4)):
        for direction in ("forward", "reverse", "bidirectional"):
            nd = 2 if direction == "bidirectional" else 1
            for layout in (0, 1):
                for lbr in ((0, 1) if op == "GRU" else (0,)):
                    X = rnd(rng, (S, Bn, I) if not layout else (Bn, S, I))
                    W, R, B = rnd(rng, (nd, G * H, I)), rnd(rng, (nd, G * H, H)), rnd(rng, (nd, 2 * G * H))
                    hshape = (nd, Bn, H) if not layout else (Bn, nd, H)
                    h0 = rnd(rng, hshape)
                    lens = np.full(Bn, S, np.int32) if layout else None
                    ins = [X, W, R, B, lens, h0]
                    kw = dict(B=B, lens=lens, h0=h0, direction=direction, layout=layout, lbr=lbr)
                    attrs = {"direction": direction, "layout": layout, "hidden_size": H}
                    if op == "GRU":
                        attrs["linear_before_reset"] = lbr
                    if op == "LSTM":
                        c0, P = rnd(rng, hshape), rnd(rng, (nd, 3 * H))
                        ins += [c0, P]
                        kw.update(c0=c0, P=P)
                    out.append(Case("%s_full_%s_l%d%s" % (op, direction, layout, "_lbr" if lbr else ""), op, ins,
                                    ref_rnn(op, X, W, R, **kw), attrs=attrs, rtol=TOL[0], atol=TOL[1]))
    # shapes for weft's own LSTM kernel (k_rnn_lstm.c): hidden 37 is 3 chunks of 16 (or 5 of 8) with a
    # tail, a batch of 9 leaves a partial register tile of rows (4 or 2 rows a tile); every direction and
    # layout with states and peepholes; a batch of 2 and hidden 40; bench_lstm's layer (batch 8, input 64,
    # hidden 128, 32 steps); NaN in one row and +-Inf in another, which must not leak into the other rows
    I2, S2 = 20, 6
    for direction in ("forward", "reverse", "bidirectional"):
        nd = 2 if direction == "bidirectional" else 1
        for layout in (0, 1):
            Bn2, H2 = 9, 37
            X = rnd(rng, (S2, Bn2, I2) if not layout else (Bn2, S2, I2))
            W, R, B = rnd(rng, (nd, 4 * H2, I2)), rnd(rng, (nd, 4 * H2, H2)), rnd(rng, (nd, 8 * H2))
            hshape = (nd, Bn2, H2) if not layout else (Bn2, nd, H2)
            h0, c0, P = rnd(rng, hshape), rnd(rng, hshape), rnd(rng, (nd, 3 * H2))
            out.append(Case("LSTM_own_%s_l%d" % (direction, layout), "LSTM", [X, W, R, B, None, h0, c0, P],
                            ref_rnn("LSTM", X, W, R, B=B, h0=h0, c0=c0, P=P, direction=direction, layout=layout),
                            attrs={"direction": direction, "layout": layout, "hidden_size": H2}, rtol=TOL[0],
                            atol=TOL[1]))
    X, W, R, B = rnd(rng, (S2, 2, I2)), rnd(rng, (1, 160, I2)), rnd(rng, (1, 160, 40)), rnd(rng, (1, 320))
    out.append(Case("LSTM_own_batch2", "LSTM", [X, W, R, B], ref_rnn("LSTM", X, W, R, B=B), rtol=TOL[0], atol=TOL[1]))
    X, W, R, B = rnd(rng, (32, 8, 64)), rnd(rng, (1, 512, 64), lo=-0.2, hi=0.2), rnd(rng, (1, 512, 128), lo=-0.2,
                                                                                     hi=0.2), rnd(rng, (1, 1024))
    out.append(Case("LSTM_own_bench_layer", "LSTM", [X, W, R, B], ref_rnn("LSTM", X, W, R, B=B), rtol=TOL[0],
                    atol=TOL[1]))
    # 150 steps: the kernel projects x W^T 64 steps at a time (k_rnn_lstm.c's LS_WINDOW), so three windows,
    # the last one partial, both directions (the reverse one walks its windows backwards), both layouts
    for layout in (0, 1):
        S3, B3 = 150, 9
        X = rnd(rng, (S3, B3, 6) if not layout else (B3, S3, 6))
        W, R, B = rnd(rng, (2, 4 * 37, 6)), rnd(rng, (2, 4 * 37, 37), lo=-0.3, hi=0.3), rnd(rng, (2, 8 * 37))
        hshape = (2, B3, 37) if not layout else (B3, 2, 37)
        h0, c0 = rnd(rng, hshape), rnd(rng, hshape)
        out.append(Case("LSTM_own_long_l%d" % layout, "LSTM", [X, W, R, B, None, h0, c0],
                        ref_rnn("LSTM", X, W, R, B=B, h0=h0, c0=c0, direction="bidirectional", layout=layout),
                        attrs={"direction": "bidirectional", "layout": layout, "hidden_size": 37}, rtol=TOL[0],
                        atol=TOL[1]))
    # pre-activations up to about +-55, a fifth past the kernel's clamp of +-20 (k_rnn_lstm_isa.h), with
    # peepholes and states: the gates saturate within 2.1e-9 of 0 or 1 there
    X, W, R = rnd(rng, (S2, 9, I2), lo=-10, hi=10), rnd(rng, (1, 4 * 37, I2)), rnd(rng, (1, 4 * 37, 37))
    B, P, h0, c0 = rnd(rng, (1, 8 * 37), lo=-4, hi=4), rnd(rng, (1, 3 * 37)), rnd(rng, (1, 9, 37)), rnd(rng, (1, 9, 37))
    out.append(Case("LSTM_own_saturated", "LSTM", [X, W, R, B, None, h0, c0, P],
                    ref_rnn("LSTM", X, W, R, B=B, h0=h0, c0=c0, P=P), rtol=TOL[0], atol=TOL[1]))
    X, W, R, B = rnd(rng, (S2, 9, I2)), rnd(rng, (1, 4 * 37, I2)), rnd(rng, (1, 4 * 37, 37)), rnd(rng, (1, 8 * 37))
    X[2, 3, 5] = np.nan
    X[1, 6, :] = np.inf
    X[4, 6, :] = -np.inf
    with np.errstate(all="ignore"):
        ref = ref_rnn("LSTM", X, W, R, B=B)
    assert np.isnan(ref[0][5, 0, 3]).all() and np.isfinite(ref[0][:, 0, [0, 1, 2, 4, 5, 7, 8]]).all()
    out.append(Case("LSTM_own_nan_inf", "LSTM", [X, W, R, B], ref, rtol=TOL[0], atol=TOL[1]))
    # LSTM with initial_h but no initial_c, and with neither but peepholes (B omitted)
    X, W, R = rnd(rng, (S, Bn, I)), rnd(rng, (2, 4 * H, I)), rnd(rng, (2, 4 * H, H))
    h0, P = rnd(rng, (2, Bn, H)), rnd(rng, (2, 3 * H))
    attrs = {"direction": "bidirectional"}
    out.append(Case("LSTM_full_h0_only", "LSTM", [X, W, R, None, None, h0], ref_rnn("LSTM", X, W, R, h0=h0,
                    direction="bidirectional"), attrs=attrs, rtol=TOL[0], atol=TOL[1]))
    out.append(Case("LSTM_full_peep_noB", "LSTM", [X, W, R, None, None, None, None, P],
                    ref_rnn("LSTM", X, W, R, P=P, direction="bidirectional"), attrs=attrs, rtol=TOL[0], atol=TOL[1]))
    return out


# ---- GridSample, AffineGrid -----------------------------------------------------------------------------

def reflect(x, lo, hi):
    rng_ = hi - lo
    if x < lo:
        dx = lo - x
        n = int(dx / rng_)
        r = dx - n * rng_
        return lo + r if n % 2 == 0 else hi - r
    if x > hi:
        dx = x - hi
        n = int(dx / rng_)
        r = dx - n * rng_
        return hi - r if n % 2 == 0 else lo + r
    return x


def cubic_w(t, a=-0.75):
    def k(x):
        x = abs(x)
        if x <= 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        if x < 2:
            return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return 0.0
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


def ref_grid_sample(X, grid, mode, pad, ac, odt=F32):
    """cdt: the grid coordinates are unnormalised in f32 arithmetic for every grid dtype but f64."""
    cdt = F64 if grid.dtype == F64 else F32
    X = X.astype(F64)
    N, C = X.shape[:2]
    sp = X.shape[2:]
    nd = len(sp)
    out = np.zeros((N, C) + grid.shape[1:-1])
    lo = [0.0 if ac else -0.5 for _ in sp]
    hi = [d - 1.0 if ac else d - 0.5 for d in sp]

    def pix(n, c, idx):
        j = []
        for i, v in enumerate(idx):
            if not 0 <= v < sp[i]:
                if pad == "zeros":
                    return 0.0
                if pad == "reflection":
                    v = int(reflect(v, lo[i], hi[i]))
                v = min(max(v, 0), sp[i] - 1)
            j.append(v)
        return X[(n, c) + tuple(j)]

    for n in range(N):
        for p in np.ndindex(*grid.shape[1:-1]):
            g = grid[(n,) + p][::-1].astype(cdt)
            taps = []
            for i in range(nd):
                L = sp[i]
                x = float((g[i] + cdt(1)) / cdt(2) * cdt(L - 1)) if ac else float(((g[i] + cdt(1)) * cdt(L) - cdt(1)) / cdt(2))
                if mode == "nearest":
                    x = float(np.rint(x))
                if x < lo[i] or x > hi[i]:
                    if pad == "border":
                        x = min(max(x, 0), L - 1)
                    elif pad == "reflection":
                        x = reflect(x, lo[i], hi[i])
                if mode == "nearest":
                    taps.append([(int(x), 1.0)])
                elif mode == "linear":
                    f = np.floor(x)
                    taps.append([(int(f), 1 - (x - f)), (int(f) + 1, x - f)])
                else:
                    f = np.floor(x)
                    taps.append(list(zip(range(int(f) - 1, int(f) + 3), cubic_w(x - f))))
            for c in range(C):
                acc = 0.0
                for combo in np.ndindex(*[len(t) for t in taps]):
                    w = np.prod([taps[i][combo[i]][1] for i in range(nd)])
                    acc += w * pix(n, c, [taps[i][combo[i]][0] for i in range(nd)])
                out[(n, c) + p] = acc
    return out.astype(odt)


def grid_cases(rng):
    import torch
    import torch.nn.functional as Fn
    out = []
    X = rnd(rng, (2, 3, 4, 5))
    grid = rnd(rng, (2, 3, 6, 2), lo=-1.3, hi=1.3)
    for mode, tmode in (("linear", "bilinear"), ("nearest", "nearest"), ("cubic", "bicubic")):
        for pad in ("zeros", "border", "reflection"):
            for ac in (0, 1):
                ref = ref_grid_sample(X, grid, mode, pad, ac)
                # torch rounds nearest's ties its own way, and for cubic with border padding it clamps the
                # taps where ONNX clamps the coordinate first; elsewhere the two must agree
                if mode != "nearest" and not (mode == "cubic" and pad == "border"):
                    t = Fn.grid_sample(torch.tensor(X), torch.tensor(grid), mode=tmode, padding_mode=pad,
                                       align_corners=bool(ac)).numpy()
                    assert np.allclose(t, ref, atol=1e-4), "GridSample reference disagrees with torch"
                out.append(Case("GridSample_%s_%s_ac%d" % (mode, pad, ac), "GridSample", [X, grid], [ref],
                                attrs={"mode": mode, "padding_mode": pad, "align_corners": ac}, rtol=1e-4, atol=1e-5))
    X3, g3 = rnd(rng, (1, 2, 3, 4, 3)), rnd(rng, (1, 2, 3, 2, 3), lo=-1.2, hi=1.2)
    for mode in ("linear", "nearest"):
        for ac in (0, 1):
            out.append(Case("GridSample_3d_%s_ac%d" % (mode, ac), "GridSample", [X3, g3],
                            [ref_grid_sample(X3, g3, mode, "zeros", ac)], attrs={"mode": mode, "align_corners": ac},
                            rtol=1e-4, atol=1e-5))
    out.append(err("GridSample_bad_mode", "GridSample", [X, grid], "mode 'area'", attrs={"mode": "area"}))
    out.append(err("GridSample_bad_grid", "GridSample", [X, rnd(rng, (2, 3, 6, 3))], "grid"))

    for nd_, shape in ((2, (2, 3, 4, 5)), (3, (2, 3, 2, 3, 4))):
        theta = rnd(rng, (shape[0], nd_, nd_ + 1))
        for ac in (0, 1):
            axes = []
            for L in shape[2:]:
                axes.append(np.linspace(-1, 1, L) if ac else (2 * np.arange(L) + 1) / L - 1)
            mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
            base = np.stack([m for m in mesh[::-1]] + [np.ones_like(mesh[0])], axis=-1)  # x, y, (z), 1
            ref = np.einsum("nij,...j->n...i", theta.astype(F64), base).astype(F32)
            if nd_ == 2:
                t = Fn.affine_grid(torch.tensor(theta), list(shape), align_corners=bool(ac)).numpy()
                assert np.allclose(t, ref, atol=1e-5), "AffineGrid reference disagrees with torch"
            out.append(Case("AffineGrid_%dd_ac%d" % (nd_, ac), "AffineGrid", [theta, np.array(shape, I64)], [ref],
                            attrs={"align_corners": ac}, rtol=1e-5, atol=1e-6))
    return out


# ---- RoiAlign, Col2Im, MaxUnpool ------------------------------------------------------------------------

def ref_roi_align(X, rois, bi, oh, ow, sr, scale, half, mode, odt=F32):
    X = X.astype(F64)
    R, C, H, W = rois.shape[0], X.shape[1], X.shape[2], X.shape[3]
    Y = np.zeros((R, C, oh, ow))
    for r in range(R):
        off = 0.5 if half else 0.0
        x0, y0, x1, y1 = [v * scale - off for v in rois[r].astype(F64)]
        rw, rh = x1 - x0, y1 - y0
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = sr if sr > 0 else int(np.ceil(rh / oh))
        gw = sr if sr > 0 else int(np.ceil(rw / ow))
        for c in range(C):
            img = X[bi[r], c]
            for ph in range(oh):
                for pw in range(ow):
                    vals = []
                    for iy in range(gh):
                        for ix in range(gw):
                            yy = y0 + ph * bh + (iy + 0.5) * bh / gh
                            xx = x0 + pw * bw + (ix + 0.5) * bw / gw
                            if yy < -1 or yy > H or xx < -1 or xx > W:
                                vals.append([0.0] * 4)
                                continue
                            yy, xx = max(yy, 0.0), max(xx, 0.0)
                            yl, xl = int(yy), int(xx)
                            if yl >= H - 1:
                                yl = yh = H - 1
                                yy = float(yl)
                            else:
                                yh = yl + 1
                            if xl >= W - 1:
                                xl = xh = W - 1
                                xx = float(xl)
                            else:
                                xh = xl + 1
                            ly, lx = yy - yl, xx - xl
                            vals.append([(1 - ly) * (1 - lx) * img[yl, xl], (1 - ly) * lx * img[yl, xh],
                                         ly * (1 - lx) * img[yh, xl], ly * lx * img[yh, xh]])
                    if mode == "avg":
                        Y[r, c, ph, pw] = sum(sum(v) for v in vals) / max(gh * gw, 1)
                    else:
                        Y[r, c, ph, pw] = max(max(v) for v in vals)
    return Y.astype(odt)


def ref_col2im(x, img, blk, dil, pads, strides):
    n = len(img)
    N, CK, L = x.shape
    C = CK // int(np.prod(blk))
    nb = [(img[i] + pads[i] + pads[n + i] - dil[i] * (blk[i] - 1) - 1) // strides[i] + 1 for i in range(n)]
    y = np.zeros((N, C) + tuple(img))
    xr = x.astype(F64).reshape((N, C) + tuple(blk) + tuple(nb))
    for kidx in np.ndindex(*blk):
        for lidx in np.ndindex(*nb):
            pos = [lidx[i] * strides[i] - pads[i] + kidx[i] * dil[i] for i in range(n)]
            if all(0 <= pos[i] < img[i] for i in range(n)):
                y[(slice(None), slice(None)) + tuple(pos)] += xr[(slice(None), slice(None)) + kidx + lidx]
    return y.astype(x.dtype)


def sample_cases(rng):
    out = []
    X = rnd(rng, (2, 3, 8, 9))
    rois = np.array([[0.5, 1.0, 6.3, 7.0], [2.0, 0.0, 4.0, 3.5], [-1.5, -1.0, 10.0, 9.5]], F32)
    bi = np.array([0, 1, 1], I64)
    for half in (0, 1):
        for mode in ("avg", "max"):
            for sr, scale in ((2, 1.0), (0, 0.5)):
                ctm = "half_pixel" if half else "output_half_pixel"
                out.append(Case("RoiAlign_%s_%s_sr%d" % (ctm, mode, sr), "RoiAlign", [X, rois, bi],
                                [ref_roi_align(X, rois, bi, 3, 4, sr, scale, half, mode)],
                                attrs={"coordinate_transformation_mode": ctm, "mode": mode, "output_height": 3,
                                       "output_width": 4, "sampling_ratio": sr, "spatial_scale": scale},
                                rtol=1e-5, atol=1e-6))
    out.append(err("RoiAlign_bad_batch", "RoiAlign", [X, rois, np.array([0, 2, 1], I64)], "batch_indices[1]"))

    for name, img, blk, dil, pads, st in (("basic", [5, 5], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
                                          ("all", [6, 7], [2, 3], [2, 1], [1, 0, 1, 2], [2, 1]),
                                          ("3d", [3, 4, 5], [2, 2, 3], [1, 1, 1], [0, 1, 0, 0, 0, 1], [1, 2, 1])):
        n = len(img)
        nb = [(img[i] + pads[i] + pads[n + i] - dil[i] * (blk[i] - 1) - 1) // st[i] + 1 for i in range(n)]
        x = rnd(rng, (2, 2 * int(np.prod(blk)), int(np.prod(nb))))
        out.append(Case("Col2Im_" + name, "Col2Im", [x, np.array(img, I64), np.array(blk, I64)],
                        [ref_col2im(x, img, blk, dil, pads, st)], attrs={"dilations": dil, "pads": pads, "strides": st},
                        rtol=1e-6, atol=1e-6))
    out.append(err("Col2Im_bad_L", "Col2Im", [rnd(rng, (1, 4, 5)), np.array([5, 5], I64), np.array([2, 2], I64)],
                   "must be [N, C * 4, 16]"))

    # MaxUnpool: scatter the pooled values back where a MaxPool took them
    x = rnd(rng, (2, 3, 6, 6))
    pooled = x.reshape(2, 3, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 3, 3, 4)
    arg = pooled.argmax(-1)
    ky, kx = arg // 2, arg % 2
    oy, ox = np.arange(3)[:, None] * 2 + ky, np.arange(3)[None, :] * 2 + kx
    idx = ((np.arange(2)[:, None, None, None] * 3 + np.arange(3)[None, :, None, None]) * 6 + oy) * 6 + ox
    vals = pooled.max(-1)
    ref = np.zeros((2, 3, 6, 6), F32)
    ref.reshape(-1)[idx.reshape(-1)] = vals.reshape(-1)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    out.append(Case("MaxUnpool_2d", "MaxUnpool", [vals, idx.astype(I64)], [ref], attrs=attrs))
    big = np.zeros((2, 3, 7, 8), F32)
    big[:, :, :6, :6] = ref
    out.append(Case("MaxUnpool_output_shape", "MaxUnpool", [vals, idx.astype(I64), np.array([2, 3, 7, 8], I64)], [big],
                    attrs=attrs))
    out.append(err("MaxUnpool_bad_index", "MaxUnpool", [vals, np.full(vals.shape, 500, I64)], "index 500",
                   attrs=attrs))
    return out


# ---- NonMaxSuppression, Unique --------------------------------------------------------------------------

def ref_nms(boxes, scores, max_out, iou, sthr, center):
    sel = []
    for b in range(boxes.shape[0]):
        bx = boxes[b].astype(F64)
        if center:  # [xc, yc, w, h]; a negative width or height makes an empty box that suppresses nothing
            y1, x1 = bx[:, 1] - bx[:, 3] / 2, bx[:, 0] - bx[:, 2] / 2
            y2, x2 = bx[:, 1] + bx[:, 3] / 2, bx[:, 0] + bx[:, 2] / 2
        else:  # [y1, x1, y2, x2], corners in either order
            y1, x1 = np.minimum(bx[:, 0], bx[:, 2]), np.minimum(bx[:, 1], bx[:, 3])
            y2, x2 = np.maximum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 1], bx[:, 3])
        area = (y2 - y1) * (x2 - x1)
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(F64)
            order = [i for i in sorted(range(len(s)), key=lambda i: (-s[i], i)) if sthr is None or s[i] > sthr]
            keep = []
            for i in order:
                if len(keep) >= max_out:
                    break
                ok = True
                for j in keep:
                    ih = min(y2[i], y2[j]) - max(y1[i], y1[j])
                    iw = min(x2[i], x2[j]) - max(x1[i], x1[j])
                    if ih > 0 and iw > 0 and area[i] > 0 and area[j] > 0 and ih * iw / (area[i] + area[j] - ih * iw) > iou:
                        ok = False
                        break
                if ok:
                    keep.append(i)
                    sel.append([b, c, i])
    return np.array(sel, I64).reshape(-1, 3)


def ref_unique(x, axis, srt):
    if axis is None:
        y, idx, inv, cnt = np.unique(x, True, True, True)
    else:
        y, idx, inv, cnt = np.unique(x, True, True, True, axis=axis)
    inv = inv.reshape(-1)
    if not srt:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        idx, cnt, inv = idx[order], cnt[order], rank[inv]
        y = np.take(x.reshape(-1) if axis is None else x, idx, axis=0 if axis is None else axis)
    return [y, idx.astype(I64), inv.astype(I64), cnt.astype(I64)]


def misc_cases(rng):
    out = []
    boxes = rng.uniform(0, 10, size=(2, 12, 4)).astype(F32)
    boxes[:, :, 2:] += boxes[:, :, :2] * rng.choice([-0.3, 0.3], size=(2, 12, 2)).astype(F32)
    boxes[:, 3] = boxes[:, 2]  # identical boxes: ties resolved by index
    scores = rng.uniform(0, 1, size=(2, 3, 12)).astype(F32)
    scores[:, :, 5] = scores[:, :, 6]
    for center in (0, 1):
        for mo, iou, st in ((3, 0.5, None), (12, 0.3, 0.4), (0, 0.5, None), (5, 0.0, 0.2)):
            ins = [boxes, scores, np.array([mo], I64), np.array([iou], F32)]
            if st is not None:
                ins.append(np.array([st], F32))
            out.append(Case("NMS_c%d_%d_%g_%s" % (center, mo, iou, st), "NonMaxSuppression", ins,
                            [ref_nms(boxes, scores, mo, iou, st, center)], attrs={"center_point_box": center}))
    out.append(Case("NMS_defaults", "NonMaxSuppression", [boxes, scores], [np.zeros((0, 3), I64)]))

    x = rng.integers(-3, 4, size=(12,)).astype(F32)
    for srt in (0, 1):
        out.append(Case("Unique_flat_s%d" % srt, "Unique", [x], ref_unique(x, None, srt), attrs={"sorted": srt}))
    xi = rng.integers(0, 3, size=(3, 5, 2)).astype(I64)
    xi[:, 3] = xi[:, 1]
    for axis in (0, 1, -1):
        for srt in (0, 1):
            out.append(Case("Unique_axis%d_s%d" % (axis, srt), "Unique", [xi], ref_unique(xi, axis, srt),
                            attrs={"axis": axis, "sorted": srt}))
    xb = rng.random(9) < 0.5
    out.append(Case("Unique_bool", "Unique", [xb], ref_unique(xb, None, 1)))
    xn = np.array([2.0, np.nan, 1.0, np.nan, 2.0], F32)
    out.append(Case("Unique_nan", "Unique", [xn], ref_unique(xn, None, 1)))
    out.append(err("Unique_bad_axis", "Unique", [xi], "axis 3", attrs={"axis": 3}))
    return out


# ---- DFT, BitCast ---------------------------------------------------------------------------------------

def dft_cases(rng):
    out = []
    for name, shape, axis, inv, one, n in (("real", (2, 8, 3, 1), 1, 0, 0, None), ("complex", (2, 5, 3, 2), 2, 0, 0, None),
                                           ("rfft", (3, 7, 1), 1, 0, 1, None), ("rfft_len", (2, 6, 1), 1, 0, 1, 9),
                                           ("ifft", (2, 6, 2), 1, 1, 0, None), ("ifft_pad", (4, 3, 2), 0, 1, 0, 5),
                                           ("irfft", (2, 5, 2), 1, 1, 1, None), ("irfft_odd", (2, 5, 2), 1, 1, 1, 9),
                                           ("real_trunc", (1, 9, 1), -2, 0, 0, 4)):
        x = rnd(rng, shape)
        xc = x[..., 0].astype(F64) + (1j * x[..., 1].astype(F64) if shape[-1] == 2 else 0)
        a = axis % len(shape)
        L = n if n is not None else (2 * (shape[a] - 1) if inv and one else shape[a])
        if inv and one:
            y = np.fft.irfft(xc, n=L, axis=a)[..., None]
        elif inv:
            y = np.fft.ifft(xc, n=L, axis=a)
        else:
            y = np.fft.fft(xc, n=L, axis=a)
            if one:
                y = np.take(y, np.arange(L // 2 + 1), axis=a)
        if y.dtype.kind == "c":
            y = np.stack([y.real, y.imag], -1)
        ins = [x, None if n is None else np.array(n, I64), np.array(axis, I64)]
        out.append(Case("DFT_" + name, "DFT", ins, [y.astype(F32)], attrs={"inverse": inv, "onesided": one},
                        rtol=1e-5, atol=1e-5))
    x = rnd(rng, (2, 6, 1))
    out.append(Case("DFT_attr_axis", "DFT", [x], [np.stack([np.fft.fft(x[..., 0].astype(F64), axis=1).real,
                                                          np.fft.fft(x[..., 0].astype(F64), axis=1).imag], -1).astype(F32)],
                    attrs={"axis": 1}, rtol=1e-5, atol=1e-5))
    out.append(err("DFT_bad_last", "DFT", [rnd(rng, (2, 6, 3))], "[..., 2] (complex)"))

    for src, dst, x in (("f32", "i32", rnd(rng, (2, 3))), ("i64", "f64", rng.integers(-9, 9, size=4).astype(I64)),
                        ("i8", "u8", np.array([-1, 5, -128, 0], np.int8)), ("bool", "u8", np.array([True, False])),
                        ("f64", "i64", rnd(rng, (3,), F64)), ("i16", "f16", np.array([15360, -1024], np.int16))):
        npdst = {"i32": np.int32, "f64": F64, "u8": np.uint8, "i64": I64, "f16": np.float16}[dst]
        out.append(Case("BitCast_%s_%s" % (src, dst), "BitCast", [x], [x.view(npdst)], attrs={"to": DType(dst)}))
    out.append(err("BitCast_sizes", "BitCast", [rnd(rng, (3,))], "cannot reinterpret f32", attrs={"to": DType("i64")}))
    return out


def cases(rng):
    return rnn_cases(rng) + grid_cases(rng) + sample_cases(rng) + misc_cases(rng) + dft_cases(rng)
