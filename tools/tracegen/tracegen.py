#!/usr/bin/env python3
"""vramshim-tracegen: serving-workload allocation traces in the RMM CSV layout.

Writes `Thread,Time,Action,Pointer,Size,Stream` lines (the layout of
../shared/traces and docs/replay.md) for a simulated inference server, so
that `vramshim replay` can compare allocators on serving work as well as on
the training snapshots. Only the Python standard library; the output is a
pure function of the arguments (seeded), so tests and benchmarks reproduce.

Workloads (--workload):
  paged   vLLM-like: the weights and ONE pre-allocated KV pool at start
          (paged KV blocks live inside it, host-side block tables), then per
          engine step the activations of that step's tokens, layer by layer.
  concat  transformers-like: per request and per layer a K and a V cache that
          grows by concatenation (torch.cat allocates the bigger tensor, then
          the old one is freed) every --grow-every generated tokens, plus the
          per-step activations; a finished request frees its caches.
Both batch continuously: a request joins the running batch at the next step
(up to --max-batch running, and for paged while the pool has blocks) and
leaves when it has produced its output.

Serving features (either workload): --prefix-share P: a share P of the
requests start with one of --prefixes system prompts whose KV cache the
server computes once and keeps while any request uses it (prefix caching);
--spec-decode K: speculative decoding, a draft model (a quarter of the
layers and hidden size) proposes K tokens per step, which the target model
verifies in one pass over K + 1 tokens per request, and a step then accepts
1..K + 1 of them; --models N: a multi-model server, N copies of the model
(weights and, for paged, KV pools), each request routed to one of them
(Zipf-like popularity), every model running its own batch per step.

Distributions: --lengths uniform|lognormal|zipf|bimodal (prompt and output
lengths), --arrival poisson|bursty|diurnal (bursty: on/off periods; diurnal:
a 24 h sine of the rate, so a simulated day has a night).

Size: --requests N and the model (--model tiny|small|7b|13b) set how big the
trace is; tiny/few requests for tests, 7b and 10^4..10^7 requests for
benchmarks. `--day` is the "simulated day": 10^7 requests over 24 h of trace
time, coarse engine steps (--step-tokens) so that the output stays ~10 lines
per request; write it to stdout and pipe it into `vramshim replay -`
instead of keeping a multi-GB file.

--copy-stream with -o FILE also writes FILE.syncs, the server's own
synchronisations (docs/replay.md, "Program synchronisations"): at the end
of each step it syncs the copy stream and the main stream. The trace bytes
do not depend on it (--no-syncs leaves it out).
"""
import argparse
import collections
import math
import random
import sys

MODELS = {
    # layers, hidden, kv bytes per token per layer (K+V, fp16), vocab, weight bytes per layer
    "tiny": dict(layers=2, hidden=256, kv=2 * 256 * 2, vocab=4096),
    "small": dict(layers=8, hidden=1024, kv=2 * 1024 * 2, vocab=32000),
    "7b": dict(layers=32, hidden=4096, kv=2 * 4096 * 2, vocab=32000),
    "13b": dict(layers=40, hidden=5120, kv=2 * 5120 * 2, vocab=32000),
}
BLOCK_TOKENS = 16  # paged KV block (vLLM's default block size)
# --copy-stream: the Stream column of the copy stream's blocks (a stream the
# program created: any handle but 0x0, 0x1 legacy and 0x2 per-thread).
COPY_STREAM = 0x7F5A00001000


class Writer:
    """Turns allocate/free calls into CSV lines with fresh pointers."""

    def __init__(self, out, stream):
        self.out = out
        self.next_ptr = 0x7F0000000000
        self.buf = []
        self.stream = "0x%x" % stream
        self.t_us = 0
        self.lines = 0

    def time(self):
        us = self.t_us
        s, f = divmod(us, 1000000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        return "%02d:%02d:%02d.%06d" % (h, m, s, f)

    def alloc(self, size, stream=None):
        """stream: the Stream column (default the writer's); a block is freed on its own."""
        size = max(1, int(size))
        p = self.next_ptr
        self.next_ptr += (size + 4095) // 4096 * 4096 + 4096
        st = self.stream if stream is None else "0x%x" % stream
        self.buf.append("0,%s,allocate,0x%x,%d,%s\n" % (self.time(), p, size, st))
        self.flush_maybe()
        return (p, size, st)

    def free(self, blk):
        p, size, st = blk
        self.buf.append("0,%s,free,0x%x,%d,%s\n" % (self.time(), p, size, st))
        self.flush_maybe()

    def flush_maybe(self):
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self):
        self.lines += len(self.buf)
        self.out.write("".join(self.buf))
        self.buf = []


