"""Where the 429s of each arrivals file fall: count by outcome, and 429 times in 250 ms bins."""
# Part of bench/realtime/analysis (see README.md there).
import csv, sys, collections
for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    out = collections.Counter(r["outcome"] for r in rows)
    bad = [r for r in rows if r["outcome"] != "Accepted"]
    bins = collections.Counter((r["outcome"], int(float(r["at_ms"]) // 250) * 250) for r in bad)
    acc = collections.Counter(int(float(r["at_ms"]) // 1000) for r in rows if r["outcome"] == "Accepted" and r["counted_global"] == "true")
    print(path.split("/")[-1], dict(out))
    if bad:
        print("   429 bins (ms):", ", ".join(f"{o[:6]}@{b}:{n}" for (o, b), n in sorted(bins.items(), key=lambda x: x[0][1])))
        print("   first/last 429 ms: %.0f / %.0f" % (min(float(r["at_ms"]) for r in bad), max(float(r["at_ms"]) for r in bad)))
    print("   accepted (global-counted) per second:", [acc[i] for i in range(max(acc) + 1)] if acc else [])
