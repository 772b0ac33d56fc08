/**
 * Where a run ends, as the hub knows it while the run's events have listeners: read for a
 * listener (one read shared by those starting alike), moved on by every event published since,
 * trusted for a second after the read, forgotten when changes may have been lost or may not be
 * arriving, when the run is created, and when the last listener leaves; a read begun before the
 * end was forgotten is neither joined nor kept.
 */
import { describe, expect, test } from 'vitest';
import type { Change } from '../../src/streams/changes.ts';
import { topics } from '../../src/streams/changes.ts';
import { END_TRUSTED_MS, Hub, type Listener } from '../../src/streams/hub.ts';

const TENANT = 'default';
const RUN = 'run-1';
const topic = topics.events(TENANT, RUN);

const listener = (): Listener & { got: number[] } => {
  const got: number[] = [];
  return {
    got,
    change: (change: Change) => {
      if (change.kind === 'event') got.push(change.event.seq);
    },
    resync: () => undefined,
    refill: () => undefined,
  };
};

const event = (seq: number, runId = RUN): Change => ({
  kind: 'event',
  tenant: TENANT,
  runId,
  event: { runId, seq, type: 'step', payload: null, createdAt: new Date(0) },
});

const created = (version: number): Change => ({
  kind: 'run',
  tenant: TENANT,
  runId: RUN,
  run: { id: RUN, task: 't', status: 'RUNNING', version, createdAt: new Date(0), updatedAt: new Date(0), eventShards: 1 } as never,
});

/** A clock the test moves: a slow machine must not outwait the end's trust. */
function hubOnClock() {
  const clock = { now: 0 };
  const hub = new Hub(
    (err) => {
      throw err;
    },
    () => clock.now,
  );
  return { hub, clock };
}

/** A table read the test answers (or fails) when it chooses, counting how often it was made. */
function tableRead() {
  const pending: { resolve: (seq: number) => void; reject: (err: Error) => void }[] = [];
  const read = () =>
    new Promise<number>((resolve, reject) => {
      pending.push({ resolve, reject });
    });
  return { read, pending };
}

const answered = (seq: number) => () => Promise.resolve(seq);

