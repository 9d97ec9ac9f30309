#!/usr/bin/env python3
"""Security scenarios against a running kafluss: SASL gate, credential rotation, ACLs.

Usage: security.py SCENARIO CONFIG.json
CONFIG is {"bootstrap": "host:port", "admin": "http://host:port", "admin_auth": [user, pw] | null,
           "topic": "db.table", ...scenario keys}.

Scenarios (each step prints one JSON line {"step", "ok", "detail"}; exit status 0 even when a
step fails, the Rust side asserts every line):
  gate          a client that skips SASL: raw Metadata / Produce frames as the first request are
                answered by a close with no byte; a PLAINTEXT confluent-kafka producer delivers
                nothing; ApiVersions is still answered.
  rotate        producer A authenticates with the old password and produces; the credentials
                are rotated with CALL sys.set_cluster_configs; A produces again on its
                established connection; a new producer with the old password fails to
                authenticate; one with the new password produces.
  handshake-v0  kafka-python pinned to api_version 0.11 uses SaslHandshake v0 and raw token
                frames: the right password produces, a wrong one is refused.
  after-restart the old password fails, the new one produces (run after a restart).
  acl           authorizer on: see acl_steps() for the cases.
Every wait is bounded; every producer sets enable.idempotence=false.
"""

import base64
import json
import socket
import struct
import sys
import time
import urllib.error
import urllib.request

DELIVERY_TIMEOUT_S = 15
SOCKET_TIMEOUT_S = 10


def emit(step, ok, detail=""):
    print(json.dumps({"step": step, "ok": bool(ok), "detail": str(detail)[:2000]}), flush=True)


# ------------------------------------------------------------------------------- admin SQL


def sql(config, statement):
    request = urllib.request.Request(
        config["admin"] + "/v1/sql", data=statement.encode(), method="POST",
        headers={"Content-Type": "text/plain"},
    )
    if config.get("admin_auth"):
        user, password = config["admin_auth"]
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sql_ok(config, step, statement):
    status, body = sql(config, statement)
    emit(step, status == 200, f"HTTP {status}: {body[:300]}")
    return status == 200


# ------------------------------------------------------------------------------- confluent-kafka


