#!/usr/bin/env node
// Drive kafkajs through a plan of cases written by the Rust suite (same plan and output format as
// produce.py: one JSON line per case on stdout). Usage: node produce.mjs PLAN.json
//
// kafkajs ships gzip only; snappy, lz4 and zstd come from pure-JS/WASM codecs registered below,
// as a kafkajs user would register them. Every wait is bounded. A plan with "idempotent": true
// asks for an idempotent producer (`idempotent: true`, one request in flight, and the 5 retries a
// non-idempotent kafkajs producer has by default instead of the idempotent default of
// Number.MAX_SAFE_INTEGER, so a case that must fail ends); otherwise idempotence stays off
// (`idempotent: false`, kafkajs's default).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const lz4 = require('lz4js');
const zstd = require('@bokuweb/zstd-wasm');

const DELIVERY_TIMEOUT_MS = 20000;
const ZSTD_LEVEL = 3;

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    return Buffer.from(lz4.compress(encoder.buffer));
  },
  async decompress(buffer) {
    return Buffer.from(lz4.decompress(buffer));
  },
});
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    await zstd.init();
    return Buffer.from(zstd.compress(encoder.buffer, ZSTD_LEVEL));
  },
  async decompress(buffer) {
    await zstd.init();
    return Buffer.from(zstd.decompress(buffer));
  },
});

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

function decode(b64) {
  return b64 === null || b64 === undefined ? null : Buffer.from(b64, 'base64');
}

function kafkaFor(plan) {
  const config = {
    clientId: 'kafluss-suite',
    brokers: [plan.bootstrap],
    connectionTimeout: 5000,
    requestTimeout: DELIVERY_TIMEOUT_MS / 2,
    retry: { retries: 1, initialRetryTime: 200, maxRetryTime: 1000 },
    logLevel: logLevel.NOTHING,
  };
  if (plan.sasl) {
    config.ssl = false;
    config.sasl = { mechanism: 'plain', username: plan.sasl.username, password: plan.sasl.password };
  }
  return new Kafka(config);
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function metadata(plan, testCase) {
  const admin = kafkaFor(plan).admin();
  await withTimeout(admin.connect(), DELIVERY_TIMEOUT_MS, 'admin connect');
  try {
    const one = await withTimeout(
      admin.fetchTopicMetadata({ topics: [testCase.topic] }),
      DELIVERY_TIMEOUT_MS,
      'metadata',
    );
    const topic = one.topics.find((t) => t.name === testCase.topic);
    if (!topic) throw new Error(`metadata for ${testCase.topic} missing: ${JSON.stringify(one)}`);
    const every = await withTimeout(admin.listTopics(), DELIVERY_TIMEOUT_MS, 'list topics');
    if (!every.includes(testCase.topic)) {
      throw new Error(`${testCase.topic} missing from all-topics metadata: ${JSON.stringify(every)}`);
    }
    return topic.partitions.map((p) => p.partitionId).sort((a, b) => a - b);
  } finally {
    await admin.disconnect();
  }
}

function toMessage(record) {
  const message = { key: decode(record.key), value: decode(record.value) };
  if (record.headers && record.headers.length > 0) {
    // A name given twice becomes an array: kafkajs then sends one header per element, in order.
    const headers = {};
    for (const [name, value] of record.headers) {
      const bytes = decode(value);
      if (name in headers) {
        headers[name] = [].concat(headers[name], [bytes]);
      } else {
        headers[name] = bytes;
      }
    }
    message.headers = headers;
  }
  if (record.timestamp !== null && record.timestamp !== undefined) {
    message.timestamp = String(record.timestamp);
  }
  if (record.partition !== null && record.partition !== undefined) {
    message.partition = record.partition;
  }
  return message;
}

async function produce(plan, testCase) {
  const options = { idempotent: Boolean(plan.idempotent), allowAutoTopicCreation: false };
  if (options.idempotent) Object.assign(options, { maxInFlightRequests: 1, retry: { retries: 5 } });
  const producer = kafkaFor(plan).producer(options);
  await withTimeout(producer.connect(), DELIVERY_TIMEOUT_MS, 'producer connect');
  try {
    const answer = await withTimeout(
      producer.send({
        topic: testCase.topic,
        messages: testCase.records.map(toMessage),
        acks: testCase.acks,
        compression: COMPRESSION[testCase.compression],
        timeout: DELIVERY_TIMEOUT_MS / 2,
      }),
      DELIVERY_TIMEOUT_MS,
      'send',
    );
    for (const partition of answer) {
      if (partition.errorCode !== 0) throw new Error(`partition error ${JSON.stringify(partition)}`);
    }
    return answer.map((p) => Number(p.baseOffset ?? -1));
  } finally {
    await producer.disconnect();
  }
}

async function runCase(plan, testCase) {
  const result = { case: testCase.name, ok: false, detail: '', offsets: [], started_ms: Date.now() };
  try {
    if (testCase.kind === 'metadata') {
      const partitions = await metadata(plan, testCase);
      const expected = [...Array(testCase.partitions).keys()];
      result.ok = JSON.stringify(partitions) === JSON.stringify(expected);
      result.detail = `partitions ${JSON.stringify(partitions)}, expected ${JSON.stringify(expected)}`;
    } else if (testCase.kind === 'produce') {
      if (COMPRESSION[testCase.compression] === undefined) {
        throw new Error(`unknown compression ${testCase.compression}`);
      }
      result.offsets = await produce(plan, testCase);
      result.ok = !testCase.expect_error;
      result.detail = result.ok ? 'delivered' : 'delivered although an error was expected';
    } else {
      result.detail = `unknown case kind ${testCase.kind}`;
    }
  } catch (error) {
    result.ok = Boolean(testCase.expect_error);
    result.detail = `${error.name}: ${error.message}`.slice(-1000);
    if (!result.ok) process.stderr.write(`${error.stack}\n`);
  }
  result.finished_ms = Date.now();
  return result;
}

async function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: node produce.mjs PLAN.json\n');
    process.exit(2);
  }
  const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  for (const testCase of plan.cases) {
    process.stdout.write(`${JSON.stringify(await runCase(plan, testCase))}\n`);
  }
}

await main();
