"""Sends the same records with stock clients (kcat, confluent-kafka, and with --java / --franz-go
the Java client and franz-go of tests/clients) to several endpoints in alternation and reports
records/s and server CPU per million records, plus the first endpoint's ratios to the others.
Used by stock-client.sh; prints a table and writes JSON.

  stock_client.py --topic T --file values.jsonl --rounds 2 --out r.json \
      [--java "java -jar .../kafluss-java-producer.jar"] [--franz-go .../kafluss-go-producer] \
      --endpoint kafluss=127.0.0.1:9092=1234 --endpoint tansu=127.0.0.1:9093=5678
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")
COMMON = {"acks": "1", "linger.ms": "5", "batch.num.messages": "500", "enable.idempotence": "false"}


def cpu_seconds(pid):
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except OSError:
        return None


def steal_seconds():
    """The machine's steal time so far (/proc/stat), CPU seconds over all its CPUs: time a
    hypervisor kept them from work they had. None where the file does not say."""
    try:
        with open("/proc/stat") as f:
            line = next(line for line in f if line.startswith("cpu "))
        return int(line.split()[8]) / TICKS
    except (OSError, StopIteration, IndexError, ValueError):
        return None


KCAT_ENV = dict(os.environ)


def run_kcat(addr, topic, path, count):
    args = ["kcat", "-P", "-b", addr, "-t", topic, "-l", path]
    for key, value in COMMON.items():
        args += ["-X", f"{key}={value}"]
    args += ["-X", "queue.buffering.max.messages=1000000"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, env=KCAT_ENV)
    if done.returncode != 0:
        raise RuntimeError(f"kcat to {addr} failed ({done.returncode}): {done.stderr[-2000:]}")
    return count


def run_confluent(addr, topic, path, count):
    import confluent_kafka

    conf = {"bootstrap.servers": addr, "queue.buffering.max.messages": 1000000, **COMMON}
    producer = confluent_kafka.Producer(conf)
    failures = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(str(err))

    with open(path, "rb") as f:
        for line in f:
            while True:
                try:
                    producer.produce(topic, line.rstrip(b"\n"), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
    left = producer.flush(120)
    if left or failures:
        raise RuntimeError(f"confluent-kafka to {addr}: {left} undelivered, failures {failures[:3]}")
    return count


def run_driver(command, name, addr, topic, path, count):
    """The Java or Go producer of tests/clients in its --bench mode: the same records and settings
    (acks=1, 5 ms linger, batches of up to 500, idempotence off); it prints {"records": N}."""
    done = subprocess.run(command + [addr, topic, path], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{name} to {addr} failed ({done.returncode}): {done.stderr[-2000:]}")
    sent = json.loads(done.stdout.strip().splitlines()[-1])["records"]
    if sent != count:
        raise RuntimeError(f"{name} to {addr} sent {sent} of {count} records")
    return count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--topic", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--endpoint", action="append", required=True, help="name=host:port=pid")
    ap.add_argument("--kcat-librdkafka", help="run kcat on this librdkafka.so.1 instead of the system's")
    ap.add_argument("--java", help="command that starts the Java producer (java -jar ...jar)")
    ap.add_argument("--franz-go", help="the Go producer binary (kafluss-go-producer)")
    ap.add_argument("--clients", help="space-separated subset of kcat, confluent-kafka, java, franz-go to run")
    a = ap.parse_args()
    clients = [("kcat", run_kcat), ("confluent-kafka", run_confluent)]
    if a.java:
        command = shlex.split(a.java) + ["--bench"]
        clients.append(("java", lambda *args, c=command: run_driver(c, "java", *args)))
    if a.franz_go:
        command = [a.franz_go, "-client", "franz-go", "-bench"]
        clients.append(("franz-go", lambda *args, c=command: run_driver(c, "franz-go", *args)))
    if a.clients:
        wanted = a.clients.split()
        unknown = [c for c in wanted if c not in {"kcat", "confluent-kafka", "java", "franz-go"}]
        if unknown:
            ap.error(f"unknown clients {unknown}: choose from kcat, confluent-kafka, java, franz-go")
        clients = [(name, fn) for name, fn in clients if name in wanted]
    if a.kcat_librdkafka:
        # kcat links librdkafka.so.1 dynamically; a directory holding that name overrides it.
        libdir = os.path.join(os.path.dirname(a.out), "kcat-librdkafka")
        os.makedirs(libdir, exist_ok=True)
        link = os.path.join(libdir, "librdkafka.so.1")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(a.kcat_librdkafka, link)
        KCAT_ENV["LD_LIBRARY_PATH"] = libdir
    version = subprocess.run(["kcat", "-V"], capture_output=True, text=True, env=KCAT_ENV).stdout
    print("kcat:", next((line.strip() for line in version.splitlines() if "librdkafka" in line), "?"), flush=True)
    with open(a.file, "rb") as f:
        count = sum(1 for _ in f)
    endpoints = []
    for spec in a.endpoint:
        name, addr, pid = spec.split("=")
        endpoints.append((name, addr, int(pid) if pid else None))
    subject = endpoints[0][0]
    runs = []
    for round_ in range(a.rounds):
        order = endpoints if round_ % 2 == 0 else list(reversed(endpoints))
        for client, fn in clients:
            for name, addr, pid in order:
                before = cpu_seconds(pid)
                steal_before = steal_seconds()
                start = time.perf_counter()
                try:
                    fn(addr, a.topic, a.file, count)
                except RuntimeError as e:
                    # A client that a reference cannot serve is recorded and left out of the
                    # ratios; failing against the subject (kafluss) fails the scenario.
                    if name == subject:
                        raise
                    runs.append({"client": client, "endpoint": name, "round": round_, "failed": str(e)[:500]})
                    print(f"{client:<16} {name:<14} round {round_}  failed: {str(e)[:300]}", flush=True)
                    continue
                elapsed = time.perf_counter() - start
                after = cpu_seconds(pid)
                cpu = after - before if before is not None and after is not None else None
                steal_after = steal_seconds()
                steal = steal_after - steal_before if steal_before is not None and steal_after is not None else None
                runs.append({
                    "client": client, "endpoint": name, "round": round_, "records": count,
                    "seconds": round(elapsed, 3), "records_per_s": round(count / elapsed, 1),
                    "server_cpu_s_per_million_records": round(cpu * 1e6 / count, 3) if cpu is not None else None,
                    "steal_s": round(steal, 3) if steal is not None else None,
                })
                print(f"{client:<16} {name:<14} round {round_}  {count / elapsed:>12.0f} rec/s  "
                      f"server CPU {runs[-1]['server_cpu_s_per_million_records']} s/Mrec  "
                      f"steal {runs[-1]['steal_s']} s", flush=True)
    totals = {}
    for run in runs:
        if "failed" in run:
            continue
        key = (run["client"], run["endpoint"])
        records, seconds = totals.get(key, (0, 0.0))
        totals[key] = (records + run["records"], seconds + run["seconds"])
    ratios = []
    for client, _ in clients:
        mine = totals[(client, subject)]
        for name, _, _ in endpoints[1:]:
            theirs = totals.get((client, name))
            if theirs is None:
                print(f"overall ratio {client} {subject}/{name}: none ({name} failed every run)")
                continue
            r = (mine[0] / mine[1]) / (theirs[0] / theirs[1])
            ratios.append({"client": client, "subject": subject, "reference": name, "records_per_s": round(r, 3)})
            print(f"overall ratio {client} {subject}/{name}: throughput {r:.3f}")
    with open(a.out, "w") as f:
        json.dump({"kcat": version.strip(), "clients": [c for c, _ in clients], "runs": runs, "ratios": ratios},
                  f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
