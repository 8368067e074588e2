#!/usr/bin/env python3
"""`vramshim top` under tmux: the pane shows every tenant with its usage,
sorted by usage, and follows a change within 2 s; `q` quits. When stdout
is not a terminal it prints one plain view."""
import os
import re
import shutil
import subprocess
import time

from histlib import MiB, Env, args, eventually, skip


def main():
    a = args()
    if not shutil.which("tmux"):
        skip("tmux is not installed")
    e = Env(a, "top", "[tenant llm]\nreserve = 512MiB\nlimit = 2GiB\n[tenant embed]\nlimit = 1GiB\n")
    sock = "vramshim-test-top-%d" % os.getpid()
    tmux = ["tmux", "-L", sock]
    try:
        llm, emb = e.holder("llm"), e.holder("embed")
        assert llm.alloc(300 * MiB) == "ok" and emb.alloc(100 * MiB) == "ok"
        assert emb.alloc(2000 * MiB).startswith("refused")

        # Not a terminal: one plain view, tenants sorted by usage, the refusal among the events.
        out = e.tool("top", "--ledger-dir", e.ledger).stdout
        rows = re.findall(r"^  (\w+)\s+\[[#|.]+\]\s+(\S+ \S+)", out, re.M)
        assert rows == [("llm", "300.00 MiB"), ("embed", "100.00 MiB")], (rows, out)
        assert re.search(r"pid \d+\s+held\s+300\.00 MiB", out), out
        assert re.search(r"embed\s+refusal\s+1\.95 GiB", out), out

        # In a terminal (tmux): live.
        cmd = "env VRAMSHIM_CONFIG=%s %s top --ledger-dir %s" % (e.conf, a.tool, e.ledger)
        subprocess.run(tmux + ["new-session", "-d", "-s", "top", "-x", "160", "-y", "50", cmd], check=True,
                       env=dict(e.env, TERM="xterm-256color"))

        def pane():
            p = subprocess.run(tmux + ["capture-pane", "-p", "-t", "top"], capture_output=True, text=True)
            return p.stdout if p.returncode == 0 else ""

        text = eventually(lambda: "300.00 MiB" in pane() and pane(), "top shows the tenants")
        assert "(q quits)" in text and re.search(r"llm\s+\[#+", text) and "embed" in text, text
        assert text.index("llm ") < text.index("embed "), text
        # A change: embed grows past llm; the view follows (and re-sorts) within 2 s.
        assert emb.alloc(400 * MiB) == "ok"
        t0 = time.time()
        text = eventually(lambda: "500.00 MiB" in pane() and pane(), "top follows a change", timeout=10)
        took = time.time() - t0
        print("top showed the change after %.2f s" % took)
        assert took <= 2.0, took
        assert re.search(r"embed\s+\[#+", text) and text.index("embed ") < text.index("llm "), text
        subprocess.run(tmux + ["send-keys", "-t", "top", "q"], check=True)
        eventually(lambda: subprocess.run(tmux + ["has-session", "-t", "top"], capture_output=True).returncode != 0,
                   "q quits", timeout=10)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        e.close()


if __name__ == "__main__":
    main()
