/**
 * A hostile tenant's data written straight into the table, as the API would have written it
 * (the table's own codec and keys), in BatchWriteItem requests: hundreds of runs in a second
 * rather than one GraphQL mutation per row. For the hostile tests and benchmarks, whose subject
 * is what reading such data costs, not writing it.
 */
import { BatchWriteCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Budget, Run, RunClaim } from '../../src/domain/run.ts';
import { claimItem } from '../../src/store/runs/claim-writes.ts';
import type { Item } from '../../src/table/attributes.ts';
import { budgetItem, eventItem, outputChunkItem, outputStreamItem, runItem } from '../../src/table/codec.ts';

/** DynamoDB's most items in one BatchWriteItem. */
const BATCH_ITEMS = 25;
/** Batches in flight at once. */
const BATCHES_AT_ONCE = 4;
/** Tries of a batch's unprocessed items (the engine throttled them) before giving up. */
const ATTEMPTS = 10;

/** Puts `items` into `table`, 25 a request, a few requests at once; throws if some are never taken. */
export async function putRows(doc: DynamoDBDocumentClient, table: string, items: Item[]) {
  const batches: Item[][] = [];
  for (let from = 0; from < items.length; from += BATCH_ITEMS) batches.push(items.slice(from, from + BATCH_ITEMS));
  const put = async (batch: Item[]) => {
    let requests = batch.map((Item) => ({ PutRequest: { Item } }));
    for (let attempt = 1; requests.length > 0; attempt++) {
      if (attempt > ATTEMPTS) throw new Error(`${requests.length} rows not written after ${ATTEMPTS} tries`);
      const { UnprocessedItems } = await doc.send(new BatchWriteCommand({ RequestItems: { [table]: requests } }));
      requests = (UnprocessedItems?.[table] ?? []) as typeof requests;
      if (requests.length) await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    }
  };
  for (let from = 0; from < batches.length; from += BATCHES_AT_ONCE)
    await Promise.all(batches.slice(from, from + BATCHES_AT_ONCE).map(put));
}

/** A run's metadata and budget rows, as createRun writes them (RUNNING, version 1). */
export function runRows(tenant: string, runId: string, { at = new Date(), budgetCap = 100 } = {}): Item[] {
  const run: Run = { id: runId, task: 't', status: 'RUNNING', version: 1, createdAt: at, updatedAt: at, eventShards: 1 };
  const budget: Budget = { runId, cap: budgetCap, spent: 0, remaining: budgetCap, version: 1 };
  return [runItem(tenant, run), budgetItem(tenant, budget, at)];
}

/** A run claimed by `holder` until `untilMs`, listed in the stall index, as claimRun writes it. */
export function claimedRunRows(
  tenant: string,
  runId: string,
  { untilMs, holder = 'w', at = new Date() }: { untilMs: number; holder?: string; at?: Date },
) {
  const claim: RunClaim = { runId, holder, token: 1, acquiredAt: at, expiresAt: new Date(untilMs), version: 1 };
  return [...runRows(tenant, runId, { at }), claimItem(tenant, claim, true)];
}

/** A run with `streams` output streams of one character each (`s0`, `s1`, ...), as appendOutput writes them. */
export function runWithStreamsRows(tenant: string, runId: string, streams: number, at = new Date()) {
  return [
    ...runRows(tenant, runId, { at }),
    ...Array.from({ length: streams }, (_, i) => [
      outputStreamItem(tenant, runId, `s${i}`, at),
      outputChunkItem(tenant, { runId, stream: `s${i}`, offset: 0, text: 'x', final: false }, at),
    ]).flat(),
  ];
}

/** A run with an event of type `step` for each of `payloads` (seq 1, 2, ...), as appendEvent writes them. */
export function runWithEventsRows(tenant: string, runId: string, payloads: unknown[], at = new Date()) {
  return [
    ...runRows(tenant, runId, { at }),
    ...payloads.map((payload, i) => eventItem(tenant, { runId, seq: i + 1, type: 'step', payload, createdAt: at }, 'seed')),
  ];
}
