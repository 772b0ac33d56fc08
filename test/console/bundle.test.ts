/**
 * The console's checked-in script is what its sources build to (so `npm install && npm start`
 * needs no build step and cannot serve a stale console), holds nothing of the server, and
 * stays small; the server serves it at / with GraphiQL still at /graphql.
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { expect, test } from 'vitest';
import { buildConsole, CONSOLE_BUNDLE } from '../../scripts/build-console.ts';
import { startTestServer } from '../support/server.ts';

test('src/console/dist/app.js is what src/console builds to (npm run build:console writes it)', async () => {
  const { code } = await buildConsole();
  expect(readFileSync(CONSOLE_BUNDLE, 'utf8') === code, 'the checked-in bundle is stale: run npm run build:console').toBe(true);
});

test('the bundle holds the console, the client and its libraries, nothing of the server', async () => {
  const { inputs } = await buildConsole();
  const outside = inputs.filter(
    (input) =>
      !/^(src\/console\/|packages\/client\/src\/|node_modules\/(@0no-co\/graphql\.web|graphql-ws|eventsource-parser)\/)/.test(input),
  );
  expect(outside).toEqual([]);
});

test('the console costs a browser under 200 KB gzipped, page, style and script together', () => {
  const files = ['src/console/index.html', 'src/console/style.css', 'src/console/dist/app.js'];
  const gzipped = files.reduce((sum, file) => sum + gzipSync(readFileSync(file), { level: 9 }).length, 0);
  expect(gzipped).toBeLessThan(200 * 1024);
});

test('served at / (page, script, style) with a strict content security policy; GraphiQL stays at /graphql; RUNPLANE_CONSOLE=false turns it off', async () => {
  const api = await startTestServer({ RUNPLANE_GRAPHIQL: 'true' });
  const root = new URL('/', api.url);
  const page = await fetch(root);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/text\/html/);
  expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
  expect(await page.text()).toContain('<script src="/console/app.js"');
  const script = await fetch(new URL('/console/app.js', root));
  expect(await script.text()).toBe(readFileSync(CONSOLE_BUNDLE, 'utf8'));
  const etag = script.headers.get('etag') ?? '';
  expect((await fetch(new URL('/console/app.js', root), { headers: { 'if-none-match': etag } })).status).toBe(304);
  expect((await fetch(new URL('/console/style.css', root))).headers.get('content-type')).toMatch(/text\/css/);
  const graphiql = await fetch(api.url, { headers: { accept: 'text/html' } });
  expect(await graphiql.text()).toMatch(/graphiql/i);

  const off = await startTestServer({ RUNPLANE_CONSOLE: 'false' });
  expect((await fetch(new URL('/', off.url))).status).toBe(404);
});
