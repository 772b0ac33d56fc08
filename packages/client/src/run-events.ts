/**
 * runEvents: a run's events as an AsyncIterable that survives reconnects and server restarts,
 * hands each seq out once, in order, and never skips one silently. A hole in the feed (or one
 * the server announces in `missingBefore`) is read from the table (`run.events`) before the
 * event after it; a seq still missing there is announced in the next event's `missingBefore`,
 * and handed out with `late: true` if it comes later.
 */
import { RunplaneError } from './errors.ts';
import type { ResultOf } from './graphql.ts';
import type { HttpConnection, SendOptions } from './http.ts';
import { send } from './http.ts';
import type { Notice, SeqRange } from './notices.ts';
import { EventPage, LastSeq, RunEvents } from './operations.ts';
import { resuming } from './resuming.ts';
import type { RetryPolicy } from './retry.ts';
import { Sequencer } from './sequencer.ts';
import type { StreamTransport } from './transport.ts';

export type RunEvent = ResultOf<typeof RunEvents>['runEvents'];

/** Rows asked for per page when a hole is read from the table (the server's default page cap is 500). */
const FILL_PAGE = 200;

export interface RunEventsOptions {
  /** Start after this seq (0: the whole run). Absent: live from now (the run's last seq, read first). */
  afterSeq?: number;
  /** Only events of these types. */
  types?: string[];
  /** Ends the stream (the iteration finishes) when it aborts. */
  signal?: AbortSignal;
}

export interface StreamDeps {
  http: HttpConnection;
  transport: () => StreamTransport;
  retry: RetryPolicy;
  reconnect: RetryPolicy;
  onNotice: (notice: Notice) => void;
}

export function runEvents(deps: StreamDeps, runId: string, options: RunEventsOptions = {}): AsyncGenerator<RunEvent, void, undefined> {
  const { signal, types } = options;
  const request: SendOptions = { signal, retry: deps.retry, onNotice: deps.onNotice };
  const typeSet = types ? new Set(types) : undefined;
  let sequencer = new Sequencer(options.afterSeq ?? 0, typeSet);

  /** Rows of the table within `holes`, in seq order, a page at a time. */
  async function* rows(holes: readonly SeqRange[]) {
    for (const hole of holes) {
      for (let after = hole.from - 1; after < hole.to; ) {
        const first = Math.min(FILL_PAGE, hole.to - after);
        const { run } = await send(deps.http, EventPage, { id: runId, afterSeq: after, first }, request);
        const page = run?.events.edges.map((edge) => edge.node) ?? [];
        for (const row of page) if (row.seq <= hole.to) yield row;
        const last = page.at(-1)?.seq ?? hole.to;
        // The run's last page, or one reaching past the hole: the rest of the hole is not in the table.
        // A short page with more to come stopped where the server's reads did (large events): go on after it.
        after = !run?.events.pageInfo.hasNextPage ? hole.to : last;
      }
    }
  }

  function accept(event: RunEvent): readonly RunEvent[] | AsyncIterable<RunEvent> {
    const verdict = sequencer.judge(event);
    if (verdict.kind === 'drop') return [];
    if (verdict.kind === 'late') {
      const late = sequencer.late(event);
      return late ? [late] : [];
    }
    if (verdict.holes.length === 0) {
      const next = sequencer.inOrder(event, []);
      return next ? [next] : [];
    }
    return fill(event, verdict.holes);
  }

  /** The holes before `event` read from the table, then `event` itself. */
  async function* fill(event: RunEvent, holes: SeqRange[]): AsyncGenerator<RunEvent> {
    let found = 0;
    for await (const row of rows(holes)) {
      const handed = sequencer.fromTable(row, holes);
      if (handed) {
        found++;
        yield handed;
      }
    }
    const next = sequencer.inOrder(event, holes);
    deps.onNotice({ kind: 'gap', runId, asked: holes, found, missing: next?.missingBefore ?? [] });
    if (next) yield next;
  }

  /** After a reconnect: the seqs stepped over may be in the table by now (the old feed would have sent them late). */
  async function* lookAgain(): AsyncGenerator<RunEvent> {
    const missing = [...sequencer.stillMissing];
    if (missing.length === 0) return;
    for await (const row of rows(missing)) {
      const late = sequencer.late(row);
      if (late) yield late;
    }
  }

  return resuming<RunEvent>({
    stream: 'runEvents',
    transport: deps.transport(),
    policy: 'backlog',
    reconnect: deps.reconnect,
    signal,
    onNotice: deps.onNotice,
    // Live from now: from the run's last seq, read first, so that a reconnect resumes exactly there.
    prepare: async () => {
      if (options.afterSeq === undefined) sequencer = new Sequencer(await lastSeq(deps, runId, request), typeSet);
    },
    request: () => ({
      document: RunEvents,
      variables: { runId, afterSeq: sequencer.resumeAfter, types },
      lastEventId: String(sequencer.resumeAfter),
    }),
    accept: (result) => accept(result.data.runEvents as RunEvent),
    resumed: lookAgain,
    afterSeq: () => sequencer.resumeAfter,
  });
}

async function lastSeq(deps: StreamDeps, runId: string, request: SendOptions) {
  const { run } = await send(deps.http, LastSeq, { id: runId }, request);
  if (!run) throw new RunplaneError('NOT_FOUND', `run ${runId} does not exist`, { details: { runId } });
  return run.lastSeq;
}
