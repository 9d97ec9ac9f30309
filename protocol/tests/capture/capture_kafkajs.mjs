#!/usr/bin/env node
// kafkajs producer for capture.py: sends the same records with one codec to 127.0.0.1:PORT.
// Usage: node capture_kafkajs.mjs PORT CODEC. Uses the kafkajs install of tests/clients
// (kafkajs ships gzip only; snappy, lz4 and zstd codecs are registered as a user would).

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', '..', '..', 'tests', 'clients', 'package.json'));
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const lz4 = require('lz4js');
const zstd = require('@bokuweb/zstd-wasm');

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
    return Buffer.from(zstd.compress(encoder.buffer, 3));
  },
  async decompress(buffer) {
    await zstd.init();
    return Buffer.from(zstd.decompress(buffer));
  },
});

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

const [port, codec] = process.argv.slice(2);
const note = 'lorem ipsum dolor sit amet '.repeat(8);
const messages = [];
for (let i = 0; i < 10; i++) {
  const headers = i % 2 === 0 ? { trace: Buffer.from(`t-${i}`), kind: Buffer.from('order') } : undefined;
  messages.push({
    key: i === 3 ? null : Buffer.from(`key-${i}`),
    value: i === 4 ? null : Buffer.from(`{"order_id":${i},"amount":"12.30","note":"${note}"}`),
    headers,
    timestamp: String(1700000000000 + i),
    partition: 0,
  });
}

const kafka = new Kafka({
  clientId: 'capture-kafkajs',
  brokers: [`127.0.0.1:${port}`],
  connectionTimeout: 5000,
  requestTimeout: 10000,
  retry: { retries: 1 },
  logLevel: logLevel.NOTHING,
});
const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: false });
await producer.connect();
await producer.send({ topic: 'capture', acks: 1, compression: CODECS[codec], messages });
await producer.disconnect();
