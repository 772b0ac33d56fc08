/**
 * The run console: pages for runs, one run and leases, routed by the URL's hash (so filters
 * live in the URL and the server serves one page), on the public API through runplane/client.
 */
import { errorBox, fill, h } from './dom.ts';
import { leasesPage } from './leases-page.ts';
import { runPage } from './run-page.ts';
import { runsPage } from './runs-page.ts';
import { forgetKey, openSession, type Session, SessionRefused, showConnection, storedKey, storeKey } from './session.ts';

/** A page renders into `root` and returns what stops its streams and timers when the route changes. */
export type Page = (root: HTMLElement, session: Session, params: URLSearchParams) => () => void;

const main = document.getElementById('main') as HTMLElement;
let session: Session | undefined;
let leave: (() => void) | undefined;

function route() {
  const [path = '', query = ''] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'run' && parts[1]) {
    params.set('id', decodeURIComponent(parts[1]));
    return { name: 'run', page: runPage, params };
  }
  if (parts[0] === 'leases') return { name: 'leases', page: leasesPage, params };
  return { name: 'runs', page: runsPage, params };
}

function render() {
  if (!session) return;
  leave?.();
  const { name, page, params } = route();
  for (const link of document.querySelectorAll<HTMLAnchorElement>('[data-nav]')) {
    if (link.dataset.nav === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  fill(main);
  leave = page(main, session, params);
}

function keyForm(problem: string) {
  const input = h('input', { id: 'api-key', type: 'password', autocomplete: 'off', required: true, size: 40 });
  const form = h(
    'form',
    {
      class: 'key-form',
      on: {
        submit: (event) => {
          event.preventDefault();
          storeKey(input.value.trim());
          void start();
        },
      },
    },
    h('h1', {}, 'API key'),
    errorBox(problem),
    h('p', {}, 'The key is kept in this tab only (sessionStorage) and sent in a header, never in the URL.'),
    h('label', { for: 'api-key' }, 'API key'),
    ' ',
    input,
    ' ',
    h('button', { type: 'submit' }, 'Use this key'),
  );
  fill(main, form);
  input.focus();
}

function showWho(current: Session) {
  const who = document.getElementById('who');
  if (!who) return;
  const signOut = h(
    'button',
    {
      type: 'button',
      class: 'link',
      on: {
        click: () => {
          forgetKey();
          location.reload();
        },
      },
    },
    'Forget key',
  );
  fill(who, `Tenant ${current.tenant}${current.canWrite ? '' : ' · read-only'}`, storedKey() ? signOut : null);
}

async function start() {
  showConnection('connecting');
  leave?.();
  leave = undefined;
  await session?.close();
  session = undefined;
  try {
    session = await openSession();
  } catch (err) {
    if (err instanceof SessionRefused && err.needsKey) return keyForm(err.message);
    fill(
      main,
      errorBox(err instanceof Error ? err.message : String(err)),
      h('button', { type: 'button', on: { click: () => void start() } }, 'Try again'),
    );
    return;
  }
  showWho(session);
  render();
}

window.addEventListener('hashchange', render);
window.addEventListener('offline', () => showConnection('offline'));
void start();
