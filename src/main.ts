/** `npm start`: the server, with the embedded engine unless an endpoint is configured. */

import { ConfigError, loadConfig } from './config.ts';
import { isMain } from './lib/is-main.ts';
import { consoleLogger } from './lib/logger.ts';
import { startServer } from './server.ts';

/** Starts the server as the environment says, until SIGTERM or SIGINT (`runplane start`). */
export async function main() {
  // Whoever read our output may go away (a closed pipe): a log line must not take the server down.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  const config = loadConfig(process.env);
  // The SDK warns that its releases after January 2027 need Node 22; ours are pinned, so it does not apply yet.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  for (const warning of config.warnings) console.error(`runplane: warning: ${warning}`);
  const server = await startServer(config, { log: consoleLogger });
  const where = server.engine
    ? `embedded engine ${server.engine.endpoint ? `on ${server.engine.endpoint}` : 'in this process, no port (RUNPLANE_ENGINE_PORT gives it one)'} (${config.engine.dataDir ? `data in ${config.engine.dataDir}` : 'in memory'})`
    : `${config.dynamodb.endpoint ?? 'AWS'} (region ${config.dynamodb.region})`;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`runplane: ${signal}, stopping`);
    try {
      await server.stop();
    } catch (err) {
      console.error(`runplane: stopping failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    }
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // Said only once the signals are handled: whoever reads this may stop it at once.
  console.log(
    [
      `Runplane is up: ${server.url}${config.graphiql ? ' (open it in a browser for GraphiQL)' : ''}`,
      ...(config.console ? [`  console:  ${new URL('/', server.url)} (the run console, in a browser)`] : []),
      `  DynamoDB: ${where}`,
      `  table:    ${config.table}${server.tableCreated ? ' (created now)' : ''}`,
      server.open
        ? '  tenant:   default (no API keys configured: anyone who can reach the port can use it)'
        : `  auth:     API keys (${config.auth.file ? `file ${config.auth.file}, re-read when it changes` : 'RUNPLANE_API_KEYS'})`,
      'Ctrl-C stops it.',
    ].join('\n'),
  );
}

/** One line saying what is wrong, and what to do where that is clear. */
function explain(err: unknown) {
  const e = err as Error & { code?: string; address?: string; port?: number };
  if (e?.code === 'EADDRINUSE') return `${e.address}:${e.port} is already in use by another process: stop it, or start on another PORT`;
  if (e?.code === 'EACCES') return `${e.address}:${e.port} may not be listened on by this user: choose a PORT above 1023`;
  return err instanceof Error ? err.message : String(err);
}

/** Says why the server could not start, and exits 1. */
export function failed(err: unknown): never {
  console.error(`runplane: ${err instanceof ConfigError ? err.message : explain(err)}`);
  if (!(err instanceof ConfigError) && process.env.RUNPLANE_DEBUG) console.error(err);
  process.exit(1);
}

if (isMain(import.meta.url)) main().catch(failed);
