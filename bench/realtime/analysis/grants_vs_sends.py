"""For one shared run (tag): when the store granted (clients' answer times) against when the
# Part of bench/realtime/analysis (see README.md there).
processes sent, and where the server refused. Usage: grants.py LOGDIR TAG"""
import csv, glob, json, sys, bisect
d, tag = sys.argv[1], sys.argv[2]
procs = []
for f in sorted(glob.glob(f"{d}/{tag}-p*-*.report.json")):
    r = json.load(open(f))
    s = r.get("store") or {}
    procs.append((f.split(tag + "-")[1].split(".")[0], r["t0_unix_s"], s.get("granted_at_unix", []), s.get("sent_at_unix", [])))
t0 = min(p[1] for p in procs)
def maxwin(ts, w=1.0):
    ts = sorted(ts); best = (0, 0)
    for i, t in enumerate(ts):
        j = bisect.bisect_right(ts, t + w) - 1
        best = max(best, (j - i + 1, t))
    return best
allg = [t for p in procs for t in p[2]]; alls = [t for p in procs for t in p[3]]
n, at = maxwin(allg); print(f"{tag}: most grants answered in any 1 s: {n} (from {1000*(at-t0):.0f} ms)")
n, at = maxwin(alls); print(f"{tag}: most sends in any 1 s: {n} (from {1000*(at-t0):.0f} ms)")
rows = [(float(r["at_ms"]), r["outcome"], int(r["rid"])) for r in csv.DictReader(open(f"{d}/{tag}.arrivals.csv"))]
bad = sorted(t for t, o, _ in rows if o != "Accepted")
if bad:
    print(f"   refused arrivals: {len(bad)}, first at {bad[0]:.0f} ms, last at {bad[-1]:.0f} ms (from the start signal)")
for name, _, g, s in procs:
    g = sorted(g); s = sorted(s)
    # sends without a grant before them (k-th send before k-th grant) and the largest lag of the k-th send behind the k-th grant
    lag = [1000 * (s[k] - g[k]) for k in range(min(len(g), len(s)))]
    early = sum(1 for x in lag if x < -1)
    print(f"   {name}: {len(g)} grants, {len(s)} sends; k-th send after k-th grant: max {max(lag, default=0):.0f} ms, "
          f"sends ahead of grants: {early} (min {min(lag, default=0):.0f} ms); sends > grants: {len(s) - len(g)}")
    # per 250 ms: grants / sends
    hist = {}
    for t in g: hist.setdefault(int((t - t0) * 4), [0, 0])[0] += 1
    for t in s: hist.setdefault(int((t - t0) * 4), [0, 0])[1] += 1
    print("      per 250 ms grants/sends:", " ".join(f"{k*250}:{v[0]}/{v[1]}" for k, v in sorted(hist.items()) if v != [0, 0]))
