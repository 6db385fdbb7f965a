#!/usr/bin/env python3
"""Renders scripts/bench_vs_kafka.sh's measurements as Markdown tables.

Arguments: the throughput rows, the rebalance rows, the memory rows, the
share-consumer rows (TSV files written by the script; any may be empty),
the idle-measurement seconds and the rebalance topic's partition count.
Medians over the rounds; each cell also lists the rounds as value@load
(the 1-minute load average when the run started).
"""
import statistics
import sys
from collections import defaultdict


def read(path):
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(x, digits=0):
    if x != x:  # NaN
        return "-"
    return f"{x:,.{digits}f}"


def rounds(vals, loads, digits=0):
    return " / ".join(f"{fmt(v, digits)}@{l}" for v, l in zip(vals, loads))


def ratio(a, b):
    return "-" if not b or a != a or b != b else f"{a / b:.2f}"


rows, rb_rows, mem_rows, share_rows = (read(p) for p in sys.argv[1:5])
idle_secs, rb_partitions = sys.argv[5], sys.argv[6]
kafka = next((r[0] for r in mem_rows if r[0].startswith("apache-kafka")), "apache-kafka")
PHASES = ["produce", "classic", "consumer"]

if rows:
    # (broker, size, phase) -> list of rows ordered by round
    by = defaultdict(list)
    brokers = []
    for r in rows:
        by[(r[0], int(r[1]), r[3])].append(r)
        if r[0] not in brokers:
            brokers.append(r[0])
    sizes = sorted({int(r[1]) for r in rows})
    print("Throughput, records/s: median, then each round as value@load. produce: ProducerPerformance;")
    print("classic / consumer: ConsumerPerformance in a fresh group with that group.protocol, over the")
    print("whole run (nMsg.sec, includes joining the group) and over the fetch phase (fetch.nMsg.sec).")
    print()
    print("| broker | record | phase | records | rec/s median | rounds (rec/s@load) | fetch rec/s median | join ms median |")
    print("|---|---|---|---|---|---|---|---|")
    meds = {}
    for b in brokers:
        for size in sizes:
            for ph in PHASES:
                rs = by.get((b, size, ph))
                if not rs:
                    continue
                rps = [float(r[5]) for r in rs]
                loads = [r[11] for r in rs]
                fetch = [float(r[7]) for r in rs if r[7]]
                join = [float(r[8]) for r in rs if r[8]]
                cpu = [float(r[9]) / (int(r[4]) / 1e6) for r in rs]
                tool = [float(r[10]) / (int(r[4]) / 1e6) for r in rs]
                share = [float(r[10]) / max(float(r[9]) + float(r[10]), 1e-9) for r in rs]
                meds[(b, size, ph)] = dict(rps=med(rps), fetch=med(fetch), cpu=med(cpu),
                                           tool=med(tool), share=med(share), join=med(join),
                                           cpu_rounds=cpu)
                print(f"| {b} | {size} B | {ph} | {rs[0][4]} | **{fmt(med(rps))}** | {rounds(rps, loads)} | "
                      f"{fmt(med(fetch)) if fetch else '-'} | {fmt(med(join)) if join else '-'} |")
    print()
    ours = [b for b in brokers if b != kafka]
    if kafka in brokers and ours:
        print(f"Ratio sharestream / {kafka}, medians (records/s; for the consumers, whole run and fetch phase):")
        print()
        head = " | ".join(f"{ph} {s} B" for s in sizes for ph in PHASES)
        print(f"| broker | {head} |")
        print("|---|" + "---|" * (len(sizes) * len(PHASES)))
        for b in ours:
            cells = []
            for s in sizes:
                for ph in PHASES:
                    m, k = meds.get((b, s, ph)), meds.get((kafka, s, ph))
                    if not m or not k:
                        cells.append("-")
                    elif ph == "produce":
                        cells.append(ratio(m["rps"], k["rps"]))
                    else:
                        cells.append(f"{ratio(m['rps'], k['rps'])} (fetch {ratio(m['fetch'], k['fetch'])})")
            print(f"| {b} | " + " | ".join(cells) + " |")
        print()
    print("CPU-seconds (utime+stime from /proc) per million records over each phase, medians: the broker's,")
    print("its rounds, the load tool's (its JVM), and the tool's share of the two (above 0.5: the tool")
    print("burns more CPU than the broker and bounds the throughput on this machine).")
    print()
    print("| broker | record | phase | broker CPU s / M records | rounds | tool CPU s / M records | tool share |")
    print("|---|---|---|---|---|---|---|")
    for b in brokers:
        for size in sizes:
            for ph in PHASES:
                m = meds.get((b, size, ph))
                if m:
                    print(f"| {b} | {size} B | {ph} | **{m['cpu']:.2f}** | "
                          f"{' / '.join(f'{c:.2f}' for c in m['cpu_rounds'])} | {m['tool']:.2f} | {m['share']:.2f} |")
    print()
    if kafka in brokers and ours:
        print(f"Broker CPU per record, {kafka} / sharestream (medians; how many times more CPU Kafka spends):")
        print()
        head = " | ".join(f"{ph} {s} B" for s in sizes for ph in PHASES)
        print(f"| broker | {head} |")
        print("|---|" + "---|" * (len(sizes) * len(PHASES)))
        for b in ours:
            cells = []
            for s in sizes:
                for ph in PHASES:
                    m, k = meds.get((b, s, ph)), meds.get((kafka, s, ph))
                    cells.append(ratio(k["cpu"], m["cpu"]) if m and k else "-")
            print(f"| {b} | " + " | ".join(cells) + " |")
        print()

