/**
 * The event feed's states as a table: given a state, when an input comes, then the state it
 * is in, what it handed out and what its driver is to do. No table and no timers: each row
 * answers the reads itself, the clock is a number, and the consumer takes what it has room for.
 */
import { describe, expect, test } from 'vitest';
import type { DeliveredEvent, RunEvent } from '../../src/domain/run.ts';
import { Effect, type FeedState } from '../../src/streams/event-feed-effects.ts';
import { EventFeedMachine } from '../../src/streams/event-feed-states.ts';
import { MAX_PENDING } from '../../src/streams/event-order.ts';

const GRACE_MS = 20;
const GAP_WAIT_MS = 1_000;

type Input =
  | { kind: 'start' }
  | { kind: 'found'; lastSeq: number }
  | { kind: 'event'; seq: number; type?: string }
  | { kind: 'events'; from: number; count: number }
  | { kind: 'page'; seqs: number[]; more?: boolean }
  | { kind: 'full' }
  | { kind: 'rechecked'; seqs: number[] }
  | { kind: 'failed' }
  | { kind: 'look' }
  | { kind: 'retry' }
  | { kind: 'resync' }
  | { kind: 'refill' }
  | { kind: 'drained' }
  | { kind: 'close' };

const start: Input = { kind: 'start' };
const found = (lastSeq: number): Input => ({ kind: 'found', lastSeq });
const event = (seq: number, type?: string): Input => ({ kind: 'event', seq, type });
const page = (seqs: number[], more = false): Input => ({ kind: 'page', seqs, more });
const rechecked = (seqs: number[]): Input => ({ kind: 'rechecked', seqs });
const full: Input = { kind: 'full' };
const failed: Input = { kind: 'failed' };
const look: Input = { kind: 'look' };
const retry: Input = { kind: 'retry' };
const resync: Input = { kind: 'resync' };
const refill: Input = { kind: 'refill' };
const drained: Input = { kind: 'drained' };
const close: Input = { kind: 'close' };
/** A step of the setup, not an input of its own: the clock moves on. */
const at = (ms: number) => ({ kind: 'clock' as const, ms });
/** A step of the setup: the consumer has room for `room` more events (Infinity: always). */
const room = (room: number) => ({ kind: 'room' as const, room });
type Step = Input | ReturnType<typeof at> | ReturnType<typeof room>;

const runEvent = (seq: number, type = 'step'): RunEvent => ({ runId: 'r', seq, type, payload: null, createdAt: new Date(0) });
const TABLE_DOWN = new Error('table unreachable');

/** A machine with a consumer and a clock of its own. */
function rig(options: { afterSeq?: number; types?: string[] }) {
  const state = { room: Number.POSITIVE_INFINITY, clock: 0, handed: [] as DeliveredEvent[] };
  const machine = new EventFeedMachine({
    ...options,
    holeGraceMs: GRACE_MS,
    gapWaitMs: GAP_WAIT_MS,
    now: () => state.clock,
    out: {
      push(delivered) {
        if (state.room <= 0) return false;
        state.room--;
        state.handed.push(delivered);
        return true;
      },
    },
  });
  const apply = (step: Step): number => {
    switch (step.kind) {
      case 'clock':
        state.clock = step.ms;
        return Effect.NONE;
      case 'room':
        state.room = step.room;
        return Effect.NONE;
      case 'start':
        return machine.start();
      case 'found':
        return machine.found(step.lastSeq);
      case 'event':
        return machine.event(runEvent(step.seq, step.type));
      case 'events': {
        let effects: number = Effect.NONE;
        for (let seq = step.from; seq < step.from + step.count; seq++) effects = machine.event(runEvent(seq));
        return effects;
      }
      case 'page':
        return machine.page(
          step.seqs.map((seq) => runEvent(seq)),
          step.more ?? false,
        );
      case 'full':
        return machine.full();
      case 'rechecked':
        return machine.rechecked(step.seqs.map((seq) => runEvent(seq)));
      case 'failed':
        return machine.failed(TABLE_DOWN);
      case 'look':
        return machine.look();
      case 'retry':
        return machine.retry();
      case 'resync':
        return machine.resync();
      case 'refill':
        return machine.refill();
      case 'drained':
        return machine.drained();
      case 'close':
        return machine.close();
    }
  };
  return { machine, state, apply };
}

