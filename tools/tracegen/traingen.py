#!/usr/bin/env python3
"""vramshim-traingen: training-step allocation traces in the RMM CSV layout.

The training counterpart of tracegen.py (same layout, same writer): what an
eager PyTorch training loop of a decoder-only transformer allocates, so that
allocator rules chosen on the four training snapshots of ../shared/traces
can be checked on training shapes they were not chosen on. Only the Python
standard library; the output is a pure function of the arguments (seeded).

A step, as the autograd engine runs it:
  forward   per layer: layer norm, QKV projection, attention (--attention
            naive keeps the [batch, heads, seq, seq] probabilities for the
            backward; flash keeps only a log-sum-exp), output projection and
            residual, layer norm, MLP up, GELU, MLP down and residual. The
            tensors the backward needs stay live; temporaries die at once.
            Then the final norm, the logits and the loss.
  backward  the reverse: each layer's gradient temporaries, its saved
            tensors freed as it finishes, and the parameter gradients
            (allocated by the first micro-step, kept until the optimizer's
            zero_grad(set_to_none=True)).
  optimizer Adam: two states per parameter made at the first step and kept;
            the foreach kernels' temporaries (one per parameter) per step.
Options: --checkpoint (activation checkpointing: the forward keeps only each
layer's input, the backward recomputes the layer first), --accum N
(gradient accumulation: N micro-steps per optimizer step), --mixed (bf16
autocast: fp32 master weights, bf16 activations, bf16 weight copies cast in
the forward and kept until it ends, fp32 logits for the loss), --seq-mix
(each micro-step draws its sequence length from a few buckets up to --seq,
as a data loader that packs by length does).
"""
import argparse
import random
import sys

from tracegen import Writer

MODELS = {
    # layers, hidden, heads, vocabulary
    "tiny": dict(layers=2, hidden=128, heads=2, vocab=1024),
    "gpt2": dict(layers=12, hidden=768, heads=12, vocab=50257),
    "gpt2-medium": dict(layers=24, hidden=1024, heads=16, vocab=50257),
    "1b": dict(layers=24, hidden=2048, heads=16, vocab=32000),
    # a vision transformer: 16 x 16 patches of 224 x 224 images (--seq 197 with
    # the class token), a classifier head on the class token alone
    "vit-l": dict(layers=24, hidden=1024, heads=16, vocab=1000, image=3 * 224 * 224),
}


