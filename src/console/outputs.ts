/**
 * A run's output streams as live text beside its timeline: each stream listed in Run.outputs
 * (read again every OUTPUTS_POLL_MS, so a stream that starts later shows up), followed with
 * runOutput from the offset already shown, so a reconnect neither repeats nor skips a character.
 * Text is only ever set as text nodes: model output is never parsed as HTML.
 */
import { operations } from '@runplane/client';
import { fill, h } from './dom.ts';
import { MAX_SHOWN_POINTS, OutputText } from './output-text.ts';
import type { Session } from './session.ts';

/** How often the page asks whether the run has a stream it does not show yet. */
const OUTPUTS_POLL_MS = 2_000;
/** Text that arrived waits this long to be drawn with what comes next (one layout per batch, not per token). */
const DRAW_MS = 50;
/** Past this much waiting text (UTF-16 units) it is drawn at once: what waits stays bounded when timers are throttled. */
const MAX_WAITING = 64 * 1024;
/** The view counts as at the end (and keeps following) within this many pixels of it. */
const END_SLACK_PX = 24;
/** Wait before reading a stream again after its reader failed. */
const RETRY_MS = 2_000;

export interface OutputsOptions {
  session: Session;
  runId: string;
}

const number = (n: number) => n.toLocaleString('en');

function streamView(session: Session, runId: string, stream: { stream: string; length: number }, index: number) {
  const stop = new AbortController();
  const titleId = `output-title-${index}`;
  const state = h('span', { class: 'output-state', role: 'status' }, 'Live');
  const trimmed = h('p', { class: 'output-trimmed', hidden: true });
  // role=log names the text as output that grows; aria-live off, or a reader would say every token.
  const view = h('pre', { class: 'output-text', role: 'log', 'aria-live': 'off', 'aria-labelledby': titleId, tabindex: 0 });
  const followButton = h(
    'button',
    { type: 'button', class: 'output-follow', hidden: true, on: { click: () => follow(true) } },
    'Follow the end',
  );
  const element = h(
    'section',
    { class: 'output', 'data-stream': stream.stream, 'aria-labelledby': titleId },
    h('h3', { id: titleId }, 'Output ', h('code', {}, stream.stream), ' ', state),
    trimmed,
    view,
    followButton,
  );
  // A stream longer than the page keeps starts where the kept text would start.
  const text = new OutputText((piece) => view.appendChild(document.createTextNode(piece)), Math.max(0, stream.length - MAX_SHOWN_POINTS));
  let following = true;
  let waiting = '';
  let timer: ReturnType<typeof setTimeout> | undefined;

  function follow(on: boolean) {
    following = on;
    followButton.hidden = on;
    if (on) view.scrollTop = view.scrollHeight;
  }
  view.addEventListener('scroll', () => {
    const atEnd = view.scrollHeight - view.scrollTop - view.clientHeight <= END_SLACK_PX;
    if (atEnd !== following) follow(atEnd);
  });

  function draw() {
    clearTimeout(timer);
    timer = undefined;
    if (!waiting) return;
    text.append(waiting);
    waiting = '';
    element.dataset.end = String(text.end);
    if (text.trimmed > 0) {
      trimmed.hidden = false;
      fill(
        trimmed,
        `The first ${number(text.trimmed)} characters are not shown: the page keeps the last ${number(MAX_SHOWN_POINTS)} of each stream.`,
      );
    }
    if (following) view.scrollTop = view.scrollHeight;
  }

  function take(piece: string) {
    waiting += piece;
    if (waiting.length > MAX_WAITING) draw();
    else timer ??= setTimeout(draw, DRAW_MS);
  }

  async function read() {
    for (;;) {
      try {
        // From the offset shown: the reader itself resumes from where it is across reconnects.
        draw();
        const afterOffset = text.end;
        for await (const piece of session.client.runOutput(runId, stream.stream, { afterOffset, signal: stop.signal })) take(piece);
        if (stop.signal.aborted) return;
        // The subscription completes only after the stream's final text.
        draw();
        element.dataset.final = 'true';
        fill(state, 'Finished');
        return;
      } catch (err) {
        if (stop.signal.aborted) return;
        fill(state, `Stopped (${err instanceof Error ? err.message : String(err)}); reading again…`);
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
        if (stop.signal.aborted) return;
        fill(state, 'Live');
      }
    }
  }
  void read();

  return {
    element,
    stop() {
      stop.abort();
      clearTimeout(timer);
    },
  };
}

export function createOutputs({ session, runId }: OutputsOptions) {
  const streams = new Map<string, ReturnType<typeof streamView>>();
  const none = h('p', { class: 'outputs-none' }, 'No output yet.');
  const list = h('div', { class: 'output-list' });
  const element = h(
    'section',
    { class: 'outputs', 'aria-labelledby': 'outputs-title' },
    h('h2', { id: 'outputs-title' }, 'Output'),
    none,
    list,
  );
  let stopped = false;

  async function look() {
    try {
      const { run } = await session.client.request(operations.OutputLengths, { id: runId });
      if (stopped) return;
      for (const stream of run?.outputs ?? []) {
        if (streams.has(stream.stream)) continue;
        const view = streamView(session, runId, stream, streams.size);
        streams.set(stream.stream, view);
        list.append(view.element);
        none.hidden = true;
      }
    } catch {
      // The next look tries again; the connection indicator says when the server is away.
    }
  }
  void look();
  const poll = setInterval(() => void look(), OUTPUTS_POLL_MS);

  return {
    element,
    stop() {
      stopped = true;
      clearInterval(poll);
      for (const view of streams.values()) view.stop();
    },
  };
}
