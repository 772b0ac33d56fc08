#!/usr/bin/env node
/** `runplane-engine [flags]` (`npm run engine -- [flags]`): the embedded engine on its own, for other tools and processes. */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { credentialsFrom, help, parseEngineArgs } from './args.ts';
import { type EngineOptions, startEngine } from './index.ts';
import { serveRemoteControl } from './remote-control.ts';

/** Runs the engine as its command line says (`runplane engine` calls this with its own arguments). */
export async function main(args = process.argv.slice(2)) {
  // Whoever read our output may go away (a closed pipe): a log line must not take the engine down.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  let options: EngineOptions | 'help';
  try {
    options = parseEngineArgs(args);
    if (options !== 'help') options.credentials = credentialsFrom(process.env);
  } catch (err) {
    console.error(`engine: ${(err as Error).message}\n\n${help}`);
    process.exit(2);
  }
  if (options === 'help') {
    console.log(help);
    return;
  }
  const engine = await startEngine(options);
  // A parent process with an IPC channel may inject faults (the chaos harness does).
  serveRemoteControl(engine);
  const stop = async (signal: string) => {
    console.log(`engine: ${signal}, closing`);
    await engine.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  // Said only once the signals are handled: whoever reads this may stop it at once.
  console.log(
    `engine: DynamoDB and DynamoDB Streams on ${engine.endpoint} (${options.dataDir ? `data in ${options.dataDir}` : 'in memory'})`,
  );
  if (!options.credentials) {
    console.error(
      `engine: no AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in its environment: any local process may use ${engine.endpoint} (set both to require requests signed with them)`,
    );
  }
}

/** Whether this module is the script Node was started with (through npm's bin link too). */
function isMain() {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return pathToFileURL(realpathSync(script)).href === import.meta.url;
  } catch {
    return false;
  }
}

if (isMain()) {
  main().catch((err) => {
    console.error(`engine: ${(err as Error).message}`);
    process.exit(1);
  });
}
