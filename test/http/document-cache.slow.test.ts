/**
 * Parsed documents are kept within a byte bound, a tenant within a quarter of it: one key
 * sending distinct documents can neither grow the heap past the bound nor evict another
 * tenant's documents.
 */

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parse } from 'graphql';
import { beforeAll, describe, expect, test } from 'vitest';
import { DocumentCache, estimatedBytes, tokenCount } from '../../src/http/document-cache.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;
const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const MiB = 1024 * 1024;
const flooder = 'flooding-read-key-0123456789';
const neighbour = 'neighbour-write-key-0123456789';

/** A document of about 3 KB: 15 aliased runs with their budgets and events (ids that are refused, so nothing is read). */
const large = (i: number) =>
  `query Flood${i} { ${Array.from(
    { length: 15 },
    (_, k) =>
      `r${k}: run(id: "no such id ${i} ${k}") { id task status version createdAt budget { cap spent remaining } events(first: 10) { edges { cursor node { seq type payload createdAt } } pageInfo { hasNextPage endCursor } } }`,
  ).join(' ')} }`;

describe('the cache on its own', () => {
  const doc = parse('{ viewer { tenant } }');
  const text = (n: number, length = 1000) => `#${n}`.padEnd(length, ' ');
  const size = (length = 1000) => estimatedBytes(text(0, length), tokenCount(doc));

  test('a tenant holds at most a quarter of the bound, and makes room from its own documents', () => {
    const cache = new DocumentCache(40 * size());
    for (let i = 0; i < 3; i++) cache.set('other', text(i), doc);
    for (let i = 0; i < 100; i++) cache.set('flood', text(i), doc);
    expect(cache.bytesOf('flood')).toBeLessThanOrEqual(cache.tenantMaxBytes);
    expect(cache.size).toBe(3 + 10);
    for (let i = 0; i < 3; i++) expect(cache.has('other', text(i))).toBe(true);
    // The newest stay, the oldest went.
    expect(cache.has('flood', text(99))).toBe(true);
    expect(cache.has('flood', text(0))).toBe(false);
  });

  test('when the whole is full, the tenant holding the most gives way', () => {
    const cache = new DocumentCache(8 * size());
    for (const tenant of ['a', 'b', 'c', 'd']) for (let i = 0; i < 2; i++) cache.set(tenant, text(i), doc);
    expect(cache.bytes).toBe(cache.maxBytes);
    cache.set('e', text(0), doc);
    expect(cache.bytes).toBeLessThanOrEqual(cache.maxBytes);
    expect(cache.has('e', text(0))).toBe(true);
    expect(cache.size).toBe(8);
  });

  test('a document larger than a tenant may hold is not kept', () => {
    const cache = new DocumentCache(4 * size());
    cache.set('a', text(1, 4 * size()), doc);
    expect(cache.size).toBe(0);
    expect(cache.counts.tooLarge).toBe(1);
  });

  test('a document that empties its own tenant to make room is counted to it, and the counts stay whole', () => {
    // Each document takes more than half of a tenant's share: the next one must evict it first.
    const share = 8 * size();
    const cache = new DocumentCache(4 * share);
    const big = (n: number) => text(n, Math.floor((0.6 * share - size(0)) / 2));
    for (let i = 0; i < 50; i++) {
      cache.set('a', big(i), doc);
      cache.set('b', text(i), doc);
      expect(cache.bytes).toBe(cache.bytesOf('a') + cache.bytesOf('b'));
      expect(cache.bytes).toBeLessThanOrEqual(cache.maxBytes);
      expect(cache.has('a', big(i))).toBe(true);
    }
    expect(cache.bytesOf('a')).toBeLessThanOrEqual(cache.tenantMaxBytes);
  });

  test('a hit moves a document to the back of its tenant`s line', () => {
    const cache = new DocumentCache(8 * size());
    cache.set('a', text(1), doc);
    cache.set('a', text(2), doc);
    expect(cache.get('a', text(1))).toBe(doc);
    cache.set('a', text(3), doc);
    expect(cache.has('a', text(1))).toBe(true);
    expect(cache.has('a', text(2))).toBe(false);
  });
});

describe('a server flooded with distinct documents by one key', () => {
  let api: TestServer;
  const bound = 8 * MiB;

  beforeAll(async () => {
    api = await startTestServer({
      RUNPLANE_API_KEYS: `${flooder}=flood:read,${neighbour}=neighbour`,
      RUNPLANE_DOCUMENT_CACHE_BYTES: String(bound),
    });
  });

  test('keeps the heap under the bound and the other tenant`s documents cached', async () => {
    const mine = 'query Mine { viewer { tenant canWrite } }';
    expect((await api.gql(mine, {}, { key: neighbour })).data.viewer.tenant).toBe('neighbour');
    // Warm up everything but the documents, then measure.
    for (let i = 0; i < 20; i++) await api.gql(large(-i - 1), {}, { key: flooder });
    const before = heapAfterGc();
    for (let i = 0; i < 300; i++) {
      const answer = await api.gql(large(i), {}, { key: flooder });
      expect(answer.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    }
    const grown = heapAfterGc() - before;
    const { documents } = api.server.app;
    expect(documents.bytes).toBeLessThanOrEqual(bound);
    expect(documents.bytesOf('flood')).toBeLessThanOrEqual(bound / 4);
    expect(documents.counts.evictions).toBeGreaterThan(200);
    // 300 documents of 3 KB hold about 70 MiB parsed; the bound holds a tenant to 2 MiB of them.
    expect(grown).toBeLessThan(bound + 16 * MiB);
    expect(documents.has('neighbour', mine)).toBe(true);
    const hits = documents.counts.hits;
    expect((await api.gql(mine, {}, { key: neighbour })).data.viewer.tenant).toBe('neighbour');
    expect(documents.counts.hits).toBe(hits + 1);
  });

  test('a document that fails validation is not kept (its errors could outweigh it)', async () => {
    const invalid = `query Invalid { ${' nope'.repeat(200)} }`;
    const answer = await api.gql(invalid, {}, { key: neighbour });
    expect(answer.errors?.length).toBeGreaterThan(0);
    expect(api.server.app.documents.has('neighbour', invalid)).toBe(false);
  });

  test('a document is cached per tenant: another tenant`s copy is its own', async () => {
    const shared = 'query Shared { viewer { tenant } }';
    await api.gql(shared, {}, { key: neighbour });
    expect(api.server.app.documents.has('flood', shared)).toBe(false);
    await api.gql(shared, {}, { key: flooder });
    expect(api.server.app.documents.has('flood', shared)).toBe(true);
    expect(api.server.app.documents.has('neighbour', shared)).toBe(true);
  });
});
