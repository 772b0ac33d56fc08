/**
 * The budget and claim rows of many runs, read together: the runs of a listing asked for their
 * budget or claim ask in the same turn, and are answered from BatchGetItem requests of up to
 * 100 keys (strongly consistent), not from a read each. Loads are batched per reader (one
 * request, or one event of a subscription), so no answer outlives the turn it was read for.
 */
import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import type { Budget, RunClaim } from '../../domain/run.ts';
import { attached } from '../../lib/attached.ts';
import { sleep } from '../../lib/backoff.ts';
import type { Item } from '../../table/attributes.ts';
import { toBudget, toClaim } from '../../table/codec.ts';
import { keys, RUN_BUDGET_SK } from '../../table/keys.ts';
import type { StoreDeps } from '../deps.ts';
import { metered, type TableReads } from '../reads.ts';

export interface RunHeadRows {
  budget: Budget | null;
  claim: RunClaim | null;
}

/** Keys per BatchGetItem: DynamoDB's most. */
const BATCH_KEYS = 100;
/** Runs whose loads are answered in one turn of the event loop (the rest in the turns after). */
const ANSWERS_PER_TURN = 50;
/** Tries of the keys DynamoDB left unprocessed (it is throttling) before the read fails. */
const UNPROCESSED_TRIES = 5;

interface Batch {
  tenant: string;
  /** Runs asked for, each with the promises waiting for it. */
  runs: Map<string, { resolve: (rows: RunHeadRows) => void; reject: (err: unknown) => void }[]>;
}

/** The batch gathering this turn's loads of one reader (a request's reads object). */
const batches = attached<object, Batch | undefined>('run-heads');
/** Loads made without a reader share one batch per tenant and turn. */
const unmetered = new Map<string, object>();

export function createHeadReads({ doc, tableName }: StoreDeps) {
  async function readAll(tenant: string, runIds: string[], reads: TableReads | undefined) {
    const reader = metered(doc, reads);
    const found = new Map<string, RunHeadRows>(runIds.map((id) => [id, { budget: null, claim: null }]));
    const byPk = new Map(runIds.map((id) => [keys.runPartition(tenant, id), id]));
    const wanted: Record<string, unknown>[] = runIds.flatMap((id) => [{ ...keys.budget(tenant, id) }, { ...keys.claim(tenant, id) }]);
    for (let from = 0; from < wanted.length; from += BATCH_KEYS) {
      let pending: Record<string, unknown>[] = wanted.slice(from, from + BATCH_KEYS);
      for (let tries = 0; pending.length > 0; tries++) {
        if (tries === UNPROCESSED_TRIES) throw new Error(`reading ${pending.length} run head rows: DynamoDB left them unprocessed`);
        if (tries > 0) await sleep(20 * 2 ** tries);
        const { Responses, UnprocessedKeys } = await reader.send(
          new BatchGetCommand({ RequestItems: { [tableName]: { Keys: pending, ConsistentRead: true } } }),
        );
        for (const item of (Responses?.[tableName] ?? []) as Item[]) {
          const rows = found.get(byPk.get(String(item.pk)) ?? '');
          if (!rows) continue;
          if (item.sk === RUN_BUDGET_SK) rows.budget = toBudget(item);
          else rows.claim = toClaim(item);
        }
        pending = (UnprocessedKeys?.[tableName]?.Keys ?? []) as Record<string, unknown>[];
      }
    }
    return found;
  }

  /**
   * Answers the loads a slice of runs per turn of the event loop: each answer lets GraphQL go
   * on with that run's fields at once, and a page of 500 runs' in one go would hold the process
   * (every other request included) for as long as all of them take.
   */
  function answerInSlices(runs: [string, Batch['runs'] extends Map<string, infer W> ? W : never][], found: Map<string, RunHeadRows>) {
    for (const [id, waiting] of runs.slice(0, ANSWERS_PER_TURN)) for (const w of waiting) w.resolve(found.get(id) as RunHeadRows);
    if (runs.length > ANSWERS_PER_TURN) setImmediate(() => answerInSlices(runs.slice(ANSWERS_PER_TURN), found));
  }

  /** Reads the batch's runs and answers each load. */
  function flush(batch: Batch, reads: TableReads | undefined) {
    const ids = [...batch.runs.keys()];
    readAll(batch.tenant, ids, reads).then(
      (found) => answerInSlices([...batch.runs], found),
      (err) => {
        for (const waiting of batch.runs.values()) for (const w of waiting) w.reject(err);
      },
    );
  }

  /** The run's budget and claim rows as stored (null where absent), read with the other loads of this turn by the same reader. */
  function headRows(tenant: string, runId: string, reads?: TableReads): Promise<RunHeadRows> {
    let owner: object | undefined = reads;
    if (!owner) {
      owner = unmetered.get(tenant) ?? {};
      unmetered.set(tenant, owner);
    }
    let batch = batches.get(owner);
    if (!batch || batch.tenant !== tenant) {
      const started: Batch = { tenant, runs: new Map() };
      batch = started;
      batches.set(owner, started);
      const key = owner;
      queueMicrotask(() => {
        batches.set(key, undefined);
        if (!reads) unmetered.delete(tenant);
        flush(started, reads);
      });
    }
    const waiting = batch.runs.get(runId) ?? [];
    batch.runs.set(runId, waiting);
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  }

  return { headRows, headsOf: readAll };
}
