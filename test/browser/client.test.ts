/**
 * runplane/client in a browser: bundled by esbuild for the browser (nothing of the server,
 * nothing of Node), loaded in headless Chromium on the server's origin, where it appends and
 * follows a run with runEvents over WebSocket and over SSE.
 */
import { build } from 'esbuild';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { describeWithBrowser, type OpenBrowser, openBrowser } from '../support/browser.ts';
import { appendEvent, newRun } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

/** What the page keeps on `window` for the test to read. */
interface PageState {
  seen: number[];
  appended: string[];
  failure?: string;
  stop: () => void;
}

describeWithBrowser('runplane/client in Chromium', () => {
  let browser: OpenBrowser;
  let api: TestServer;
  let bundle: string;
  let inputs: string[];
  beforeAll(async () => {
    const built = await build({
      entryPoints: ['packages/client/src/index.ts'],
      bundle: true,
      format: 'iife',
      globalName: 'RunplaneClient',
      platform: 'browser',
      target: 'chrome120',
      write: false,
      metafile: true,
      logLevel: 'silent',
      conditions: ['runplane-source'],
    });
    bundle = built.outputFiles[0]?.text ?? '';
    inputs = Object.keys(built.metafile.inputs);
    browser = await openBrowser();
    api = await startTestServer({ stopAfterAll: false });
  });
  afterAll(async () => {
    await browser?.close();
    await api?.server.stop();
  });

  test('the bundle holds the client and its three libraries, nothing of the server', () => {
    const outside = inputs.filter(
      (input) => !/^(packages\/client\/src\/|node_modules\/(@0no-co\/graphql\.web|graphql-ws|eventsource-parser)\/)/.test(input),
    );
    expect(outside).toEqual([]);
    expect(inputs).toContain('packages/client/src/index.ts');
  });

  test.each(['ws', 'sse'] as const)(
    'runEvents over %s in the page: the history, then live events, each once in order',
    async (transport) => {
      const runId = await newRun(api);
      for (let i = 0; i < 3; i++) await appendEvent(api, runId, { type: 'from.node' });
      const page = await browser.context.newPage();
      try {
        await page.goto(new URL('/health', api.url).toString());
        await page.addScriptTag({ content: bundle });
        await page.evaluate(
          ({ url, runId, transport }) => {
            const { createRunplane } = (window as unknown as { RunplaneClient: typeof import('runplane/client') }).RunplaneClient;
            const client = createRunplane({ url, transport });
            const stop = new AbortController();
            const state: PageState = { seen: [], appended: [], stop: () => stop.abort() };
            (window as unknown as { state: PageState }).state = state;
            void (async () => {
              try {
                for await (const event of client.runEvents(runId, { afterSeq: 0, signal: stop.signal })) {
                  state.seen.push(event.seq);
                  if (event.seq === 3) {
                    const answer = await client.appendEvent({
                      runId,
                      type: 'from.browser',
                      payload: { agent: navigator.userAgent.length },
                    });
                    state.appended.push(answer.__typename);
                  }
                }
              } catch (err) {
                state.failure = String(err);
              }
            })();
          },
          { url: api.url, runId, transport },
        );
        const state = () =>
          page.evaluate(() => {
            const { seen, appended, failure } = (window as unknown as { state: PageState }).state;
            return { seen, appended, failure };
          });
        await waitFor(async () => (await state()).seen.length >= 4, {
          timeoutMs: 30_000,
          what: 'the history and the browser’s own append',
        });
        for (let i = 0; i < 3; i++) await appendEvent(api, runId, { type: 'from.node' });
        await waitFor(async () => (await state()).seen.length >= 7, { timeoutMs: 30_000, what: 'the live events' });
        expect(await state()).toEqual({ seen: [1, 2, 3, 4, 5, 6, 7], appended: ['Event'], failure: undefined });
        const read = await api.gql('query($id: ID!) { run(id: $id, consistent: true) { events { edges { node { seq type } } } } }', {
          id: runId,
        });
        expect(read.data.run.events.edges[3].node).toEqual({ seq: 4, type: 'from.browser' });
        await page.evaluate(() => (window as unknown as { state: PageState }).state.stop());
        await waitFor(() => api.server.live.openSubscriptions === 0, { what: 'the page’s subscription to end' });
      } finally {
        await page.close();
      }
    },
  );

  test.each(['ws', 'sse'] as const)(
    'withRun over %s in the page: fenced writes, and a cancellation from Node aborts its signal',
    async (transport) => {
      const runId = await newRun(api);
      const page = await browser.context.newPage();
      try {
        await page.goto(new URL('/health', api.url).toString());
        await page.addScriptTag({ content: bundle });
        await page.evaluate(
          ({ url, runId, transport }) => {
            const { createRunplane } = (window as unknown as { RunplaneClient: typeof import('runplane/client') }).RunplaneClient;
            const client = createRunplane({ url, transport });
            const state: { steps: string[]; outcome?: string } = { steps: [] };
            (window as unknown as { claimState: typeof state }).claimState = state;
            client
              .withRun({ runId, holder: 'browser', ttlSeconds: 30 }, async (run, signal) => {
                state.steps.push((await run.append({ type: 'from.browser' })).__typename);
                await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
                state.steps.push((await run.append({ type: 'too.late' })).__typename);
              })
              .then(
                () => {
                  state.outcome = 'returned';
                },
                (err) => {
                  state.outcome = (err as { code?: string }).code ?? String(err);
                },
              );
          },
          { url: api.url, runId, transport },
        );
        const state = () => page.evaluate(() => (window as unknown as { claimState: { steps: string[]; outcome?: string } }).claimState);
        await waitFor(async () => (await state()).steps.length === 1, { timeoutMs: 30_000, what: 'the page to hold the run and append' });
        const cancelled = await api.gql(`mutation { cancelRun(input: { runId: "${runId}", reason: "from node" }) { __typename } }`);
        expect(cancelled.data.cancelRun.__typename).toBe('Run');
        await waitFor(async () => (await state()).outcome !== undefined, { timeoutMs: 30_000, what: 'the page to hear of it' });
        expect(await state()).toEqual({ steps: ['Event', 'ClaimLost'], outcome: 'RUN_CANCELLED' });
      } finally {
        await page.close();
      }
    },
  );
});
