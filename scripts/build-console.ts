/**
 * Builds the console's script (src/console -> src/console/dist/app.js) with esbuild. The
 * output is checked in, so `npm install && npm start` serves the console with no build step;
 * test/console/bundle.test.ts fails when it no longer matches its sources.
 *   npm run build:console
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const CONSOLE_BUNDLE = fileURLToPath(new URL('../src/console/dist/app.js', import.meta.url));

export async function buildConsole() {
  const result = await build({
    entryPoints: [fileURLToPath(new URL('../src/console/main.ts', import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome115', 'firefox115', 'safari16'],
    minify: true,
    legalComments: 'none',
    charset: 'utf8',
    write: false,
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: fileURLToPath(new URL('..', import.meta.url)),
    // The client from its sources, as in development.
    conditions: ['runplane-source'],
  });
  const [output] = result.outputFiles;
  if (!output) throw new Error('esbuild wrote no output');
  return { code: output.text, inputs: Object.keys(result.metafile.inputs) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { code } = await buildConsole();
  writeFileSync(CONSOLE_BUNDLE, code);
  console.log(`wrote ${CONSOLE_BUNDLE} (${code.length} bytes)`);
}
