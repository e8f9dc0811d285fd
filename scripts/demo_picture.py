"""Draws README.md's picture from the demo's own output: what the simulated Discord server
counted over time against its limits.

    cargo run --release -p ratelane --example discord_bot -- --timeline /tmp/demo.csv
    python3 -m venv /tmp/picture && /tmp/picture/bin/pip install 'matplotlib==3.10.*'
    /tmp/picture/bin/python scripts/demo_picture.py /tmp/demo.csv docs/img/demo.png

Not part of the test command (it needs matplotlib from PyPI); the PNG is committed.
Top: requests the server counted against the bot's global limit in the second before each
instant (limit 50 per second). Bottom: one channel's messages, cumulative, against what its
bucket allows (5 per 5 s, fixed windows from the channel's first arrival).
"""

from __future__ import annotations

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, out: str) -> None:
    rows = list(csv.DictReader(open(src, newline="")))
    glob = sorted(float(r["at_ms"]) / 1000 for r in rows if r["counted_global"] == "true")
    end = max(float(r["at_ms"]) for r in rows) / 1000
    ts = [i / 100 for i in range(int(end * 100) + 2)]
    lo = 0
    hi = 0
    counted = []
    for t in ts:
        while hi < len(glob) and glob[hi] <= t:
            hi += 1
        while lo < hi and glob[lo] <= t - 1.0:
            lo += 1
        counted.append(hi - lo)
    channel = sorted(
        float(r["at_ms"]) / 1000
        for r in rows
        if r["route"] == "POST /channels/:id/messages" and r["major"] == "100"
    )
    first = channel[0]
    allowed_t = []
    allowed = []
    k = 0
    while first + 5 * k <= end + 5:
        allowed_t += [first + 5 * k, first + 5 * (k + 1)]
        allowed += [5 * (k + 1), 5 * (k + 1)]
        k += 1

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.2), sharex=True, dpi=100)
    top.plot(ts, counted, color="#1f77b4", lw=1.4, label="requests the server counted in the last second")
    top.axhline(50, color="#d62728", lw=1.2, ls="--", label="global limit: 50 per second")
    top.set_ylim(0, 60)
    top.set_ylabel("per second")
    top.legend(loc="lower center", fontsize=8, frameon=False)
    top.set_title(
        f"ratelane demo: {len(rows)} arrivals at a simulated Discord, 0 429s, the global limit held",
        fontsize=10,
    )
    bottom.step(channel, range(1, len(channel) + 1), where="post", color="#1f77b4", lw=1.4,
                label="channel 100: messages that reached the server")
    bottom.plot(allowed_t, allowed, color="#d62728", lw=1.2, ls="--", label="what its bucket allows (5 per 5 s)")
    bottom.set_ylabel("messages")
    bottom.set_xlabel("seconds (virtual time)")
    bottom.legend(loc="upper left", fontsize=8, frameon=False)
    bottom.set_xlim(0, end + 0.5)
    for ax in (top, bottom):
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(alpha=0.25)
    fig.tight_layout()
    fig.savefig(out, metadata={"Software": None})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
