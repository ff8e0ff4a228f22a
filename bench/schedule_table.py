#!/usr/bin/env python3
"""schedule_table.py — the merge step of bench/schedule_sweep.sh: the
`kevo seed --json` lines of a sweep (DIR/<problem>/batch-*.jsonl) and the
generated candidates (DIR/<problem>/gen/*.cu) into one table
(bench/sched_table.h describes the format), plus a summary of verdicts.

  schedule_table.py --out DIR --problems "allreduce allgather" \
      --header "# date: ..." [--header ...] > bench/data/schedules-<machine>.tsv

Every generated candidate gets a row: one without a result yet is
'missing' (an unfinished sweep). A duplicate (the same compiled code as
another candidate) carries that candidate's cell and times. Verdicts other
than ok of generated schedules are kevo bugs: they are listed on stderr and
the exit status is 3 (0 when every row is ok, 4 when rows are missing)."""
import argparse
import glob
import json
import os
import re
import sys

SIZES = ["64KiB", "1MiB", "16MiB", "256MiB"]


def schedule_of(path):
    """The candidate's `// kevo:schedule ...` text and the cell of its
    `// kevo:pattern` line ('-' when none)."""
    sched, cell = None, "-"
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if s.startswith("// kevo:schedule") and sched is None:
                sched = s[len("// kevo:schedule"):].strip()
            elif s.startswith("// kevo:pattern"):
                kv = dict(w.split("=", 1) for w in s.split()[2:] if "=" in w)
                if "transport" in kv and "fusion" in kv:
                    cell = kv["transport"] + "/" + kv["fusion"]
    return sched, cell


def times(report):
    out = {}
    for s in report.get("sizes", []):
        if s.get("name") in SIZES and "candidate" in s and "reference" in s:
            out[s["name"]] = (s["candidate"]["median_us"], s["reference"]["median_us"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems", required=True)
    ap.add_argument("--header", action="append", default=[])
    a = ap.parse_args()
    for h in a.header:
        print(h if h.startswith("#") else "# " + h)
    cols = ["collective", "schedule", "aimed_cell", "measured_cell", "verdict"]
    for z in SIZES:
        cols += ["us_" + z, "ref_" + z]
    print("\t".join(cols))
    counts, bugs, missing = {}, [], 0
    for p in a.problems.split():
        gen = os.path.join(a.out, p, "gen")
        results = {}
        for jf in sorted(glob.glob(os.path.join(a.out, p, "batch-*.jsonl"))):
            with open(jf, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line.startswith("{"):
                        o = json.loads(line)
                        results[o["seed"]] = o.get("report") or {}
        # a duplicate's message names the seed it repeats
        for name, rep in results.items():
            if rep.get("verdict") == "duplicate":
                m = re.search(r"as seed (\S+):", rep.get("message", ""))
                orig = results.get(m.group(1)) if m else None
                if orig and orig.get("verdict") == "ok":
                    rep["cell"] = orig.get("cell", "-")
                    rep["sizes"] = orig.get("sizes", [])
        for cu in sorted(glob.glob(os.path.join(gen, "*.cu"))):
            name = os.path.basename(cu)[:-3]
            sched, aimed = schedule_of(cu)
            if sched is None:
                print(f"schedule_table: {cu}: no kevo:schedule line", file=sys.stderr)
                bugs.append((p, name, "no kevo:schedule line"))
                continue
            sched = sched.replace("\t", " ")
            rep = results.get(name)
            verdict = rep.get("verdict", "missing") if rep is not None else "missing"
            t = times(rep) if rep else {}
            row = [p, sched, aimed, rep.get("cell", "-") if rep else "-", verdict]
            for z in SIZES:
                c, r = t.get(z, (None, None))
                row += [f"{c:.3f}" if c else "-", f"{r:.3f}" if r else "-"]
            print("\t".join(row))
            counts.setdefault(p, {}).setdefault(verdict, 0)
            counts[p][verdict] += 1
            if verdict == "missing":
                missing += 1
            elif verdict not in ("ok", "duplicate"):
                bugs.append((p, name, verdict + ": " + (rep.get("message", "") or "")[:300]))
    print("schedule sweep: verdicts per collective", file=sys.stderr)
    for p, c in counts.items():
        print(f"  {p}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())), file=sys.stderr)
    if bugs:
        print(f"schedule sweep: {len(bugs)} generated schedules were not ok (kevo bugs to "
              "report):", file=sys.stderr)
        for p, n, why in bugs:
            print(f"  {p}/{n}: {why}", file=sys.stderr)
    return 3 if bugs else 4 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
