/**
 * Readiness: one cheap, strongly consistent read of a key that never exists, answered from
 * cache for a second so that frequent probes cost DynamoDB at most one read a second.
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { Clients } from './client.ts';
import { keys } from './keys.ts';

/** Longest a probe waits for DynamoDB before calling it unreachable. */
const PROBE_TIMEOUT_MS = 2_000;
/** How long one answer stands for. */
const CACHE_MS = 1_000;

export interface Readiness {
  ready: boolean;
  reason?: string;
}

export function readinessProbe(clients: Pick<Clients, 'dynamo'>, tableName: string) {
  let last: { at: number; answer: Promise<Readiness> } | undefined;
  const probe = async (): Promise<Readiness> => {
    try {
      await clients.dynamo.send(
        new GetItemCommand({ TableName: tableName, Key: { pk: { S: keys.probe.pk }, sk: { S: keys.probe.sk } }, ConsistentRead: true }),
        { abortSignal: AbortSignal.timeout(PROBE_TIMEOUT_MS) },
      );
      return { ready: true };
    } catch (err) {
      const e = err as Error & { code?: string };
      if (e.name === 'ResourceNotFoundException') return { ready: false, reason: `table ${tableName} does not exist` };
      return { ready: false, reason: `DynamoDB did not answer: ${e.name === 'AbortError' ? 'timed out' : (e.code ?? e.name)}` };
    }
  };
  return () => {
    if (!last || Date.now() - last.at > CACHE_MS) last = { at: Date.now(), answer: probe() };
    return last.answer;
  };
}
