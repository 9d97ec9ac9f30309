"""librdkafka's mock cluster as a long-running reference endpoint for the bench scenarios.

Creates a mock cluster (rd_kafka_mock_cluster_new, through ctypes) inside this process, prints
    BOOTSTRAP <host:port>[,<host:port>...] lib <path of the librdkafka used>
and serves until SIGTERM or SIGINT, or until --seconds have passed.

librdkafka is, in this order: the file named by $LIBRDKAFKA, the copy bundled in the
confluent-kafka wheel of this Python, the system's librdkafka.so.1. When none loads it says what
it tried and exits with status 1.
"""

import argparse
import ctypes
import glob
import os
import signal
import sys
import time


def librdkafka_candidates():
    if os.environ.get("LIBRDKAFKA"):
        yield os.environ["LIBRDKAFKA"]
        return
    try:
        import confluent_kafka
    except ImportError:
        pass
    else:
        wheel = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
        yield from sorted(glob.glob(os.path.join(wheel, "confluent_kafka.libs", "librdkafka*.so*")))
    yield "librdkafka.so.1"


def load_librdkafka():
    tried = []
    for path in librdkafka_candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as error:
            tried.append(f"{path}: {error}")
    sys.exit(
        "mock_cluster.py: no librdkafka could be loaded (set LIBRDKAFKA=/path/to/librdkafka.so.1, "
        "or run this with a Python that has confluent-kafka installed); tried:\n  "
        + "\n  ".join(tried)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the mock cluster")
    parser.add_argument("--seconds", type=float, default=600, help="stop after this long")
    args = parser.parse_args()

    stop = False

    def request_stop(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    lib, path = load_librdkafka()
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]

    errstr = ctypes.create_string_buffer(512)
    # The mock cluster lives in a client handle; rd_kafka_new takes ownership of the conf.
    handle = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, len(errstr))  # RD_KAFKA_PRODUCER
    if not handle:
        sys.exit(f"mock_cluster.py: rd_kafka_new failed: {errstr.value.decode()}")
    cluster = lib.rd_kafka_mock_cluster_new(handle, args.brokers)
    if not cluster:
        lib.rd_kafka_destroy(handle)
        sys.exit("mock_cluster.py: rd_kafka_mock_cluster_new failed")
    bootstraps = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()
    print("BOOTSTRAP", bootstraps, "lib", path, flush=True)

    started = time.monotonic()
    while not stop and time.monotonic() - started < args.seconds:
        time.sleep(0.2)
    lib.rd_kafka_mock_cluster_destroy(cluster)
    lib.rd_kafka_destroy(handle)
    print("mock cluster stopped", flush=True)


if __name__ == "__main__":
    main()
