/** The run console in a browser page: opened with a key in its tab's sessionStorage, read through the DOM. */
import { mkdirSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { waitFor } from './wait.ts';

/** Opens the console at `hash` (e.g. `#/runs`), its tab holding `key` as if typed in. */
export async function openConsole(context: BrowserContext, apiUrl: string, hash: string, key?: string): Promise<Page> {
  const page = await context.newPage();
  if (key) await page.addInitScript((value) => sessionStorage.setItem('runplane.apiKey', value), key);
  await page.goto(new URL(`/${hash}`, apiUrl).toString());
  return page;
}

/** The seqs of the timeline's rows in the DOM, top to bottom. */
export const timelineSeqs = (page: Page) =>
  page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>('.timeline .event')]
      .sort((a, b) => Number.parseFloat(a.style.top) - Number.parseFloat(b.style.top))
      .map((row) => Number(row.dataset.seq)),
  );

export async function waitForSeqs(page: Page, test: (seqs: number[]) => boolean, what: string) {
  let last: number[] = [];
  try {
    await waitFor(
      async () => {
        last = await timelineSeqs(page);
        return test(last);
      },
      { timeoutMs: 30_000, what },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; rows shown: ${last.slice(0, 30).join(',')}${last.length > 30 ? '…' : ''}`);
  }
}

/** Saves a screenshot for README under docs/ when RUNPLANE_SCREENSHOTS=1 (npm run screenshots). */
export async function screenshot(page: Page, name: string) {
  if (process.env.RUNPLANE_SCREENSHOTS !== '1') return;
  mkdirSync('docs', { recursive: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `docs/${name}.png`, fullPage: true });
}
