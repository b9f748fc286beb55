#!/usr/bin/env python3
"""train_torch.py — weft-train's default model and step, in PyTorch, for speed.

The peer side of perf/compare/train_run.sh: the GPT-2-style decoder that
build/bin/weft-train trains by default (trainer/main.c defaults, trainer/model.c
layout and initialisation), with the same step: forward, mean cross-entropy,
backward, global-norm clipping, AdamW with decoupled weight decay on every
parameter, linear warm-up then cosine learning rate. fp32 on the CPU with a
fixed thread count. Only speed is compared, so the tokens are uniformly random
over weft's vocabulary (13 for the default addition task) rather than the
addition problems; the work per step does not depend on their values.

Prints one line: "torch: threads T ... median N tokens/s ... mean-all M tokens/s".
The median is over the steps after --warmup; mean-all is total tokens over
total time of every step, the definition weft-train's final line uses.

  /usr/bin/python3 perf/compare/train_torch.py --threads 1 --steps 300
"""
import argparse
import math
import os
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--threads", type=int, default=1, help="intra-op threads (set before torch loads)")
    a("--vocab", type=int, default=13)
    a("--seq", type=int, default=32)
    a("--layers", type=int, default=2)
    a("--hidden", type=int, default=64)
    a("--heads", type=int, default=4)
    a("--ffn", type=int, default=256)
    a("--batch", type=int, default=16, help="sequences per step")
    a("--steps", type=int, default=300)
    a("--warmup", type=int, default=20, help="steps left out of the median (and the lr warm-up)")
    a("--lr", type=float, default=3e-3)
    a("--min-lr", type=float, default=3e-4)
    a("--beta1", type=float, default=0.9)
    a("--beta2", type=float, default=0.95)
    a("--eps", type=float, default=1e-8)
    a("--weight-decay", type=float, default=0.1)
    a("--clip", type=float, default=1.0)
    a("--seed", type=int, default=1337)
    return p.parse_args()


args = parse()
# The thread pools read these when torch loads. torch's OpenMP pool and the
# OpenBLAS (pthread) pool it calls are separate; with the default spinning
# OpenMP wait they fight over the cores at 2 threads (p90 step 10x the
# median here), so idle OpenMP threads sleep unless the caller says otherwise.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)


class Block(nn.Module):
    """x += Attn(LN1(x)); x += MLP(LN2(x)): fused QKV, causal softmax, tanh GELU."""

    def __init__(self, h, heads, ffn, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc, self.out = nn.Linear(h, ffn), nn.Linear(ffn, h)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

    def attn(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(h // self.heads))
        s = s.masked_fill(self.mask[:t, :t], float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, h))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(a.vocab, a.hidden), nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList(Block(a.hidden, a.heads, a.ffn, a.seq) for _ in range(a.layers))
        self.lnf = nn.LayerNorm(a.hidden)
        # GPT-2 initialisation as trainer/model.c: N(0, 0.02), residual
        # projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gain 1.
        resid = 0.02 / math.sqrt(2 * a.layers)
        for name, w in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(w)
            elif ".ln" in name or name.startswith("lnf"):
                nn.init.ones_(w)
            else:
                nn.init.normal_(w, 0.0, resid if name.endswith(("proj.weight", "out.weight")) else 0.02)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:t]
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied LM head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lr_at(a, step):
    """Linear warm-up, then cosine from lr to min-lr over the rest (optim.c)."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    decay = a.steps - a.warmup
    if decay <= 1:
        return a.lr
    progress = (step - a.warmup) / (decay - 1)
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    torch.manual_seed(args.seed)
    model = GPT(args)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                            weight_decay=args.weight_decay)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = args.batch * args.seq
    times, loss = [], float("nan")
    for step in range(args.steps):
        seqs = torch.randint(args.vocab, (args.batch, args.seq + 1), generator=gen)
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(args, step)
        opt.zero_grad(set_to_none=True)
        out = model(seqs[:, :-1], seqs[:, 1:])
        out.backward()
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        loss = out.item()
        times.append(time.perf_counter() - t0)
    steady = times[args.warmup:] if len(times) > args.warmup else times
    median = tokens / statistics.median(steady)
    mean_all = tokens * len(times) / sum(times)
    print(f"torch: threads {torch.get_num_threads()} torch {torch.__version__} params {nparams} "
          f"tokens/step {tokens} steps {args.steps} last loss {loss:.4f} "
          f"median {median:.0f} tokens/s mean-all {mean_all:.0f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
