#!/usr/bin/python3
"""Trains an EAGLE draft head (common/eagle_head.h) for a target GGUF on the CPU.

The head (Li et al. 2024, EAGLE): at position t its input is
concat(embed(token[t+1]), f[t]), with f[t] the target's last-layer residual
stream at t (before the final RMSNorm); a linear fc [2d -> d], one Llama
decoder layer (RMSNorm, attention with interleaved-pair RoPE, RMSNorm, SwiGLU),
and its output h[t] is the predicted f[t+1]. Its logits are the target's own
readout, output(final_norm(h[t])), which the head file does not store.

Steps, all reproducible from the seed:
  1. the corpus: every *.py under /usr/lib/python3*/ except each file whose
     path ends with a `source` listed in the held-out file
     (../shared/eval/heldout_sources.txt), sorted, then shuffled by the seed;
  2. the target's features over it: `specserve dump-features` (the real CPU
     forward pass), tokens + f16 features;
  3. training, teacher-forced on the dumped features: EAGLE's loss,
     smooth-L1(h[t], f[t+1]) + w_ce * cross-entropy against the target's own
     next-token distribution softmax(output(norm(f[t+1]))), Adam, uniform
     feature noise as in EAGLE;
  4. the head as GGUF (general.architecture = specserve-eagle), with the
     target's n_embd, vocabulary size and fingerprint (TargetFingerprint in
     common/eagle_head.h: the readout matrix's name, type, shape and a
     checksum of its bytes) for the loader to check.

Debian's python3-torch and python3-numpy only (with Debian's reference BLAS a
step is ~40x slower than with libopenblas0-pthread, also a Debian package,
which tools/setup.sh does not install). The head in models/ was made by
(see models/README.md):
  nice -n 10 /usr/bin/python3 tools/train_eagle.py --target models/code-target-7m.gguf \
      --out models/code-target-7m-eagle.gguf
"""
import argparse
import glob
import os
import random
import struct
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core, whichever BLAS Debian's alternatives pick
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from gguf_read import TYPES, Reader  # noqa: E402  (the project's independent GGUF reader)

ARCH = "specserve-eagle"
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------- target file

