/**
 * The console's hold on the API: one client of runplane/client with the key from
 * sessionStorage (never the URL), what the key may do, and the connection indicator.
 */
import { createRunplane, type Notice, type Runplane, RunplaneError } from '@runplane/client';

const KEY_ITEM = 'runplane.apiKey';
const ENDPOINT = new URL('/graphql', location.href).toString();

export type ConnectionState = 'connecting' | 'live' | 'reconnecting' | 'offline';

export interface Session {
  client: Runplane;
  tenant: string;
  /** The key's name: what a decision made here is recorded under. */
  keyName: string;
  canWrite: boolean;
  /** Called with each stream reconnect (the run page then marks where it caught up). */
  onReconnect(listener: (notice: Notice) => void): () => void;
  close(): Promise<void>;
}

export const storedKey = () => sessionStorage.getItem(KEY_ITEM) ?? undefined;
export const storeKey = (key: string) => sessionStorage.setItem(KEY_ITEM, key);
export const forgetKey = () => sessionStorage.removeItem(KEY_ITEM);

const indicator = () => document.getElementById('connection');

const labels: Record<ConnectionState, string> = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  offline: 'Offline',
};

export function showConnection(state: ConnectionState, detail?: string) {
  const element = indicator();
  if (!element) return;
  element.dataset.state = state;
  element.textContent = detail ? `${labels[state]} (${detail})` : labels[state];
}

/** Why the session could not start: no key, a refused key, or no server. */
export class SessionRefused extends Error {
  constructor(
    message: string,
    readonly needsKey: boolean,
  ) {
    super(message);
  }
}

/** @throws SessionRefused */
export async function openSession(): Promise<Session> {
  const apiKey = storedKey();
  const listeners = new Set<(notice: Notice) => void>();
  const client = createRunplane({
    url: ENDPOINT,
    apiKey,
    transport: 'ws',
    // A console waits for the server to come back, however long it takes.
    reconnect: { maxAttempts: Number.POSITIVE_INFINITY, maxDelayMs: 5_000, deadlineMs: Number.POSITIVE_INFINITY },
    onNotice(notice) {
      if (notice.kind === 'socket') showConnection(notice.state === 'open' ? 'live' : 'reconnecting');
      if (notice.kind === 'reconnect') {
        if (notice.reason === 'error') showConnection('reconnecting', notice.error?.message);
        for (const listener of listeners) listener(notice);
      }
    },
  });
  try {
    const viewer = await client.viewer({ retry: { maxAttempts: 2 } });
    return {
      client,
      tenant: viewer.tenant,
      keyName: viewer.name,
      canWrite: viewer.canWrite,
      onReconnect(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close: () => client.close(),
    };
  } catch (err) {
    await client.close();
    if (err instanceof RunplaneError && err.code === 'UNAUTHENTICATED') {
      throw new SessionRefused(apiKey ? `The server refused this API key: ${err.message}` : 'This server needs an API key.', true);
    }
    showConnection('offline');
    throw new SessionRefused(`The server could not be reached: ${err instanceof Error ? err.message : String(err)}`, false);
  }
}