class Step:
    """One model's training loop on a Writer."""

    def __init__(self, w, a, rng):
        self.w, self.a, self.rng = w, a, rng
        m = dict(MODELS[a.model])
        if a.layers:
            m["layers"] = a.layers
        self.m = m
        self.act = 2 if a.mixed else 4   # bytes per activation element
        h, v = m["hidden"], m["vocab"]
        # parameters: embeddings (a vision model: the patch projection), then
        # per layer (norms, QKV, projection, MLP), the final norm
        shapes = [3 * 16 * 16 * h if m.get("image") else v * h, a.seq * h]
        for _ in range(m["layers"]):
            shapes += [h, h, 3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h]
        shapes += [h, h]
        if m.get("image"):
            shapes += [v * h, v]   # the classifier head
        self.shapes = shapes
        self.params = [w.alloc(4 * n) for n in shapes]
        self.grads = None
        self.states = None

    def tick(self, us=20):
        self.w.t_us += us

    def t(self, elems):
        """A fresh activation tensor, made by a kernel whose time follows its
        size (about 10 G elements per second: a step of --model gpt2 at
        batch 8 x 1024 tokens takes some 40 ms, the order of a real GPU's)."""
        self.tick(max(20, elems // 10000))
        return self.w.alloc(elems * self.act)

    def free(self, *blks):
        for b in blks:
            self.w.free(b)
        self.tick(5)

    def layer_forward(self, b, s, x):
        """Returns (output, saved tensors) of one layer on input x."""
        h, nh = self.m["hidden"], self.m["heads"]
        ln1 = self.t(b * s * h)
        stats1 = self.t(2 * b * s)
        qkv = self.t(3 * b * s * h)
        if self.a.attention == "naive":
            scores = self.t(b * nh * s * s)
            probs = self.t(b * nh * s * s)
            self.free(scores)
            ctx = self.t(b * s * h)
            att = [probs]
        else:
            ctx = self.t(b * s * h)
            att = [self.t(b * nh * s * 4 // self.act)]   # log-sum-exp, fp32
        proj = self.t(b * s * h)
        x1 = self.t(b * s * h)
        self.free(proj)
        ln2 = self.t(b * s * h)
        stats2 = self.t(2 * b * s)
        up = self.t(4 * b * s * h)
        gelu = self.t(4 * b * s * h)
        down = self.t(b * s * h)
        out = self.t(b * s * h)
        self.free(down)
        return out, [ln1, stats1, qkv, ctx, x1, ln2, stats2, up, gelu] + att

    def chain(self, prev, *sizes):
        """Each size a kernel's output, its input (the previous one) freed
        once it is made, as autograd's chained gradient temporaries are;
        returns the last. prev: the first input, or None."""
        for n in sizes:
            nxt = self.t(n)
            if prev is not None:
                self.free(prev)
            prev = nxt
        return prev

    def layer_backward(self, b, s, saved, gin):
        """Frees the layer's saved tensors and gin; returns the input's gradient."""
        h, nh = self.m["hidden"], self.m["heads"]
        # MLP: through GELU, the up projection and the second norm to the residual
        g_x1 = self.chain(None, 4 * b * s * h, 4 * b * s * h, b * s * h, b * s * h)
        self.free(gin)
        # attention: the probabilities' and scores' gradients (naive), QKV, the first norm
        g_ctx = self.t(b * s * h)
        att = [b * nh * s * s, b * nh * s * s] if self.a.attention == "naive" else []
        g_qkv = self.chain(None, *att, 3 * b * s * h)
        self.free(g_ctx)
        g_x = self.chain(g_qkv, b * s * h, b * s * h)
        self.free(g_x1)
        self.free(*saved)
        return g_x

    def micro_step(self, b, s):
        h, v, layers = self.m["hidden"], self.m["vocab"], self.m["layers"]
        casts = [self.w.alloc(2 * n) for n in self.shapes if n >= h * h] if self.a.mixed else []
        image = self.m.get("image")
        batch_in = self.w.alloc(4 * b * image) if image else None   # the loader's images
        x = self.t(b * s * h)   # embeddings (patch embeddings)
        inputs, saved = [], []
        for _ in range(layers):
            out, sv = self.layer_forward(b, s, x)
            if self.a.checkpoint:   # only the input is kept; the backward recomputes the rest
                self.free(*sv)
                sv = None
            inputs.append(x)
            saved.append(sv)
            x = out
        lnf = self.t(b * s * h)
        rows = b if image else b * s   # a classifier reads the class token alone
        logits = self.t(rows * v)
        if self.a.mixed:   # the loss in fp32
            self.tick()
            logits32 = self.w.alloc(4 * rows * v)
            self.free(logits)
            logits = logits32
        self.free(*casts)   # autocast's weight cache ends with the forward
        loss = self.w.alloc(4)
        # backward
        if self.grads is None:
            self.grads = [self.w.alloc(4 * n) for n in self.shapes]
        g_logits = self.w.alloc(logits[1])
        self.free(loss, logits)
        g = self.t(b * s * h)
        self.free(g_logits, lnf, x)
        for i in reversed(range(layers)):
            sv = saved[i]
            if sv is None:   # checkpointed: recompute the layer's forward
                out, sv = self.layer_forward(b, s, inputs[i])
                self.free(out)
            g = self.layer_backward(b, s, sv, g)
            if i:
                self.free(inputs[i])
        self.free(g, inputs[0])
        if batch_in:
            self.free(batch_in)

    def optimizer_step(self):
        if self.states is None:
            self.states = [self.w.alloc(4 * n) for n in self.shapes for _ in (0, 1)]
        tmp = [self.w.alloc(4 * n) for n in self.shapes]
        self.tick(200)
        self.free(*tmp)
        self.free(*self.grads)   # zero_grad(set_to_none=True)
        self.grads = None

    def run(self):
        a = self.a
        buckets = [max(8, a.seq * k // 4) for k in (1, 2, 3, 4)]
        for _ in range(a.steps):
            for _ in range(a.accum):
                s = self.rng.choice(buckets) if a.seq_mix else a.seq
                self.micro_step(a.batch, s)
                self.tick(2000)
            self.optimizer_step()
        if a.teardown:
            self.free(*self.states)
            self.free(*self.params)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    ap.add_argument("--layers", type=int, default=0, help="override the model's layer count")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps")
    ap.add_argument("--accum", type=int, default=1, help="micro-steps per optimizer step")
    ap.add_argument("--attention", choices=["naive", "flash"], default="naive")
    ap.add_argument("--checkpoint", action="store_true", help="activation checkpointing per layer")
    ap.add_argument("--mixed", action="store_true", help="bf16 autocast over fp32 master weights")
    ap.add_argument("--seq-mix", action="store_true", help="sequence length drawn per micro-step")
    ap.add_argument("--no-teardown", dest="teardown", action="store_false", default=True,
                    help="leave weights and optimizer states live at the end")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    for k in ("batch", "seq", "steps", "accum"):
        if getattr(a, k) < 1:
            ap.error("--%s must be at least 1" % k)
    if a.layers < 0:
        ap.error("--layers must not be negative")
    out = sys.stdout if a.output == "-" else open(a.output, "w")
    out.write("Thread,Time,Action,Pointer,Size,Stream\n")
    w = Writer(out, 0)
    try:
        Step(w, a, random.Random(a.seed)).run()
        w.flush()
    except BrokenPipeError:
        return 1
    if out is not sys.stdout:
        out.close()
    print("vramshim-traingen: %d events, %d steps x %d micro-steps (%s, batch %d, seq %d%s%s%s%s, seed %d)"
          % (w.lines, a.steps, a.accum, a.model, a.batch, a.seq, ", " + a.attention + " attention",
             ", checkpointing" if a.checkpoint else "", ", bf16 autocast" if a.mixed else "",
             ", mixed lengths" if a.seq_mix else "", a.seed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
