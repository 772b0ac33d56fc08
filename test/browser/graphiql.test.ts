/**
 * GraphiQL and EventSource in a real browser (headless Chromium): the page served at
 * /graphql loads in under 3 MB, runs a query and a subscription that shows an event appended
 * from outside, with no header typed; an EventSource resumes by itself after a restart.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { uniqueName } from '../support/aws.ts';
import { describeWithBrowser, type OpenBrowser, openBrowser } from '../support/browser.ts';
import { newRun as createRun } from '../support/runs.ts';
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

  const newRun = (server: TestServer) => createRun(server, { task: 'seen in GraphiQL', budgetCap: 7 });
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

  test('GraphiQL runs under its CSP with no violation, may not be framed, and keeps no typed header in storage', async () => {
    const page = await browser.context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    const response = await page.goto(`${api.url}?query=${encodeURIComponent('{ viewer { tenant } }')}`);
    const headers = response?.headers() ?? {};
    expect(headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    expect(headers['content-security-policy']).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(headers['x-frame-options']).toBe('DENY');
    const secret = 'typed-secret-key-0123456789';
    await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });
    await page.getByRole('button', { name: /^Headers$/ }).click();
    const headerEditor = page.locator('.graphiql-editor-tool .graphiql-editor').last();
    await headerEditor.click();
    // Inserted whole (typing would meet the editor's closing brackets).
    await page.keyboard.insertText(`{"x-note": "${secret}"}`);
    await waitFor(async () => (await textOf(page, '.graphiql-editor-tool')).includes(secret), {
      timeoutMs: 30_000,
      what: 'the typed header',
    });
    await waitFor(
      async () => {
        if ((await responseText(page)).includes('default')) return true;
        await page.locator('.graphiql-execute-button').click();
        return false;
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'the query result' },
    );
    // GraphiQL writes a tab (query, variables and, when it persists them, headers) together, debounced: once the query is kept, look.
    const stored = () => page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }));
    await waitFor(async () => (await stored()).includes('viewer { tenant }'), { timeoutMs: 30_000, what: 'the tab to be stored' });
    expect(await stored()).not.toContain(secret);
    expect(violations).toEqual([]);
    await page.close();
  });

  test('a page on another origin cannot frame GraphiQL, create a run (even by a simple request), or open a WebSocket', async () => {
    const other = createServer((_, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><iframe id="frame" src="${api.url}"></iframe>`);
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const page = await browser.context.newPage();
    try {
      await page.goto(`http://127.0.0.1:${(other.address() as AddressInfo).port}/`);
      const id = uniqueName('cross');
      const outcome = await page.evaluate(
        async ({ url, id }) => {
          const body = JSON.stringify({ query: `mutation { createRun(input: { id: "${id}", task: "t", budgetCap: 1 }) { __typename } }` });
          // text/plain needs no preflight: the browser sends it, the server must refuse it.
          const simple = await fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body }).then(
            () => 'sent',
            (err) => String(err),
          );
          const cors = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
            (r) => `status ${r.status}`,
            () => 'blocked',
          );
          const socket = await new Promise<string>((resolve) => {
            const ws = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
            ws.onopen = () => resolve('open');
            ws.onerror = () => resolve('refused');
          });
          return { simple, cors, socket };
        },
        { url: api.url, id },
      );
      expect(outcome.cors).toBe('blocked');
      expect(outcome.socket).toBe('refused');
      expect((await api.gql(`query { run(id: "${id}", consistent: true) { id } }`)).data.run).toBeNull();
      // The frame stays empty: its document never became GraphiQL's.
      const framed = page.frames().find((frame) => frame !== page.mainFrame());
      const title = await framed?.title().catch(() => '');
      expect(title).not.toBe('Runplane · GraphiQL');
    } finally {
      await page.close();
      other.close();
    }
  });
});
