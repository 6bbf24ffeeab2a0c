"""Summarises an `ncu --csv --page raw` file (profile.sh): one line per kernel name with its
launches, median duration, and DRAM traffic (bytes read + written) per launch and rate."""
import csv
import re
import statistics
import sys


def main(path):
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # skip ncu's own ==PROF== lines
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        print("ncu_table: no kernel rows in", path)
        return 1
    head, units = rows[0], rows[1]
    col = {name: i for i, name in enumerate(head)}

    def num(r, name):
        v = r[col[name]].replace(",", "")
        # Durations to ms, sizes to bytes; ncu writes "ns"/"us"/"ms" (older: "nsecond").
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                 "msecond": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
        unit = units[col[name]]
        if unit not in scale:
            raise SystemExit(f"ncu_table: unknown unit {unit!r} of {name}")
        return float(v) * scale[unit] if v else 0.0

    by = {}
    order = []
    for r in rows[2:]:
        name = r[col["Kernel Name"]].replace("(anonymous namespace)::", "")
        name = re.sub(r"^void ", "", name).split("(")[0]
        name = re.sub(r"^(\w+::)*", "", name)[:40]  # drop namespaces, keep template args
        if name not in by:
            by[name] = []
            order.append(name)
        by[name].append((num(r, "gpu__time_duration.sum"),
                         num(r, "dram__bytes_read.sum") + num(r, "dram__bytes_write.sum")))
    print(f"{'kernel':40} {'launches':>8} {'median ms':>10} {'DRAM MB':>9} {'GB/s':>7}")
    for name in order:
        ms = statistics.median(t for t, _ in by[name])
        mb = statistics.median(b for _, b in by[name]) / 1e6
        print(f"{name:40} {len(by[name]):8d} {ms:10.3f} {mb:9.1f} {mb / ms if ms else 0:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
