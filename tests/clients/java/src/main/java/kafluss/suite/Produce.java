package kafluss.suite;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the Java client (kafka-clients) through a plan of cases written by the Rust suite: the
 * same plan and output format as tests/clients/produce.py (one JSON line per case on stdout).
 *
 * <p>Usage: {@code java -jar kafluss-java-producer.jar PLAN.json}, or {@code --version}. Every wait
 * is bounded. A plan with {@code "idempotent": false} turns idempotence off explicitly ({@code
 * enable.idempotence=false}); with {@code "idempotent": true} the producer has no such line and
 * runs with the client's default (idempotent since 3.0, with acks=all).
 */
public final class Produce {
  /** Bounds for one case, in milliseconds (as produce.py). */
  private static final int DELIVERY_TIMEOUT_MS = 20_000;

  private static final int METADATA_TIMEOUT_MS = 10_000;
  /** A case that must fail (unknown topic, wrong password) gives up sooner. */
  private static final int EXPECTED_FAILURE_TIMEOUT_MS = 5_000;

  private Produce() {}

  public static void main(String[] args) throws Exception {
    // Before any logger exists: the client's warnings go to stderr, the driver's JSON to stdout.
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
    if (args.length == 1 && args[0].equals("--version")) {
      System.out.println(
          "kafka-clients " + clientVersion() + ", Java " + System.getProperty("java.version"));
      return;
    }
    if (args.length == 5 && args[0].equals("--exactly-once")) {
      exactlyOnce(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
      return;
    }
    if (args.length == 4 && args[0].equals("--bench")) {
      bench(args[1], args[2], Path.of(args[3]));
      return;
    }
    if (args.length != 1) {
      System.err.println(
          "usage: java -jar kafluss-java-producer.jar PLAN.json | --version | --bench BOOTSTRAP TOPIC VALUES"
              + " | --exactly-once BOOTSTRAP TOPIC PARTITIONS COUNT");
      System.exit(2);
    }
    JsonObject plan =
        JsonParser.parseString(Files.readString(Path.of(args[0]), StandardCharsets.UTF_8)).getAsJsonObject();
    Gson gson = new Gson();
    for (JsonElement element : plan.getAsJsonArray("cases")) {
      System.out.println(gson.toJson(runCase(plan, element.getAsJsonObject())));
      System.out.flush();
    }
  }

  /**
   * The bench's stock-client mode (bench/scenarios/stock_client.py): every line of {@code values}
   * as one record value to {@code topic}, with the scenario's settings for every client (acks=1,
   * 5 ms linger, batches of up to 500 records of 100 B, idempotence off); prints {@code {"records":
   * N}} once every record is acknowledged, exits 1 if any failed.
   */
  private static void bench(String bootstrap, String topic, Path values) throws Exception {
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("acks", "1");
    config.put("linger.ms", "5");
    config.put("batch.size", String.valueOf(500 * 100));
    config.put("enable.idempotence", "false");
    config.put("buffer.memory", String.valueOf(256L << 20));
    java.util.concurrent.atomic.AtomicLong failed = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicReference<Exception> first = new java.util.concurrent.atomic.AtomicReference<>();
    long records = 0;
    try (KafkaProducer<byte[], byte[]> producer =
            new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
        java.io.BufferedReader in = Files.newBufferedReader(values, StandardCharsets.UTF_8)) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        producer.send(
            new ProducerRecord<>(topic, line.getBytes(StandardCharsets.UTF_8)),
            (metadata, error) -> {
              if (error != null) {
                failed.incrementAndGet();
                first.compareAndSet(null, error);
              }
            });
        records++;
      }
      producer.flush();
    }
    if (failed.get() > 0) {
      System.err.println(failed.get() + " of " + records + " records failed, first: " + describe(first.get()));
      System.exit(1);
    }
    System.out.println("{\"records\": " + records + "}");
  }

  /**
   * The exactly-once tests' producer (tests/tests/exactly_once.rs): the client's default settings
   * (idempotent, acks=all, retries without limit within the default 120 s delivery timeout), one
   * record per id 0..count-1, its value the id in decimal, to partition id % partitions, paced at
   * 10 records every 10 ms so that the test's faults fall in the middle of the run. Prints one
   * JSON line: {"acked": [ids acknowledged, in acknowledgement order], "failed": N, "errors":
   * [the first few failures]}.
   */
  private static void exactlyOnce(String bootstrap, String topic, int partitions, int count)
      throws Exception {
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    List<Long> acked = java.util.Collections.synchronizedList(new ArrayList<>());
    List<String> errors = java.util.Collections.synchronizedList(new ArrayList<>());
    java.util.concurrent.atomic.AtomicLong failed = new java.util.concurrent.atomic.AtomicLong();
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
      // Several topics (comma-separated, e.g. both names of one table): record id goes to the
      // id % n-th.
      String[] topics = topic.split(",");
      for (int id = 0; id < count; id++) {
        final long record = id;
        producer.send(
            new ProducerRecord<>(
                topics[id % topics.length],
                id % partitions,
                null,
                String.valueOf(id).getBytes(StandardCharsets.UTF_8)),
            (metadata, error) -> {
              if (error == null) {
                acked.add(record);
              } else {
                failed.incrementAndGet();
                if (errors.size() < 5) {
                  errors.add(last(describe(error), 300));
                }
              }
            });
        if (id % 10 == 9) {
          Thread.sleep(10);
        }
      }
      producer.flush();
    }
    Map<String, Object> result = new LinkedHashMap<>();
    synchronized (acked) {
      result.put("acked", new ArrayList<>(acked));
    }
    result.put("failed", failed.get());
    result.put("errors", new ArrayList<>(errors));
    System.out.println(new Gson().toJson(result));
  }

  /** The version kafka-clients reports about itself (its jar's kafka/kafka-version.properties). */
  private static String clientVersion() throws java.io.IOException {
    Properties version = new Properties();
    try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      if (in == null) {
        return "unknown";
      }
      version.load(in);
    }
    return version.getProperty("version", "unknown");
  }

  private static Map<String, Object> runCase(JsonObject plan, JsonObject testCase) {
    Map<String, Object> result = new LinkedHashMap<>();
    boolean expectError = testCase.has("expect_error") && testCase.get("expect_error").getAsBoolean();
    result.put("case", testCase.get("name").getAsString());
    result.put("ok", false);
    result.put("detail", "");
    result.put("offsets", new ArrayList<Long>());
    result.put("started_ms", System.currentTimeMillis());
    try {
      String kind = testCase.get("kind").getAsString();
      if (kind.equals("metadata")) {
        List<Integer> partitions = metadata(plan, testCase);
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < testCase.get("partitions").getAsInt(); i++) {
          expected.add(i);
        }
        result.put("ok", partitions.equals(expected));
        result.put("detail", "partitions " + partitions + ", expected " + expected);
      } else if (kind.equals("produce")) {
        result.put("offsets", produce(plan, testCase, expectError));
        result.put("ok", !expectError);
        result.put("detail", expectError ? "delivered although an error was expected" : "delivered");
      } else {
        result.put("detail", "unknown case kind " + kind);
      }
    } catch (Exception error) {
      result.put("ok", expectError);
      result.put("detail", last(describe(error), 1000));
      if (!expectError) {
        StringWriter trace = new StringWriter();
        error.printStackTrace(new PrintWriter(trace));
        System.err.print(trace);
      }
    }
    result.put("finished_ms", System.currentTimeMillis());
    return result;
  }

  /** The exception and its causes, each with its class name (the suite looks for "auth"). */
  private static String describe(Throwable error) {
    StringBuilder text = new StringBuilder();
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      if (text.length() > 0) {
        text.append(" <- ");
      }
      text.append(cause.getClass().getName()).append(": ").append(cause.getMessage());
      if (cause.getCause() == cause) {
        break;
      }
    }
    return text.toString();
  }

  private static String last(String text, int max) {
    return text.length() <= max ? text : text.substring(text.length() - max);
  }

  private static Properties common(JsonObject plan) {
    Properties config = new Properties();
    config.put("bootstrap.servers", plan.get("bootstrap").getAsString());
    JsonElement sasl = plan.get("sasl");
    if (sasl != null && !sasl.isJsonNull()) {
      JsonObject user = sasl.getAsJsonObject();
      config.put("security.protocol", "SASL_PLAINTEXT");
      config.put("sasl.mechanism", "PLAIN");
      config.put(
          "sasl.jaas.config",
          "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
              + jaasQuoted(user.get("username").getAsString())
              + "\" password=\""
              + jaasQuoted(user.get("password").getAsString())
              + "\";");
    }
    return config;
  }

  /** The plan's {@code idempotent}: false (or missing) turns idempotence off explicitly. */
  private static boolean idempotent(JsonObject plan) {
    JsonElement idempotent = plan.get("idempotent");
    return idempotent != null && !idempotent.isJsonNull() && idempotent.getAsBoolean();
  }

  private static String jaasQuoted(String text) {
    return text.replace("\\", "\\\\").replace("\"", "\\\"");
  }

  private static KafkaProducer<byte[], byte[]> producer(JsonObject plan, JsonObject testCase, boolean expectError) {
    Properties config = common(plan);
    if (!idempotent(plan)) {
      config.put("enable.idempotence", "false");
    }
    config.put("linger.ms", "5");
    int deliveryMs = expectError ? EXPECTED_FAILURE_TIMEOUT_MS : DELIVERY_TIMEOUT_MS;
    // delivery.timeout.ms must be at least linger.ms + request.timeout.ms.
    config.put("request.timeout.ms", String.valueOf(deliveryMs / 2));
    config.put("delivery.timeout.ms", String.valueOf(deliveryMs));
    config.put("max.block.ms", String.valueOf(Math.min(METADATA_TIMEOUT_MS, deliveryMs)));
    if (testCase != null) {
      int acks = testCase.get("acks").getAsInt();
      config.put("acks", acks == -1 ? "all" : String.valueOf(acks));
      config.put("compression.type", testCase.get("compression").getAsString());
    }
    return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
  }

  private static List<Integer> metadata(JsonObject plan, JsonObject testCase) throws Exception {
    String topic = testCase.get("topic").getAsString();
    List<Integer> partitions = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = producer(plan, null, false)) {
      for (PartitionInfo info : producer.partitionsFor(topic)) {
        partitions.add(info.partition());
      }
    }
    partitions.sort(null);
    Properties config = common(plan);
    config.put("request.timeout.ms", String.valueOf(METADATA_TIMEOUT_MS));
    config.put("default.api.timeout.ms", String.valueOf(METADATA_TIMEOUT_MS));
    try (Admin admin = Admin.create(config)) {
      Set<String> every = admin.listTopics().names().get(METADATA_TIMEOUT_MS, TimeUnit.MILLISECONDS);
      if (!every.contains(topic)) {
        throw new IllegalStateException(topic + " missing from all-topics metadata: " + every);
      }
    }
    return partitions;
  }

  private static byte[] decode(JsonElement b64) {
    return b64 == null || b64.isJsonNull() ? null : Base64.getDecoder().decode(b64.getAsString());
  }

  private static Integer optionalInt(JsonObject object, String name) {
    JsonElement element = object.get(name);
    return element == null || element.isJsonNull() ? null : element.getAsInt();
  }

  private static Long optionalLong(JsonObject object, String name) {
    JsonElement element = object.get(name);
    return element == null || element.isJsonNull() ? null : element.getAsLong();
  }

  private static List<Long> produce(JsonObject plan, JsonObject testCase, boolean expectError) throws Exception {
    String topic = testCase.get("topic").getAsString();
    List<Future<RecordMetadata>> futures = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = producer(plan, testCase, expectError)) {
      for (JsonElement element : testCase.getAsJsonArray("records")) {
        JsonObject record = element.getAsJsonObject();
        List<org.apache.kafka.common.header.Header> headers = new ArrayList<>();
        JsonElement headerList = record.get("headers");
        if (headerList != null && !headerList.isJsonNull()) {
          for (JsonElement header : headerList.getAsJsonArray()) {
            JsonArray pair = header.getAsJsonArray();
            headers.add(new RecordHeader(pair.get(0).getAsString(), decode(pair.get(1))));
          }
        }
        futures.add(
            producer.send(
                new ProducerRecord<>(
                    topic,
                    optionalInt(record, "partition"),
                    optionalLong(record, "timestamp"),
                    decode(record.get("key")),
                    decode(record.get("value")),
                    headers)));
      }
      producer.flush();
      List<Long> offsets = new ArrayList<>();
      for (Future<RecordMetadata> future : futures) {
        RecordMetadata metadata = future.get(DELIVERY_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        // With acks=0 the client learns no offset and reports -1.
        offsets.add(metadata.hasOffset() ? metadata.offset() : null);
      }
      return offsets;
    }
  }
}
