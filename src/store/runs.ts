/** Runs: created with their budget in one transaction, read with budget and first events in one Query. */
import { randomUUID } from 'node:crypto';
import { GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { RunAlreadyExists, RunNotFound, StatusConflict } from '../domain/errors.ts';
import { type Budget, initialStatus, isTerminal, type Run, type RunEvent, type RunStatus } from '../domain/run.ts';
import { attr, budgetItem, eventBytes, type Item, runItem, toBudget, toEvent, toRun } from '../table/codec.ts';
import { conditions, isConditionalCheckFailed } from '../table/conditions.ts';
import { keys, RUN_BUDGET_SK, RUN_META_SK } from '../table/keys.ts';
import type { ReadBudget, StoreDeps } from './deps.ts';
import type { Idempotency, IdempotencyKey } from './idempotency.ts';
import { ConditionFailed, type TransactItem, type Write, write } from './write.ts';

export interface CreateRun {
  tenant: string;
  id: string;
  task: string;
  budgetCap: number;
}

/** A run as one Query on its partition finds it. */
export interface RunSnapshot {
  run: Run;
  budget: Budget | null;
  /** The run's first events, in seq order. */
  events: RunEvent[];
  /** Whether the run has more events than `events`. */
  moreEvents: boolean;
}

export interface Transition {
  tenant: string;
  runId: string;
  from: RunStatus;
  to: RunStatus;
  /** Only if the run is still at this version (optimistic concurrency). */
  expectedVersion?: number;
}

export interface RunCreated {
  run: Run;
  budget: Budget;
}

const dates = <T extends { createdAt: unknown; updatedAt: unknown }>(value: T) => ({
  ...value,
  createdAt: new Date(value.createdAt as string),
  updatedAt: new Date(value.updatedAt as string),
});

export function createRunStore({ doc, tableName, now, retention }: StoreDeps, idempotency: Idempotency) {
  /** Finished runs whose events are being given their TTL, in the background. */
  const expiring = new Set<Promise<void>>();
  const nowSeconds = () => Math.floor(now().getTime() / 1000);
  /** A row past its TTL counts as gone, though DynamoDB deletes it late. */
  const live = (item: Item | undefined) =>
    item && !(Number(item[attr.expiresAt] ?? Number.POSITIVE_INFINITY) <= nowSeconds()) ? item : undefined;

  async function createOnce({ tenant, id, task, budgetCap }: CreateRun, claim?: (result: RunCreated) => TransactItem) {
    const at = now();
    const run: Run = { id, task, status: initialStatus, version: 1, createdAt: at, updatedAt: at };
    const budget: Budget = { runId: id, cap: budgetCap, spent: 0, remaining: budgetCap, version: 1 };
    // A run id is taken once; its budget row comes with it. An expired run's id stays taken
    // until DynamoDB has deleted its rows: a new run must never see the old one's events.
    const put = (Item: Item): Write => ({ Put: { TableName: tableName, Item, ConditionExpression: conditions.absent } });
    try {
      const writes = [put(runItem(tenant, run)), put(budgetItem(tenant, budget, at))];
      await write(doc, writes, claim?.({ run, budget }));
    } catch (err) {
      if (err instanceof ConditionFailed) throw new RunAlreadyExists(id);
      throw err;
    }
    return { run, budget };
  }

  async function readMeta(tenant: string, runId: string) {
    const { Item } = await doc.send(new GetCommand({ TableName: tableName, Key: keys.run(tenant, runId), ConsistentRead: true }));
    return live(Item);
  }

  /** Gives every event of a finished run the run's TTL (a few writes at a time, after the transition returned). */
  async function expireEvents(tenant: string, runId: string, expiresAt: number) {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await doc.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :first AND :last',
          ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId), ':first': keys.events.first, ':last': keys.events.last },
          ProjectionExpression: 'pk, sk',
          ExclusiveStartKey: start,
        }),
      );
      const rows = page.Items ?? [];
      for (let i = 0; i < rows.length; i += 8) {
        await Promise.all(
          rows.slice(i, i + 8).map((row) =>
            doc
              .send(
                new UpdateCommand({
                  TableName: tableName,
                  Key: { pk: row.pk, sk: row.sk },
                  UpdateExpression: 'SET #expiresAt = :expires',
                  ConditionExpression: conditions.present,
                  ExpressionAttributeNames: { '#expiresAt': attr.expiresAt },
                  ExpressionAttributeValues: { ':expires': expiresAt },
                }),
              )
              .catch((err) => {
                if (!isConditionalCheckFailed(err)) throw err;
              }),
          ),
        );
      }
      start = page.LastEvaluatedKey;
    } while (start);
  }

  async function transitionOnce({ tenant, runId, from, to, expectedVersion }: Transition, claim?: TransactItem) {
    const writeId = randomUUID();
    const at = now();
    const finished = isTerminal(to);
    const expires = nowSeconds() + retention.finishedRunSeconds;
    const meta: Write = {
      Update: {
        TableName: tableName,
        Key: keys.run(tenant, runId),
        // The run exists (and has not expired), is still where the caller saw it, and at the version it saw.
        ConditionExpression: [
          conditions.present,
          conditions.statusIs,
          '(attribute_not_exists(#expiresAt) OR #expiresAt > :nowSeconds)',
          ...(expectedVersion !== undefined ? ['#version = :expectedVersion'] : []),
        ].join(' AND '),
        UpdateExpression: `SET #status = :to, #updatedAt = :now, gsi2pk = :listing, #writeId = :writeId${finished ? ', #expiresAt = :expires' : ''} ADD #version :one`,
        ExpressionAttributeNames: {
          '#status': attr.status,
          '#updatedAt': attr.updatedAt,
          '#version': attr.version,
          '#writeId': attr.writeId,
          '#expiresAt': attr.expiresAt,
        },
        ExpressionAttributeValues: {
          ':from': from,
          ':to': to,
          ':now': at.toISOString(),
          ':nowSeconds': nowSeconds(),
          ':listing': keys.runListing(tenant, runId, to, '').gsi2pk,
          ':one': 1,
          ':writeId': writeId,
          ...(finished ? { ':expires': expires } : {}),
          ...(expectedVersion !== undefined ? { ':expectedVersion': expectedVersion } : {}),
        },
      },
    };
    // A finished run's budget row expires with it (its events are given the same TTL afterwards).
    const budget: Write = {
      Update: {
        TableName: tableName,
        Key: keys.budget(tenant, runId),
        ConditionExpression: conditions.present,
        UpdateExpression: 'SET #expiresAt = :expires',
        ExpressionAttributeNames: { '#expiresAt': attr.expiresAt },
        ExpressionAttributeValues: { ':expires': expires },
      },
    };
    try {
      const after = await write(doc, finished ? [meta, budget] : [meta], claim);
      if (finished) {
        const job: Promise<void> = expireEvents(tenant, runId, expires)
          .catch((err) => console.error(`runplane: giving the events of finished run ${runId} their TTL failed:`, err))
          .finally(() => expiring.delete(job));
        expiring.add(job);
      }
      return after ? toRun(after) : undefined;
    } catch (err) {
      if (!(err instanceof ConditionFailed)) throw err;
      const found = err.index === 0 ? live(err.item) : await readMeta(tenant, runId);
      if (!found) throw new RunNotFound(runId);
      // The SDK resent this transition after a lost response: it was applied.
      if (found[attr.writeId] === writeId) return toRun(found);
      const current = toRun(found);
      throw new StatusConflict(runId, from, current.status, current.version, expectedVersion);
    }
  }

  return {
    /** Resolves once finished runs' events have all been given their TTL (tests, shutdown). */
    async settled() {
      while (expiring.size > 0) await Promise.allSettled([...expiring]);
    },

    /**
     * Creates the run's metadata and budget together, or neither.
     * @throws RunAlreadyExists
     * @throws IdempotencyConflict when the key was used for a different request
     */
    async create(input: CreateRun, idem?: IdempotencyKey): Promise<RunCreated> {
      if (!idem) return createOnce(input);
      return idempotency.once<RunCreated>(idem, {
        perform: (claim) => createOnce(input, (result) => claim(result)),
        encode: (created) => created,
        decode: (stored) => {
          const { run, budget } = stored as { run: Run; budget: Budget };
          return { run: dates(run), budget };
        },
      });
    },

    /** Metadata, budget and up to `eventLimit` first events, from ONE Query; null when the run does not exist. */
    async read(
      tenant: string,
      runId: string,
      { consistent = false, eventLimit, budget: readBudget }: { consistent?: boolean; eventLimit: number; budget?: ReadBudget },
    ) {
      const { Items = [], LastEvaluatedKey } = await doc.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': keys.runPartition(tenant, runId) },
          ConsistentRead: consistent,
          // Budget and metadata sort first; one more event than asked tells whether more follow.
          Limit: 2 + eventLimit + 1,
        }),
      );
      const meta = live(Items.find((item) => item.sk === RUN_META_SK));
      if (!meta) return null;
      const budget = Items.find((item) => item.sk === RUN_BUDGET_SK);
      const events = Items.filter((item) => item.sk !== RUN_META_SK && item.sk !== RUN_BUDGET_SK).map(toEvent);
      readBudget?.spend(events.slice(0, eventLimit).reduce((bytes, event) => bytes + eventBytes(event), 0));
      return {
        run: toRun(meta),
        budget: budget ? toBudget(budget) : null,
        events: events.slice(0, eventLimit),
        // A page stops at 1 MB too: then more may follow even with fewer events than asked.
        moreEvents: events.length > eventLimit || LastEvaluatedKey !== undefined,
      } satisfies RunSnapshot;
    },

    /**
     * Moves the run from `from` to `to` (the caller checked the transition is legal). A run
     * reaching a terminal status gets its TTL: it expires after the finished-run retention.
     * @throws StatusConflict when the run is no longer in `from` (or not at expectedVersion)
     * @throws RunNotFound
     */
    async transition(input: Transition, idem?: IdempotencyKey): Promise<Run> {
      // A terminal transition is a transaction (metadata and budget): it reads the run after.
      if (!idem) return (await transitionOnce(input)) ?? toRun((await readMeta(input.tenant, input.runId)) ?? {});
      return idempotency.once(idem, {
        perform: (claim) => transitionOnce(input, claim()),
        readResult: async () => toRun((await readMeta(input.tenant, input.runId)) ?? {}),
        encode: (run) => run,
        decode: (stored) => dates(stored as Run),
      });
    },
  };
}

export type RunStore = ReturnType<typeof createRunStore>;
