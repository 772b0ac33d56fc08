/**
 * The live tail of a run's timeline: runEvents from where the timeline ends, paused and
 * resumed by the user (a resumed tail reads what it missed from the table, in order), and a
 * "caught up at seq N" marker once a resumed or reconnected tail has reached where the run
 * was at that moment.
 */
import { operations } from '@runplane/client';
import { fill, h } from './dom.ts';
import type { Session } from './session.ts';
import type { Timeline } from './timeline.ts';

export interface TailOptions {
  session: Session;
  runId: string;
  timeline: Timeline;
  onError: (message: string) => void;
}

export function createTail({ session, runId, timeline, onError }: TailOptions) {
  const { client } = session;
  let running: AbortController | undefined;
  let paused = false;
  let types: string[] | undefined;
  /** The highest seq the tail has handed the timeline. */
  let seen = 0;
  /** Where the run stood when the tail came back: the marker shows once the tail gets there. */
  let target: number | undefined;

  const state = h('span', { class: 'tail-state', id: 'tail-state', role: 'status' }, 'Following');
  const button = h(
    'button',
    { type: 'button', id: 'tail-toggle', 'aria-pressed': false, on: { click: () => (paused ? resume() : pause()) } },
    'Pause',
  );
  const marker = h('p', { class: 'caught-up', id: 'caught-up', role: 'status', hidden: true });
  const element = h('div', { class: 'tail' }, button, ' ', state, marker);

  /** The run's last seq (of these types): what "caught up" means now. */
  async function lastSeq() {
    if (types) {
      const { run } = await client.request(operations.RunEventPage, { id: runId, last: 1, types });
      return run?.events.edges.at(-1)?.node.seq ?? 0;
    }
    const { run } = await client.request(operations.LastSeq, { id: runId });
    return run?.lastSeq ?? 0;
  }

  function check() {
    if (target === undefined || seen < target) return;
    marker.hidden = false;
    fill(marker, `Caught up at seq ${target} · ${new Date().toLocaleTimeString(undefined, { hour12: false })}`);
    target = undefined;
  }

  async function expectCatchUp() {
    try {
      target = await lastSeq();
      check();
    } catch (err) {
      onError(`Reading where the run stands failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  function start() {
    running?.abort();
    const mine = new AbortController();
    running = mine;
    const after = timeline.endSeq;
    seen = after ?? 0;
    void (async () => {
      try {
        for await (const event of client.runEvents(runId, { afterSeq: after, types, signal: mine.signal })) {
          seen = Math.max(seen, event.seq);
          timeline.add(event);
          check();
        }
      } catch (err) {
        if (!mine.signal.aborted) onError(`The live tail stopped: ${err instanceof Error ? err.message : String(err)}`);
      }
    })();
  }

  function pause() {
    paused = true;
    running?.abort();
    running = undefined;
    button.textContent = 'Resume';
    button.setAttribute('aria-pressed', 'true');
    state.textContent = `Paused at seq ${timeline.endSeq ?? seen}`;
  }

  function resume() {
    paused = false;
    button.textContent = 'Pause';
    button.setAttribute('aria-pressed', 'false');
    state.textContent = 'Following';
    marker.hidden = true;
    start();
    void expectCatchUp();
  }

  const unsubscribe = session.onReconnect((notice) => {
    if (notice.kind !== 'reconnect' || notice.stream !== 'runEvents' || paused) return;
    marker.hidden = true;
    void expectCatchUp();
  });

  return {
    element,
    /** Follows again from where the timeline now ends, of these types. */
    restart(next: string[] | undefined) {
      types = next;
      if (!paused) start();
    },
    stop() {
      running?.abort();
      unsubscribe();
    },
  };
}
