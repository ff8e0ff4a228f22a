#!/usr/bin/env python3
"""hostile_verdicts.py — the verdict table of bench/hostile_search.sh.

  hostile_verdicts.py ATTEMPTS HOSTILE_DIR [--bests FILE] [--elites FILE] NAME...

ATTEMPTS is the output of `kevo archive attempts --json` (stderr may be mixed
in). For each NAME it prints the attempts of the seed hostile_NAME by stage and
verdict, and fails (exit 1, naming the seed) unless it was evaluated as a seed
and every seed evaluation got the verdict that HOSTILE_DIR/NAME.cu expects on
its "// expect: VERDICT" line (read as tests/gpu/test_gpu_eval.c reads it).
--bests FILE (`kevo archive best P --per-size --json`): it fails when a size's
best program is a hostile seed. --elites FILE (`kevo archive show P --json`):
it fails when an elite is a hostile seed that games the results (its file has
a "// no-faster-than:" line) or is expected to fail; a hostile whose attack
failed and whose kernel is correct may hold a cell no honest seed fills, and
is listed.
"""
import collections
import json
import re
import sys


def expected_verdict(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        m = re.search(r"// expect:[ ]*([^ \n]*)", f.read())
    return m.group(1) if m else None


def games(path):
    """Whether the hostile games the results (a memoizing one: "// no-faster-than:")."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return "// no-faster-than:" in f.read()


def programs_in(node):
    """Every value of a "program" key, anywhere in a JSON document."""
    found = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "program" and isinstance(v, (int, float)):
                found.add(int(v))
            else:
                found |= programs_in(v)
    elif isinstance(node, list):
        for v in node:
            found |= programs_in(v)
    return found


def main(argv):
    if len(argv) < 4:
        print("usage: hostile_verdicts.py ATTEMPTS HOSTILE_DIR NAME...", file=sys.stderr)
        return 2
    attempts, hostile_dir, rest = argv[1], argv[2], argv[3:]
    kept_files, names = [], []
    while rest:
        if rest[0] in ("--bests", "--elites") and len(rest) > 1:
            kept_files.append((rest[0][2:], rest[1]))
            rest = rest[2:]
        else:
            names.append(rest.pop(0))
    with open(attempts, encoding="utf-8", errors="replace") as f:
        rows = [json.loads(line.rstrip(",\n")) for line in f if line.startswith("{")]
    model = {r["program"]: r["model"] for r in rows if r["model"]}
    seen = collections.defaultdict(collections.Counter)
    seeded = collections.defaultdict(list)
    for r in rows:
        if r["stage"] == "proposal":
            continue
        name = model.get(r["program"], "")
        seen[name][r["stage"] + " " + r["verdict"]] += 1
        if r["stage"] == "seed":
            seeded[name].append(r["verdict"])
    failed = []
    print("%-22s %-14s %s" % ("hostile seed", "expected", "attempts (stage verdict x count)"))
    for h in names:
        want = expected_verdict("%s/%s.cu" % (hostile_dir, h))
        c = seen["hostile_" + h]
        print("%-22s %-14s %s" % (h, want or "?",
                                  ", ".join("%s x%d" % kv for kv in sorted(c.items())) or "(none)"))
        got = seeded["hostile_" + h]
        if not want:
            failed.append("%s: %s/%s.cu has no '// expect:' line" % (h, hostile_dir, h))
        elif not got:
            failed.append("%s: expected %s, but it was never evaluated as a seed" % (h, want))
        elif any(v != want for v in got):
            failed.append("%s: expected %s, got %s" % (h, want, ", ".join(got)))
    for kind, path in kept_files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        start = min([i for i in (text.find("{"), text.find("[")) if i >= 0], default=-1)
        kept = programs_in(json.loads(text[start:])) if start >= 0 else set()
        hostile_kept = [p for p in sorted(kept) if model.get(p, "").startswith("hostile_")]
        print("%s: %d programs, %d of them hostile seeds" % (kind, len(kept), len(hostile_kept)))
        for p in hostile_kept:
            path_cu = "%s/%s.cu" % (hostile_dir, model[p][len("hostile_"):])
            if kind == "elites" and expected_verdict(path_cu) == "ok" and not games(path_cu):
                print("  %s (program %d) holds a cell: correct, its attack failed" % (model[p], p))
            else:
                failed.append("%s: program %d is among the %s" % (model[p], p, kind))
    for f in failed:
        print("FAIL: hostile seed " + f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