/** An event as the consumer got it, in short: `4`, `4 late`, `4 after missing 3-3`. */
const shown = (e: DeliveredEvent) =>
  `${e.seq}${e.late ? ' late' : ''}${e.missingBefore ? ` after missing ${e.missingBefore.map((r) => `${r.from}-${r.to}`).join(',')}` : ''}`;
const effectNames = (effects: number) =>
  Object.entries(Effect)
    .filter(([, bit]) => bit !== 0 && (effects & bit) !== 0)
    .map(([name]) => name);

interface Given {
  state: FeedState;
  options?: { afterSeq?: number; types?: string[] };
  steps: Step[];
}

/** Each state, reached the way a feed reaches it. */
const givens = {
  new: { state: 'starting', options: {}, steps: [] },
  'new, from afterSeq 4': { state: 'starting', options: { afterSeq: 4 }, steps: [] },
  starting: { state: 'starting', options: {}, steps: [start] },
  'starting, 3 and 5 seen': { state: 'starting', options: {}, steps: [start, event(3), event(5)] },
  'starting, 1,000 seen': { state: 'starting', options: {}, steps: [start, { kind: 'events', from: 1, count: MAX_PENDING }] },
  'starting, changes lost meanwhile': { state: 'starting', options: {}, steps: [start, resync] },
  'starting, changes not arriving': { state: 'starting', options: {}, steps: [start, refill] },
  'reading from 1': { state: 'reading', steps: [start] },
  'reading from 1, 1 handed out live': { state: 'reading', steps: [start, event(1)] },
  'reading from 1, asked again': { state: 'reading', steps: [start, refill] },
  'reading from 1, 1,000 seen ahead': { state: 'reading', steps: [start, { kind: 'events', from: 3, count: MAX_PENDING }] },
  'reading from 3 after a hole, since 0': { state: 'reading', steps: [start, page([1, 2, 4]), look] },
  'reading from 3, 5 seen': { state: 'reading', steps: [start, page([1, 2]), event(5), look] },
  'reading from 3, 5 seen, waited for since 0': { state: 'reading', steps: [start, page([1, 2]), event(5), look, page([]), look] },
  'live at 6, 3-4 stepped over behind 5 seen live': {
    state: 'live',
    steps: [start, page([1, 2]), event(5), look, page([]), look, at(GAP_WAIT_MS), page([])],
  },
  'rechecking 3-3 (live at 5)': { state: 'reading', steps: [start, page([1, 2, 4]), at(GAP_WAIT_MS), look, page([4]), resync] },
  'rechecking 3-3 and 6-6 (live at 8)': {
    state: 'reading',
    steps: [start, page([1, 2, 4]), at(GAP_WAIT_MS), look, page([4, 5, 7]), at(2 * GAP_WAIT_MS), look, page([7]), resync],
  },
  'rechecking 3-3 at 4, 3 not yet said': {
    state: 'reading',
    steps: [start, page([1, 2, 4]), look, at(GAP_WAIT_MS), room(0), page([4]), room(Number.POSITIVE_INFINITY), drained],
  },
  'reading from 4, 3 stepped over and not yet said': {
    state: 'reading',
    steps: [start, page([1, 2, 4]), look, at(GAP_WAIT_MS), room(0), page([4]), room(Number.POSITIVE_INFINITY), drained, rechecked([])],
  },
  retrying: { state: 'retrying', steps: [start, failed] },
  'retrying a second time': { state: 'reading', steps: [start, failed, retry] },
  'reading on after a failed read': { state: 'reading', steps: [start, failed, retry, page([1], true)] },
  'reading from 4 after a hole at 3 was filled live': { state: 'reading', steps: [start, page([1, 2, 4]), look, event(3)] },
  'live at 3': { state: 'live', steps: [start, page([1, 2])] },
  'live at 3, tool events only': { state: 'live', options: { afterSeq: 0, types: ['tool'] }, steps: [start, page([1, 2])] },
  'live at 5, 3 stepped over': { state: 'live', steps: [start, page([1, 2, 4]), at(GAP_WAIT_MS), look, page([4])] },
  'waiting: 5 seen, 3 missing': { state: 'waiting', steps: [start, page([1, 2]), event(5)] },
  'waiting: 4 and 5 seen, 3 missing': { state: 'waiting', steps: [start, page([1, 2]), event(5), event(4)] },
  'waiting: 4 in the table, 3 missing': { state: 'waiting', steps: [start, page([1, 2, 4])] },
  'waiting: 1,000 seen, 3 missing': { state: 'waiting', steps: [start, page([1, 2]), { kind: 'events', from: 4, count: MAX_PENDING }] },
  'behind at 3': { state: 'behind', steps: [start, page([1, 2]), room(0), event(3)] },
  'behind at 5, late 3 refused': { state: 'behind', steps: [start, page([1, 2, 4]), at(GAP_WAIT_MS), look, page([4]), room(0), event(3)] },
  'behind at 4, 3 stepped over and not yet said': {
    state: 'behind',
    steps: [start, page([1, 2, 4]), look, at(GAP_WAIT_MS), room(0), page([4])],
  },
  'behind at 1, a read under way': { state: 'behind', steps: [start, room(0), event(1)] },
  'behind at 1, pausing': { state: 'behind', steps: [start, room(0), event(1), failed] },
  'caught up at 1, a read under way': { state: 'reading', steps: [start, room(0), event(1), room(Number.POSITIVE_INFINITY), drained] },
  ended: { state: 'ended', steps: [start, page([1, 2]), close] },
  'ended while reading': { state: 'ended', steps: [start, close] },
  'ended, the start failed': { state: 'ended', options: {}, steps: [start, failed] },
} satisfies Record<string, Given>;
type GivenName = keyof typeof givens;