class Client:
    """One confluent-kafka producer: one set of broker connections kept open across produce()."""

    def __init__(self, config, user=None, password=None, protocol=None):
        from confluent_kafka import Producer

        self.errors = []
        settings = {
            "bootstrap.servers": config["bootstrap"],
            "enable.idempotence": False,
            "acks": "all",
            "linger.ms": 1,
            "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
            "socket.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
            "allow.auto.create.topics": False,
            "retries": 0,
        }
        if user is not None:
            settings.update({
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": password,
            })
        elif protocol is not None:
            settings["security.protocol"] = protocol
        self.errors_text = ""
        self.producer = Producer(settings, error_cb=lambda e: self.errors.append(e))

    def produce(self, topic, count, tag):
        """Returns (delivered offsets, delivery error codes as names)."""
        offsets, failures = [], []

        def delivered(err, msg):
            if err is None:
                offsets.append(msg.offset())
            else:
                failures.append(err.name())

        for i in range(count):
            value = json.dumps({"tag": tag, "n": i}).encode()
            self.producer.produce(topic, value=value, on_delivery=delivered)
            self.producer.poll(0)
        self.producer.flush(DELIVERY_TIMEOUT_S + 5)
        return offsets, failures

    def auth_failed(self, wait_s=DELIVERY_TIMEOUT_S):
        """Waits (bounded) for librdkafka to report an authentication error."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self.producer.poll(0.2)
            if any(e.name() == "_AUTHENTICATION" for e in self.errors):
                return True
        return False

    def topic_visible(self, topic):
        """True/False from a named Metadata request; None when the request itself failed."""
        try:
            metadata = self.producer.list_topics(topic=topic, timeout=SOCKET_TIMEOUT_S)
        except Exception as e:
            self.errors_text = repr(e)
            return None
        one = metadata.topics.get(topic)
        return one is not None and one.error is None

    def all_topics(self):
        """Every topic of an all-topics Metadata request, or None when the request failed."""
        try:
            return sorted(self.producer.list_topics(timeout=SOCKET_TIMEOUT_S).topics)
        except Exception as e:  # reported by the step that asked
            self.errors_text = repr(e)
            return None


def expect_delivered(step, client, topic, count, tag):
    offsets, failures = client.produce(topic, count, tag)
    emit(step, len(offsets) == count and not failures,
         f"delivered {len(offsets)}/{count}, failures {failures[:3]}, client errors {[str(e) for e in client.errors[:3]]}")


def expect_refused(step, client, topic, count, tag, code):
    offsets, failures = client.produce(topic, count, tag)
    emit(step, not offsets and failures and all(f == code for f in failures),
         f"delivered {len(offsets)}, failures {sorted(set(failures))} (want {code})")


# ------------------------------------------------------------------------------- raw frames


def request_frame(api_key, version, correlation_id, body):
    client_id = b"kafluss-security-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_all_until_close(sock):
    """Everything the server sends until it closes (or the timeout fires: then None)."""
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
    except socket.timeout:
        return None


def raw_first_request(config, step, api_key, version, body):
    host, port = config["bootstrap"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(request_frame(api_key, version, 7, body))
        received = read_all_until_close(sock)
    emit(step, received == b"", f"server sent {received!r:.200} before closing" if received else
         ("closed with no response" if received == b"" else "connection left open"))


def raw_api_versions(config, step):
    host, port = config["bootstrap"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(request_frame(18, 0, 9, b""))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
        correlation_id, error_code = struct.unpack(">ih", body[:6])
    emit(step, correlation_id == 9 and error_code == 0, f"correlation {correlation_id}, error {error_code}")


# ------------------------------------------------------------------------------- scenarios


def gate(config):
    topic = config["topic"]
    raw_api_versions(config, "api_versions_served_before_auth")
    # Metadata v1 for all topics (topics array null).
    raw_first_request(config, "metadata_before_auth_closes_silently", 3, 1, struct.pack(">i", -1))
    # Produce v3: transactional_id null, acks 1, timeout, one topic, one partition, 9 junk bytes.
    name = topic.encode()
    produce_body = (struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
                    + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 9) + b"\x00" * 9)
    raw_first_request(config, "produce_before_auth_closes_silently", 0, 3, produce_body)
    # SaslAuthenticate before any handshake: ILLEGAL_SASL_STATE (34), then close.
    host, port = config["bootstrap"].rsplit(":", 1)
    token = b"\0writer\0" + config["password"].encode()
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(request_frame(36, 0, 11, struct.pack(">i", len(token)) + token))
        received = read_all_until_close(sock)
    code = struct.unpack(">h", received[8:10])[0] if received and len(received) >= 10 else None
    emit("authenticate_without_handshake_is_illegal", code == 34 and received is not None,
         f"error code {code}, {len(received or b'')} bytes then close={received is not None}")
    plaintext = Client(config, protocol="PLAINTEXT")
    offsets, failures = plaintext.produce(topic, 3, "plaintext")
    emit("plaintext_client_delivers_nothing", not offsets, f"delivered {len(offsets)}, failures {sorted(set(failures))}")


def rotate(config):
    topic, old, new = config["topic"], config["old_password"], config["new_password"]
    a = Client(config, "writer", old)
    expect_delivered("a_produces_with_old_password", a, topic, 5, "a-before")
    pairs = f"writer:{new}"
    if config.get("keep_users"):
        pairs += "," + config["keep_users"]
    sql_ok(config, "rotate_credentials",
           f"CALL sys.set_cluster_configs(config_pairs => 'security.sasl.plain.credentials', '{pairs}')")
    status, body = sql(config, "CALL sys.set_cluster_configs(config_pairs => "
                               "'security.sasl.plain.credentials', 'writer:Leak3dPw,orphanLeak')")
    emit("bad_credentials_refused_without_echo",
         status != 200 and "Leak3dPw" not in body and "orphanLeak" not in body, f"HTTP {status}: {body[:300]}")
    status, body = sql(config, "CALL sys.get_cluster_configs()")
    emit("get_cluster_configs_hides_secret", status == 200 and old not in body and new not in body,
         f"HTTP {status}: {body[:300]}")
    expect_delivered("a_keeps_producing_after_rotation", a, topic, 5, "a-after")
    stale = Client(config, "writer", old)
    emit("new_connection_with_old_password_fails", stale.auth_failed(),
         [str(e) for e in stale.errors[:3]])
    fresh = Client(config, "writer", new)
    expect_delivered("new_connection_with_new_password_produces", fresh, topic, 5, "fresh")


def after_restart(config):
    topic, old, new = config["topic"], config["old_password"], config["new_password"]
    stale = Client(config, "writer", old)
    emit("old_password_fails_after_restart", stale.auth_failed(), [str(e) for e in stale.errors[:3]])
    fresh = Client(config, "writer", new)
    expect_delivered("new_password_produces_after_restart", fresh, topic, 5, "restarted")


def acl(config):
    """Tables: acl.guarded (the target), acl.other, hidden.secret. Users: admin (super user),
    writer, reader. Rows that must never land are checked by the Rust side (scan counts)."""
    writer = lambda: Client(config, "writer", config["writer_password"])
    admin = Client(config, "admin", config["admin_password"])

    no_acl = writer()
    emit("no_describe_topic_looks_missing", no_acl.topic_visible("acl.guarded") is False, no_acl.errors_text)
    listed = no_acl.all_topics()
    emit("all_topics_hides_undescribable", listed is not None and "acl.guarded" not in listed,
         listed if listed is not None else no_acl.errors_text)

    sql_ok(config, "grant_describe", "CALL sys.add_acl(resource => 'acl.guarded', permission => 'ALLOW', "
                                     "principal => 'User:writer', operation => 'DESCRIBE', host => '*')")
    describe_only = writer()
    emit("describe_makes_topic_visible", describe_only.topic_visible("acl.guarded") is True, describe_only.errors_text)
    expect_refused("without_write_topic_authorization_failed", describe_only, "acl.guarded", 3, "no-write",
                   "TOPIC_AUTHORIZATION_FAILED")

    sql_ok(config, "grant_write_on_database", "CALL sys.add_acl(resource => 'acl', permission => 'ALLOW', "
                                              "principal => 'User:writer', operation => 'WRITE')")
    db_grant = writer()
    expect_delivered("database_grant_covers_table", db_grant, "acl.guarded", 4, "db-grant")
    expect_delivered("database_grant_covers_sibling_table", db_grant, "acl.other", 2, "db-grant-other")
    emit("write_implies_describe", db_grant.topic_visible("acl.other") is True, db_grant.errors_text)
    emit("other_database_still_hidden", db_grant.topic_visible("hidden.secret") is False, db_grant.errors_text)

    sql_ok(config, "deny_write_on_table", "CALL sys.add_acl(resource => 'acl.guarded', permission => 'DENY', "
                                          "principal => 'User:writer', operation => 'WRITE', host => '*')")
    denied = writer()
    expect_refused("deny_beats_allow", denied, "acl.guarded", 3, "denied", "TOPIC_AUTHORIZATION_FAILED")
    expect_delivered("deny_is_per_table", denied, "acl.other", 1, "still-allowed")

    status, body = sql(config, "CALL sys.list_acl(resource => 'ANY')")
    emit("list_acl_shows_entries", status == 200 and body.count("User:writer") >= 3, f"HTTP {status}: {body[:500]}")

    expect_delivered("super_user_bypasses", admin, "hidden.secret", 2, "admin")
    emit("super_user_sees_everything",
         admin.topic_visible("hidden.secret") is True and admin.topic_visible("acl.guarded") is True, admin.errors_text)

    sql_ok(config, "drop_deny", "CALL sys.drop_acl(resource => 'acl.guarded', permission => 'DENY', "
                                "principal => 'ANY', operation => 'ANY', host => 'ANY')")
    expect_delivered("drop_acl_restores_grant", writer(), "acl.guarded", 1, "after-drop")

    status, body = sql_with_auth(config, ("reader", config["reader_password"]),
                                 "CALL sys.add_acl(resource => 'CLUSTER', permission => 'ALLOW', "
                                 "principal => 'User:reader', operation => 'ALL')")
    emit("acl_procedures_need_alter_on_cluster", status != 200, f"HTTP {status}: {body[:300]}")


def sql_with_auth(config, auth, statement):
    return sql(dict(config, admin_auth=list(auth)), statement)


def handshake_v0(config):
    from kafka import KafkaProducer

    def producer(password):
        # api_version (0, 11): Produce v3 and SaslHandshake v0 (raw PLAIN token frames).
        return KafkaProducer(
            bootstrap_servers=config["bootstrap"], api_version=(0, 11, 0), security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username="writer", sasl_plain_password=password,
            enable_idempotence=False, max_block_ms=5000, request_timeout_ms=5000, retries=0,
        )

    good = producer(config["password"])
    try:
        offset = good.send(config["topic"], json.dumps({"tag": "v0", "n": 1}).encode()).get(timeout=DELIVERY_TIMEOUT_S).offset
        emit("handshake_v0_produces", offset == 0, f"offset {offset}")
    finally:
        good.close(timeout=5)
    try:
        bad = producer("not-the-password")
        bad.send(config["topic"], b"{}").get(timeout=DELIVERY_TIMEOUT_S)
        emit("handshake_v0_wrong_password_refused", False, "delivered")
    except Exception as e:
        emit("handshake_v0_wrong_password_refused", True, repr(e))


SCENARIOS = {"gate": gate, "handshake-v0": handshake_v0, "rotate": rotate, "after-restart": after_restart, "acl": acl}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
        print(f"usage: {sys.argv[0]} {{{'|'.join(SCENARIOS)}}} CONFIG.json", file=sys.stderr)
        return 2
    with open(sys.argv[2]) as f:
        config = json.load(f)
    try:
        SCENARIOS[sys.argv[1]](config)
    except Exception as e:  # a crash is a failed step, reported like the others
        emit(f"{sys.argv[1]}_crashed", False, repr(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
