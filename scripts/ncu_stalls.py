"""Warp stall samples by SASS instruction, from ncu's source page:

    ncu ... --section SourceCounters -o REPORT python3 SCRIPT
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
    python3 scripts/ncu_stalls.py SRC.csv [TOP]

prints, for each kernel, its samples by stall reason and its TOP (20)
instructions by samples (offset from the kernel's first instruction,
warp-level executions, the instruction, its top two reasons)."""
import csv
import sys
from collections import Counter


def kernels(path):
    """(kernel name, [row dicts]) for each kernel in the CSV."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if rec and rec[0] == "Kernel Name":
                if name:
                    yield name, rows
                name, header, rows = rec[1], None, []
            elif header is None:
                header = rec
            elif rec:
                rows.append(dict(zip(header, rec)))
    if name:
        yield name, rows


def _n(x: str) -> int:
    try:
        return int(float(x.replace(",", "")))
    except ValueError:
        return 0


def report(name, rows, top=20):
    reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(_n(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    by = Counter({c[6:]: sum(_n(r[c]) for r in rows) for c in reasons})
    print(f'"{name}" samples {total}')
    print("  by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by.most_common(8)))
    base = int(rows[0]["Address"], 16)
    for r in sorted(rows, key=lambda r: -_n(r["Warp Stall Sampling (All Samples)"]))[:top]:
        s = _n(r["Warp Stall Sampling (All Samples)"])
        why = Counter({c[6:]: _n(r[c]) for c in reasons}).most_common(2)
        print(f"  {100 * s / total:5.1f}% {int(r['Address'], 16) - base:6x} exec {_n(r['Instructions Executed']):7d}"
              f"  {r['Source'].strip()[:56]:56} " + ", ".join(f"{k} {v}" for k, v in why))


def main():
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    for name, rows in kernels(sys.argv[1]):
        report(name, rows, top)
        print()


if __name__ == "__main__":
    main()
