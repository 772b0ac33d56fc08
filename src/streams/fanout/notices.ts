/**
 * Notices: a change sent through Redis without its content, because it is larger than an
 * entry may be (RUNPLANE_REDIS_ENTRY_BYTES) or its tenant is past its share of the bytes this
 * replica sends (fanout/shares.ts). It names what changed; the replicas that receive it read
 * that from the table, which is the record: a change is published once its write has landed,
 * and live output text (published before it is stored) is followed by its chunk rows' own
 * changes or notices once stored. Nothing is lost, only read.
 *
 * - An event, output text or a claim: the topic's feeds read what is new, as while Redis is
 *   degraded (their refill), one read per feed at a time.
 * - A run (or budget) and a lease: read here, once per replica however many feeds listen, and
 *   published as if it had come whole, so that tenant-wide feeds (which cannot re-read
 *   everything) get it too.
 */
import type { Budget, Lease, Run, RunClaim } from '../../domain/run.ts';
import { type Change, topics } from '../changes.ts';
import type { Hub } from '../hub.ts';

export interface Notice {
  kind: Change['kind'];
  tenant: string;
  /** The run's id (the unit's for a lease). */
  id: string;
  /** An output change's stream. */
  stream?: string;
}

const KINDS: ReadonlySet<string> = new Set<Change['kind']>(['event', 'run', 'budget', 'claim', 'lease', 'output']);

/** The notice of a change, as an entry's value. */
export function noticeOf(change: Change): string {
  const id = change.kind === 'lease' ? change.unitId : change.runId;
  const stream = change.kind === 'output' ? change.chunk.stream : undefined;
  return JSON.stringify({ kind: change.kind, tenant: change.tenant, id, stream });
}

/** The entries of a turn, each notice once (the first of the same thing). */
export function withoutRepeatedNotices<T extends { kind: string; value: string }>(entries: T[]): T[] {
  const seen = new Set<string>();
  return entries.filter(({ kind, value }) => kind !== 'notice' || (!seen.has(value) && Boolean(seen.add(value))));
}

/** @throws on anything that is not a notice this version wrote */
export function decodeNotice(text: string): Notice {
  const value = JSON.parse(text) as Partial<Record<keyof Notice, unknown>> | null;
  if (
    !value ||
    !KINDS.has(value.kind as string) ||
    typeof value.tenant !== 'string' ||
    typeof value.id !== 'string' ||
    (value.kind === 'output' && typeof value.stream !== 'string')
  )
    throw new Error('not a notice');
  return value as Notice;
}

/** What a receiving replica reads for a notice of a run or a lease (strongly consistent). */
export interface NoticeTable {
  runHead(tenant: string, runId: string): Promise<{ run: Run; budget: Budget | null; claim: RunClaim | null } | null>;
  lease(tenant: string, unitId: string): Promise<Lease | null>;
}

/** Reads of runs and leases for notices at once; more wait their turn. */
export const NOTICE_READS_IN_FLIGHT = 16;
/** Runs and leases waiting for a read; past it changes may be missed, and every feed re-reads (a resync). */
export const MAX_NOTICES_WAITING = 10_000;

export interface NoticeReadsOptions {
  hub: Hub;
  table: NoticeTable;
  /** Changes may have been missed (a read failed, or too many wait): every feed re-reads. */
  onLost: (reason: string) => void;
}

/** A receiving replica's side: each notice turned into reads of the table. */
export class NoticeReads {
  /** Runs and leases to read, by key. */
  private readonly waiting = new Map<string, Notice>();
  /** Reads under way, by key: true when another notice came meanwhile (read once more after). */
  private readonly reading = new Map<string, boolean>();

  constructor(private readonly options: NoticeReadsOptions) {}

  take(notice: Notice) {
    const { hub } = this.options;
    const { tenant, id } = notice;
    if (notice.kind === 'event') return hub.refillTopic(topics.events(tenant, id));
    if (notice.kind === 'output') return hub.refillTopic(topics.output(tenant, id, notice.stream as string));
    if (notice.kind === 'claim') return hub.refillTopic(topics.run(tenant, id));
    const lease = notice.kind === 'lease';
    const [topic, wide] = lease ? [topics.lease(tenant, id), topics.leases(tenant)] : [topics.run(tenant, id), topics.runs(tenant)];
    // Nobody here listens: a subscriber starting later reads the table as it starts.
    if (hub.listenersOf(topic) + hub.listenersOf(wide) === 0) return;
    const key = lease ? topic : topics.run(tenant, id);
    if (this.reading.has(key)) return void this.reading.set(key, true);
    if (this.waiting.has(key)) return;
    if (this.waiting.size >= MAX_NOTICES_WAITING) {
      this.waiting.clear();
      return this.options.onLost(`more than ${MAX_NOTICES_WAITING} runs and leases waited to be read for notices`);
    }
    this.waiting.set(key, notice);
    this.next();
  }

  get waitingReads() {
    return this.waiting.size;
  }

  private next() {
    while (this.reading.size < NOTICE_READS_IN_FLIGHT && this.waiting.size > 0) {
      const [key, notice] = this.waiting.entries().next().value as [string, Notice];
      this.waiting.delete(key);
      this.reading.set(key, false);
      this.read(notice)
        .catch((err) => this.options.onLost(`a read for a notice failed (${err instanceof Error ? err.message : String(err)})`))
        .finally(() => {
          const again = this.reading.get(key);
          this.reading.delete(key);
          if (again) this.waiting.set(key, notice);
          this.next();
        });
    }
  }

  private async read({ kind, tenant, id }: Notice) {
    const { hub, table } = this.options;
    if (kind === 'lease') {
      const lease = await table.lease(tenant, id);
      if (lease) hub.publish({ kind: 'lease', tenant, unitId: id, lease });
      return;
    }
    const head = await table.runHead(tenant, id);
    if (!head) return;
    // Feeds keep what is newer by version: whatever of these they had already is dropped.
    hub.publish({ kind: 'run', tenant, runId: id, run: head.run });
    if (head.budget) hub.publish({ kind: 'budget', tenant, runId: id, budget: head.budget });
    if (head.claim) hub.publish({ kind: 'claim', tenant, runId: id, claim: head.claim });
  }
}