def draw_length(rng, dist, mean, cap):
    if dist == "uniform":
        v = rng.uniform(1, 2 * mean)
    elif dist == "lognormal":
        sigma = 0.8
        v = rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    elif dist == "zipf":  # heavy tail: Pareto with alpha 1.5, scaled to the mean
        v = mean / 3.0 * rng.paretovariate(1.5)
    elif dist == "bimodal":  # chat turns and long documents
        v = rng.uniform(1, mean / 2) if rng.random() < 0.8 else rng.uniform(2 * mean, 4 * mean)
    else:
        raise ValueError(dist)
    return max(1, min(cap, int(v)))


class Arrivals:
    """Arrival times in microseconds, one request at a time."""

    def __init__(self, rng, kind, rate, day_s):
        self.rng, self.kind, self.rate, self.day_s = rng, kind, rate, day_s
        self.t = 0.0
        self.on_until = 0.0

    def next(self):
        r = self.rng
        if self.kind == "poisson":
            self.t += r.expovariate(self.rate)
        elif self.kind == "bursty":  # on periods at 4x the rate, off periods idle; mean rate kept
            if self.t >= self.on_until:
                self.t += r.expovariate(1.0 / 30.0)          # off ~30 s
                self.on_until = self.t + r.expovariate(1.0 / 10.0)  # on ~10 s
            self.t += r.expovariate(4.0 * self.rate)
        elif self.kind == "diurnal":  # thinning of a Poisson process with a 24 h sine rate
            peak = 2.0 * self.rate
            while True:
                self.t += r.expovariate(peak)
                phase = 2 * math.pi * (self.t % self.day_s) / self.day_s
                if r.random() < (1 - math.cos(phase)) / 2 * 0.9 + 0.1:
                    break
        else:
            raise ValueError(self.kind)
        return int(self.t * 1e6)


def step_activations(w, m, tokens, batch, coarse):
    """The activations of one engine step over `tokens` tokens: per layer the
    hidden states, attention and MLP intermediates (freed when the layer is
    done, the residual kept until the next layer), then the logits of the
    batch's last tokens and the sampled ids."""
    h = m["hidden"]
    x = w.alloc(tokens * h * 2)
    layers = 1 if coarse else m["layers"]
    for _ in range(layers):
        qkv = w.alloc(tokens * 3 * h * 2)
        att = w.alloc(tokens * h * 2)
        w.free(qkv)
        if not coarse:
            mlp = w.alloc(tokens * 4 * h * 2)
            out = w.alloc(tokens * h * 2)
            w.free(mlp)
            w.free(att)
            att = out
        w.free(x)
        x = att
    logits = w.alloc(batch * m["vocab"] * 4)
    w.free(x)
    ids = w.alloc(batch * 8)
    w.free(logits)
    return ids


