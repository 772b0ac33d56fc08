/**
 * Leases: every unit of the tenant with its holder, fencing token and time to expiry (counting
 * down each second), live through leasesChanged.
 */
import type { LeaseState } from '@runplane/client';
import { errorBox, fill, h } from './dom.ts';
import { countdown, time } from './format.ts';
import type { Page } from './main.ts';

const PAGE_SIZE = 100;
/** Units shown at most: live additions past this are not added (the listing pages on). */
const MAX_UNITS = 500;

export const leasesPage: Page = (root, session, params) => {
  const stop = new AbortController();
  const heldOnly = params.get('held') === 'true';
  const units = new Map<string, LeaseState>();
  let nextCursor: string | undefined;
  const body = h('tbody');
  const message = h('div', { class: 'message' });
  const more = h('div', { class: 'pager' });
  const heldBox = h('input', {
    id: 'held-only',
    type: 'checkbox',
    checked: heldOnly,
    on: { change: () => (location.hash = heldBox.checked ? '#/leases?held=true' : '#/leases') },
  });
  fill(
    root,
    h('h1', {}, 'Leases'),
    h('p', { class: 'filters' }, heldBox, ' ', h('label', { for: 'held-only' }, 'Held now only')),
    message,
    h(
      'table',
      { class: 'leases' },
      h('caption', { class: 'visually-hidden' }, 'Units and their leases'),
      h(
        'thead',
        {},
        h('tr', {}, ...['Unit', 'Holder', 'Fencing token', 'Expires in', 'Acquired', 'Version'].map((c) => h('th', { scope: 'col' }, c))),
      ),
      body,
    ),
    more,
  );

  function draw() {
    const now = Date.now();
    const shown = [...units.values()].filter((lease) => !heldOnly || Date.parse(lease.expiresAt) > now);
    fill(
      body,
      ...shown.map((lease) =>
        h(
          'tr',
          { 'data-unit': lease.unitId },
          h('td', {}, h('code', {}, lease.unitId)),
          h('td', {}, lease.owner),
          h('td', { class: 'token' }, String(lease.token)),
          h('td', { class: 'expiry', title: lease.expiresAt }, countdown(lease.expiresAt, now)),
          h('td', {}, time(lease.acquiredAt)),
          h('td', {}, String(lease.version)),
        ),
      ),
    );
    if (shown.length === 0) fill(body, h('tr', {}, h('td', { colspan: 6, class: 'empty' }, 'No units.')));
    fill(more, nextCursor ? h('button', { type: 'button', on: { click: () => void load(nextCursor) } }, 'More units') : null);
  }

  async function load(after?: string) {
    try {
      const page = await session.client.leases({ held: heldOnly || undefined, first: PAGE_SIZE, after, signal: stop.signal });
      if (!after) units.clear();
      for (const { node } of page.edges) if (units.size < MAX_UNITS || units.has(node.unitId)) units.set(node.unitId, node);
      nextCursor = page.pageInfo.hasNextPage && units.size < MAX_UNITS ? (page.pageInfo.endCursor ?? undefined) : undefined;
      fill(message);
      draw();
    } catch (err) {
      if (!stop.signal.aborted) fill(message, errorBox(`Listing leases failed: ${err instanceof Error ? err.message : String(err)}`));
    }
  }

  void (async () => {
    const changes = session.client.leasesChanged({ signal: stop.signal, onResubscribed: () => void load() });
    void load();
    try {
      for await (const lease of changes) {
        const known = units.get(lease.unitId);
        if (known && known.version >= lease.version) continue;
        if (!known && units.size >= MAX_UNITS) continue;
        units.set(lease.unitId, lease);
        draw();
      }
    } catch (err) {
      if (!stop.signal.aborted)
        fill(message, errorBox(`Live updates stopped: ${err instanceof Error ? err.message : String(err)}. Reload to try again.`));
    }
  })();
  // The countdown: one redraw a second, of the expiry cells only.
  const ticker = setInterval(() => {
    const now = Date.now();
    for (const cell of body.querySelectorAll<HTMLElement>('td.expiry')) cell.textContent = countdown(cell.title, now);
  }, 1000);
  return () => {
    stop.abort();
    clearInterval(ticker);
  };
};
