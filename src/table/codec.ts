/**
 * Items <-> domain values. Rows may also be written by services that bypass the API, so
 * decoding trusts the keys over the copies in attributes.
 */

import { MAX_EVENT_SHARDS } from '../domain/limits.ts';
import type { OutputChunk } from '../domain/output.ts';
import { type Budget, type ClaimEnd, type Lease, originOf, type Run, type RunClaim, type RunEvent, type RunStatus } from '../domain/run.ts';
import { attached } from '../lib/attached.ts';
import { attr, type Item } from './attributes.ts';
import { keys, outputOfSk, outputStreamOfSk, parseRunPartition, seqOfSk } from './keys.ts';

const date = (value: unknown) => new Date(typeof value === 'string' || typeof value === 'number' ? value : 0);
const runIdOf = (item: Item) => parseRunPartition(String(item.pk))?.runId ?? String(item[attr.runId]);

export function runItem(tenant: string, run: Run): Item {
  const createdAt = run.createdAt.toISOString();
  return {
    ...keys.run(tenant, run.id),
    ...keys.runListing(tenant, run.id, run.status, createdAt),
    [attr.entity]: 'run',
    [attr.runId]: run.id,
    [attr.task]: run.task,
    [attr.status]: run.status,
    [attr.version]: run.version,
    [attr.createdAt]: createdAt,
    [attr.updatedAt]: run.updatedAt.toISOString(),
    ...(run.eventShards > 1 ? { [attr.eventShards]: run.eventShards } : {}),
  };
}

/** The shard count a run's metadata row holds; a row without one (or with one no key can be built from) is the seed's layout, 1. */
export function eventShardsOf(item: Item): number {
  const shards = Number(item[attr.eventShards] ?? 1);
  return Number.isSafeInteger(shards) && shards >= 1 && shards <= MAX_EVENT_SHARDS ? shards : 1;
}

export function toRun(item: Item): Run {
  return {
    id: runIdOf(item),
    task: String(item[attr.task] ?? ''),
    status: item[attr.status] as RunStatus,
    version: Number(item[attr.version] ?? 0),
    createdAt: date(item[attr.createdAt]),
    updatedAt: date(item[attr.updatedAt]),
    eventShards: eventShardsOf(item),
  };
}

export function budgetItem(tenant: string, budget: Budget, now: Date): Item {
  return {
    ...keys.budget(tenant, budget.runId),
    [attr.entity]: 'budget',
    [attr.runId]: budget.runId,
    [attr.cap]: budget.cap,
    [attr.spent]: budget.spent,
    // Kept beside spent so that a charge is one conditional update: remaining >= amount.
    [attr.remaining]: budget.remaining,
    [attr.version]: budget.version,
    [attr.updatedAt]: now.toISOString(),
  };
}

export function toBudget(item: Item): Budget {
  const cap = Number(item[attr.cap] ?? 0);
  const spent = Number(item[attr.spent] ?? 0);
  return {
    runId: runIdOf(item),
    cap,
    spent,
    remaining: Number(item[attr.remaining] ?? cap - spent),
    version: Number(item[attr.version] ?? 0),
  };
}

/**
 * A JSON value in a form the AWS SDK's marshaller stores faithfully. It picks a DynamoDB
 * type by `value.constructor.name`, so an object with its own key `constructor` (say
 * `{"constructor": {"name": "Set"}}`) would be refused or, worse, stored as something else.
 * Such objects go as Maps, which it stores key by key; everything else goes as it is.
 */
export function storable(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const stored = value.map(storable);
    return stored.some((child, i) => child !== value[i]) ? stored : value;
  }
  const object = value as Record<string, unknown>;
  let asMap = Object.hasOwn(object, 'constructor');
  const keys = Object.keys(object);
  const stored = keys.map((key) => {
    const child = storable(object[key]);
    if (child !== object[key]) asMap = true;
    return child;
  });
  return asMap ? new Map(keys.map((key, i) => [key, stored[i]])) : value;
}

/**
 * A value as `storable` left it, back as the JSON value it was (Maps as objects): what the rows
 * this server just wrote hold before the SDK has stored them. A plain object is never a copy
 * (storable hands back the original unless a child changed), so only Maps and arrays are walked.
 */
export function fromStorable(value: unknown): unknown {
  if (value instanceof Map) return Object.fromEntries([...value].map(([key, child]) => [key, fromStorable(child)]));
  if (Array.isArray(value)) {
    const plain = value.map(fromStorable);
    return plain.some((child, i) => child !== value[i]) ? plain : value;
  }
  return value;
}