class Model:
    """One served model: its weights, (paged) KV pool, queue and batch."""

    def __init__(self, w, a, m):
        self.m = m
        h = m["hidden"]
        # Weights: per layer the attention and MLP matrices, plus embeddings.
        self.weights = [w.alloc(m["vocab"] * h * 2)]
        for _ in range(m["layers"]):
            self.weights.append(w.alloc(4 * h * h * 2))
            self.weights.append(w.alloc(3 * 4 * h * h * 2 // 1))
        self.pool_blocks = 0
        if a.workload == "paged":
            # vLLM sizes its KV pool once from what is left of the card.
            self.pool_blocks = max(a.max_batch * 4,
                                   int(a.kv_pool_gib * (1 << 30)) // (BLOCK_TOKENS * m["kv"] * m["layers"]))
            self.weights.append(w.alloc(self.pool_blocks * BLOCK_TOKENS * m["kv"] * m["layers"]))
        self.free_blocks = self.pool_blocks
        self.pending = collections.deque()  # (arrival_us, prompt, output, prefix)
        self.running = []
        self.prefix_kv = {}  # prefix id -> [blocks, users] (--prefix-share)


def draft_of(m):
    """--spec-decode: the draft model, a quarter of the target's layers and hidden size."""
    return dict(m, layers=max(1, m["layers"] // 4), hidden=max(64, m["hidden"] // 4),
                kv=max(64, m["kv"] // 4))


def generate(a, out, syncs=None):
    """syncs: an open file for the program's synchronisations (the sidecar
    TRACE.syncs of docs/replay.md), or None."""
    rng = random.Random(a.seed)
    m = dict(MODELS[a.model])
    if a.layers:
        m["layers"] = a.layers
    w = Writer(out, 0)
    out.write("Thread,Time,Action,Pointer,Size,Stream\n")
    coarse = a.day
    models = [Model(w, a, m) for _ in range(a.models)]
    draft = draft_of(m) if a.spec_decode else None
    if draft:
        h = draft["hidden"]
        models[0].weights.append(w.alloc(draft["vocab"] * h * 2))
        for _ in range(draft["layers"]):
            models[0].weights.append(w.alloc(16 * h * h * 2))
    # Multi-model popularity: model i drawn with weight 1 / (i + 1).
    popularity = [1.0 / (i + 1) for i in range(a.models)]
    # Their own generator, so that the traces without these features stay byte for byte as before.
    prng = random.Random(a.seed * 7919 + 1)
    prefix_len = [draw_length(prng, "uniform", a.prompt_mean, a.max_len) for _ in range(a.prefixes)]

    arr = Arrivals(rng, a.arrival, a.rate, 86400.0)
    issued = 0
    done = 0
    step_us = a.step_us
    next_arrival = arr.next()
    while done < a.requests:
        # Admit arrivals up to now.
        while issued < a.requests and next_arrival <= w.t_us:
            p = draw_length(rng, a.lengths, a.prompt_mean, a.max_len)
            o = draw_length(rng, a.lengths, a.output_mean, a.max_len)
            mi = prng.choices(range(a.models), popularity)[0] if a.models > 1 else 0
            pre = prng.randrange(a.prefixes) if a.prefix_share and prng.random() < a.prefix_share else None
            models[mi].pending.append((next_arrival, p, o, pre))
            issued += 1
            next_arrival = arr.next() if issued < a.requests else None
        if not any(md.running or md.pending for md in models):
            w.t_us = max(w.t_us, next_arrival)
            continue
        step_tokens = 0
        for md in models:
            if md.running or md.pending:
                d, t = model_step(w, a, md, draft if md is models[0] else None, prng, coarse, prefix_len, syncs)
                done += d
                step_tokens += t
        w.t_us += step_us + (step_tokens * a.us_per_token)
    if a.teardown:
        for md in reversed(models):
            for blk in reversed(md.weights):
                w.free(blk)
    w.flush()
    return w.lines


def model_step(w, a, md, draft, prng, coarse, prefix_len, syncs):
    """One engine step of one model: admit, run the step's activations, grow
    or free the requests' caches. Returns (requests finished, tokens)."""
    m = md.m
    running, pending = md.running, md.pending
    done = 0
    if True:
        prefill = 0
        while pending and len(running) < a.max_batch:
            _, p, o, pre = pending[0]
            need = (p + o + BLOCK_TOKENS - 1) // BLOCK_TOKENS
            if a.workload == "paged":
                need = min(need, md.pool_blocks)
                if need > md.free_blocks:
                    break
                md.free_blocks -= need
            pending.popleft()
            r = {"len": p, "left": o, "blocks": need, "kv": [], "prefix": pre}
            if pre is not None:
                # Prefix caching: the shared prompt's KV is computed once and
                # kept while a request uses it; this request prefills its own
                # part only.
                if pre not in md.prefix_kv:
                    n = prefix_len[pre]
                    blocks = [w.alloc(n * m["kv"] // 2) for _ in range(2 * m["layers"])] \
                        if a.workload == "concat" else []
                    md.prefix_kv[pre] = [blocks, 0]
                    prefill += n
                md.prefix_kv[pre][1] += 1
            if a.workload == "concat":
                r["kv"] = [w.alloc(p * m["kv"] // 2) for _ in range(2 * m["layers"])]
                r["grown"] = 0
            running.append(r)
            prefill += p
        # One engine step (coarse: --step-tokens decode tokens per request at once).
        adv = a.step_tokens if coarse else 1
        if draft:
            # Speculative decoding: K draft passes of one token per request,
            # then the target verifies K + 1 tokens per request at once; a
            # step accepts 1..K + 1 of them.
            for _ in range(a.spec_decode):
                w.free(step_activations(w, draft, len(running), len(running), True))
            tokens = prefill + len(running) * (a.spec_decode + 1)
            adv = 1 + sum(1 for _ in range(a.spec_decode) if prng.random() < 0.7)
        else:
            tokens = prefill + len(running) * adv
        # --copy-stream: the step's input ids are staged by a host-to-device
        # copy on a stream of their own (allocated while it is current, as
        # PyTorch does), used by the step on the main stream, freed after it.
        staged = w.alloc(tokens * 8, COPY_STREAM) if a.copy_stream else None
        ids = step_activations(w, m, tokens, len(running), coarse)
        still = []
        for r in running:
            gen = min(adv, r["left"])
            r["left"] -= gen
            r["len"] += gen
            if a.workload == "concat":
                r["grown"] += gen
                if r["grown"] >= a.grow_every and r["left"] > 0:
                    r["grown"] = 0
                    # torch.cat per layer: the bigger K (V) first, then the old one freed.
                    nk = []
                    for blk in r["kv"]:
                        nb = w.alloc(r["len"] * m["kv"] // 2)
                        w.free(blk)
                        nk.append(nb)
                    r["kv"] = nk
            if r["left"] <= 0:
                for blk in r["kv"]:
                    w.free(blk)
                md.free_blocks += r["blocks"]
                if r["prefix"] is not None:
                    pk = md.prefix_kv[r["prefix"]]
                    pk[1] -= 1
                    if pk[1] == 0:  # the last user left: the prefix cache goes
                        for blk in pk[0]:
                            w.free(blk)
                        del md.prefix_kv[r["prefix"]]
                done += 1
            else:
                still.append(r)
        running[:] = still
        w.free(ids)
        if staged:
            w.free(staged)
            if syncs is not None:
                # The step ends as such a server's does: it waits for the
                # copy stream before it refills the pinned staging buffer,
                # and reads the sampled tokens back on the main stream.
                n = w.lines + len(w.buf)
                syncs.write("%d,stream,0x%x\n%d,stream,0x0\n" % (n, COPY_STREAM, n))
    return done, tokens


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--workload", choices=["paged", "concat"], default="concat")
    ap.add_argument("--model", choices=sorted(MODELS), default="small")
    ap.add_argument("--layers", type=int, default=0, help="override the model's layer count")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--lengths", choices=["uniform", "lognormal", "zipf", "bimodal"], default="lognormal")
    ap.add_argument("--arrival", choices=["poisson", "bursty", "diurnal"], default="poisson")
    ap.add_argument("--rate", type=float, default=20.0, help="mean requests per second")
    ap.add_argument("--prompt-mean", type=int, default=256)
    ap.add_argument("--output-mean", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--grow-every", type=int, default=1, help="concat: tokens between cache growths")
    ap.add_argument("--kv-pool-gib", type=float, default=8.0, help="paged: size of the KV pool")
    ap.add_argument("--step-us", type=int, default=15000, help="fixed time of an engine step")
    ap.add_argument("--us-per-token", type=int, default=20)
    ap.add_argument("--step-tokens", type=int, default=16, help="--day: decode tokens per request per step")
    ap.add_argument("--day", action="store_true",
                    help="a simulated day: 10^7 requests (unless --requests given), coarse steps")
    ap.add_argument("--no-teardown", dest="teardown", action="store_false", default=None,
                    help="leave the weights (and KV pool) live at the end: a server that keeps running "
                         "(the default for --day)")
    ap.add_argument("--copy-stream", action="store_true",
                    help="stage each step's input ids on a second (copy) stream; default: one stream (0x0)")
    ap.add_argument("--no-syncs", dest="syncs", action="store_false", default=True,
                    help="--copy-stream with -o FILE: do not write the program's synchronisations to "
                         "FILE.syncs (docs/replay.md)")
    ap.add_argument("--prefix-share", type=float, default=0.0,
                    help="share of requests that start with a shared system prompt (prefix caching)")
    ap.add_argument("--prefixes", type=int, default=4, help="--prefix-share: how many shared prompts")
    ap.add_argument("--spec-decode", type=int, default=0,
                    help="speculative decoding: draft tokens per step (0: off)")
    ap.add_argument("--models", type=int, default=1, help="models served by one process")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args(argv)
    if a.day:
        if "--requests" not in (argv if argv is not None else sys.argv):
            a.requests = 10_000_000
        if "--rate" not in (argv if argv is not None else sys.argv):
            a.rate = a.requests / 86400.0
        a.grow_every = max(a.grow_every, a.step_tokens)
        a.max_batch = max(a.max_batch, 256)
    if a.teardown is None:
        a.teardown = not a.day
    for k in ("requests", "prompt_mean", "output_mean", "max_len", "max_batch", "grow_every", "step_tokens",
              "prefixes", "models"):
        if getattr(a, k) < 1:
            ap.error("--%s must be at least 1" % k.replace("_", "-"))
    if a.rate <= 0:
        ap.error("--rate must be above 0")
    out = sys.stdout if a.output == "-" else open(a.output, "w")
    syncs = None
    if a.copy_stream and a.syncs and a.output != "-":
        syncs = open(a.output + ".syncs", "w")
        syncs.write("After,Sync,Stream\n")
    try:
        n = generate(a, out, syncs)
    except BrokenPipeError:
        return 1
    if out is not sys.stdout:
        out.close()
    if syncs:
        syncs.close()
    print("vramshim-tracegen: %d events, %d requests (%s, %s lengths, %s arrivals, seed %d)"
          % (n, a.requests, a.workload, a.lengths, a.arrival, a.seed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
