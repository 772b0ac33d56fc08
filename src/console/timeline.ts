/**
 * A run's event timeline, virtualized: rows of one height, only those in view (and a few
 * around) in the DOM, pages fetched as the view nears either end of what is loaded. What is
 * loaded is a window of the run, at most MAX_WINDOW events: past that the far end is let go
 * (and fetched again if the view goes back there).
 */
import type { RunEvent, Runplane } from '@runplane/client';
import { operations } from '@runplane/client';
import { fill, h } from './dom.ts';
import { json, preview, time } from './format.ts';

export const ROW_HEIGHT = 28;
const PAGE = 200;
/** Rows drawn beyond the view on each side. */
const OVERSCAN = 10;
/** Events held in memory at most; the far end of the window goes past this. */
export const MAX_WINDOW = 2_000;
/** Load the next page once the view is this many rows from the window's end. */
const NEAR = 40;

type Item = { event: RunEvent; cursor: string };
type Loaded = { items: Item[]; hasBefore: boolean; hasAfter: boolean };

export interface TimelineOptions {
  client: Runplane;
  runId: string;
  onError: (message: string) => void;
  /** Scrolling brought the window to the run's end: the tail follows from there (it reads what came meanwhile). */
  onReachedEnd?: () => void;
}

export class Timeline {
  readonly element: HTMLElement;
  private readonly viewport: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly detail: HTMLElement;
  private items: Item[] = [];
  private hasBefore = false;
  private hasAfter = false;
  /**
   * Where the next page after (before) the window starts, as the last page said: past what it read,
   * which a filtered page may have read beyond its last event. Unset: from the window's edge event.
   */
  private afterCursor: string | undefined;
  private beforeCursor: string | undefined;
  private loading = false;
  private generation = 0;
  private types: string[] | undefined;
  private selected: number | undefined;
  private drawn = '';

  constructor(private readonly options: TimelineOptions) {
    this.spacer = h('div', { class: 'spacer', role: 'presentation' });
    this.viewport = h('div', {
      class: 'timeline',
      role: 'list',
      'aria-label': 'Events',
      tabindex: 0,
      on: { scroll: () => this.onScroll() },
    });
    this.viewport.append(this.spacer);
    this.detail = h('section', { class: 'detail', 'aria-live': 'polite', 'aria-label': 'Selected event' });
    this.element = h('div', { class: 'timeline-box' }, this.viewport, this.detail);
  }

  /** The last seq in the window, when the window reaches the run's end (what a live tail follows from). */
  get endSeq() {
    return this.hasAfter ? undefined : (this.items.at(-1)?.event.seq ?? 0);
  }

  get rowsInDom() {
    return this.spacer.childElementCount;
  }

  /** Shows the run from `seq` on (1: the start), of these types only. */
  async jump(seq: number, types?: string[]) {
    this.types = types;
    const page = await this.fetch({ first: PAGE, afterSeq: Math.max(0, seq - 1) });
    if (!page) return;
    this.replace({ items: page.items, hasBefore: (page.items[0]?.event.seq ?? seq) > 1 && seq > 1, hasAfter: page.hasNext });
    this.viewport.scrollTop = 0;
    this.draw();
  }

  /** Shows the run's last events, following new ones. */
  async latest(types?: string[]) {
    this.types = types;
    const page = await this.fetch({ last: PAGE });
    if (!page) return;
    this.replace({ items: page.items, hasBefore: page.hasPrevious, hasAfter: false });
    this.scrollToEnd();
  }

  /** A live event: added when the window reaches the run's end, in seq order, once. */
  add(event: RunEvent) {
    if (this.hasAfter) return;
    const last = this.items.at(-1)?.event.seq ?? 0;
    if (event.seq <= last) return;
    const following = this.atEnd();
    this.items.push({ event, cursor: cursorOf(event.seq) });
    this.afterCursor = undefined;
    this.trimFront();
    if (following) this.scrollToEnd();
    else this.draw();
  }

  private atEnd() {
    const { scrollTop, clientHeight, scrollHeight } = this.viewport;
    return scrollHeight - scrollTop - clientHeight < ROW_HEIGHT * 2;
  }

  private scrollToEnd() {
    this.draw();
    this.viewport.scrollTop = this.viewport.scrollHeight;
    this.draw();
  }

  private replace(loaded: Loaded) {
    this.generation++;
    this.items = loaded.items;
    this.hasBefore = loaded.hasBefore;
    this.hasAfter = loaded.hasAfter;
    this.afterCursor = this.beforeCursor = undefined;
    this.selected = undefined;
    fill(this.detail);
  }