def read_gguf(path):
    """Metadata, tensor infos {name: (type_id, ne, abs_offset, nbytes)} and the bytes."""
    with open(path, "rb") as f:
        d = f.read()
    r = Reader(d)
    if r.take("<I") != 0x46554747:
        raise ValueError(f"{path}: not a GGUF file")
    _, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        ne = [r.take("<q") for _ in range(nd)]
        t, off = r.take("<I"), r.take("<Q")
        infos.append((name, t, ne, off))
    align = kv.get("general.alignment", 32)
    start = (r.p + align - 1) // align * align
    tensors = {}
    for name, t, ne, off in infos:
        _, bs, bb = TYPES[t]
        rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
        tensors[name] = (t, ne, start + off, rows * ne[0] // bs * bb)
    return kv, tensors, d


def tensor_f32(tensors, d, name):
    t, ne, off, nbytes = tensors[name]
    raw = np.frombuffer(d, dtype=np.uint8, count=nbytes, offset=off)
    if t == 0:
        a = raw.view("<f4").astype(np.float32)
    elif t == 1:
        a = raw.view("<f2").astype(np.float32)
    else:
        raise ValueError(f"{name}: type {TYPES[t][0]} is not supported here (F32 or F16 targets)")
    return a.reshape(list(reversed(ne)))


def fingerprint(tensors, d):
    """TargetFingerprint (common/eagle_head.h): '<name> <type> [rows, cols] <checksum>'."""
    name = "output.weight" if "output.weight" in tensors else "token_embd.weight"
    t, ne, off, nbytes = tensors[name]
    raw = np.frombuffer(d, dtype=np.uint8, count=nbytes, offset=off)
    raw = np.concatenate([raw, np.zeros((-nbytes) % 8, dtype=np.uint8)])
    words = raw.view("<u8")
    odd = np.arange(words.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        h = int(np.sum(words * odd, dtype=np.uint64)) & MASK64
    shape = ", ".join(str(x) for x in reversed(ne))
    return f"{name} {TYPES[t][0]} [{shape}] {h:016x}"


# ---------------------------------------------------------------- corpus

def heldout(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def corpus_files(heldout_path, seed):
    held = heldout(heldout_path)
    files = sorted(p for p in glob.glob("/usr/lib/python3*/**/*.py", recursive=True) if os.path.isfile(p))
    keep = [p for p in files if not any(p.endswith("/" + s) for s in held)]
    random.Random(seed).shuffle(keep)
    return keep, len(files) - len(keep)


def read_features(path):
    with open(path, "rb") as f:
        d = f.read()
    if d[:8] != b"SSFEAT1\0":
        raise ValueError(f"{path}: not a dump-features file")
    n_embd, vocab, n_seqs, n_tokens = struct.unpack_from("<IIQQ", d, 8)
    p = 32
    starts = np.frombuffer(d, dtype="<u8", count=n_seqs + 1, offset=p).astype(np.int64)
    p += 8 * (n_seqs + 1)
    tokens = np.frombuffer(d, dtype="<i4", count=n_tokens, offset=p).astype(np.int64)
    p += 4 * n_tokens
    feats = np.frombuffer(d, dtype="<f2", count=n_tokens * n_embd, offset=p).reshape(n_tokens, n_embd)
    return n_embd, vocab, starts, tokens, feats


# ---------------------------------------------------------------- the head

def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, base):
    """Interleaved pairs (2i, 2i+1), as GGUF llama files and kernels/cpu_ops.h. x: [B, H, T, hd]."""
    hd, T = x.shape[-1], x.shape[-2]
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)


class Head(torch.nn.Module):
    def __init__(self, d, n_head, n_head_kv, n_ff, eps, base):
        super().__init__()
        self.d, self.h, self.hkv, self.hd, self.eps, self.base = d, n_head, n_head_kv, d // n_head, eps, base

        def lin(o, i):
            return torch.nn.Parameter(torch.randn(o, i) / i ** 0.5)
        self.fc = lin(d, 2 * d)
        self.attn_norm = torch.nn.Parameter(torch.ones(d))
        self.wq, self.wk, self.wv = lin(d, d), lin(self.hkv * self.hd, d), lin(self.hkv * self.hd, d)
        self.wo = torch.nn.Parameter(torch.zeros(d, d))
        self.ffn_norm = torch.nn.Parameter(torch.ones(d))
        self.gate, self.up = lin(n_ff, d), lin(n_ff, d)
        self.down = torch.nn.Parameter(torch.zeros(d, n_ff))

    def forward(self, emb, feat):
        """emb, feat: [B, T, d] -> h [B, T, d] (the predicted next features)."""
        B, T, d = feat.shape
        x = torch.cat([emb, feat], -1) @ self.fc.t()
        xn = rms_norm(x, self.attn_norm, self.eps)
        q = (xn @ self.wq.t()).view(B, T, self.h, self.hd).transpose(1, 2)
        k = (xn @ self.wk.t()).view(B, T, self.hkv, self.hd).transpose(1, 2)
        v = (xn @ self.wv.t()).view(B, T, self.hkv, self.hd).transpose(1, 2)
        q, k = rope(q, self.base), rope(k, self.base)
        rep = self.h // self.hkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        att = (q @ k.transpose(-1, -2)) / self.hd ** 0.5
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf")).softmax(-1)
        x = x + (att @ v).transpose(1, 2).reshape(B, T, d) @ self.wo.t()
        xn = rms_norm(x, self.ffn_norm, self.eps)
        return x + (F.silu(xn @ self.gate.t()) * (xn @ self.up.t())) @ self.down.t()


# ---------------------------------------------------------------- GGUF writer

def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_head(path, meta, tensors):
    """meta: [(key, 'u32'|'f32'|'str', value)]; tensors: [(name, np array F32 or F16)]."""
    align = 32
    out = bytearray(struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(meta)))
    for k, t, v in meta:
        out += gguf_string(k)
        out += {"u32": lambda: struct.pack("<II", 4, v), "f32": lambda: struct.pack("<If", 6, v),
                "str": lambda: struct.pack("<I", 8) + gguf_string(v)}[t]()
    off, blobs = 0, []
    for name, a in tensors:
        out += gguf_string(name) + struct.pack("<I", a.ndim)
        out += b"".join(struct.pack("<q", n) for n in reversed(a.shape))
        out += struct.pack("<IQ", 0 if a.dtype == np.float32 else 1, off)
        blob = a.astype("<f4" if a.dtype == np.float32 else "<f2").tobytes()
        blobs.append(blob)
        off = (off + len(blob) + align - 1) // align * align
    out += b"\0" * ((-len(out)) % align)
    for blob in blobs:
        out += blob + b"\0" * ((-len(blob)) % align)
    with open(path, "wb") as f:
        f.write(out)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--target", default="models/code-target-7m.gguf")
    ap.add_argument("--out", required=True)
    ap.add_argument("--specserve", default=os.path.join(here, "..", "build", "bin", "specserve"))
    ap.add_argument("--heldout", default=os.path.join(here, "..", "..", "shared", "eval", "heldout_sources.txt"))
    ap.add_argument("--workdir", default="/tmp/specserve-eagle")
    ap.add_argument("--tokens", type=int, default=400000, help="corpus tokens to dump")
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--minutes", type=float, default=25.0, help="stop training after this wall time")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ce-weight", type=float, default=0.1)
    ap.add_argument("--noise", type=float, default=0.1, help="uniform feature noise, times the features' std")
    ap.add_argument("--ff", type=int, default=0, help="the head's FFN width (0: the target's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init", default="", help="start from this head's weights (a head this script wrote)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    t0 = time.time()

    kv, tensors, d = read_gguf(a.target)
    arch = kv["general.architecture"]
    n_embd = kv[f"{arch}.embedding_length"]
    n_head, n_head_kv = kv[f"{arch}.attention.head_count"], kv[f"{arch}.attention.head_count_kv"]
    eps = kv.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    base = kv.get(f"{arch}.rope.freq_base", 10000.0)
    n_ctx = kv[f"{arch}.context_length"]
    n_ff = a.ff or kv[f"{arch}.feed_forward_length"]
    embd = torch.from_numpy(tensor_f32(tensors, d, "token_embd.weight"))
    out_w = torch.from_numpy(tensor_f32(tensors, d, "output.weight")) if "output.weight" in tensors else embd
    out_norm = torch.from_numpy(tensor_f32(tensors, d, "output_norm.weight"))
    vocab = embd.shape[0]
    fp = fingerprint(tensors, d)
    print(f"target {a.target}: d={n_embd} heads={n_head}/{n_head_kv} vocab={vocab} fingerprint {fp}", flush=True)

    os.makedirs(a.workdir, exist_ok=True)
    files, dropped = corpus_files(a.heldout, a.seed)
    print(f"corpus: {len(files)} files ({dropped} held out)", flush=True)
    lst = os.path.join(a.workdir, "files.txt")
    with open(lst, "w") as f:
        f.write("\n".join(files) + "\n")
    feat_path = os.path.join(a.workdir, f"features-{os.path.basename(a.target)}-{a.tokens}-{a.seed}.bin")
    if not os.path.exists(feat_path):
      subprocess.run([a.specserve, "dump-features", "--target", a.target, "--files", lst, "--out", feat_path,
                      "--chunk", str(a.chunk), "--max-tokens", str(a.tokens)], check=True)
    fd, fv, starts, tokens, feats = read_features(feat_path)
    assert fd == n_embd and fv == vocab, "the dump is of another target"
    print(f"features: {len(tokens)} tokens in {len(starts) - 1} sequences ({time.time() - t0:.0f} s)", flush=True)

    # Windows of seq + 1 positions inside one sequence; the last 5% of the
    # sequences are kept apart to report the held-out agreement.
    lens = np.diff(starts)
    ok = np.nonzero(lens >= 8)[0]
    n_val = max(1, len(ok) // 20)
    val, train = ok[-n_val:], ok[:-n_val]
    std = float(np.std(feats[: min(len(feats), 200000)].astype(np.float32)))

    def window(i, T):
        n = int(lens[i])
        L = min(T + 1, n)
        s = int(starts[i]) + int(rng.integers(0, n - L + 1))
        return tokens[s:s + L], feats[s:s + L].astype(np.float32)

    def batch(ids, T):
        toks, fs = zip(*(window(i, T) for i in ids))
        L = min(len(t) for t in toks)
        tok = torch.from_numpy(np.stack([t[:L] for t in toks]))
        f = torch.from_numpy(np.stack([x[:L] for x in fs]))
        return tok, f

    def losses(head, tok, f, noise):
        inp = f[:, :-1]
        if noise > 0:
            inp = inp + (torch.rand_like(inp) - 0.5) * 2 * noise * std
        h = head(embd[tok[:, 1:]], inp)
        tgt = f[:, 1:]
        with torch.no_grad():
            p = (rms_norm(tgt, out_norm, eps) @ out_w.t()).softmax(-1)
        logq = (rms_norm(h, out_norm, eps) @ out_w.t()).log_softmax(-1)
        reg = F.smooth_l1_loss(h, tgt)
        ce = -(p * logq).sum(-1).mean()
        agree = (logq.argmax(-1) == p.argmax(-1)).float().mean()
        return reg, ce, agree

    head = Head(n_embd, n_head, n_head_kv, n_ff, eps, base)
    if a.init:
        _, it, idata = read_gguf(a.init)
        names = {"fc": "fc.weight", "attn_norm": "blk.0.attn_norm.weight", "wq": "blk.0.attn_q.weight",
                 "wk": "blk.0.attn_k.weight", "wv": "blk.0.attn_v.weight", "wo": "blk.0.attn_output.weight",
                 "ffn_norm": "blk.0.ffn_norm.weight", "gate": "blk.0.ffn_gate.weight", "up": "blk.0.ffn_up.weight",
                 "down": "blk.0.ffn_down.weight"}
        with torch.no_grad():
            for attr, name in names.items():
                getattr(head, attr).copy_(torch.from_numpy(tensor_f32(it, idata, name)))
    opt = torch.optim.AdamW(head.parameters(), lr=a.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    step = 0
    while step < a.steps and (time.time() - t0) < a.minutes * 60:
        tok, f = batch(rng.choice(train, a.batch), a.seq)
        reg, ce, agree = losses(head, tok, f, a.noise)
        loss = reg + a.ce_weight * ce
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step}: reg {reg.item():.4f} ce {ce.item():.3f} agree {agree.item():.3f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    with torch.no_grad():
        rs, cs, ags = [], [], []
        for i in range(0, len(val), a.batch):
            r, c, g = losses(head, *batch(val[i:i + a.batch], a.seq), 0.0)
            rs.append(r.item()), cs.append(c.item()), ags.append(g.item())
    print(f"held-out sequences: reg {np.mean(rs):.4f} ce {np.mean(cs):.3f} top-1 agreement {np.mean(ags):.3f} "
          f"after {step} steps", flush=True)

    P = lambda t: t.detach().numpy()
    h16 = lambda t: P(t).astype(np.float16)
    meta = [("general.architecture", "str", ARCH), ("general.name", "str", f"eagle head for {os.path.basename(a.target)}"),
            (f"{ARCH}.embedding_length", "u32", n_embd), (f"{ARCH}.feed_forward_length", "u32", n_ff),
            (f"{ARCH}.attention.head_count", "u32", n_head), (f"{ARCH}.attention.head_count_kv", "u32", n_head_kv),
            (f"{ARCH}.attention.layer_norm_rms_epsilon", "f32", eps), (f"{ARCH}.rope.freq_base", "f32", base),
            (f"{ARCH}.context_length", "u32", n_ctx), (f"{ARCH}.attention.sliding_window", "u32", a.seq),
            (f"{ARCH}.target.embedding_length", "u32", n_embd), (f"{ARCH}.target.vocab_size", "u32", vocab),
            (f"{ARCH}.target.fingerprint", "str", fp)]
    write_head(a.out, meta, [
        ("fc.weight", h16(head.fc)), ("blk.0.attn_norm.weight", P(head.attn_norm)),
        ("blk.0.attn_q.weight", h16(head.wq)), ("blk.0.attn_k.weight", h16(head.wk)),
        ("blk.0.attn_v.weight", h16(head.wv)), ("blk.0.attn_output.weight", h16(head.wo)),
        ("blk.0.ffn_norm.weight", P(head.ffn_norm)), ("blk.0.ffn_gate.weight", h16(head.gate)),
        ("blk.0.ffn_up.weight", h16(head.up)), ("blk.0.ffn_down.weight", h16(head.down))])
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes) in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
