/**
 * A bare graphql-ws (graphql-transport-ws) subscriber: one socket, one subscription, no
 * reconnects. Light enough for a thousand of them in the load generator.
 */
import WebSocket from 'ws';

export interface Subscriber {
  close(): void;
}

export function subscribe(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  onNext: (data: Record<string, unknown>) => void,
  onError: (error: unknown) => void,
): Promise<Subscriber> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    socket.on('error', (err) => {
      reject(err);
      onError(err);
    });
    socket.on('close', (code, reason) => {
      if (code !== 1000) onError(new Error(`socket closed: ${code} ${reason}`));
    });
    socket.on('message', (raw) => {
      const message = JSON.parse(String(raw)) as { type: string; payload?: { data?: Record<string, unknown> } | unknown[] };
      if (message.type === 'connection_ack') {
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } }));
        resolve({ close: () => socket.close(1000) });
      } else if (message.type === 'next') {
        onNext((message.payload as { data: Record<string, unknown> }).data);
      } else if (message.type === 'error') {
        onError(new Error(JSON.stringify(message.payload)));
      } else if (message.type === 'ping') {
        socket.send(JSON.stringify({ type: 'pong' }));
      }
    });
  });
}
