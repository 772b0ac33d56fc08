import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** Whether the module at `url` is the script Node was started with (through npm's bin link too). */
export function isMain(url: string) {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === url;
  } catch {
    return false;
  }
}
