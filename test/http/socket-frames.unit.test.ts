/**
 * What socket-frames.ts relies on in graphql-ws, checked against graphql-ws itself: the `next`
 * frame it writes by hand is byte for byte the one graphql-ws would write, and graphql-ws ends
 * an operation through the handle `onOperation` gave it (`complete` when it finishes, `return()`
 * on the client's complete and on close, an `error` frame when it fails); and the WebSocket
 * frame around it is byte for byte ws's. A release of graphql-ws or ws that changes any of
 * these fails here.
 */
import { createRequire } from 'node:module';
import { GraphQLError, parse } from 'graphql';
import { GRAPHQL_TRANSPORT_WS_PROTOCOL, MessageType, makeServer, stringifyMessage } from 'graphql-ws';
import { describe, expect, test } from 'vitest';
import { nextFrame } from '../../src/http/subscriptions/index.ts';
import { ownBytes, textFrame } from '../../src/http/subscriptions/text-frames.ts';
import { schema } from '../../src/schema/index.ts';
import { waitFor } from '../support/wait.ts';

describe('the next frame', () => {
  const results = [
    { data: { runEvents: { seq: 1, type: 'step', payload: { text: 'ünïcode \u2028 "quoted" \\ </script>' } } } },
    { data: null, errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL' } }] },
    { data: { runChanged: { status: 'RUNNING' } }, extensions: { traced: true } },
  ];
  const ids = ['1', 'a"b', '\u0000\u001f', 'x'.repeat(128), '🙂'];
  test.each(ids)('for id %j is the one graphql-ws writes', (id) => {
    for (const payload of results) {
      expect(nextFrame(id, JSON.stringify(payload))).toBe(stringifyMessage({ id, type: MessageType.Next, payload } as never));
    }
  });
});

describe('the WebSocket frame around it', () => {
  // ws's own framing, for a server (unmasked) sending text.
  const Sender = (createRequire(import.meta.url)('ws') as { Sender: { frame(data: Buffer, options: object): Buffer[] } }).Sender;
  const wsFrame = (payload: Buffer) =>
    Buffer.concat(Sender.frame(payload, { fin: true, opcode: 1, mask: false, readOnly: false, rsv1: false }));
  // Across the lengths where the header's length field changes size (7 bits, 16, 64), with a head past ASCII.
  test.each([12, 34, 125, 126, 127, 0xffff, 0x10000, 70_000])('is the one ws writes, for a payload of %i bytes', (length) => {
    const head = '{"id":"🙂"';
    const headBytes = Buffer.byteLength(head);
    const body = Buffer.alloc(length - headBytes, 'x');
    const frame = textFrame(head, headBytes, body);
    expect(frame.equals(wsFrame(Buffer.concat([Buffer.from(head), body])))).toBe(true);
  });

  test("shared bodies, and frames that will wait, are buffers of their own, not slices of Node's pool (a slice keeps its 8 KiB block alive)", () => {
    const body = ownBytes('{"data":{}}}');
    const waiting = textFrame('{"id":"1","type":"next","payload":', 34, body, true);
    expect(body.buffer.byteLength).toBe(body.length);
    expect(waiting.buffer.byteLength).toBe(waiting.length);
    expect(textFrame('{"id":"1","type":"next","payload":', 34, body, false).equals(waiting)).toBe(true);
  });
});

/** graphql-ws's own server over an in-memory socket, with the hook websocket.ts uses. */
function serverWithHandle(handle: () => AsyncIterableIterator<never>) {
  const sent: Array<{ type: string; id?: string; payload?: unknown }> = [];
  let receive: (data: string) => Promise<void> = async () => {};
  const server = makeServer({
    schema,
    onSubscribe: () => ({ schema, document: parse('subscription { leasesChanged { unitId } }') }),
    // The subscribe that ran is beside the point: onOperation hands graphql-ws the handle instead.
    subscribe: async () => ({ data: null }),
    onOperation: () => handle(),
  });
  const closed = server.opened(
    {
      protocol: GRAPHQL_TRANSPORT_WS_PROTOCOL,
      send: (data) => {
        sent.push(JSON.parse(data));
      },
      close: () => undefined,
      onMessage: (cb) => {
        receive = cb;
      },
    },
    {},
  );
  const send = (message: unknown) => receive(JSON.stringify(message));
  return { sent, send, closed };
}

function controlledHandle() {
  let finish: (err?: Error) => void = () => {};
  const ended = new Promise<void>((resolve, reject) => {
    finish = (err) => (err ? reject(err) : resolve());
  });
  ended.catch(() => undefined);
  const calls = { next: 0, return: 0 };
  const handle: AsyncIterableIterator<never> = {
    next: () => {
      calls.next += 1;
      return ended.then(() => ({ done: true as const, value: undefined as never }));
    },
    return: async () => {
      calls.return += 1;
      finish();
      return { done: true as const, value: undefined as never };
    },
    [Symbol.asyncIterator]: () => handle,
  };
  return { handle, calls, finish };
}

async function subscribed(handle: AsyncIterableIterator<never>) {
  const server = serverWithHandle(() => handle);
  await server.send({ type: MessageType.ConnectionInit });
  void server.send({ type: MessageType.Subscribe, id: 'op-1', payload: { query: 'subscription { leasesChanged { unitId } }' } });
  return server;
}

describe('graphql-ws ends an operation through the handle', () => {
  test('it waits on next() and sends complete once the handle ends', async () => {
    const { handle, calls, finish } = controlledHandle();
    const { sent } = await subscribed(handle);
    await waitFor(() => calls.next === 1, { what: 'graphql-ws to ask the handle for its next result' });
    expect(sent.map((m) => m.type)).toEqual([MessageType.ConnectionAck]);
    finish();
    await waitFor(() => sent.some((m) => m.type === MessageType.Complete), { what: 'complete' });
    expect(sent.at(-1)).toEqual({ id: 'op-1', type: MessageType.Complete });
  });

  test("the client's complete calls return()", async () => {
    const { handle, calls } = controlledHandle();
    const { send } = await subscribed(handle);
    await waitFor(() => calls.next === 1, { what: 'the operation to start' });
    await send({ type: MessageType.Complete, id: 'op-1' });
    expect(calls.return).toBe(1);
  });

  test('closing the socket calls return()', async () => {
    const { handle, calls } = controlledHandle();
    const { closed } = await subscribed(handle);
    await waitFor(() => calls.next === 1, { what: 'the operation to start' });
    await closed(1000, 'bye');
    expect(calls.return).toBe(1);
  });

  test('a handle that fails gets an error frame with its message', async () => {
    const { handle, calls, finish } = controlledHandle();
    const { sent } = await subscribed(handle);
    await waitFor(() => calls.next === 1, { what: 'the operation to start' });
    finish(new GraphQLError('DynamoDB could not be reached', { extensions: { code: 'UNAVAILABLE' } }));
    await waitFor(() => sent.some((m) => m.type === MessageType.Error), { what: 'the error frame' });
    expect(sent.find((m) => m.type === MessageType.Error)).toMatchObject({
      id: 'op-1',
      payload: [{ message: 'DynamoDB could not be reached', extensions: { code: 'UNAVAILABLE' } }],
    });
  });
});