function arrange(name: GivenName) {
  const given: Given = givens[name];
  const feed = rig(given.options ?? { afterSeq: 0 });
  for (const step of given.steps) feed.apply(step);
  expect(feed.machine.state, `the setup of "${name}"`).toBe(given.state);
  feed.state.handed = [];
  feed.state.room = Number.POSITIVE_INFINITY;
  return feed;
}

interface Row {
  given: GivenName;
  when: Input;
  /** Room the consumer has for this input (default: always room). */
  room?: number;
  /** The clock when the input comes (default: where the setup left it). */
  clock?: number;
  state: FeedState;
  next?: number;
  pending?: number[];
  handed?: string[];
  effects?: string[];
  /** LOOK's or PAUSE's delay. */
  delayMs?: number;
  /** RECHECK's range. */
  range?: string;
}

const rows: Row[] = [
  // Starting: where does the run end?
  { given: 'new', when: start, state: 'starting', effects: ['FIND_END'] },
  { given: 'new, from afterSeq 4', when: start, state: 'reading', next: 5, effects: ['READ'] },
  { given: 'starting', when: found(4), state: 'live', next: 5 },
  { given: 'starting', when: event(7), state: 'starting', pending: [7] },
  {
    given: 'starting, 3 and 5 seen',
    when: found(2),
    state: 'waiting',
    next: 4,
    pending: [5],
    handed: ['3'],
    effects: ['LOOK'],
    delayMs: GRACE_MS,
  },
  { given: 'starting, 3 and 5 seen', when: found(4), state: 'live', next: 6, handed: ['5'] },
  { given: 'starting, 3 and 5 seen', when: found(2), room: 0, state: 'behind', next: 3, effects: ['BEHIND'] },
  { given: 'starting, 1,000 seen', when: event(MAX_PENDING + 1), state: 'starting', pending: [] },
  // Changes lost (or not arriving) before the end was found: read on from the end once found.
  { given: 'starting', when: resync, state: 'starting', effects: [] },
  { given: 'starting, changes lost meanwhile', when: found(4), state: 'reading', next: 5, effects: ['READ'] },
  { given: 'starting, changes not arriving', when: found(4), state: 'reading', next: 5, effects: ['READ'] },
  { given: 'starting', when: refill, state: 'starting', effects: [] },
  { given: 'starting', when: failed, state: 'ended', effects: ['REPORT', 'FAIL', 'END'] },
  { given: 'starting', when: close, state: 'ended', effects: ['END'] },

  // Reading: catching up from the table.
  { given: 'reading from 1', when: page([1, 2, 3]), state: 'live', next: 4, handed: ['1', '2', '3'] },
  { given: 'reading from 1', when: page([1, 2], true), state: 'reading', next: 3, handed: ['1', '2'], effects: ['READ'] },
  { given: 'reading from 1', when: page([1, 2, 4]), state: 'waiting', next: 3, handed: ['1', '2'], effects: ['LOOK'], delayMs: 50 },
  { given: 'reading from 1', when: page([]), state: 'live', next: 1 },
  { given: 'reading from 1', when: page([1]), room: 0, state: 'behind', next: 1, effects: ['BEHIND'] },
  { given: 'reading from 1', when: page([1, 2, 3]), room: 2, state: 'behind', next: 3, handed: ['1', '2'], effects: ['BEHIND'] },
  // The budget was full when the read's turn came, then it is free again.
  { given: 'reading from 1', when: full, state: 'behind', next: 1, effects: ['STALL', 'BEHIND'] },
  { given: 'behind at 1, a read under way', when: full, state: 'behind', next: 1, effects: [] },
  // An event arriving while a table read is in flight.
  { given: 'reading from 1', when: event(1), state: 'reading', next: 2, handed: ['1'] },
  { given: 'reading from 1', when: event(3), state: 'reading', next: 1, pending: [3] },
  { given: 'reading from 1', when: event(1), room: 0, state: 'behind', next: 1, effects: ['BEHIND'] },
  { given: 'reading from 1, 1 handed out live', when: page([1, 2]), state: 'live', next: 3, handed: ['2'] },
  { given: 'reading from 1, 1,000 seen ahead', when: event(MAX_PENDING + 3), state: 'reading', pending: [] },
  {
    given: 'reading from 1, 1,000 seen ahead',
    when: page([1, 2]),
    state: 'live',
    next: MAX_PENDING + 3,
    handed: Array.from({ length: MAX_PENDING + 2 }, (_, i) => String(i + 1)),
  },
  { given: 'reading from 1', when: resync, state: 'reading', effects: [] },
  { given: 'reading from 1', when: refill, state: 'reading', effects: [] },
  { given: 'reading from 1', when: drained, state: 'reading', effects: [] },
  { given: 'reading from 1, asked again', when: page([1]), state: 'reading', next: 2, handed: ['1'], effects: ['READ'] },
  { given: 'reading from 1', when: failed, state: 'retrying', effects: ['PAUSE', 'REPORT'], delayMs: 100 },
  // return() while reading: the read's answer finds the feed over.
  { given: 'reading from 1', when: close, state: 'ended', effects: ['END'] },
  { given: 'ended while reading', when: page([1, 2]), state: 'ended', handed: [] },
  // A hole filled late, within the wait.
  { given: 'reading from 3 after a hole, since 0', when: page([3, 4]), state: 'live', next: 5, handed: ['3', '4'] },
  {
    given: 'reading from 3 after a hole, since 0',
    when: page([4]),
    clock: GAP_WAIT_MS - 1,
    state: 'waiting',
    next: 3,
    effects: ['LOOK'],
    delayMs: 100,
  },
  // ... or not: stepped over after the wait, and said so with the next event.
  {
    given: 'reading from 3 after a hole, since 0',
    when: page([4]),
    clock: GAP_WAIT_MS,
    state: 'live',
    next: 5,
    handed: ['4 after missing 3-3'],
  },
  {
    given: 'reading from 3 after a hole, since 0',
    when: page([4, 5]),
    clock: GAP_WAIT_MS,
    state: 'live',
    next: 6,
    handed: ['4 after missing 3-3', '5'],
  },
  {
    given: 'reading from 3 after a hole, since 0',
    when: page([4, 5]),
    clock: GAP_WAIT_MS,
    room: 0,
    state: 'behind',
    next: 4,
    effects: ['BEHIND'],
  },
  {
    given: 'behind at 4, 3 stepped over and not yet said',
    when: drained,
    state: 'reading',
    next: 4,
    effects: ['RECHECK', 'CAUGHT_UP'],
    range: '3-3',
  },
  // A hole filled live: the next hole waits its own time.
  {
    given: 'reading from 4 after a hole at 3 was filled live',
    when: page([4, 6]),
    clock: GAP_WAIT_MS,
    state: 'waiting',
    next: 5,
    handed: ['4'],
    effects: ['LOOK'],
    delayMs: 50,
  },
  { given: 'reading from 3, 5 seen', when: page([]), state: 'waiting', next: 3, pending: [5], effects: ['LOOK'], delayMs: 50 },
  {
    given: 'reading from 3, 5 seen',
    when: page([3]),
    state: 'waiting',
    next: 4,
    pending: [5],
    handed: ['3'],
    effects: ['LOOK'],
    delayMs: 50,
  },
  { given: 'reading from 3, 5 seen', when: page([3, 4]), state: 'live', next: 6, handed: ['3', '4', '5'] },
  // Seen live but not in the table: the same wait, then stepped over up to it.
  {
    given: 'reading from 3, 5 seen, waited for since 0',
    when: page([]),
    clock: GAP_WAIT_MS - 1,
    state: 'waiting',
    next: 3,
    pending: [5],
    effects: ['LOOK'],
    delayMs: 100,
  },
  {
    given: 'reading from 3, 5 seen, waited for since 0',
    when: page([]),
    clock: GAP_WAIT_MS,
    state: 'live',
    next: 6,
    handed: ['5 after missing 3-4'],
  },
  { given: 'live at 6, 3-4 stepped over behind 5 seen live', when: event(4), state: 'live', next: 6, handed: ['4 late'] },

  // Rechecking stepped-over seqs (after a resync or a lag), then reading on.
  { given: 'live at 5, 3 stepped over', when: resync, state: 'reading', effects: ['RECHECK'], range: '3-3' },
  { given: 'rechecking 3-3 (live at 5)', when: rechecked([3]), state: 'reading', next: 5, handed: ['3 late'], effects: ['READ'] },
  { given: 'rechecking 3-3 (live at 5)', when: rechecked([]), state: 'reading', next: 5, effects: ['READ'] },
  { given: 'rechecking 3-3 (live at 5)', when: rechecked([3]), room: 0, state: 'behind', next: 5, effects: ['BEHIND'] },
  { given: 'rechecking 3-3 and 6-6 (live at 8)', when: rechecked([]), state: 'reading', next: 8, effects: ['RECHECK'], range: '6-6' },
  { given: 'rechecking 3-3 at 4, 3 not yet said', when: rechecked([]), state: 'reading', next: 4, effects: ['READ'] },
  {
    given: 'reading from 4, 3 stepped over and not yet said',
    when: page([4, 5]),
    state: 'live',
    next: 6,
    handed: ['4 after missing 3-3', '5'],
  },
  { given: 'rechecking 3-3 (live at 5)', when: failed, state: 'retrying', effects: ['PAUSE', 'REPORT'], delayMs: 100 },

  // Retrying: the table could not be read.
  { given: 'retrying', when: retry, state: 'reading', next: 1, effects: ['READ'] },
  { given: 'retrying a second time', when: failed, state: 'retrying', effects: ['PAUSE', 'REPORT'], delayMs: 200 },
  { given: 'reading on after a failed read', when: failed, state: 'retrying', effects: ['PAUSE', 'REPORT'], delayMs: 100 },
  { given: 'retrying', when: event(1), state: 'retrying', next: 2, handed: ['1'] },
  { given: 'retrying', when: event(2), state: 'retrying', next: 1, pending: [2] },
  { given: 'retrying', when: event(1), room: 0, state: 'behind', next: 1, effects: ['BEHIND'] },
  { given: 'retrying', when: resync, state: 'retrying', effects: [] },
  { given: 'retrying', when: refill, state: 'retrying', effects: [] },
  { given: 'retrying', when: drained, state: 'retrying', effects: [] },
  { given: 'retrying', when: failed, state: 'retrying', effects: ['REPORT'] },
  { given: 'retrying', when: close, state: 'ended', effects: ['END'] },

  // Live: each event as it comes.
  { given: 'live at 3', when: event(3), state: 'live', next: 4, handed: ['3'] },
  { given: 'live at 3', when: event(2), state: 'live', next: 3, handed: [] },
  { given: 'live at 3', when: event(5), state: 'waiting', next: 3, pending: [5], effects: ['LOOK'], delayMs: GRACE_MS },
  { given: 'live at 3', when: event(3), room: 0, state: 'behind', next: 3, effects: ['BEHIND'] },
  { given: 'live at 3, tool events only', when: event(3, 'step'), state: 'live', next: 4, handed: [] },
  { given: 'live at 3, tool events only', when: event(3, 'tool'), state: 'live', next: 4, handed: ['3'] },
  { given: 'live at 3', when: resync, state: 'reading', next: 3, effects: ['READ'] },
  { given: 'live at 3', when: refill, state: 'reading', next: 3, effects: ['READ'] },
  { given: 'live at 3', when: drained, state: 'reading', next: 3, effects: ['READ'] },
  { given: 'live at 3', when: failed, state: 'live', effects: ['REPORT'] },
  { given: 'live at 3', when: close, state: 'ended', effects: ['END'] },
  // A stepped-over seq that comes after all: handed out once, marked late.
  { given: 'live at 5, 3 stepped over', when: event(3), state: 'live', next: 5, handed: ['3 late'] },
  { given: 'live at 5, 3 stepped over', when: event(4), state: 'live', next: 5, handed: [] },
  { given: 'live at 5, 3 stepped over', when: event(3), room: 0, state: 'behind', next: 5, effects: ['BEHIND'] },

  // Waiting on a hole.
  { given: 'waiting: 5 seen, 3 missing', when: event(3), state: 'waiting', next: 4, pending: [5], handed: ['3'] },
  { given: 'waiting: 4 and 5 seen, 3 missing', when: event(3), state: 'waiting', next: 6, pending: [], handed: ['3', '4', '5'] },
  { given: 'waiting: 5 seen, 3 missing', when: event(6), state: 'waiting', next: 3, pending: [5, 6] },
  { given: 'waiting: 5 seen, 3 missing', when: event(2), state: 'waiting', next: 3, pending: [5] },
  {
    given: 'waiting: 5 seen, 3 missing',
    when: event(3),
    room: 0,
    state: 'behind',
    next: 3,
    pending: [],
    effects: ['CANCEL_LOOK', 'BEHIND'],
  },
  { given: 'waiting: 5 seen, 3 missing', when: look, state: 'reading', next: 3, pending: [5], effects: ['READ'] },
  { given: 'waiting: 4 in the table, 3 missing', when: look, state: 'reading', next: 3, effects: ['READ'] },
  { given: 'waiting: 4 in the table, 3 missing', when: event(3), state: 'waiting', next: 4, handed: ['3'] },
  { given: 'waiting: 5 seen, 3 missing', when: resync, state: 'reading', effects: ['READ', 'CANCEL_LOOK'] },
  { given: 'waiting: 5 seen, 3 missing', when: refill, state: 'reading', effects: ['READ', 'CANCEL_LOOK'] },
  { given: 'waiting: 5 seen, 3 missing', when: drained, state: 'reading', effects: ['READ', 'CANCEL_LOOK'] },
  {
    given: 'waiting: 1,000 seen, 3 missing',
    when: event(MAX_PENDING + 4),
    state: 'reading',
    next: 3,
    pending: [],
    effects: ['READ', 'CANCEL_LOOK'],
  },
  { given: 'waiting: 5 seen, 3 missing', when: failed, state: 'waiting', effects: ['REPORT'] },
  { given: 'waiting: 5 seen, 3 missing', when: close, state: 'ended', pending: [], effects: ['END'] },

  // Behind: the consumer's queue or send buffer is full; the table holds the rest.
  { given: 'behind at 3', when: event(3), state: 'behind', next: 3, handed: [] },
  { given: 'behind at 3', when: drained, state: 'reading', next: 3, effects: ['READ', 'CAUGHT_UP'] },
  { given: 'behind at 5, late 3 refused', when: drained, state: 'reading', next: 5, effects: ['RECHECK', 'CAUGHT_UP'], range: '3-3' },
  { given: 'behind at 3', when: failed, state: 'behind', effects: ['REPORT'] },
  { given: 'behind at 3', when: close, state: 'ended', effects: ['CAUGHT_UP', 'END'] },
  { given: 'behind at 1, a read under way', when: page([1, 2]), state: 'behind', next: 1, handed: [] },
  { given: 'behind at 1, a read under way', when: drained, state: 'reading', next: 1, effects: ['CAUGHT_UP'] },
  { given: 'caught up at 1, a read under way', when: page([1, 2]), state: 'reading', next: 3, handed: ['1', '2'], effects: ['READ'] },
  { given: 'behind at 1, a read under way', when: failed, state: 'behind', effects: ['PAUSE', 'REPORT'], delayMs: 100 },
  { given: 'behind at 1, pausing', when: retry, state: 'behind', effects: [] },
  { given: 'behind at 1, pausing', when: drained, state: 'retrying', effects: ['CAUGHT_UP'] },

  // Ended: nothing more is handed out.
  { given: 'ended', when: event(3), state: 'ended', handed: [] },
  { given: 'ended', when: failed, state: 'ended', effects: ['REPORT'] },
  { given: 'ended, the start failed', when: found(4), state: 'ended' },
];