/** An event's row, in the partition of its seq among the run's `shards`. */
export function eventItem(tenant: string, event: RunEvent, writeId: string, shards = 1): Item {
  return {
    ...keys.event(tenant, event.runId, event.seq, shards),
    [attr.writeId]: writeId,
    [attr.entity]: 'event',
    [attr.runId]: event.runId,
    [attr.seq]: event.seq,
    [attr.type]: event.type,
    [attr.payload]: storable(event.payload ?? null),
    [attr.createdAt]: event.createdAt.toISOString(),
    [attr.origin]: originOf(event),
  };
}

export function toEvent(item: Item): RunEvent {
  return {
    runId: runIdOf(item),
    seq: seqOfSk(String(item.sk)) ?? Number(item[attr.seq]),
    type: String(item[attr.type] ?? ''),
    payload: fromStorable(item[attr.payload] ?? null),
    createdAt: date(item[attr.createdAt]),
    // Only the server's own value is SERVER: a row written around the API without it is a client's.
    origin: item[attr.origin] === 'SERVER' ? 'SERVER' : 'CLIENT',
  };
}

const eventSizes = attached<RunEvent, number>('size');

/**
 * About how many bytes an event takes in a response (its payload's JSON and the fields around
 * it), in UTF-8 as it is sent (a character past ASCII is 2 to 4 bytes); computed once per event.
 */
export function eventBytes(event: RunEvent): number {
  let size = eventSizes.get(event);
  if (size === undefined) {
    const payload = event.payload === null || event.payload === undefined ? 'null' : JSON.stringify(event.payload);
    size = 160 + Buffer.byteLength(event.type) + Buffer.byteLength(payload);
    eventSizes.set(event, size);
  }
  return size;
}

export function toLease(item: Item): Lease {
  return {
    unitId: String(item[attr.unitId]),
    owner: String(item[attr.owner] ?? ''),
    token: Number(item[attr.token] ?? 0),
    acquiredAt: date(item[attr.acquiredAt]),
    expiresAt: new Date(Number(item[attr.leaseUntil] ?? 0)),
    version: Number(item[attr.version] ?? 0),
  };
}

/** A run's claim row (null: never claimed, or ended with no holder). */
export function toClaim(item: Item | undefined): RunClaim | null {
  if (!item || typeof item[attr.holder] !== 'string') return null;
  return {
    runId: runIdOf(item),
    holder: item[attr.holder] as string,
    token: Number(item[attr.token] ?? 0),
    acquiredAt: date(item[attr.acquiredAt]),
    expiresAt: new Date(Number(item[attr.claimUntil] ?? 0)),
    version: Number(item[attr.version] ?? 0),
    // `true` on rows written before the reason was kept.
    ...(item[attr.claimEnded] === true ? { ended: true } : {}),
    ...(typeof item[attr.claimEnded] === 'string' ? { ended: true, endedBy: item[attr.claimEnded] as ClaimEnd } : {}),
  };
}

/** A chunk of a run's output stream, from its offset on. */
export function outputChunkItem(tenant: string, chunk: OutputChunk, at: Date): Item {
  return {
    ...keys.outputChunk(tenant, chunk.runId, chunk.stream, chunk.offset),
    [attr.entity]: 'output',
    [attr.runId]: chunk.runId,
    [attr.stream]: chunk.stream,
    [attr.offset]: chunk.offset,
    [attr.text]: chunk.text,
    [attr.final]: chunk.final,
    [attr.createdAt]: at.toISOString(),
  };
}

/** A chunk row; the stream and offset come from its key (a bypassing writer's copies may disagree). */
export function toOutputChunk(item: Item): OutputChunk {
  const placed = outputOfSk(String(item.sk));
  return {
    runId: runIdOf(item),
    stream: placed?.stream ?? String(item[attr.stream] ?? ''),
    offset: placed?.offset ?? Number(item[attr.offset] ?? 0),
    text: typeof item[attr.text] === 'string' ? (item[attr.text] as string) : '',
    final: item[attr.final] === true,
  };
}

/** The row saying a run has this output stream (written with its first chunk). */
export function outputStreamItem(tenant: string, runId: string, stream: string, at: Date): Item {
  return {
    ...keys.outputStream(tenant, runId, stream),
    [attr.entity]: 'outputStream',
    [attr.runId]: runId,
    [attr.stream]: stream,
    [attr.createdAt]: at.toISOString(),
  };
}

/** An output stream row: its name, and its length once it is final. */
export function toOutputStream(item: Item): { stream: string; final: boolean; length?: number } {
  const stream = outputStreamOfSk(String(item.sk)) ?? String(item[attr.stream] ?? '');
  const final = item[attr.final] === true;
  return final ? { stream, final, length: Number(item[attr.length] ?? 0) } : { stream, final };
}
