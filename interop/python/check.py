"""Interoperability checks with confluent-kafka (librdkafka) for sharestream.

Each command runs one client scenario against --bootstrap and prints one line
``RESULT {json}`` that tests/suite/interop_embedded.rs asserts on. Exit status 1
when the scenario raised.

  check.py produce-txn --bootstrap B --topic T --txn-id ID --count N [--abort]
  check.py consume --bootstrap B --topic T --expect N      (read_committed, assign)
  check.py share-consume --bootstrap B --topic T --group G --produce N
  check.py share-close-pending --bootstrap B --topic T --group G --produce N
"""

import argparse
import json
import sys
import time
import traceback

import confluent_kafka as ck


def base(args):
    return {"bootstrap.servers": args.bootstrap, "socket.timeout.ms": 15000}


def produce_txn(args, out):
    conf = base(args)
    conf.update({"transactional.id": args.txn_id, "transaction.timeout.ms": 60000})
    p = ck.Producer(conf)
    p.init_transactions(30)
    out["init"] = True
    p.begin_transaction()
    errors = []
    for i in range(args.count):
        p.produce(args.topic, key=f"k{i}", value=f"{args.prefix}-{i}",
                  on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
    p.flush(30)
    if args.abort:
        p.abort_transaction(30)
    else:
        p.commit_transaction(30)
    out.update(sent=args.count, delivery_errors=len(errors),
               outcome="abort" if args.abort else "commit")


def consume(args, out):
    conf = base(args)
    conf.update({"group.id": "interop-unused", "isolation.level": "read_committed",
                 "enable.auto.commit": False})
    c = ck.Consumer(conf)
    md = c.list_topics(args.topic, timeout=20)
    parts = [ck.TopicPartition(args.topic, p, ck.OFFSET_BEGINNING)
             for p in md.topics[args.topic].partitions]
    c.assign(parts)
    values = []
    deadline = time.time() + args.timeout_ms / 1000
    while time.time() < deadline and len(values) < args.expect:
        m = c.poll(0.3)
        if m is None or m.error():
            continue
        values.append(m.value().decode())
    for m in c.consume(100, 0.5):
        if not m.error():
            values.append(m.value().decode())
    c.close()
    prefixes = {}
    for v in values:
        k = v.split("-", 1)[0]
        prefixes[k] = prefixes.get(k, 0) + 1
    out.update(mode="assign", received=len(values), by_prefix=prefixes)


def subscribe(args, out):
    """A consumer group: subscribe(), read, commit, close; a second consumer
    of the same group must then find nothing left (committed offsets)."""
    def one(timeout_s, want):
        conf = base(args)
        conf.update({"group.id": args.group, "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c = ck.Consumer(conf)
        c.subscribe([args.topic])
        values = []
        deadline = time.time() + timeout_s
        while time.time() < deadline and len(values) < want:
            m = c.poll(0.3)
            if m is None or m.error():
                continue
            values.append(m.value().decode())
        if values:
            c.commit(asynchronous=False)
        c.close()
        return values
    first = one(args.timeout_ms / 1000, args.expect)
    second = one(5, 1)
    out.update(mode="subscribe", received=len(first), after_commit=len(second))


def share_consume(args, out):
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    try:
        admin = AdminClient(base(args))
        res = ConfigResource(ResourceType.GROUP, args.group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([res]).values():
            f.result(20)
        out["group_config_set"] = True
    except Exception as e:  # the warm-up below still lets 'latest' work
        out.update(group_config_set=False, group_config_error=f"{type(e).__name__}: {e}")
    conf = base(args)
    conf.update({"group.id": args.group})
    c = ck.ShareConsumer(conf)
    c.subscribe([args.topic])
    values = []
    warm = time.time() + args.warmup_ms / 1000
    while time.time() < warm:
        for m in c.poll(0.2) or []:
            if not m.error():
                values.append(m.value().decode())
    if args.produce:
        p = ck.Producer(base(args))
        for i in range(args.produce):
            p.produce(args.topic, key=f"k{i}", value=f"{args.prefix}-{i}")
        p.flush(30)
    deadline = time.time() + args.timeout_ms / 1000
    expect = args.expect or args.produce
    while time.time() < deadline and len(values) < expect:
        for m in c.poll(0.3) or []:
            if not m.error():
                values.append(m.value().decode())
    c.commit_sync(15)
    c.close()
    out.update(mode="implicit", received=len(values), distinct=len(set(values)))


def share_close_pending(args, out):
    """Explicit acknowledgement: every record ACCEPTed, no commit, then
    close(), which sends the pending acknowledgements with the leave
    (librdkafka sends the leave heartbeat and the final ShareAcknowledge at
    once, on two connections). A second consumer of the group then polls:
    nothing may come back (after_close 0)."""
    out["group_config_set"] = set_earliest(args, out)
    conf = base(args)
    conf.update({"group.id": args.group, "share.acknowledgement.mode": "explicit"})
    c = ck.ShareConsumer(conf)
    c.subscribe([args.topic])
    p = ck.Producer(base(args))
    for i in range(args.produce):
        p.produce(args.topic, key=f"k{i}", value=f"{args.prefix}-{i}")
    p.flush(30)
    values = set()
    deadline = time.time() + args.timeout_ms / 1000
    while time.time() < deadline and len(values) < args.produce:
        for m in c.poll(0.3) or []:
            if not m.error():
                values.add(m.value().decode())
                c.acknowledge(m)
    c.close()
    out.update(received=len(values))
    c2 = ck.ShareConsumer(conf)
    c2.subscribe([args.topic])
    again = 0
    watch = time.time() + args.watch_ms / 1000
    while time.time() < watch:
        for m in c2.poll(0.3) or []:
            if not m.error():
                again += 1
                c2.acknowledge(m)
    c2.close()
    out.update(after_close=again)


def set_earliest(args, out):
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    try:
        admin = AdminClient(base(args))
        res = ConfigResource(ResourceType.GROUP, args.group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([res]).values():
            f.result(20)
        return True
    except Exception as e:
        out["group_config_error"] = f"{type(e).__name__}: {e}"
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["produce-txn", "consume", "subscribe", "share-consume",
                                        "share-close-pending"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--txn-id", default="py-txn")
    ap.add_argument("--group", default="py-share")
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--produce", type=int, default=0)
    ap.add_argument("--prefix", default="py")
    ap.add_argument("--abort", action="store_true")
    ap.add_argument("--timeout-ms", type=int, default=20000)
    ap.add_argument("--warmup-ms", type=int, default=3000)
    ap.add_argument("--watch-ms", type=int, default=12000)
    args = ap.parse_args()
    out = {"check": args.command, "client_version": ck.__version__,
           "librdkafka": ck.libversion()[0]}
    status = 0
    try:
        {"produce-txn": produce_txn, "consume": consume, "subscribe": subscribe,
         "share-consume": share_consume,
         "share-close-pending": share_close_pending}[args.command](args, out)
        out["ok"] = True
    except Exception as e:  # reported to the suite, which decides
        traceback.print_exc()
        out.update(ok=False, error=f"{type(e).__name__}: {e}")
        status = 1
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
