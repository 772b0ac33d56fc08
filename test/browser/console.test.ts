/**
 * The run console in headless Chromium against a real server: live lists and timelines, the
 * tail's pause and resume, the type filter, an approval raced by another client, a read-only
 * key, a 10,000-event run scrolled to its end with a bounded number of rows in the DOM, and a
 * run's output streams followed live, across cut connections, as text, within their bound.
 */
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { describeWithBrowser, type OpenBrowser, openBrowser } from '../support/browser.ts';
import { testClient } from '../support/client.ts';
import { openConsole, screenshot, timelineSeqs, waitForSeqs } from '../support/console.ts';
import { tcpProxy } from '../support/proxy.ts';
import { newRun as createRun, putEventRow } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { waitFor } from '../support/wait.ts';

const WRITE = 'console-write-0123456789abcdef';
const READ = 'console-read-0123456789abcdef';
const TENANT = 'acme';

describeWithBrowser('the run console in Chromium', () => {
  let browser: OpenBrowser;
  let api: TestServer;
  beforeAll(async () => {
    browser = await openBrowser();
    api = await startTestServer({
      env: { RUNPLANE_API_KEYS: `${WRITE}=${TENANT}:write:console,${READ}=${TENANT}:read`, RUNPLANE_STALL_CHECK_SECONDS: '1' },
      stopAfterAll: false,
    });
  });
  afterAll(async () => {
    await browser?.close();
    await api?.server.stop();
  });

  const as = { key: WRITE };
  const newRun = (task = 'book a flight') => createRun(api, { task, budgetCap: 100, ...as });
  const append = async (runId: string, type = 'step', payload: unknown = null, cost?: number) =>
    (
      await api.gql(
        'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }',
        { input: { runId, type, payload, cost } },
        as,
      )
    ).data.appendEvent;
  const putEvent = (runId: string, seq: number, type: string) =>
    putEventRow(api, runId, seq, { type, payload: { via: 'table' }, tenant: TENANT });
  const text = (page: Page, selector: string) => page.locator(selector).textContent({ timeout: 30_000 });

  test('the key is asked for and kept out of the URL; a run created through the API appears in the list without a reload; the filter lives in the URL', async () => {
    const page = await openConsole(browser.context, api.url, '#/runs');
    try {
      await page.locator('#api-key').fill(WRITE, { timeout: 30_000 });
      await page.getByRole('button', { name: 'Use this key' }).click();
      await page.locator('table.runs').waitFor({ timeout: 30_000 });
      await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
      const runId = await newRun('appears live');
      await page.locator(`tr[data-run="${runId}"]`).waitFor({ timeout: 30_000 });
      expect(await text(page, `tr[data-run="${runId}"]`)).toContain('appears live');
      expect(page.url()).not.toContain(WRITE);
      await page.locator('#status-filter').selectOption('RUNNING');
      await page.locator('#run-search').fill(runId);
      await waitFor(() => page.url().includes('status=RUNNING') && page.url().includes(`q=${runId}`), { what: 'the filter in the URL' });
      await page.reload();
      await page.locator(`tr[data-run="${runId}"]`).waitFor({ timeout: 30_000 });
      expect(await page.locator('tbody tr').count()).toBe(1);
      expect(await page.locator('#status-filter').inputValue()).toBe('RUNNING');
      await page.locator('#run-search').fill('');
    } finally {
      await page.close();
    }
  });

  test('the runs list ages its rows without redrawing them: a focused link keeps the focus', async () => {
    const runId = await newRun('keeps focus');
    // A browser of its own: the clock moved on by hand below is its whole context's.
    const own = await openBrowser();
    const page = await own.context.newPage();
    try {
      // The page's clock, moved on by hand: the ages' 15 s tick comes at once.
      await page.clock.install();
      await page.addInitScript((value) => sessionStorage.setItem('runplane.apiKey', value), WRITE);
      await page.goto(new URL('/#/runs', api.url).toString());
      const link = page.locator(`tr[data-run="${runId}"] a`);
      await link.waitFor({ timeout: 30_000 });
      await link.focus();
      const before = await text(page, `tr[data-run="${runId}"] td.age`);
      await page.clock.fastForward(5 * 60_000);
      await waitFor(async () => (await text(page, `tr[data-run="${runId}"] td.age`)) !== before, { what: 'the age moved on' });
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe(runId);
    } finally {
      await own.close();
    }
  });

  test("another client's events and a row written straight into the table appear in order; a paused tail takes nothing, a resumed one catches up and says where", async () => {
    const runId = await newRun();
    for (let i = 0; i < 3; i++) await append(runId, 'tool.called', { i }, 5);
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      await waitForSeqs(page, (seqs) => seqs.join() === '1,2,3', 'the first events');
      expect(await text(page, '.budget label')).toContain('15 spent of 100, 85 remaining');
      await append(runId, 'tool.returned');
      await putEvent(runId, 5, 'written.directly');
      await waitForSeqs(page, (seqs) => seqs.join() === '1,2,3,4,5', 'the appended and the directly written event');
      await waitFor(async () => (await text(page, '.budget label'))?.includes('15 spent') ?? false, { what: 'the budget' });

      await page.locator('#tail-toggle').click();
      expect(await text(page, '#tail-state')).toBe('Paused at seq 5');
      await append(runId, 'while.paused');
      await append(runId, 'while.paused');
      expect(await timelineSeqs(page)).toEqual([1, 2, 3, 4, 5]);
      await page.locator('#tail-toggle').click();
      await waitForSeqs(page, (seqs) => seqs.join() === '1,2,3,4,5,6,7', 'what was missed while paused');
      await page.locator('#caught-up:not([hidden])').waitFor({ timeout: 30_000 });
      expect(await text(page, '#caught-up')).toMatch(/^Caught up at seq 7/);
      await page.locator('.event[data-seq="2"]').click();
      expect(await text(page, '.detail')).toContain('"i": 1');
    } finally {
      await page.close();
    }
  });

  test('after its connection is cut, the console says so, reconnects, reads what it missed in order, and marks where it caught up', async () => {
    const proxy = await tcpProxy(api.url);
    const runId = await newRun();
    await append(runId);
    await append(runId);
    const page = await openConsole(browser.context, proxy.url, `#/run/${runId}`, WRITE);
    try {
      await waitForSeqs(page, (seqs) => seqs.join() === '1,2', 'the first events');
      await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
      // Every state the indicator shows from now on.
      await page.evaluate(() => {
        const indicator = document.getElementById('connection') as HTMLElement;
        const states: string[] = [];
        (window as unknown as { states: string[] }).states = states;
        new MutationObserver(() => states.push(indicator.dataset.state ?? '')).observe(indicator, { attributes: true });
      });
      proxy.drop();
      await append(runId, 'while.away');
      await append(runId, 'while.away');
      await waitForSeqs(page, (seqs) => seqs.join() === '1,2,3,4', 'the events appended while it was cut off');
      await page.locator('#caught-up:not([hidden])').waitFor({ timeout: 30_000 });
      const caughtUp = Number(/^Caught up at seq (\d+)/.exec((await text(page, '#caught-up')) ?? '')?.[1]);
      expect(caughtUp).toBeGreaterThanOrEqual(2);
      expect(caughtUp).toBeLessThanOrEqual(4);
      await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
      expect(await page.evaluate(() => (window as unknown as { states: string[] }).states)).toContain('reconnecting');
      expect(proxy.dropped).toBeGreaterThan(0);
    } finally {
      await page.close();
      await proxy.close();
    }
  });

  test('the type filter shows one type, in the URL, and keeps following it live', async () => {
    const runId = await newRun();
    for (let i = 0; i < 6; i++) await append(runId, i % 2 ? 'model.responded' : 'tool.called');
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      await waitForSeqs(page, (seqs) => seqs.length === 6, 'all events');
      await page.locator('#type-filter').fill('model.responded');
      await page.getByRole('button', { name: 'Filter' }).click();
      await waitForSeqs(page, (seqs) => seqs.join() === '2,4,6', 'the filtered events');
      expect(page.url()).toContain('types=model.responded');
      await append(runId, 'tool.called');
      await append(runId, 'model.responded');
      await waitForSeqs(page, (seqs) => seqs.join() === '2,4,6,8', 'the next event of that type, and not the other');
    } finally {
      await page.close();
    }
  });

  test('approving from the console while another client races resolveApproval: exactly one wins, and both consoles show the outcome', async () => {
    for (let round = 0; round < 3; round++) {
      const runId = await newRun('wire money');
      await append(runId, 'plan');
      const asked = await api.gql(
        `mutation { requestApproval(input: { runId: "${runId}", request: { amount: 250 } }) { __typename } }`,
        {},
        as,
      );
      expect(asked.data.requestApproval.__typename).toBe('Run');
      const [mine, theirs] = await Promise.all([
        openConsole(browser.context, api.url, `#/run/${runId}`, WRITE),
        openConsole(browser.context, api.url, `#/run/${runId}`, WRITE),
      ]);
      try {
        await mine.locator('#approve').waitFor({ timeout: 30_000 });
        await theirs.locator('#approve').waitFor({ timeout: 30_000 });
        // Both at once: the click is dispatched in the page (sending the console's resolveApproval), then the other client's.
        const [, other] = await Promise.all([
          mine.evaluate(() => (document.getElementById('approve') as HTMLButtonElement).click()),
          api.gql(`mutation { resolveApproval(input: { runId: "${runId}", approve: false, by: "other-client" }) { __typename } }`, {}, as),
        ]);
        // The console's decision may still be on its way: wait for a decision, then count them.
        await waitFor(async () => (await text(mine, '#run-status')) !== 'AWAITING_APPROVAL', { timeoutMs: 30_000, what: 'a decision' });
        const resolved = await api.gql(
          `{ run(id: "${runId}", consistent: true) { status events(types: ["approval.resolved"]) { edges { node { payload } } } } }`,
          {},
          as,
        );
        // Both decide with one key: the other client states who it is, the console states nothing.
        const decisions = resolved.data.run.events.edges.map(
          (e: { node: { payload: { by: string; statedBy: string | null } } }) => e.node.payload,
        );
        expect(decisions).toHaveLength(1);
        const otherWon = decisions[0].statedBy === 'other-client';
        const status = resolved.data.run.status;
        expect(status).toBe(otherWon ? 'FAILED' : 'RUNNING');
        expect(other.data.resolveApproval.__typename).toBe(otherWon ? 'Run' : 'StatusConflict');
        const shown = `${otherWon ? 'Rejected' : 'Approved'} by key ${decisions[0].by}`;
        for (const page of [mine, theirs]) {
          await waitFor(async () => (await text(page, '#run-status')) === status, { timeoutMs: 30_000, what: `status ${status} shown` });
          await waitFor(async () => (await text(page, '#decision'))?.includes(shown) ?? false, {
            timeoutMs: 30_000,
            what: 'the decision shown',
          });
        }
      } finally {
        await mine.close();
        await theirs.close();
      }
    }
  });

  test('a run`s holder and its claim counting down; a STALLED badge once its worker is gone; the runs list filters STALLED; Cancel ends it', async () => {
    const runId = await newRun('held by a worker');
    const claim = async (holder: string, ttlSeconds: number) =>
      (
        await api.gql(
          `mutation { claimRun(input: { runId: "${runId}", holder: "${holder}", ttlSeconds: ${ttlSeconds} }) { __typename ... on RunClaim { token } } }`,
          {},
          as,
        )
      ).data.claimRun;
    // Long enough to watch it count down however slowly the page opens; then renewed short.
    const { token } = await claim('worker-7', 600);
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      await waitFor(async () => (await text(page, '#run-holder'))?.includes('Held by worker-7') ?? false, { what: 'the holder shown' });
      const secondsLeft = async () => Number(/(\d+) s/.exec((await text(page, '#claim-left')) ?? '')?.[1]);
      const left = await secondsLeft();
      expect(left).toBeGreaterThan(0);
      await waitFor(async () => (await secondsLeft()) < left, { what: 'the countdown' });
      const renewed = await api.gql(
        `mutation { renewRunClaim(input: { runId: "${runId}", holder: "worker-7", token: ${token}, ttlSeconds: 2 }) { __typename } }`,
        {},
        as,
      );
      expect(renewed.data.renewRunClaim.__typename).toBe('RunClaim');
      // The worker dies: its claim runs out unrenewed, the watcher finds the run stalled.
      await waitFor(async () => (await text(page, '#run-status')) === 'STALLED', { what: 'the STALLED badge' });
      expect(await page.locator('.status-STALLED').count()).toBeGreaterThan(0);
      expect(await text(page, '#run-holder')).toMatch(/Stalled/);
      const list = await openConsole(browser.context, api.url, '#/runs?status=STALLED', WRITE);
      try {
        await list.locator(`tr[data-run="${runId}"]`).waitFor({ timeout: 30_000 });
        expect(await list.locator('#status-filter').inputValue()).toBe('STALLED');
      } finally {
        await list.close();
      }
      // Typed at a person's pace, across the countdown's redraws: the field keeps its focus and text.
      await page.locator('#cancel-reason').click();
      await page.keyboard.type('the worker is gone', { delay: 150 });
      expect(await page.locator('#cancel-reason').inputValue()).toBe('the worker is gone');
      await page.locator('#cancel-run').click();
      await waitFor(async () => (await text(page, '#run-status')) === 'CANCELLED', { what: 'the run cancelled' });
      const { data } = await api.gql(
        `{ run(id: "${runId}", consistent: true) { events(types: ["run.cancelled"]) { edges { node { payload } } } } }`,
        {},
        as,
      );
      expect(data.run.events.edges[0].node.payload).toMatchObject({ by: 'console', reason: 'the worker is gone', from: 'STALLED' });
      expect(await page.locator('#cancel-run').count()).toBe(0);
      // The server's own events are marked in the timeline, by the origin the server recorded; an
      // agent's are not, look-alikes of the server's types included, nor a server type written straight into the table.
      for (const type of ['run.stalled.retry', 'approval.resolvecl', 'run.5talled'])
        expect((await append(runId, type)).__typename).toBe('Event');
      await putEvent(runId, 6, 'run.stalled');
      await waitForSeqs(page, (seqs) => seqs.length === 6, 'the stall, the cancel, the agent`s events and the row written directly');
      const rows = await page
        .locator('.timeline .event')
        .evaluateAll((events) =>
          events.map((e) => [e.querySelector('.type')?.textContent?.trim(), e.querySelector('.type.by-server .server-mark') !== null]),
        );
      expect(rows).toEqual([
        ['◆ run.stalled', true],
        ['◆ run.cancelled', true],
        ['run.stalled.retry', false],
        ['approval.resolvecl', false],
        ['run.5talled', false],
        ['run.stalled', false],
      ]);
      await page.locator('.event[data-seq="2"]').click();
      expect(await text(page, '.detail h3')).toBe('Event #2 · run.cancelled (written by the server)');
      await page.locator('.event[data-seq="6"]').click();
      expect(await text(page, '.detail h3')).toBe('Event #6 · run.stalled');
    } finally {
      await page.close();
    }
  });

  test('a read-only key sees the approval but no button to act on it', async () => {
    const runId = await newRun();
    await api.gql(`mutation { requestApproval(input: { runId: "${runId}", request: "ok?" }) { __typename } }`, {}, as);
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, READ);
    try {
      await page.locator('.approval pre').waitFor({ timeout: 30_000 });
      expect(await text(page, '.approval')).toContain('read-only');
      expect(await page.locator('#approve, #reject').count()).toBe(0);
      expect(await text(page, '#who')).toContain('read-only');
    } finally {
      await page.close();
    }
  });

  test('the leases page lists units with holder and fencing token, counts down, and follows acquires live', async () => {
    // The page's socket shows live before the server has its leasesChanged (graphql-ws has no
    // acknowledgement of a subscribe): the acquire below waits for the server to count it.
    const subscriptions = () => api.server.app.admission.usage(TENANT).subscriptions;
    await waitFor(() => subscriptions() === 0, { timeoutMs: 30_000, what: 'earlier pages’ subscriptions gone' });
    const page = await openConsole(browser.context, api.url, '#/leases', WRITE);
    try {
      await page.locator('table.leases').waitFor({ timeout: 30_000 });
      await page.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
      await waitFor(() => subscriptions() >= 1, { timeoutMs: 30_000, what: 'the page’s leasesChanged on the server' });
      const unitId = uniqueName('unit');
      const acquired = await api.gql(
        `mutation { acquireLease(input: { unitId: "${unitId}", owner: "worker-7", ttlSeconds: 90 }) { ... on Lease { token } } }`,
        {},
        as,
      );
      const row = page.locator(`tr[data-unit="${unitId}"]`);
      await row.waitFor({ timeout: 30_000 });
      expect(await row.textContent()).toContain('worker-7');
      expect(await text(page, `tr[data-unit="${unitId}"] td.token`)).toBe(String(acquired.data.acquireLease.token));
      const first = await text(page, `tr[data-unit="${unitId}"] td.expiry`);
      expect(first).toMatch(/^1:[0-3]\d$/);
      await waitFor(async () => (await text(page, `tr[data-unit="${unitId}"] td.expiry`)) !== first, {
        timeoutMs: 30_000,
        what: 'the countdown',
      });
    } finally {
      await page.close();
    }
  });

  test('a 10,000-event run scrolls to its end with a bounded number of rows in the DOM', async () => {
    const runId = await newRun('long');
    const total = 10_000;
    const now = new Date().toISOString();
    // Eight batches at a time: the rows, not the order they arrive in, are what the page reads.
    const batches = Array.from({ length: Math.ceil(total / 25) }, (_, b) => b * 25 + 1);
    for (let at = 0; at < batches.length; at += 8) {
      await Promise.all(
        batches.slice(at, at + 8).map(async (from) => {
          const items = Array.from({ length: Math.min(25, total - from + 1) }, (_, i) => ({
            PutRequest: {
              Item: {
                ...keys.event(TENANT, runId, from + i),
                runId,
                seq: from + i,
                type: 'step',
                payload: { n: from + i },
                createdAt: now,
              },
            },
          }));
          const { UnprocessedItems } = await api.server.clients.doc.send(new BatchWriteCommand({ RequestItems: { [api.table]: items } }));
          expect(UnprocessedItems?.[api.table] ?? []).toEqual([]);
        }),
      );
    }
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      await waitForSeqs(page, (seqs) => seqs[0] === 1, 'the first rows');
      let most = 0;
      await waitFor(
        async () => {
          const rows = await page.evaluate(() => {
            const view = document.querySelector('.timeline') as HTMLElement;
            view.scrollTop = view.scrollHeight;
            return document.querySelectorAll('.timeline .event').length;
          });
          most = Math.max(most, rows);
          return (await timelineSeqs(page)).includes(total);
        },
        { timeoutMs: 120_000, intervalMs: 50, what: 'the last event' },
      );
      expect((await timelineSeqs(page)).at(-1)).toBe(total);
      // The view is 60% of a 720 px window: about 15 rows, with 10 more on each side.
      expect(most).toBeLessThanOrEqual(60);
      expect(most).toBeGreaterThan(0);
      // And the events held in memory stay within the window's bound (MAX_WINDOW).
      expect(Number(await page.locator('.timeline').getAttribute('data-held'))).toBeLessThanOrEqual(2000);
      // Scrolled to the end, the tail follows from there: the next event shows.
      expect((await append(runId, 'after.the.scroll')).seq).toBe(total + 1);
      await waitForSeqs(page, (seqs) => seqs.includes(total + 1), 'the event appended once the view reached the end');
      // Back to the start: the window is fetched again there.
      await page.locator('#jump-seq').fill('1');
      await page.getByRole('button', { name: 'Go' }).click();
      await waitForSeqs(page, (seqs) => seqs[0] === 1, 'the start again');
    } finally {
      await page.close();
    }
  });

  const appendOutput = async (runId: string, stream: string, offset: number, text: string, final = false) => {
    const answer = await api.gql(
      'mutation($input: AppendOutputInput!) { appendOutput(input: $input) { __typename } }',
      { input: { runId, stream, offset, text, final } },
      as,
    );
    expect(answer.data?.appendOutput.__typename, JSON.stringify(answer.errors)).toBe('OutputChunk');
  };
  /** What the page shows of one stream: its text, the offset it reached, whether it is marked final. */
  const outputOf = (page: Page, stream: string) =>
    page.evaluate((name) => {
      const section = [...document.querySelectorAll<HTMLElement>('.output')].find((s) => s.dataset.stream === name);
      const view = section?.querySelector<HTMLElement>('.output-text');
      return {
        text: view?.textContent ?? undefined,
        end: Number(section?.dataset.end ?? 0),
        final: section?.dataset.final === 'true',
        atEnd: view ? view.scrollHeight - view.scrollTop - view.clientHeight <= 24 : false,
        scrollTop: view?.scrollTop ?? 0,
        scrolls: view ? view.scrollHeight > view.clientHeight : false,
      };
    }, stream);
  const waitForOutput = async (
    page: Page,
    stream: string,
    test: (shown: Awaited<ReturnType<typeof outputOf>>) => boolean,
    what: string,
  ) => {
    let last: Awaited<ReturnType<typeof outputOf>> | undefined;
    try {
      await waitFor(
        async () => {
          last = await outputOf(page, stream);
          return test(last);
        },
        { timeoutMs: 60_000, what },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}; shown: end ${last?.end}, final ${last?.final}, text …${last?.text?.slice(-80)}`);
    }
    return last as Awaited<ReturnType<typeof outputOf>>;
  };

  test('output streams show as live text beside the timeline: markup as text, followed while written, exact after cut connections, marked finished', async () => {
    const proxy = await tcpProxy(api.url);
    const runId = await newRun('answer a question');
    await append(runId, 'model.requested');
    const injection = '<img src=x onerror="window.__injected=1"><script>window.__injected=2</script> & </pre>\n';
    await appendOutput(runId, 'stdout', 0, injection);
    const page = await openConsole(browser.context, proxy.url, `#/run/${runId}`, WRITE);
    try {
      await page.locator('section.outputs[aria-labelledby]').waitFor({ timeout: 30_000 });
      await waitForOutput(page, 'stdout', (shown) => shown.text === injection, 'the stdout stream, as text');
      expect(await page.locator('.outputs img, .outputs script').count()).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { __injected?: number }).__injected)).toBeUndefined();
      expect(await page.getByRole('region', { name: /Output stdout/ }).count()).toBe(1);

      // A stream that starts once the page is open, written token by token by a client of its own.
      const { client } = testClient(api.url, { apiKey: WRITE });
      const writer = client.output(runId, 'llm', { intervalMs: 20 });
      const tokens = Array.from({ length: 480 }, (_, i) => `w${i}${i % 7 === 6 ? '\n' : ' '}${i % 60 === 0 ? '🙂 ' : ''}`);
      let written = '';
      for (let batch = 0; batch < 12; batch++) {
        for (const token of tokens.slice(batch * 40, batch * 40 + 40)) {
          writer.write(token);
          written += token;
        }
        // Cut while text is on its way: the console reconnects and reads on from what it shows.
        if (batch === 4 || batch === 8) proxy.drop();
        const length = [...written].length;
        const shown = await waitForOutput(page, 'llm', (s) => s.end === length, `the llm stream followed to ${length}`);
        expect(shown.text).toBe(written);
        expect(shown.final).toBe(false);
        // Following: the view stays at the end as it grows (but for the batch after the reader scrolled up).
        if (shown.scrolls && batch !== 10) expect(shown.atEnd, `at the end after batch ${batch}`).toBe(true);
        if (batch === 9) {
          // The reader scrolls up: new text no longer moves the view.
          await page.evaluate(() => {
            const view = [...document.querySelectorAll<HTMLElement>('.output')].find((s) => s.dataset.stream === 'llm');
            (view?.querySelector('.output-text') as HTMLElement).scrollTop = 0;
          });
          await page.locator('.output[data-stream="llm"] .output-follow:not([hidden])').waitFor({ timeout: 30_000 });
        }
        if (batch === 10) {
          expect(shown.scrollTop).toBe(0);
          await page.locator('.output[data-stream="llm"] .output-follow').click();
          await waitForOutput(page, 'llm', (s) => s.atEnd, 'the view back at the end');
        }
      }
      expect(proxy.dropped).toBeGreaterThan(0);
      await writer.close();
      const done = await waitForOutput(page, 'llm', (s) => s.final, 'the llm stream marked finished');
      expect(done.text).toBe(written);
      expect(await text(page, '.output[data-stream="llm"] .output-state')).toBe('Finished');
      expect((await outputOf(page, 'stdout')).final).toBe(false);
      // The events go on beside it.
      await waitForSeqs(page, (seqs) => seqs.join() === '1', 'the timeline beside the output');
    } finally {
      await page.close();
      await proxy.close();
    }
  });

  test('a stream past 1,000,000 characters: the page keeps its last 1,000,000 at most and says the start is not shown', async () => {
    const runId = await newRun('a long log');
    const line = (n: number) => `${String(n).padStart(7, '0')} log line\n`;
    let all = '';
    const write = async (until: number) => {
      while (all.length < until) {
        let piece = '';
        while (piece.length < 100_000) piece += line((all.length + piece.length) / 18);
        await appendOutput(runId, 'stdout', all.length, piece);
        all += piece;
      }
    };
    await write(600_000);
    const page = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      await waitForOutput(page, 'stdout', (s) => s.end === all.length, 'the first 600,000 characters');
      expect(await page.locator('.output-trimmed').isHidden()).toBe(true);
      await write(1_300_000);
      await appendOutput(runId, 'stdout', all.length, '', true);
      const shown = await waitForOutput(page, 'stdout', (s) => s.final, 'the whole stream, final');
      expect(shown.end).toBe(all.length);
      const kept = shown.text ?? '';
      expect(kept.length).toBeLessThanOrEqual(1_000_000);
      expect(kept.length).toBeGreaterThan(1_000_000 - 16 * 1024);
      expect(all.endsWith(kept)).toBe(true);
      const note = await text(page, '.output-trimmed');
      expect(note).toContain(`The first ${(all.length - kept.length).toLocaleString('en')} characters are not shown`);
    } finally {
      await page.close();
    }
    // Opened after it grew past the bound: the page starts where the kept text would start.
    const later = await openConsole(browser.context, api.url, `#/run/${runId}`, WRITE);
    try {
      const shown = await waitForOutput(later, 'stdout', (s) => s.final, 'the long stream read from its last 1,000,000');
      expect(shown.text).toBe(all.slice(-1_000_000));
      expect(await text(later, '.output-trimmed')).toContain(
        `The first ${(all.length - 1_000_000).toLocaleString('en')} characters are not shown`,
      );
    } finally {
      await later.close();
    }
  });

  test('each page as README shows it (saved under docs/ by npm run screenshots)', async () => {
    const tasks = [
      'triage support inbox',
      'refund order 1182',
      'summarize weekly metrics',
      'book travel for the offsite',
      'migrate billing records',
    ];
    const ids: string[] = [];
    for (const task of tasks) {
      const id = await newRun(task);
      ids.push(id);
      for (let i = 0; i < 4; i++) await append(id, i % 2 ? 'model.responded' : 'tool.called', { tool: 'search', query: task, step: i }, 7);
    }
    const [, refund, metrics, travel] = ids as [string, string, string, string, string];
    await api.gql(`mutation { transitionRun(input: { runId: "${metrics}", from: RUNNING, to: COMPLETED }) { __typename } }`, {}, as);
    await api.gql(`mutation { transitionRun(input: { runId: "${travel}", from: RUNNING, to: WAITING_FOR_TOOL }) { __typename } }`, {}, as);
    await api.gql(
      `mutation { requestApproval(input: { runId: "${refund}", request: { action: "refund", order: 1182, amount: 249.5, currency: "EUR" } }) { __typename } }`,
      {},
      as,
    );
    await appendOutput(
      refund,
      'llm',
      0,
      'The customer asked for a refund of order 1182 (249.50 EUR). The order shipped on 3 March and came back unopened on 9 March, ' +
        'inside the 30-day window. The policy allows a full refund to the original card.\n\nPlan: ask for approval, then refund 249.50 EUR ' +
        'and email the customer.',
      true,
    );
    for (const [unit, owner] of [
      ['invoice-batch-7', 'worker-a'],
      ['crawler-shard-2', 'worker-b'],
      ['report-weekly', 'worker-c'],
    ] as const)
      await api.gql(`mutation { acquireLease(input: { unitId: "${unit}", owner: "${owner}", ttlSeconds: 300 }) { __typename } }`, {}, as);

    const runs = await openConsole(browser.context, api.url, '#/runs', WRITE);
    try {
      await runs.locator(`tr[data-run="${ids[4]}"]`).waitFor({ timeout: 30_000 });
      await runs.locator('#connection[data-state="live"]').waitFor({ timeout: 30_000 });
      for (const id of ids) expect(await runs.locator(`tr[data-run="${id}"]`).count()).toBe(1);
      await screenshot(runs, 'console-runs');
    } finally {
      await runs.close();
    }
    const run = await openConsole(browser.context, api.url, `#/run/${refund}`, WRITE);
    try {
      await run.locator('#approve').waitFor({ timeout: 30_000 });
      await waitForSeqs(run, (seqs) => seqs.length === 5, 'the events');
      await waitForOutput(run, 'llm', (shown) => shown.final, 'the model output');
      await run.locator('.event[data-seq="3"]').click();
      await screenshot(run, 'console-run');
    } finally {
      await run.close();
    }
    const leases = await openConsole(browser.context, api.url, '#/leases', WRITE);
    try {
      await leases.locator('tr[data-unit="report-weekly"]').waitFor({ timeout: 30_000 });
      await screenshot(leases, 'console-leases');
    } finally {
      await leases.close();
    }
  });
});
