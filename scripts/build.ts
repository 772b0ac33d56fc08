/**
 * The server to JavaScript (the root package's prepack; `npm run build` builds the packages
 * first): dist/ by tsc from src/ without the console's sources, with the console's page, style
 * and built script where src/http/console.ts reads them, so the packed server runs compiled
 * JavaScript with no TypeScript compiler at run time.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const tsc = fileURLToPath(import.meta.resolve('typescript/bin/tsc'));
const compile = (project: string) => execFileSync(process.execPath, [tsc, '-p', project], { cwd: ROOT, stdio: 'inherit' });

export function build() {
  rmSync(`${ROOT}dist`, { recursive: true, force: true });
  compile('tsconfig.build.json');
  mkdirSync(`${ROOT}dist/console/dist`, { recursive: true });
  for (const asset of ['index.html', 'style.css', 'dist/app.js']) cpSync(`${ROOT}src/console/${asset}`, `${ROOT}dist/console/${asset}`);
  // npm links bins executable on install; a clone running them by path needs the bit too.
  chmodSync(`${ROOT}dist/cli/runplane.js`, 0o755);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  build();
  console.log('built dist/');
}