  private async fetch(args: { first?: number; last?: number; after?: string; before?: string; afterSeq?: number }) {
    try {
      const { run } = await this.options.client.request(operations.RunEventPage, { id: this.options.runId, types: this.types, ...args });
      const events = run?.events;
      if (!events) return undefined;
      return {
        items: events.edges.map((edge) => ({ event: edge.node as RunEvent, cursor: edge.cursor })),
        hasNext: events.pageInfo.hasNextPage,
        hasPrevious: events.pageInfo.hasPreviousPage,
        // Where the next page starts: past the last event, or (a filtered page that found none) past what was read.
        endCursor: events.pageInfo.endCursor ?? undefined,
        startCursor: events.pageInfo.startCursor ?? undefined,
      };
    } catch (err) {
      this.options.onError(`Loading events failed: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  private onScroll() {
    this.draw();
    const first = Math.floor(this.viewport.scrollTop / ROW_HEIGHT);
    const last = Math.ceil((this.viewport.scrollTop + this.viewport.clientHeight) / ROW_HEIGHT);
    if (last > this.items.length - NEAR && this.hasAfter) void this.loadAfter();
    else if (first < NEAR && this.hasBefore) void this.loadBefore();
  }

  private async loadAfter() {
    if (this.loading) return;
    this.loading = true;
    const generation = this.generation;
    try {
      const page = await this.fetch({ first: PAGE, after: this.afterCursor ?? this.items.at(-1)?.cursor });
      if (!page || generation !== this.generation) return;
      this.items.push(...page.items);
      this.hasAfter = page.hasNext;
      this.afterCursor = page.endCursor;
      this.trimFront();
      if (!this.hasAfter) this.options.onReachedEnd?.();
    } finally {
      this.loading = false;
    }
    this.onScroll();
  }

  private async loadBefore() {
    if (this.loading) return;
    this.loading = true;
    const generation = this.generation;
    try {
      const page = await this.fetch({ last: PAGE, before: this.beforeCursor ?? this.items[0]?.cursor });
      if (!page || generation !== this.generation) return;
      this.items.unshift(...page.items);
      this.hasBefore = page.hasPrevious;
      this.beforeCursor = page.startCursor;
      this.viewport.scrollTop += page.items.length * ROW_HEIGHT;
      if (this.items.length > MAX_WINDOW) {
        this.items.length = MAX_WINDOW;
        this.hasAfter = true;
        this.afterCursor = undefined;
      }
      this.selected = undefined;
    } finally {
      this.loading = false;
    }
    this.onScroll();
  }

  /** Lets the oldest events of the window go past MAX_WINDOW, keeping the view where it was. */
  private trimFront() {
    const excess = this.items.length - MAX_WINDOW;
    if (excess <= 0) return;
    this.items.splice(0, excess);
    this.hasBefore = true;
    this.beforeCursor = undefined;
    this.selected = this.selected === undefined || this.selected < excess ? undefined : this.selected - excess;
    this.spacer.style.height = `${this.items.length * ROW_HEIGHT}px`;
    this.viewport.scrollTop -= excess * ROW_HEIGHT;
  }

  /** Draws the rows in view; nothing when the same rows are drawn already. */
  draw() {
    const height = this.items.length * ROW_HEIGHT;
    this.spacer.style.height = `${height}px`;
    // How many events the window holds (at most MAX_WINDOW), for tests and the curious.
    this.viewport.dataset.held = String(this.items.length);
    const from = Math.max(0, Math.floor(this.viewport.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const to = Math.min(this.items.length, Math.ceil((this.viewport.scrollTop + this.viewport.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    const key = `${this.generation}:${from}:${to}:${this.items.length}:${this.items[0]?.event.seq}:${this.selected}`;
    if (key === this.drawn) return;
    this.drawn = key;
    const rows: HTMLElement[] = [];
    for (let i = from; i < to; i++) rows.push(this.row(i, this.items[i] as Item));
    this.spacer.replaceChildren(...rows);
  }

  private row(index: number, { event }: Item) {
    const select = () => this.select(index);
    return h(
      'div',
      {
        class: index === this.selected ? 'event selected' : 'event',
        role: 'listitem',
        tabindex: 0,
        'data-seq': event.seq,
        'aria-current': index === this.selected ? 'true' : undefined,
        style: `top:${index * ROW_HEIGHT}px`,
        on: { click: select, keydown: (e) => (e as KeyboardEvent).key === 'Enter' && select() },
      },
      h('span', { class: 'seq' }, `#${event.seq}`),
      typeOf(event),
      h('time', { datetime: event.createdAt }, time(event.createdAt)),
      h('span', { class: 'payload' }, preview(event.payload)),
    );
  }

  private select(index: number) {
    const item = this.items[index];
    this.selected = this.selected === index ? undefined : index;
    this.draw();
    if (!item || this.selected === undefined) return fill(this.detail);
    const { event } = item;
    fill(
      this.detail,
      h('h3', {}, `Event #${event.seq} · ${event.type}${event.origin === 'SERVER' ? ' (written by the server)' : ''}`),
      h('p', {}, `Written ${time(event.createdAt)}`),
      h('pre', { class: 'json' }, json(event.payload)),
    );
  }
}

/**
 * An event's type, whole on hover, marked when the server wrote it: by the origin the server
 * records, never by the type's name (a client's type may be spelled to look like the server's).
 */
function typeOf({ type, origin }: RunEvent) {
  if (origin !== 'SERVER') return h('span', { class: 'type', title: type }, type);
  return h(
    'span',
    { class: 'type by-server', title: `${type}: written by the server` },
    h('span', { class: 'server-mark', 'aria-label': 'written by the server' }, '◆'),
    ` ${type}`,
  );
}

/** The cursor the API gives an event (base64url of `seq:<n>`), for events that came live. */
function cursorOf(seq: number) {
  return btoa(`seq:${seq}`).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
