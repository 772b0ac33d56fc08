/**
 * The clients: appenders (half with idempotency keys, retried until answered; half plain,
 * sent once, so group commit is exercised), budget chargers, lease workers that stall past
 * their lease and crash without releasing, and subscribers that drop their connection and
 * resume with afterSeq; run workers that claim runs, append fenced by their claim's token, and
 * now and then pause past their claim (then write again: refused once another took over) or
 * crash holding it (the stall watcher finds it, and the next worker takes it over). Keyed
 * appends are now and then sent to both servers at once (a double submit): the key must make
 * them one effect. A raw writer puts events straight
 * into the table, out of order, as a writer that bypasses the API may. Every operation goes
 * into the history.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { type Answer, graphql, sleep } from './client.ts';
import type { History, Operation } from './history.ts';

export interface WorkloadOptions {
  urls: string[];
  runs: string[];
  units: string[];
  history: History;
  appenders?: number;
  chargers?: number;
  workers?: number;
  subscribers?: number;
  /** Chance that a lease worker stalls past its lease after acquiring. */
  stallChance?: number;
  /** Runs that run workers claim and write to, fenced; closed (claimed and COMPLETED) when the load stops. */
  claimRuns?: string[];
  runWorkers?: number;
  /** A run with a low cap that the first charger spends on alone (refusals at the cap), besides the others. */
  cappedRun?: string;
  /** A run written to now and then by one client and watched by one subscriber that never drops (delivery latency). */
  probeRun?: string;
  /** How often the prober appends (default every 1.2 s). */
  probeEveryMs?: number;
  /** Chance that a keyed append is sent to both servers at once. */
  hedgeChance?: number;
  /** A run only the raw writer writes to, through `put` (the table, not the API), and one subscriber watches. */
  raw?: { runId: string; put(seq: number, op: string): Promise<void> };
  /**
   * A run written to steadily with large events, watched by readers that now and then stop
   * reading their socket for seconds (the server's buffer for them fills; their feeds fall
   * back to the table), each with several subscriptions on one socket.
   */
  stalled?: { runId: string; readers: number; copies: number; padBytes: number };
}

/**
 * The raw writer's gap-filling puts that landed later than this after the event past them:
 * a feed may rightly have stepped over the hole by then (it waits RUNPLANE_GAP_WAIT_SECONDS,
 * 30 s), so subscribers need not have them in their place.
 */
export const LATE_FILL_MS = 30_000;

/** What a subscriber got, in order, across its reconnects. */
export interface Subscription {
  runId: string;
  events: { seq: number; op: string | null }[];
  /** Times it resumed after a dropped or closed connection. */
  resumes: number;
  /** performance.now() at which each event arrived (parallel to events). */
  received?: number[];
  /** Never drops its connection on its own (the probe's subscriber). */
  stable?: boolean;
}

const APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) {
  __typename ... on Event { seq } ... on BudgetExceeded { remaining } } }`;
const CHARGE = `mutation($input: ChargeBudgetInput!) { chargeBudget(input: $input) {
  __typename ... on Budget { spent } ... on BudgetExceeded { remaining } } }`;
const CLAIM = `mutation($input: ClaimRunInput!) { claimRun(input: $input) {
  __typename ... on RunClaim { token holder acquiredAt expiresAt } ... on RunHeld { holder expiresAt } } }`;
const RENEW_CLAIM = `mutation($input: RenewRunClaimInput!) { renewRunClaim(input: $input) {
  __typename ... on RunClaim { token expiresAt } ... on ClaimLost { currentToken: token } } }`;
const RELEASE_CLAIM = `mutation($input: ReleaseRunClaimInput!) { releaseRunClaim(input: $input) {
  __typename ... on RunClaim { token expiresAt } ... on ClaimLost { currentToken: token } } }`;
const CLOSE = `mutation($input: TransitionRunInput!) { transitionRun(input: $input) {
  __typename ... on Run { status } ... on StatusConflict { current } ... on ClaimLost { currentToken: token } } }`;
const FENCED_APPEND = `mutation($input: AppendEventInput!) { appendEvent(input: $input) {
  __typename ... on Event { seq } ... on ClaimLost { currentToken: token } } }`;
const LEASE = '__typename ... on Lease { token owner acquiredAt expiresAt }';
const ACQUIRE = `mutation($input: AcquireLeaseInput!) { acquireLease(input: $input) { ${LEASE} ... on LeaseHeld { holder } } }`;
const RENEW = `mutation($input: RenewLeaseInput!) { renewLease(input: $input) { ${LEASE} ... on LeaseLost { currentToken } } }`;
const RELEASE = `mutation($input: ReleaseLeaseInput!) { releaseLease(input: $input) { ${LEASE} ... on LeaseLost { currentToken } } }`;

/** Typenames that mean "answered, nothing applied". */
const REFUSALS = new Set(['BudgetExceeded', 'LeaseHeld', 'LeaseLost', 'RunHeld', 'ClaimLost', 'StatusConflict']);
/** Typenames that mean "answered, applied". */
const EFFECTS = new Set(['Event', 'Budget', 'Lease', 'RunClaim', 'Run']);

const pick = <T>(items: T[]) => items[Math.floor(Math.random() * items.length)] as T;

export function startWorkload(options: WorkloadOptions) {
  const { urls, runs, units, history } = options;
  let generating = true;
  /** Retries of keyed operations go on until this time (set when the load stops). */
  let retryUntil = Number.POSITIVE_INFINITY;
  const subscriptions: Subscription[] = [];
  let subscribing = true;
  let stalls = 0;
  let crashes = 0;
  /** Run workers that paused past their claim, and that crashed holding one. */
  let runStalls = 0;
  let runCrashes = 0;
  /** Times a stalled reader stopped reading its socket. */
  let readerStalls = 0;
  /** The raw writer's ops whose put filled a hole late (see LATE_FILL_MS). */
  const lateFills = new Set<string>();

  /** Sends one operation; keyed ones are retried until answered (or the drain deadline). */
  const performOp = (...args: Parameters<typeof perform>) => perform(...args);
  async function perform(
    client: string,
    url: () => string,
    kind: Operation['kind'],
    query: string,
    input: Record<string, unknown>,
    keyed: boolean,
  ) {
    const send = graphql(url, history);
    const start = performance.now();
    const sentAt = Date.now();
    let attempts = 0;
    let answer: Answer;
    // A double submit: the first attempt goes to both servers at once; one effect, one answer.
    const hedge = keyed && kind === 'append' && Math.random() < (options.hedgeChance ?? 0.1);
    for (;;) {
      attempts++;
      if (hedge && attempts === 1) {
        const other = () => urls[(urls.indexOf(url()) + 1) % urls.length] as string;
        const both = await Promise.all([send(query, { input }), graphql(other, history)(query, { input })]);
        // The answer that applied it, if one did (the other may be a refusal judged at another moment).
        const applied = (a: Answer) => (a.data && Object.values(a.data)[0])?.__typename === 'Event';
        answer = both.find(applied) ?? both.find((a) => a.data) ?? (both[0] as Answer);
        // An applied append is stored with its key: every answer that applied it is the same.
        // A refusal applies nothing and leaves the key free, so each attempt is judged when it
        // comes (a claim may run out between the two, or another holder be named): refusals
        // may differ, from each other and from the twin that applied it.
        const answered = new Set(
          both
            .map((a) => a.data && Object.values(a.data)[0])
            .filter((result) => result?.__typename === 'Event')
            .map((result) => JSON.stringify(result)),
        );
        if (answered.size > 1) history.unexpected.push(`one keyed append answered ${[...answered].join(' and ')}`);
      } else answer = await send(query, { input });
      if (answer.data || !answer.retryable || !keyed || performance.now() > retryUntil) break;
      await sleep(50 + Math.random() * 150);
    }
    const result = answer.data ? (Object.values(answer.data)[0] as Record<string, unknown>) : undefined;
    const typename = result?.__typename as string | undefined;
    const outcome = !result ? 'unknown' : typename && REFUSALS.has(typename) ? 'refused' : 'acknowledged';
    if (result && typename && !REFUSALS.has(typename) && !EFFECTS.has(typename)) {
      history.unexpected.push(`${kind} answered ${typename}`);
    }
    history.add({ client, kind, input, start, end: performance.now(), sentAt, outcome, result, attempts, failure: answer.failure });
    return result;
  }

  const appender = async (index: number) => {
    const client = `appender-${index}`;
    const url = () => urls[index % urls.length] as string;
    // Keyed and plain appenders on both servers.
    const keyed = Math.floor(index / 2) % 2 === 0;
    for (let n = 1; generating; ) {
      // Plain appenders now and then send a burst to one run at once (a tool fan-out), so that
      // group commit writes batches of more than one.
      const burst = !keyed && Math.random() < 0.3 ? 3 + Math.floor(Math.random() * 4) : 1;
      const runId = pick(runs);
      const results = await Promise.all(
        Array.from({ length: burst }, () => {
          const op = `${client}-${n++}`;
          const cost = keyed && Math.random() < 0.2 ? 1 : undefined;
          const input = {
            runId,
            type: 'chaos',
            payload: { op },
            ...(cost ? { cost } : {}),
            ...(keyed ? { idempotencyKey: op } : {}),
          };
          return perform(client, url, 'append', APPEND, input, keyed);
        }),
      );
      // A client that got no answer waits a moment before its next request, as any would.
      if (results.some((r) => !r)) await sleep(50 + Math.random() * 150);
    }
  };

  const charger = async (index: number) => {
    const client = `charger-${index}`;
    const url = () => urls[index % urls.length] as string;
    for (let n = 1; generating; n++) {
      const runId = index === 0 && options.cappedRun ? options.cappedRun : pick(runs);
      const input = { runId, amount: 1 + Math.floor(Math.random() * 5), idempotencyKey: `${client}-${n}` };
      await perform(client, url, 'charge', CHARGE, input, true);
      await sleep(Math.random() * 20);
    }
  };

  const workers = options.workers ?? 6;
  const worker = async (index: number) => {
    // Two workers share each owner name: a worker restarted under the same identity while its
    // old incarnation still runs. Only the token tells their leases apart.
    const owner = `worker-${index % Math.ceil(workers / 2)}`;
    const client = `worker-${index}`;
    const url = () => urls[index % urls.length] as string;
    const stallChance = options.stallChance ?? 0.2;
    // Half of the workers send plain lease requests (no key: the holder-write path), once each.
    const plain = index % 2 === 1;
    const perform = (c: string, u: () => string, kind: Operation['kind'], q: string, input: Record<string, unknown>) =>
      performOp(c, u, kind, q, plain ? { ...input, idempotencyKey: undefined } : input, !plain);
    for (let n = 1; generating; n++) {
      const unitId = pick(units);
      const key = (what: string) => `${client}-${n}-${what}`;
      const taken = await perform(client, url, 'acquire', ACQUIRE, { unitId, owner, ttlSeconds: 1, idempotencyKey: key('acquire') });
      if (taken?.__typename !== 'Lease') {
        await sleep(Math.random() * 50);
        continue;
      }
      const token = taken.token as number;
      await perform(client, url, 'renew', RENEW, { unitId, owner, token, ttlSeconds: 1, idempotencyKey: key('renew-1') });
      // A stall past the lease: a GC pause, a slow tool call. Its writes after waking must be refused if someone took over.
      if (Math.random() < stallChance) {
        stalls++;
        await sleep(1_300);
      } else await sleep(Math.random() * 100);
      await perform(client, url, 'renew', RENEW, { unitId, owner, token, ttlSeconds: 1, idempotencyKey: key('renew-2') });
      // A crash: the lease is left to expire.
      if (Math.random() < 0.2) {
        crashes++;
        continue;
      }
      await perform(client, url, 'release', RELEASE, { unitId, owner, token, idempotencyKey: key('release') });
    }
  };

  /**
   * Claims a run, appends to it fenced by the claim's token (renewing between writes), then
   * releases it; or pauses past the claim and writes again (refused once another worker took
   * over), or crashes holding it (the stall watcher finds the run STALLED; the next claim
   * takes it over).
   */
  const runWorker = async (index: number, claimRuns: string[]) => {
    const holder = `runner-${index}`;
    const url = () => urls[index % urls.length] as string;
    for (let n = 1; generating; n++) {
      const runId = pick(claimRuns);
      const claimed = await perform(
        holder,
        url,
        'claim',
        CLAIM,
        { runId, holder, ttlSeconds: 1, idempotencyKey: `${holder}-${n}-claim` },
        true,
      );
      if (claimed?.__typename !== 'RunClaim') {
        await sleep(50 + Math.random() * 100);
        continue;
      }
      const token = claimed.token as number;
      const write = (suffix: string) => {
        const op = `${holder}-${n}-${suffix}`;
        return perform(
          holder,
          url,
          'append',
          FENCED_APPEND,
          { runId, type: 'work', payload: { op, token }, fencingToken: token, idempotencyKey: op },
          true,
        );
      };
      for (let k = 0; k < 3 && generating; k++) {
        await write(String(k));
        await sleep(Math.random() * 100);
        await perform(holder, url, 'renewClaim', RENEW_CLAIM, { runId, holder, token, ttlSeconds: 1 }, false);
      }
      const fate = Math.random();
      if (fate < 0.25) {
        // A pause past the claim (a GC pause, a slow model call): what it writes on waking is refused if another took over.
        runStalls++;
        await sleep(1_500);
        await write('late');
      } else if (fate < 0.45) {
        runCrashes++;
        continue;
      }
      await perform(holder, url, 'releaseClaim', RELEASE_CLAIM, { runId, holder, token }, false);
    }
  };

  /** When the load stops: each claimed run is claimed once more (taken over if STALLED) and COMPLETED, fenced. */
  const closeRuns = async (claimRuns: string[]) => {
    for (const runId of claimRuns) {
      const url = () => urls[0] as string;
      for (let n = 1; performance.now() < retryUntil; n++) {
        const claimed = await perform(
          'closer',
          url,
          'claim',
          CLAIM,
          { runId, holder: 'closer', ttlSeconds: 30, idempotencyKey: `closer-${runId}-${n}` },
          true,
        );
        if (claimed?.__typename !== 'RunClaim') {
          await sleep(100);
          continue;
        }
        const closed = await perform(
          'closer',
          url,
          'close',
          CLOSE,
          { runId, from: 'RUNNING', to: 'COMPLETED', fencingToken: claimed.token, idempotencyKey: `closer-${runId}-${n}-close` },
          true,
        );
        if (closed?.__typename === 'Run') break;
      }
    }
  };

  const subscriber = async (index: number, probe?: string, run?: string) => {
    const runId = probe ?? run ?? (runs[index % runs.length] as string);
    const url = urls[(index + 1) % urls.length] as string;
    const subscription: Subscription = { runId, events: [], resumes: 0, received: [], stable: !!probe };
    subscriptions.push(subscription);
    while (subscribing) {
      const last = subscription.events.at(-1)?.seq ?? 0;
      const client = createClient({ url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 0, lazy: true });
      let drop: NodeJS.Timeout | undefined;
      let watch: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        const dispose = client.subscribe<{ runEvents: { seq: number; payload: { op?: string } | null } }>(
          {
            query: 'subscription($r: ID!, $after: Int) { runEvents(runId: $r, afterSeq: $after) { seq payload } }',
            variables: { r: runId, after: last },
          },
          {
            next: ({ data }) => {
              if (data) {
                subscription.events.push({ seq: data.runEvents.seq, op: data.runEvents.payload?.op ?? null });
                subscription.received?.push(performance.now());
              }
            },
            error: () => resolve(),
            complete: () => resolve(),
          },
        );
        // Now and then the dashboard drops its connection on its own.
        if (!subscription.stable)
          drop = setTimeout(
            () => {
              dispose();
              resolve();
            },
            500 + Math.random() * 1_500,
          );
        watch = setInterval(() => {
          if (subscribing) return;
          dispose();
          resolve();
        }, 50);
        client.on('closed', () => resolve());
      });
      clearTimeout(drop);
      clearInterval(watch);
      // A socket that failed while connecting fails its dispose too: the subscriber resumes all the same.
      await Promise.resolve(client.dispose()).catch(() => undefined);
      if (subscribing) {
        subscription.resumes++;
        await sleep(50 + Math.random() * 200);
      }
    }
  };

  /** Appends to the probe run through server 0 now and then; its subscriber listens on server 1. */
  const prober = async (runId: string) => {
    const url = () => urls[0] as string;
    for (let n = 1; generating; n++) {
      const op = `prober-${n}`;
      await perform('prober', url, 'append', APPEND, { runId, type: 'chaos', payload: { op }, idempotencyKey: op }, true);
      await sleep(options.probeEveryMs ?? 1_200);
    }
  };

  /**
   * Puts events straight into the table in pairs, the later seq first and the earlier a moment
   * after (well within the feed's wait for a hole), each put retried until it lands.
   */
  const rawWriter = async ({ runId, put }: NonNullable<WorkloadOptions['raw']>) => {
    const write = async (seq: number, op: string) => {
      const start = performance.now();
      const sentAt = Date.now();
      for (let attempts = 1; ; attempts++) {
        try {
          await put(seq, op);
          const end = performance.now();
          history.add({
            client: 'raw',
            kind: 'append',
            input: { runId, payload: { op } },
            start,
            end,
            sentAt,
            outcome: 'acknowledged',
            result: { seq },
            attempts,
          });
          return start;
        } catch (err) {
          // Past the drain deadline the engine is not back: give up (checkAppends reports what is missing).
          if (performance.now() > retryUntil) throw err;
          await sleep(20 + Math.random() * 50);
        }
      }
    };
    for (let seq = 1; generating; seq += 2) {
      const ahead = await write(seq + 1, `raw-${seq + 1}`);
      await sleep(50 + Math.random() * 250);
      await write(seq, `raw-${seq}`);
      if (performance.now() - ahead > LATE_FILL_MS) lateFills.add(`raw-${seq}`);
      await sleep(Math.random() * 300);
    }
  };

  /** Appends large events to the stalled readers' run through server 0, in bursts (group commit writes them together). */
  const bulkWriter = async ({ runId, padBytes }: NonNullable<WorkloadOptions['stalled']>) => {
    const pad = 'p'.repeat(padBytes);
    for (let n = 1; generating; ) {
      await Promise.all(
        Array.from({ length: 8 }, () => {
          const op = `bulk-${n++}`;
          return perform('bulk', () => urls[0] as string, 'append', APPEND, { runId, type: 'bulk', payload: { op, pad } }, false);
        }),
      );
    }
  };

  /**
   * One socket on server 1 with `copies` subscriptions to the run, each from seq 0; now and then
   * it stops reading for a while, then reads on. Each copy must still get every event once, in order.
   */
  const stalledReader = async ({ runId, copies }: NonNullable<WorkloadOptions['stalled']>) => {
    const socket = new WebSocket((urls[1 % urls.length] as string).replace(/^http/, 'ws'), 'graphql-transport-ws');
    const copiesOf = Array.from({ length: copies }, (): Subscription => ({ runId, events: [], resumes: 0, stable: true }));
    subscriptions.push(...copiesOf);
    const query = 'subscription($r: ID!) { runEvents(runId: $r, afterSeq: 0) { seq payload } }';
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init' })));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as {
        type: string;
        id?: string;
        payload?: { data?: { runEvents: { seq: number; payload: { op?: string } } } };
      };
      if (message.type === 'connection_ack') {
        for (const i of copiesOf.keys())
          socket.send(JSON.stringify({ id: String(i), type: 'subscribe', payload: { query, variables: { r: runId } } }));
      }
      const event = message.payload?.data?.runEvents;
      if (message.type === 'next' && event) copiesOf[Number(message.id)]?.events.push({ seq: event.seq, op: event.payload?.op ?? null });
    });
    await new Promise((resolve) => socket.once('open', resolve));
    const lagging = async () => {
      const text = await fetch(new URL('/metrics', urls[1 % urls.length])).then(
        (r) => r.text(),
        () => '',
      );
      return Number(/^runplane_subscriptions_lagging (\d+)/m.exec(text)?.[1] ?? 0) > 0;
    };
    while (subscribing) {
      await sleep(500 + Math.random() * 1_000);
      if (!generating) continue;
      socket.pause();
      readerStalls++;
      // Stalled until the server's feeds have fallen behind (however fast this machine writes), then a little longer.
      const until = performance.now() + 10_000;
      while (generating && performance.now() < until && !(await lagging())) await sleep(100);
      await sleep(500 + Math.random() * 1_000);
      socket.resume();
    }
    socket.resume();
    socket.close();
  };

  const tasks = [
    ...Array.from({ length: options.appenders ?? 8 }, (_, i) => appender(i)),
    ...Array.from({ length: options.chargers ?? 3 }, (_, i) => charger(i)),
    ...Array.from({ length: workers }, (_, i) => worker(i)),
    ...(options.probeRun ? [prober(options.probeRun)] : []),
    ...(options.raw ? [rawWriter(options.raw).catch(() => {})] : []),
    ...(options.stalled ? [bulkWriter(options.stalled)] : []),
    ...Array.from({ length: options.claimRuns ? (options.runWorkers ?? 3) : 0 }, (_, i) => runWorker(i, options.claimRuns as string[])),
  ];
  const watching = [
    ...Array.from({ length: options.subscribers ?? 4 }, (_, i) => subscriber(i)),
    // On server 1, the prober writes through server 0: only the stream poller brings its events.
    ...(options.probeRun ? [subscriber(0, options.probeRun)] : []),
    ...(options.raw ? [subscriber(0, undefined, options.raw.runId)] : []),
    ...Array.from({ length: options.stalled?.readers ?? 0 }, () =>
      stalledReader(options.stalled as NonNullable<WorkloadOptions['stalled']>),
    ),
  ];

  return {
    subscriptions,
    /** Lease workers that stalled past their lease, and that crashed holding one. */
    get stalls() {
      return stalls;
    },
    get crashes() {
      return crashes;
    },
    get readerStalls() {
      return readerStalls;
    },
    /** Run workers that paused past their claim, and that crashed holding one. */
    get runStalls() {
      return runStalls;
    },
    get runCrashes() {
      return runCrashes;
    },
    lateFills,
    /** Stops making new operations; those under way keep retrying (keyed) until `drainMs` from now. */
    async stopLoad(drainMs: number) {
      generating = false;
      retryUntil = performance.now() + drainMs;
      await Promise.all(tasks);
      if (options.claimRuns) await closeRuns(options.claimRuns);
    },
    /** Ends the subscribers (after the checker has let them catch up). */
    async stopSubscribers() {
      subscribing = false;
      await Promise.all(watching);
    },
  };
}