describe('the end of a run, as the hub knows it', () => {
  test('read for the first listener; then moved on by each later event, never back', async () => {
    const { hub } = hubOnClock();
    const first = listener();
    hub.subscribe(topic, first);
    hub.publish(event(3));
    // An event alone says nothing of the events before it that were never published here.
    expect(hub.endOf(topic)).toBeUndefined();
    expect(await hub.endFor(topic, first, answered(5))).toBe(5);
    expect(hub.endOf(topic)).toBe(5);
    hub.publish(event(6));
    hub.publish(event(8));
    hub.publish(event(7));
    expect(hub.endOf(topic)).toBe(8);
    // Known: no read.
    expect(await hub.endFor(topic, first, () => Promise.reject(new Error('read')))).toBe(8);
    // Another run's events are another run's.
    hub.publish(event(50, 'run-2'));
    expect(hub.endOf(topic)).toBe(8);
    expect(first.got).toEqual([3, 6, 8, 7]);
  });

  test('one read for those starting together; a read that fails fails its own listener, the others read again', async () => {
    const { hub } = hubOnClock();
    const listeners = [listener(), listener(), listener()];
    for (const l of listeners) hub.subscribe(topic, l);
    const table = tableRead();
    const ends = listeners.map((l) => hub.endFor(topic, l, table.read));
    expect(table.pending).toHaveLength(1);
    table.pending[0]?.resolve(4);
    expect(await Promise.all(ends)).toEqual([4, 4, 4]);

    const { hub: other } = hubOnClock();
    for (const l of listeners) other.subscribe(topic, l);
    const failing = tableRead();
    const outcomes = Promise.allSettled(listeners.map((l) => other.endFor(topic, l, failing.read)));
    failing.pending[0]?.reject(new Error('throttled'));
    // The two that joined read again, once each.
    await new Promise((resolve) => setImmediate(resolve));
    expect(failing.pending).toHaveLength(3);
    failing.pending[1]?.resolve(4);
    failing.pending[2]?.resolve(4);
    expect((await outcomes).map((o) => o.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
  });

  test('trusted for a second after the last read; then read again, and the new read is the end', async () => {
    const { hub, clock } = hubOnClock();
    const only = listener();
    hub.subscribe(topic, only);
    await hub.endFor(topic, only, answered(5));
    hub.publish(event(6));
    clock.now = END_TRUSTED_MS;
    expect(hub.endOf(topic)).toBe(6);
    clock.now = END_TRUSTED_MS + 1;
    // Rows may have been removed meanwhile (removals are not published): the end must be read.
    expect(hub.endOf(topic)).toBeUndefined();
    expect(await hub.endFor(topic, only, answered(2))).toBe(2);
    expect(hub.endOf(topic)).toBe(2);
  });

  test('a read answered late is trusted from when it began', async () => {
    const { hub, clock } = hubOnClock();
    const only = listener();
    hub.subscribe(topic, only);
    const table = tableRead();
    const end = hub.endFor(topic, only, table.read);
    clock.now = END_TRUSTED_MS - 100;
    table.pending[0]?.resolve(5);
    expect(await end).toBe(5);
    expect(hub.endOf(topic)).toBe(5);
    clock.now = END_TRUSTED_MS + 1;
    expect(hub.endOf(topic)).toBeUndefined();
  });

  test('a run created (its id may be one whose rows expired) is read again', async () => {
    const { hub } = hubOnClock();
    const only = listener();
    hub.subscribe(topic, only);
    await hub.endFor(topic, only, answered(5));
    hub.publish(created(2));
    expect(hub.endOf(topic)).toBe(5);
    hub.publish(created(1));
    expect(hub.endOf(topic)).toBeUndefined();
  });

  test('a read begun before the end was forgotten is neither joined nor kept', async () => {
    for (const forget of [(hub: Hub) => hub.resync(), (hub: Hub) => hub.refill(), (hub: Hub) => hub.publish(created(1))]) {
      const { hub } = hubOnClock();
      const [early, late] = [listener(), listener()];
      hub.subscribe(topic, early);
      hub.subscribe(topic, late);
      const table = tableRead();
      const earlyEnd = hub.endFor(topic, early, table.read);
      // The old run's rows were read; then they went, and the run was made again (or changes were lost).
      forget(hub);
      const lateEnd = hub.endFor(topic, late, table.read);
      expect(table.pending).toHaveLength(2);
      table.pending[0]?.resolve(5);
      table.pending[1]?.resolve(0);
      expect(await earlyEnd).toBe(5);
      expect(await lateEnd).toBe(0);
      expect(hub.endOf(topic)).toBe(0);
    }
  });

  test('a listener not listening reads for itself, and its read is not kept', async () => {
    const { hub } = hubOnClock();
    const gone = listener();
    const unsubscribe = hub.subscribe(topic, gone);
    const other = listener();
    hub.subscribe(topic, other);
    unsubscribe();
    expect(await hub.endFor(topic, gone, answered(5))).toBe(5);
    expect(hub.endOf(topic)).toBeUndefined();
    expect(await hub.endFor(topic, other, answered(6))).toBe(6);
    expect(hub.endOf(topic)).toBe(6);
  });

  test('forgotten when the last listener leaves, on a resync and on a refill', async () => {
    const { hub } = hubOnClock();
    const only = listener();
    let unsubscribe = hub.subscribe(topic, only);
    await hub.endFor(topic, only, answered(5));
    unsubscribe();
    // Nobody listened in between: events written meanwhile were not seen here.
    unsubscribe = hub.subscribe(topic, only);
    expect(hub.endOf(topic)).toBeUndefined();
    await hub.endFor(topic, only, answered(9));
    hub.resync();
    expect(hub.endOf(topic)).toBeUndefined();
    await hub.endFor(topic, only, answered(9));
    hub.refill();
    expect(hub.endOf(topic)).toBeUndefined();
    await hub.endFor(topic, only, answered(9));
    expect(hub.endOf(topic)).toBe(9);
    unsubscribe();
    expect(hub.subscriberCount).toBe(0);
  });
});

describe('a listener that fails', () => {
  test('is reported; the listeners after it, on the run and tenant-wide, still get the change', () => {
    const failures: unknown[] = [];
    const hub = new Hub((err) => failures.push(err));
    const failing = (message: string): Listener => ({
      ...listener(),
      change: () => {
        throw new Error(message);
      },
    });
    const before = listener();
    const after = listener();
    hub.subscribe(topic, before);
    hub.subscribe(topic, failing('listener failed'));
    hub.subscribe(topic, after);
    const runsSeen: string[] = [];
    hub.subscribe(topics.runs(TENANT), failing('tenant-wide listener failed'));
    hub.subscribe(topics.runs(TENANT), { ...listener(), change: (change) => void (change.kind === 'run' && runsSeen.push(change.runId)) });
    hub.publish(event(1));
    hub.publish(created(2));
    expect(before.got).toEqual([1]);
    expect(after.got).toEqual([1]);
    expect(runsSeen).toEqual([RUN]);
    expect((failures as Error[]).map((e) => e.message)).toEqual(['listener failed', 'tenant-wide listener failed']);
  });
});
