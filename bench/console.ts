/**
 * The console in headless Chromium: its first paint and its time to live on a run of 10,000
 * events (the run page drawn, its first events shown, its tail subscribed), beside GraphiQL's
 * first paint and its time to a usable editor, served by the same server in the same run.
 * Each figure is the median of a few fresh pages, in a fresh browser profile.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { graphqlClient } from '../harness/clients.ts';
import type { ServerProcess } from '../harness/processes.ts';
import { ms, percentile, ratio } from '../harness/stats.ts';

const CHROMIUM = process.env.RUNPLANE_CHROMIUM ?? '/usr/bin/chromium';
const APPEND = 'mutation($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq } } }';

export interface ConsoleResult {
  events: number;
  pages: number;
  consoleFirstPaintMs: number[];
  consoleLiveMs: number[];
  /** An event appended once the page was live, until the page showed it. */
  consoleEventShownMs: number[];
  graphiqlFirstPaintMs: number[];
  graphiqlReadyMs: number[];
}

/**
 * In the page, from its start: when the run page shows its first events with the socket up
 * (ms since navigation). A string, not a function: tsx's helpers would not exist in the page.
 */
const WATCH_LIVE = `
  new MutationObserver(() => {
    if (window.liveAt) return;
    if (document.querySelector('#connection[data-state="live"]') && document.querySelector('.timeline .event')) window.liveAt = performance.now();
  }).observe(document, { subtree: true, childList: true, attributes: true });
`;

const firstPaint = () => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? Number.NaN;

export async function consoleTimes(server: ServerProcess, events: number, pages = 5): Promise<ConsoleResult> {
  const gql = graphqlClient(server.url);
  const runId = `bench-console-${Date.now().toString(36)}`;
  await gql('mutation($input: CreateRunInput!) { createRun(input: $input) { __typename } }', {
    input: { id: runId, task: 'console', budgetCap: 1 },
  });
  let written = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (written < events) {
        written++;
        await gql(APPEND, { input: { runId, type: 'step', payload: { text: 'a step of about this size' } } });
      }
    }),
  );

  const profile = mkdtempSync(join(tmpdir(), 'runplane-bench-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const result: ConsoleResult = {
    events,
    pages,
    consoleFirstPaintMs: [],
    consoleLiveMs: [],
    consoleEventShownMs: [],
    graphiqlFirstPaintMs: [],
    graphiqlReadyMs: [],
  };
  const origin = new URL('/', server.url).toString();
  try {
    // One page of each first, unmeasured: the browser's own start-up is not the page's.
    for (let round = -1; round < pages; round++) {
      const page = await context.newPage();
      await page.addInitScript({ content: WATCH_LIVE });
      await page.goto(`${origin}#/run/${runId}`);
      await page
        .waitForFunction(() => (window as unknown as { liveAt?: number }).liveAt, undefined, { timeout: 60_000, polling: 50 })
        .catch(async (err) => {
          throw new Error(`the console did not go live: ${((await page.locator('body').textContent()) ?? '').slice(0, 600)}`, {
            cause: err,
          });
        });
      const paint = await page.evaluate(firstPaint);
      const live = await page.evaluate(() => (window as unknown as { liveAt: number }).liveAt);
      // Live means live: from the run's end, the next event appended reaches the page.
      await page.locator('button', { hasText: 'Latest' }).click();
      await page.locator(`.event[data-seq="${events}"]`).waitFor({ timeout: 60_000 });
      await page.locator('#tail-state', { hasText: 'Following' }).waitFor({ timeout: 60_000 });
      const sent = performance.now();
      const appended = await gql(APPEND, { input: { runId, type: 'bench.live', payload: null } });
      const seq = (appended as { appendEvent: { seq: number } }).appendEvent.seq;
      await page.locator(`.event[data-seq="${seq}"]`).waitFor({ timeout: 60_000 });
      const shown = performance.now() - sent;
      await page.close();

      const graphiql = await context.newPage();
      const opened = performance.now();
      await graphiql.goto(server.url);
      await graphiql.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });
      const ready = performance.now() - opened;
      const graphiqlPaint = await graphiql.evaluate(firstPaint);
      await graphiql.close();
      if (round < 0) continue;
      result.consoleFirstPaintMs.push(paint);
      result.consoleLiveMs.push(live);
      result.consoleEventShownMs.push(shown);
      result.graphiqlFirstPaintMs.push(graphiqlPaint);
      result.graphiqlReadyMs.push(ready);
    }
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
  return result;
}

const median = (samples: number[]) => percentile(samples, 50);

/** The benchmark table's rows: each figure beside its baseline from the same run. */
export function consoleRows(times: ConsoleResult): [string, string, string, string][] {
  const paint = median(times.consoleFirstPaintMs);
  const live = median(times.consoleLiveMs);
  return [
    [
      `console: first paint, run page of ${times.events.toLocaleString('en')} events (median of ${times.pages})`,
      ms(paint),
      `GraphiQL's first paint: ${ms(median(times.graphiqlFirstPaintMs))}`,
      ratio(paint / median(times.graphiqlFirstPaintMs)),
    ],
    [
      'console: time to live (first events shown, socket up)',
      ms(live),
      `GraphiQL until its editor is ready: ${ms(median(times.graphiqlReadyMs))}`,
      ratio(live / median(times.graphiqlReadyMs)),
    ],
    [
      'console: an event appended, until the page shows it',
      ms(median(times.consoleEventShownMs)),
      "the console's own time to live above",
      ratio(median(times.consoleEventShownMs) / live),
    ],
  ];
}
