"""Per process: k-th send (client's transport call) against k-th arrival of its rids at the
# Part of bench/realtime/analysis (see README.md there).
server (FIFO pairing), in ms; and where the grants were for the arrivals of one server window."""
import csv, glob, json, sys
d, tag, K = sys.argv[1], sys.argv[2], int(sys.argv[3])
reps = {}
for f in sorted(glob.glob(f"{d}/{tag}-p*-*.report.json")):
    name = f.split(tag + "-")[1].split(".")[0]; reps[int(name[1:].split("-")[0])] = (name, json.load(open(f)))
t0 = min(r["t0_unix_s"] for _, r in reps.values())
rows = sorted((float(r["at_ms"]), int(r["rid"])) for r in csv.DictReader(open(f"{d}/{tag}.arrivals.csv")))
rid_proc = {}
for p, (name, r) in reps.items():
    for o in r["results"]: rid_proc[o["rid"]] = p
for p, (name, r) in sorted(reps.items()):
    sends = sorted(1000 * (t - t0) for t in r["store"]["sent_at_unix"])
    arr = [t for t, rid in rows if rid_proc.get(rid) == p]
    lag = sorted(a - s for a, s in zip(arr, sends))
    if lag:
        q = lambda x: lag[min(len(lag) - 1, int(x * len(lag)))]
        print(f"{tag} {name}: send -> arrival (FIFO pairs, ms): min {lag[0]:.0f} p50 {q(.5):.0f} p90 {q(.9):.0f} max {lag[-1]:.0f}")
