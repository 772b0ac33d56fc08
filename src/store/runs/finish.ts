/**
 * A finished run's events and output get the run's TTL, so they expire with it: in the
 * background, a few writes at a time, after the transition that finished the run has returned.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { consoleLogger } from '../../lib/logger.ts';
import { attr } from '../../table/attributes.ts';
import { conditions, isConditionalCheckFailed } from '../../table/conditions.ts';
import { keys } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { eventRange } from '../events/page.ts';
import { queryPages } from '../query-pages.ts';
import type { EventLayout } from './index.ts';

/** Event rows given their TTL at once (one Query page is worked through this many at a time). */
const STAMPS_AT_ONCE = 8;

export function createEventExpiry({ doc, tableName, log = consoleLogger }: StoreDeps, layout: Pick<EventLayout, 'shardsOf'>) {
  /** Runs whose events are being given their TTL. */
  const expiring = new Set<Promise<void>>();

  /** Gives one event row its TTL; a row deleted meanwhile is left alone. */
  const stamp = (key: Record<string, unknown>, expiresAt: number) =>
    doc
      .send(
        new UpdateCommand({
          TableName: tableName,
          Key: key,
          UpdateExpression: 'SET #ttl = :expires',
          // Only a row still there: a stamp must not bring back an event as a bare key.
          ConditionExpression: conditions.present,
          ExpressionAttributeNames: { '#ttl': attr.ttl },
          ExpressionAttributeValues: { ':expires': expiresAt },
        }),
      )
      .catch((err) => {
        if (!isConditionalCheckFailed(err)) throw err;
      });

  async function expireEvents(tenant: string, runId: string, expiresAt: number) {
    const partitions = keys.eventPartitions(tenant, runId, await layout.shardsOf(tenant, runId));
    // In the run's own partition, events (of one shard), then output streams and their chunks:
    // every row that sorts after the run's head; in each event shard's partition, its events.
    const own = keys.runPartition(tenant, runId);
    for (const pk of new Set([own, ...partitions])) await stampAll(eventRange(pk, keys.events.first, keys.afterOutput), expiresAt);
  }

  async function stampAll(range: ReturnType<typeof eventRange>, expiresAt: number) {
    const pages = queryPages(doc, { TableName: tableName, ...range, ProjectionExpression: 'pk, sk' });
    for await (const page of pages) {
      const rows = page.Items ?? [];
      for (let i = 0; i < rows.length; i += STAMPS_AT_ONCE) {
        await Promise.all(rows.slice(i, i + STAMPS_AT_ONCE).map((row) => stamp({ pk: row.pk, sk: row.sk }, expiresAt)));
      }
    }
  }

  return {
    /** Starts giving the run's events their TTL; a failure is logged (TTL is housekeeping, the run is finished either way). */
    start(tenant: string, runId: string, expiresAt: number) {
      const job: Promise<void> = expireEvents(tenant, runId, expiresAt)
        .catch((err) => log.error(`giving the events of finished run ${runId} their TTL failed`, err))
        .finally(() => expiring.delete(job));
      expiring.add(job);
    },

    /** Resolves once finished runs' events have all been given their TTL (tests, shutdown). */
    async settled() {
      while (expiring.size > 0) await Promise.allSettled([...expiring]);
    },
  };
}
