/**
 * Where a run ends, as the hub knows it while the run's events have listeners: set by a read a
 * listener made, moved on by every event published since, trusted for a second after the read,
 * forgotten when changes may have been lost or may not be arriving, when the run is created,
 * and when the last listener leaves.
 */
import { describe, expect, test } from 'vitest';
import type { Change } from '../../src/streams/changes.ts';
import { topics } from '../../src/streams/changes.ts';
import { END_TRUSTED_MS, Hub, type Listener } from '../../src/streams/hub.ts';

const TENANT = 'default';
const RUN = 'run-1';
const topic = topics.events(TENANT, RUN);
/** A clock that stands still: a slow machine must not outwait the end's trust. */
const standingStill = () => 0;

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

describe('the end of a run, as the hub knows it', () => {
  test('unknown until a listener reads it; then moved on by each later event, never back', () => {
    const hub = new Hub((err) => {
      throw err;
    }, standingStill);
    const first = listener();
    hub.subscribe(topic, first);
    hub.publish(event(3));
    // An event alone says nothing of the events before it that were never published here.
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, first, 5, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(5);
    hub.publish(event(6));
    hub.publish(event(8));
    hub.publish(event(7));
    expect(hub.endOf(topic)).toBe(8);
    // A read that ended before the events above, while the end is trusted: the end stays where they took it.
    hub.noteEnd(topic, first, 6, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(8);
    // Another run's events are another run's.
    hub.publish(event(50, 'run-2'));
    expect(hub.endOf(topic)).toBe(8);
    expect(first.got).toEqual([3, 6, 8, 7]);
  });

  test('trusted for a second after the last read; then read again, and the new read is the end', () => {
    let now = 0;
    const hub = new Hub(
      () => undefined,
      () => now,
    );
    const only = listener();
    hub.subscribe(topic, only);
    hub.noteEnd(topic, only, 5, hub.endMark(topic));
    hub.publish(event(6));
    now = END_TRUSTED_MS;
    expect(hub.endOf(topic)).toBe(6);
    now = END_TRUSTED_MS + 1;
    // Rows may have been removed meanwhile (removals are not published): the end must be read.
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, only, 2, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(2);
  });

  test('a run created (its id may be one whose rows expired) is read again', () => {
    const hub = new Hub(() => undefined, standingStill);
    const only = listener();
    hub.subscribe(topic, only);
    hub.noteEnd(topic, only, 5, hub.endMark(topic));
    const run = (version: number): Change => ({
      kind: 'run',
      tenant: TENANT,
      runId: RUN,
      run: { id: RUN, task: 't', status: 'RUNNING', version, createdAt: new Date(0), updatedAt: new Date(0), eventShards: 1 } as never,
    });
    hub.publish(run(2));
    expect(hub.endOf(topic)).toBe(5);
    hub.publish(run(1));
    expect(hub.endOf(topic)).toBeUndefined();
  });

  test('a read begun before changes were lost or stopped arriving is not kept', () => {
    const hub = new Hub(() => undefined, standingStill);
    const only = listener();
    hub.subscribe(topic, only);
    for (const forget of [() => hub.resync(), () => hub.refill()]) {
      const mark = hub.endMark(topic);
      forget();
      hub.noteEnd(topic, only, 5, mark);
      expect(hub.endOf(topic)).toBeUndefined();
    }
    hub.noteEnd(topic, only, 5, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(5);
  });

  test('a read by a listener that is no longer listening is not kept', () => {
    const hub = new Hub(() => undefined, standingStill);
    const gone = listener();
    const unsubscribe = hub.subscribe(topic, gone);
    const other = listener();
    hub.subscribe(topic, other);
    unsubscribe();
    hub.noteEnd(topic, gone, 5, hub.endMark(topic));
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, other, 5, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(5);
  });

  test('forgotten when the last listener leaves, on a resync and on a refill', () => {
    const hub = new Hub(() => undefined, standingStill);
    const only = listener();
    let unsubscribe = hub.subscribe(topic, only);
    hub.noteEnd(topic, only, 5, hub.endMark(topic));
    unsubscribe();
    // Nobody listened in between: events written meanwhile were not seen here.
    unsubscribe = hub.subscribe(topic, only);
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, only, 9, hub.endMark(topic));
    hub.resync();
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, only, 9, hub.endMark(topic));
    hub.refill();
    expect(hub.endOf(topic)).toBeUndefined();
    hub.noteEnd(topic, only, 9, hub.endMark(topic));
    expect(hub.endOf(topic)).toBe(9);
    unsubscribe();
    expect(hub.subscriberCount).toBe(0);
  });
});
