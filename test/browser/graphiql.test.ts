/**
 * GraphiQL and EventSource in a real browser (headless Chromium): the page served at
 * /graphql loads in under 3 MB, runs a query and a subscription that shows an event appended
 * from outside, with no header typed; an EventSource resumes by itself after a restart.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { describeWithBrowser, type OpenBrowser, openBrowser } from '../support/browser.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

describeWithBrowser('in Chromium', () => {
  let browser: OpenBrowser;
  let api: TestServer;
  beforeAll(async () => {
    browser = await openBrowser();
    api = await startTestServer({ env: { RUNPLANE_GRAPHIQL: 'true' }, stopAfterAll: false });
  });
  afterAll(async () => {
    await browser?.close();
    await api?.server.stop();
  });

  const newRun = async (server: TestServer) => {
    const id = uniqueName('run');
    await server.gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
      input: { id, task: 'seen in GraphiQL', budgetCap: 7 },
    });
    return id;
  };
  const append = (server: TestServer, runId: string, type: string) =>
    server.gql('mutation($id: ID!, $type: String!) { appendEvent(input: { runId: $id, type: $type }) { __typename } }', {
      id: runId,
      type,
    });

  /** The text of an editor pane as shown (Monaco shows spaces as no-break spaces). */
  // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText, the text a user sees
  const textOf = async (page: Page, selector: string) => (await page.locator(selector).innerText()).replace(/\u00a0/g, ' ');
  const responseText = (page: Page) => textOf(page, '.graphiql-response');

  /** Opens GraphiQL with `query` in its editor and runs it (once the editor has it: a click before that runs nothing). */
  async function runInGraphiQL(page: Page, query: string) {
    await page.goto(`${api.url}?query=${encodeURIComponent(query)}`);
    const execute = page.locator('.graphiql-execute-button');
    await execute.waitFor({ timeout: 60_000 });
    await waitFor(async () => (await textOf(page, '.graphiql-query-editor')).includes(query.slice(0, 12)), {
      timeoutMs: 60_000,
      what: 'the query in the editor',
    });
    await waitFor(
      async () => {
        if ((await responseText(page)).trim()) return true;
        await execute.click();
        await new Promise((resolve) => setTimeout(resolve, 500));
        return (await responseText(page)).trim().length > 0;
      },
      { timeoutMs: 60_000, what: 'GraphiQL to run the operation' },
    );
  }

  test('GraphiQL loads in under 3 MB and runs a query', async () => {
    const runId = await newRun(api);
    const page = await browser.context.newPage();
    const sizes: Promise<number>[] = [];
    page.on('requestfinished', (request) => {
      sizes.push(request.sizes().then((s) => s.responseBodySize + s.responseHeadersSize));
    });
    await runInGraphiQL(page, `{ run(id: "${runId}") { task budget { cap } } }`);
    await waitFor(async () => (await responseText(page)).includes('seen in GraphiQL'), { timeoutMs: 30_000, what: 'the query result' });
    expect(await responseText(page)).toMatch(/"cap": 7/);
    const transferred = (await Promise.all(sizes)).reduce((a, b) => a + b, 0);
    expect(transferred).toBeGreaterThan(100_000);
    expect(transferred).toBeLessThan(3 * 1024 * 1024);
    expect(await page.title()).toBe('Runplane · GraphiQL');
    await page.close();
  });

  test('a subscription run in GraphiQL, no header typed, shows an event appended from outside', async () => {
    const runId = await newRun(api);
    await append(api, runId, 'before.subscribing');
    const page = await browser.context.newPage();
    await runInGraphiQL(page, `subscription { runEvents(runId: "${runId}", afterSeq: 0) { seq type } }`);
    await waitFor(async () => (await responseText(page)).includes('before.subscribing'), { timeoutMs: 30_000, what: 'the history' });
    await append(api, runId, 'appended.from.outside');
    await waitFor(async () => (await responseText(page)).includes('appended.from.outside'), { timeoutMs: 30_000, what: 'the live event' });
    expect(await responseText(page)).not.toMatch(/CSRF|error/i);
    await page.close();
  });

  test('an EventSource resumes by itself after a graceful restart: every seq once, in order', async () => {
    const server = await startTestServer({ stopAfterAll: false });
    let restarted: TestServer | undefined;
    const page = await browser.context.newPage();
    try {
      const runId = await newRun(server);
      for (let i = 0; i < 3; i++) await append(server, runId, 'step');
      // A page of the server's origin (any path), so that EventSource is same-origin.
      await page.goto(new URL('/health', server.url).toString());
      await page.evaluate((runId) => {
        const query = 'subscription($runId: ID!) { runEvents(runId: $runId, afterSeq: 0) { seq } }';
        const url = `/graphql?query=${encodeURIComponent(query)}&variables=${encodeURIComponent(JSON.stringify({ runId }))}`;
        const seen: { seq: number; id: string }[] = [];
        (window as unknown as { seen: typeof seen }).seen = seen;
        const source = new EventSource(url);
        source.addEventListener('next', (event) => {
          const message = event as MessageEvent;
          seen.push({ seq: JSON.parse(message.data).data.runEvents.seq, id: message.lastEventId });
        });
      }, runId);
      const seen = () => page.evaluate(() => (window as unknown as { seen: { seq: number; id: string }[] }).seen);
      await waitFor(async () => (await seen()).length >= 3, { timeoutMs: 30_000, what: 'the first three in the browser' });
      const { table, url } = server;
      await server.server.stop();
      restarted = await startTestServer({ table, env: { PORT: new URL(url).port }, stopAfterAll: false });
      for (let i = 0; i < 3; i++) await append(restarted, runId, 'after.restart');
      await waitFor(async () => (await seen()).length >= 6, { timeoutMs: 60_000, what: 'the events after the restart' });
      expect(await seen()).toEqual([1, 2, 3, 4, 5, 6].map((seq) => ({ seq, id: String(seq) })));
    } finally {
      await page.close();
      await (restarted ?? server).server.stop();
    }
  });
});
