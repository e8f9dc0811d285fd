"""Each server window (fixed, from the first arrival) against the store's sliding window (from
# Part of bench/realtime/analysis (see README.md there).
the grants): for each burst of refused arrivals, when the refused process was granted, and how
many grants the store gave in the 1 s before those grants."""
import csv, glob, json, sys, bisect
d, tag = sys.argv[1], sys.argv[2]
procs = {}
t0 = None
reps = {}
for f in sorted(glob.glob(f"{d}/{tag}-p*-*.report.json")):
    r = json.load(open(f)); name = f.split(tag + "-")[1].split(".")[0]
    reps[name] = r
t0 = min(r["t0_unix_s"] for r in reps.values())
grants = sorted((1000 * (t - t0), n) for n, r in reps.items() for t in (r.get("store") or {}).get("granted_at_unix", []))
gt = [g[0] for g in grants]
rows = sorted((float(r["at_ms"]), r["outcome"], int(r["rid"])) for r in csv.DictReader(open(f"{d}/{tag}.arrivals.csv")))
first = rows[0][0]
print(f"{tag}: first grant answered at {gt[0]:.1f} ms, first arrival at {first:.1f} ms (start signal = 0 on both clocks, within a ms or so)")
bad = [r for r in rows if r[1] != "Accepted"]
if not bad:
    print("   no refused arrival"); sys.exit()
# bursts: refused arrivals closer than 50 ms
bursts = []; cur = [bad[0]]
for r in bad[1:]:
    if r[0] - cur[-1][0] < 50: cur.append(r)
    else: bursts.append(cur); cur = [r]
bursts.append(cur)
for b in bursts:
    t = b[0][0]
    w = int((t - first) // 1000)
    ws = first + 1000 * w
    acc_in_w = sum(1 for x in rows if ws <= x[0] < t and x[1] == "Accepted")
    print(f"   burst of {len(b)} refused at {t:.0f}-{b[-1][0]:.0f} ms: server window {w} opened at {ws:.0f} ms and had taken {acc_in_w} before it")
    # grants in the 1 s of store window before the burst's sends (answers within 60 ms before the burst)
    lo = bisect.bisect_left(gt, t - 60); hi = bisect.bisect_right(gt, t)
    if hi > lo:
        g = gt[lo]
        n1 = bisect.bisect_right(gt, g) - bisect.bisect_left(gt, g - 1000)
        early = [x for x in gt if ws - 1000 <= x < ws]
        print(f"      grants answered in the 60 ms before it: {hi - lo}, from {gt[lo]:.0f} ms; the store had answered {n1} grants in the 1 s up to {g:.0f} ms")
        inw = sum(1 for x in gt if ws - 30 <= x < t)
        print(f"      grants answered since the server window opened ({ws:.0f} ms, less 30 ms): {inw}; grants in the 1 s before that: {len(early)}")