/** Inputs that leave the state as it was and do nothing. */
const ignored: [GivenName, Input][] = [
  ...[look, retry, drained, page([1]), full, rechecked([1])].map((input): [GivenName, Input] => ['starting', input]),
  ...[found(9), look, retry, rechecked([1])].map((input): [GivenName, Input] => ['reading from 1', input]),
  ...[found(9), look, page([1]), full, rechecked([1])].map((input): [GivenName, Input] => ['retrying', input]),
  ...[found(9), look, retry, page([3]), full, rechecked([3])].map((input): [GivenName, Input] => ['live at 3', input]),
  ...[found(9), retry, page([3]), full, rechecked([3])].map((input): [GivenName, Input] => ['waiting: 5 seen, 3 missing', input]),
  ...[found(9), resync, refill, look, retry, page([3]), full, rechecked([3])].map((input): [GivenName, Input] => ['behind at 3', input]),
  ...[start, found(9), resync, refill, look, retry, drained, page([3]), full, rechecked([3]), close].map((input): [GivenName, Input] => [
    'ended',
    input,
  ]),
];

const label = (input: Input) => JSON.stringify(input).replace(/"/g, '');

describe('the event feed, state by state', () => {
  test.each(rows.map((row) => ({ ...row, input: label(row.when) })))('given $given, when $input, then $state', (row) => {
    const { machine, state, apply } = arrange(row.given);
    if (row.room !== undefined) state.room = row.room;
    if (row.clock !== undefined) state.clock = row.clock;
    const effects = apply(row.when);
    const now = machine.describe();
    expect(now.state).toBe(row.state);
    if (row.next !== undefined) expect(now.next).toBe(row.next);
    if (row.pending !== undefined) expect(now.pending).toEqual(row.pending);
    expect(state.handed.map(shown)).toEqual(row.handed ?? []);
    if (row.effects !== undefined) expect(effectNames(effects).sort()).toEqual([...row.effects].sort());
    else expect(effectNames(effects)).toEqual([]);
    if (row.delayMs !== undefined) expect(machine.delayMs).toBe(row.delayMs);
    if (row.range !== undefined) expect(`${machine.range?.from}-${machine.range?.to}`).toBe(row.range);
  });

  test.each(ignored.map(([given, input]) => ({ given, input, name: label(input) })))(
    'given $given, $name is ignored',
    ({ given, input }) => {
      const { machine, state, apply } = arrange(given);
      const before = machine.describe();
      expect(effectNames(apply(input))).toEqual([]);
      expect(machine.describe()).toEqual(before);
      expect(state.handed).toEqual([]);
    },
  );

  test('every state meets every kind of input', () => {
    const states: FeedState[] = ['starting', 'reading', 'retrying', 'live', 'waiting', 'behind', 'ended'];
    const kinds: Input['kind'][] = [
      'found',
      'event',
      'page',
      'full',
      'rechecked',
      'failed',
      'look',
      'retry',
      'resync',
      'refill',
      'drained',
      'close',
    ];
    const met = new Set(
      [...rows.map((row) => [row.given, row.when] as const), ...ignored].map(([given, input]) => `${givens[given].state} ${input.kind}`),
    );
    const missing = states.flatMap((state) => kinds.map((kind) => `${state} ${kind}`)).filter((pair) => !met.has(pair));
    expect(missing).toEqual([]);
  });
});
