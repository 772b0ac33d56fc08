/**
 * The runs list: status filter and search kept in the URL, a page at a time, live through
 * runsChanged (new runs appear at the top of the first page, rows change in place).
 */
import type { RunsChangedState } from '@runplane/client';
import { errorBox, fill, h } from './dom.ts';
import { age } from './format.ts';
import type { Page } from './main.ts';
import { isNewer } from './runs.ts';

const STATUSES = ['RUNNING', 'WAITING_FOR_TOOL', 'AWAITING_APPROVAL', 'STALLED', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
type Status = (typeof STATUSES)[number];
const PAGE_SIZE = 50;
/** Rows kept on one page: live additions past this push the oldest off (they are on the next page). */
const MAX_ROWS = 200;

type Row = RunsChangedState & { lastSeq?: number };

export const runsPage: Page = (root, session, params) => {
  const stop = new AbortController();
  let status = (STATUSES as readonly string[]).includes(params.get('status') ?? '') ? (params.get('status') as Status) : undefined;
  let search = params.get('q') ?? '';
  /** Cursors of the pages before this one (to go back), and this page's. */
  const cursors: (string | undefined)[] = [];
  let cursor: string | undefined;
  let nextCursor: string | undefined;
  let rows: Row[] = [];

  const statusSelect = h(
    'select',
    {
      id: 'status-filter',
      on: {
        change: () => {
          status = (statusSelect.value || undefined) as Status | undefined;
          keepInUrl();
          void load();
        },
      },
    },
    h('option', { value: '' }, 'Any status'),
    ...STATUSES.map((s) => h('option', { value: s, selected: s === status }, s)),
  );
  const searchInput = h('input', {
    id: 'run-search',
    type: 'search',
    value: search,
    placeholder: 'id or task',
    on: {
      input: () => {
        search = searchInput.value;
        keepInUrl();
        draw();
      },
    },
  });
  const body = h('tbody');
  const message = h('div', { class: 'message' });
  const pager = h('div', { class: 'pager' });
  fill(
    root,
    h('h1', {}, 'Runs'),
    h(
      'form',
      { class: 'filters', role: 'search', on: { submit: (e) => e.preventDefault() } },
      h('label', { for: 'status-filter' }, 'Status'),
      statusSelect,
      h('label', { for: 'run-search' }, 'Search'),
      searchInput,
    ),
    message,
    h(
      'table',
      { class: 'runs' },
      h('caption', { class: 'visually-hidden' }, 'Runs, newest first'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Status', 'Run', 'Task', 'Age', 'Last event', 'Budget spent / cap', 'Version'].map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      body,
    ),
    pager,
  );

  function keepInUrl() {
    const query = new URLSearchParams();
    if (status) query.set('status', status);
    if (search) query.set('q', search);
    const text = query.toString();
    // Not a new history entry per keystroke, and no re-render: the hash changes quietly.
    history.replaceState(null, '', `#/runs${text ? `?${text}` : ''}`);
  }

  const matches = (run: Row) => {
    const q = search.trim().toLowerCase();
    return !q || run.id.toLowerCase().includes(q) || run.task.toLowerCase().includes(q);
  };

  function draw() {
    const shown = rows.filter(matches);
    fill(
      body,
      ...shown.map((run) =>
        h(
          'tr',
          { 'data-run': run.id },
          h('td', {}, h('span', { class: `status status-${run.status}` }, run.status)),
          h('td', {}, h('a', { href: `#/run/${encodeURIComponent(run.id)}` }, run.id)),
          h('td', { class: 'task' }, run.task),
          h('td', { class: 'age', title: run.createdAt }, age(run.createdAt)),
          h('td', {}, run.lastSeq === undefined ? '' : run.lastSeq === 0 ? 'none' : `#${run.lastSeq}`),
          h('td', {}, `${run.budget.spent} / ${run.budget.cap}`),
          h('td', {}, String(run.version)),
        ),
      ),
    );
    if (shown.length === 0)
      fill(body, h('tr', {}, h('td', { colspan: 7, class: 'empty' }, search ? 'No run on this page matches.' : 'No runs.')));
    fill(
      pager,
      cursors.length > 0 ? h('button', { type: 'button', on: { click: () => void load(cursors.pop(), true) } }, 'Previous page') : null,
      nextCursor ? h('button', { type: 'button', on: { click: () => nextPage() } }, 'Next page') : null,
    );
  }

  function nextPage() {
    cursors.push(cursor);
    void load(nextCursor, true);
  }

  let loading = 0;
  async function load(after?: string, paging = false) {
    if (!paging) cursors.length = 0;
    const mine = ++loading;
    try {
      const page = await session.client.runs({ status, first: PAGE_SIZE, after, signal: stop.signal });
      if (mine !== loading) return;
      cursor = after;
      nextCursor = page.pageInfo.hasNextPage ? (page.pageInfo.endCursor ?? undefined) : undefined;
      rows = page.edges.map((edge) => edge.node);
      // An exact id typed in the search finds its run even when it is on another page.
      if (search && !rows.some((r) => r.id === search.trim())) {
        const exact = await session.client.run(search.trim(), { first: 0, signal: stop.signal }).catch(() => null);
        if (exact && (!status || exact.status === status)) rows.unshift(exact);
      }
      fill(message);
      draw();
    } catch (err) {
      if (!stop.signal.aborted) fill(message, errorBox(`Listing runs failed: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  function apply(change: RunsChangedState) {
    const at = rows.findIndex((r) => r.id === change.id);
    if (at >= 0) {
      const row = rows[at] as Row;
      if (isNewer(change, row)) rows[at] = { ...change, lastSeq: row.lastSeq };
    } else if (cursor === undefined && (!status || change.status === status)) {
      rows.unshift({ ...change, lastSeq: 0 });
      rows.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
      rows.length = Math.min(rows.length, MAX_ROWS);
    } else return;
    draw();
  }

  void (async () => {
    // Subscribed before the first listing, so that nothing created meanwhile is missed.
    const changes = session.client.runsChanged({ signal: stop.signal, onResubscribed: () => void load(cursor, true) });
    void load();
    try {
      for await (const change of changes) apply(change);
    } catch (err) {
      if (!stop.signal.aborted)
        fill(message, errorBox(`Live updates stopped: ${err instanceof Error ? err.message : String(err)}. Reload to try again.`));
    }
  })();
  // The ages, every 15 s: those cells only (redrawing the rows would take the focus from a link).
  const ticker = setInterval(() => {
    const now = Date.now();
    for (const cell of body.querySelectorAll<HTMLElement>('td.age')) cell.textContent = age(cell.title, now);
  }, 15_000);
  return () => {
    stop.abort();
    clearInterval(ticker);
  };
};
