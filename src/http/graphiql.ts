/**
 * The GraphiQL page, served from this process (no CDN: it works offline). It is 9 MB of
 * HTML and script, so it is compressed once (brotli, or gzip for clients without it),
 * kept, and revalidated by ETag: a browser transfers about 2 MB the first time, nothing after.
 * A strict CSP lets only its own script run (by hash) and no other site frame it, and headers
 * typed into it (an API key) are not kept in the browser's storage.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';

/** What a new tab shows: one of each kind of operation, runnable in order. */
export const EXAMPLE_OPERATIONS = `# Runplane, in GraphiQL.
#
# Run an operation with the play button (Ctrl-Enter); with several here, pick one.
# With API keys configured, put {"Authorization": "Bearer <key>"} in the Headers tab.
# Try them in order; run the subscription, then append from a second tab and watch it arrive.

mutation CreateRun {
  createRun(input: { id: "demo-1", task: "try Runplane", budgetCap: 1000 }) {
    __typename
    ... on Run { id status budget { cap spent remaining } }
    ... on RunAlreadyExists { message }
  }
}

mutation AppendEvent {
  appendEvent(input: { runId: "demo-1", type: "tool.called", payload: { tool: "search" }, cost: 10 }) {
    __typename
    ... on Event { seq type createdAt }
    ... on Error { message }
  }
}

query Run {
  run(id: "demo-1") {
    id task status version
    budget { cap spent remaining }
    events(first: 20) { edges { node { seq type payload createdAt } } }
  }
}

subscription RunEvents {
  runEvents(runId: "demo-1", afterSeq: 0) { seq type payload createdAt }
}
`;

/**
 * The page's CSP: its one inline script by hash (nothing injected could run), its editor's
 * workers from the blob URLs that script makes, requests to this origin only, and framing by
 * nobody. @throws when the page does not have the one inline script this expects (a new
 * GraphiQL release: look at the page and update the policy)
 */
export function contentSecurityPolicy(html: string) {
  const open = '<script>';
  const start = html.indexOf(open, html.indexOf('<div id="root"></div>'));
  const end = html.lastIndexOf('</script>');
  if (start < 0 || end < start) throw new Error('the GraphiQL page has no inline script where expected');
  const script = html.slice(start + open.length, end);
  const hash = createHash('sha256').update(script).digest('base64');
  return [
    "default-src 'none'",
    `script-src 'sha256-${hash}'`,
    'worker-src blob:',
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const compressBrotli = promisify(brotliCompress);
const compressGzip = promisify(gzip);

interface Rendered {
  etag: string;
  csp: string;
  identity: Buffer;
  br: Buffer;
  gzip: Buffer;
}

export function graphiqlPage({ endpoint }: { endpoint: string }) {
  let rendered: Promise<Rendered> | undefined;
  const render = async (): Promise<Rendered> => {
    // Loaded on the first request for the page, not at start: the module is 9 MB of source.
    const { renderGraphiQL } = await import('@graphql-yoga/render-graphiql');
    const html = renderGraphiQL({
      title: 'Runplane · GraphiQL',
      endpoint,
      defaultQuery: EXAMPLE_OPERATIONS,
      // GraphiQL's own requests carry the CSRF header (a page of this origin may set it; another site's cannot).
      additionalHeaders: { 'x-graphql-yoga-csrf': '1' },
      // A key typed into the Headers tab stays in the tab: never written to localStorage.
      shouldPersistHeaders: false,
    } as Parameters<typeof renderGraphiQL>[0]);
    const identity = Buffer.from(html);
    const [br, gz] = await Promise.all([
      // Quality 6: within 12% of the smallest, in a fiftieth of the time.
      compressBrotli(identity, { params: { [constants.BROTLI_PARAM_QUALITY]: 6 } }),
      compressGzip(identity, { level: 6 }),
    ]);
    return {
      etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
      csp: contentSecurityPolicy(html),
      identity,
      br,
      gzip: gz,
    };
  };

  return {
    async serve(req: IncomingMessage, res: ServerResponse) {
      rendered ??= render();
      const page = await rendered;
      const headers = {
        etag: page.etag,
        'cache-control': 'no-cache',
        vary: 'accept-encoding',
        'content-security-policy': page.csp,
        'x-frame-options': 'DENY',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      };
      if (req.headers['if-none-match'] === page.etag) {
        res.writeHead(304, headers);
        res.end();
        return;
      }
      const accepted = String(req.headers['accept-encoding'] ?? '');
      const [encoding, body] = /\bbr\b/.test(accepted)
        ? (['br', page.br] as const)
        : /\bgzip\b/.test(accepted)
          ? (['gzip', page.gzip] as const)
          : ([undefined, page.identity] as const);
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/html; charset=utf-8',
        'content-length': body.length,
        ...(encoding ? { 'content-encoding': encoding } : {}),
      });
      res.end(body);
    },
  };
}
