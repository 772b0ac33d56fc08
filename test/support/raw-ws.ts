/**
 * A graphql-ws client written out by hand, for tests that misbehave on purpose: it can stop
 * reading its socket (the kernel's buffers fill, then the server's writes wait), flood
 * subscribes, or send what a stock client never would.
 */
import WebSocket from 'ws';
import { waitFor } from './wait.ts';

export interface Frame {
  type: string;
  id?: string;
  /** The seq of a `next` frame's runEvents event, read from its text without parsing the rest. */
  seq?: number;
  /** The parsed frame, for frames shorter than `keepUnder` bytes. */
  message?: { type: string; id?: string; payload?: unknown };
}

export interface RawSocket {
  socket: WebSocket;
  frames: Frame[];
  closed: Promise<{ code: number; reason: string }>;
  send(message: unknown): void;
  subscribe(id: string, query: string, variables?: Record<string, unknown>): void;
  /** Stops reading the socket (the TCP window closes; nothing more is taken from the server). */
  pause(): void;
  resume(): void;
  until(test: (frames: Frame[]) => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(): void;
}

export async function rawSocket(
  httpUrl: string,
  {
    connectionParams,
    keepUnder = 4096,
    init = true,
  }: { connectionParams?: Record<string, unknown>; keepUnder?: number; init?: boolean } = {},
): Promise<RawSocket> {
  const socket = new WebSocket(httpUrl.replace(/^http/, 'ws'), 'graphql-transport-ws');
  const frames: Frame[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  socket.on('message', (data: Buffer) => {
    const text = data.toString();
    const type = /"type":"([a-z_]+)"/.exec(text)?.[1] ?? 'unknown';
    const id = /^\{"id":"([^"]*)"/.exec(text)?.[1] ?? /"id":"([^"]*)"/.exec(text.slice(0, 300))?.[1];
    const seq = type === 'next' ? Number(/"seq":(\d+)/.exec(text)?.[1] ?? Number.NaN) : undefined;
    frames.push({ type, id, seq, message: text.length < keepUnder ? JSON.parse(text) : undefined });
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  const raw: RawSocket = {
    socket,
    frames,
    closed,
    send: (message) => socket.send(typeof message === 'string' ? message : JSON.stringify(message)),
    subscribe: (id, query, variables = {}) => raw.send({ id, type: 'subscribe', payload: { query, variables } }),
    // ws's own pause: its receiver would otherwise resume the socket when it drains.
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    until: (test, what, timeoutMs = 30_000) => waitFor(() => test(frames), { timeoutMs, what }),
    close: () => socket.close(),
  };
  if (init) {
    raw.send({ type: 'connection_init', payload: connectionParams });
    await raw.until((all) => all.some((f) => f.type === 'connection_ack'), 'connection_ack');
  }
  return raw;
}

/** The errors of the `error` frame answering operation `id`, if one came. */
export function errorsOf(frames: Frame[], id: string) {
  const frame = frames.find((f) => f.type === 'error' && f.id === id);
  return frame?.message?.payload as { message: string; extensions?: Record<string, unknown> }[] | undefined;
}
