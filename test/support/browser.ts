/**
 * Debian's Chromium, driven by playwright-core (no browser download). Where it is missing the
 * browser tests are skipped, saying why; with RUNPLANE_REQUIRE_BROWSER=1 (set by .ci/run) they
 * fail instead, so CI can never pass them by skipping.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { describe } from 'vitest';

export const chromiumPath = process.env.RUNPLANE_CHROMIUM ?? '/usr/bin/chromium';
const missing = !existsSync(chromiumPath);
const required = process.env.RUNPLANE_REQUIRE_BROWSER === '1';
if (missing && !required)
  console.warn(`browser tests skipped: no Chromium at ${chromiumPath} (apt-get install chromium, or set RUNPLANE_CHROMIUM)`);

/** `describe` for tests that need the browser: skipped with the reason when there is none (unless it is required). */
export function describeWithBrowser(name: string, body: () => void) {
  if (missing && !required) return describe.skip(`${name} (skipped: no Chromium at ${chromiumPath}; apt-get install chromium)`, body);
  return describe(name, body);
}

export interface OpenBrowser {
  browser: Browser;
  context: BrowserContext;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile, kept off the network but for this machine. */
export async function openBrowser(): Promise<OpenBrowser> {
  if (missing) throw new Error(`Chromium is required (RUNPLANE_REQUIRE_BROWSER=1) but there is none at ${chromiumPath}`);
  const profile = mkdtempSync(join(tmpdir(), 'runplane-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
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
  return {
    browser: context.browser() as Browser,
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