if mem_rows:
    print(f"| broker | RSS idle after start (MiB) | peak RSS, VmHWM, at the end (MiB) | idle CPU after start (ms/s, over {idle_secs} s) |")
    print("|---|---|---|---|")
    for r in mem_rows:
        print(f"| {r[0]} | {int(r[1]) / 1024:.0f} | {int(r[2]) / 1024:.0f} | {r[3]} |")
    print()

if rb_rows:
    print(f"Rebalances (RebalanceBench: 4 KafkaConsumers, one topic of {rb_partitions} partitions, members join one")
    print("after another; ms, median, then each round as value@load). first: the first member alone owns every")
    print("partition; join: from the 4th member's subscribe until the 4 own every partition exactly once;")
    print("leave: from the first member's close() until the 3 others own every partition exactly once.")
    print()
    print("| broker | protocol | first ms | join ms (4th member) | join rounds | leave ms (1 of 4) | leave rounds |")
    print("|---|---|---|---|---|---|---|")
    by = defaultdict(list)
    brokers = []
    for r in rb_rows:
        by[(r[0], r[2])].append(r)
        if r[0] not in brokers:
            brokers.append(r[0])
    modes = ["eager", "cooperative", "consumer"]
    label = {"eager": "classic, eager (range)", "cooperative": "classic, cooperative-sticky",
             "consumer": "consumer (KIP-848, uniform)"}
    rb_med = {}
    for b in brokers:
        for m in modes:
            rs = by.get((b, m))
            if not rs:
                continue
            loads = [r[6] for r in rs]
            first, join, leave = ([float(r[i]) for r in rs] for i in (3, 4, 5))
            rb_med[(b, m)] = (med(join), med(leave))
            print(f"| {b} | {label[m]} | {fmt(med(first))} | **{fmt(med(join))}** | {rounds(join, loads)} | "
                  f"**{fmt(med(leave))}** | {rounds(leave, loads)} |")
    print()
    ours = [b for b in brokers if b != kafka]
    if kafka in brokers and ours:
        print(f"Ratio sharestream / {kafka} of the median rebalance times (join, leave):")
        print()
        print("| broker | " + " | ".join(label[m] for m in modes) + " |")
        print("|---|---|---|---|")
        for b in ours:
            cells = []
            for m in modes:
                o, k = rb_med.get((b, m)), rb_med.get((kafka, m))
                cells.append(f"{ratio(o[0], k[0])}, {ratio(o[1], k[1])}" if o and k else "-")
            print(f"| {b} | " + " | ".join(cells) + " |")
        print()

if share_rows:
    print("Share consumers against Apache Kafka (topic bench-100-r1, each a fresh share group from the earliest offset):")
    print()
    print("| share consumer | records | records/s | MB/s | load |")
    print("|---|---|---|---|---|")
    for r in share_rows:
        print(f"| {r[0]} | {r[1]} | {fmt(float(r[2]))} | {r[3]} | {r[4]} |")
    by_tool = {}
    for r in share_rows:
        by_tool.setdefault(r[0], []).append(float(r[2]))
    print()
    print("| share consumer | runs | median records/s |")
    print("|---|---|---|")
    for tool, v in by_tool.items():
        print(f"| {tool} | {len(v)} | {fmt(med(v))} |")
    java = [v for t, v in by_tool.items() if t.startswith("java")]
    rust = [v for t, v in by_tool.items() if t.startswith("rust")]
    if java and rust:
        print()
        print(f"Ratio rust / java of the medians: {med(rust[0]) / max(med(java[0]), 1e-9):.2f}")
