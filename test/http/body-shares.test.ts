/**
 * Request bodies being read are shared between tenants (RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT):
 * a tenant whose bodies fill its share has its next one wait unread, while another tenant is
 * served at once; the waiting one is read once room frees up, and past the waiting bound the
 * next is refused unread (RATE_LIMITED, retryable). Raw sockets: a body sent in part holds its
 * place for as long as the test says.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { MAX_WAITING_BODIES } from '../../src/http/body-shares.ts';
import { metric } from '../support/metrics.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const A = 'bodies-tenant-a-key-0123456789';
const B = 'bodies-tenant-b-key-0123456789';
/** Tenant A's share of the bodies being read. */
const SHARE = 64 * 1024;
/** A's body held open: most of its share. */
const HELD = 60 * 1024;

let api: TestServer;
const opened: Socket[] = [];

beforeAll(async () => {
  api = await startTestServer({
    RUNPLANE_API_KEYS: `${A}=a,${B}=b`,
    RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT: String(SHARE),
    // The waiting requests' sockets stay open past the test's own pace on a loaded machine.
    RUNPLANE_REQUEST_TIMEOUT_SECONDS: '120',
  });
});

afterAll(() => {
  for (const socket of opened) socket.destroy();
});

/** A POST of `{ __typename }` whose body is `length` bytes (padded in an unused variable); `sent` of them are sent now. */
function post(key: string, length: number, sent = length) {
  const envelope = '{"query":"{ __typename }","variables":{"pad":""}}';
  const body = `${envelope.slice(0, -3)}${'x'.repeat(length - envelope.length)}"}}`;
  const { hostname, port, pathname } = new URL(api.url);
  const socket = connect(Number(port), hostname);
  opened.push(socket);
  let answer = '';
  socket.on('data', (chunk) => {
    answer += chunk;
  });
  socket.on('error', () => undefined);
  const head = `POST ${pathname} HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\nauthorization: Bearer ${key}\r\ncontent-length: ${length}\r\n\r\n`;
  socket.write(head + body.slice(0, sent));
  return {
    answer: () => answer,
    // Whole: its JSON, with a Content-Length or as the last chunk.
    answered: () => /\r\n\r\n[\s\S]*\}(\r\n0\r\n\r\n)?$/.test(answer),
    json: () => JSON.parse(/\{.*\}/.exec(answer.split('\r\n\r\n')[1] ?? '')?.[0] ?? 'null'),
    rest: () => socket.write(body.slice(sent)),
  };
}

const inFlight = () => metric(api.url, 'runplane_body_bytes_in_flight');

test("a tenant's body past its share waits unread; another tenant is served meanwhile; the waiting one is read once room frees up", async () => {
  const held = post(A, HELD, 1024);
  await waitFor(async () => (await inFlight()) === HELD, { what: "A's first body to take its place" });
  const waiting = post(A, 8 * 1024);
  // Another tenant's request is answered at once; A's second is not read: A's share holds the first.
  const other = await api.gql('{ __typename }', {}, { key: B });
  expect(other.data).toEqual({ __typename: 'Query' });
  expect(await inFlight()).toBe(HELD);
  expect(waiting.answered(), waiting.answer()).toBe(false);

  held.rest();
  await waitFor(() => held.answered() && waiting.answered(), { what: "both of A's requests to be answered" });
  for (const request of [held, waiting]) expect(request.answer()).toMatch(/^HTTP\/1\.1 200[\s\S]*"__typename":"Query"/);
  await waitFor(async () => (await inFlight()) === 0, { what: 'every place to be given back' });
});

test(`past ${MAX_WAITING_BODIES} of a tenant's requests waiting, the next is refused unread, retryably; the others are read in turn`, async () => {
  const held = post(A, HELD, 1024);
  await waitFor(async () => (await inFlight()) === HELD, { what: "A's first body to take its place" });
  const waiting = Array.from({ length: MAX_WAITING_BODIES }, () => post(A, 8 * 1024));
  const refused = post(A, 8 * 1024);
  await waitFor(() => refused.answered(), { what: 'the request past the bound to be refused' });
  expect(refused.answer()).toMatch(/^HTTP\/1\.1 429/);
  expect(refused.json()?.errors?.[0]).toMatchObject({
    message: expect.stringMatching(/RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT/),
    extensions: { code: 'RATE_LIMITED', retryable: true },
  });
  expect(waiting.filter((w) => w.answered())).toEqual([]);
  expect(await metric(api.url, 'runplane_bodies_refused_total')).toBe(1);

  held.rest();
  await waitFor(() => waiting.every((w) => w.answered()), { what: 'the waiting requests to be read and answered' });
  for (const request of waiting) expect(request.answer()).toMatch(/^HTTP\/1\.1 200/);
});
