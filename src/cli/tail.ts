/**
 * `npm run tail -- <runId>`: prints a run's events as they happen, with Runplane's own client
 * (runplane/client). It resumes after the last event it printed when the connection drops or
 * the server restarts, so it never shows an event twice or skips one.
 *
 *   npm run tail -- <runId>                  live from now
 *   npm run tail -- <runId> --after-seq 40   from seq 41 on, then live
 *   npm run tail -- <runId> --from-start     the whole run, then live
 *   npm run tail -- <runId> --output llm     the text of the run's output stream `llm`
 *   --types a,b   only these event types     --url URL   the server (default RUNPLANE_URL, else http://127.0.0.1:$PORT/graphql)
 *   --transport ws|sse   how events travel (default ws)
 *   --wait S      how long to wait for a server to answer at all (default 10 s)
 *   With API keys on the server: RUNPLANE_API_KEY=<key> npm run tail -- <runId>
 * Once the run is finished and its last event printed, it exits (0); with --types it follows until stopped.
 */
import { parseArgs } from 'node:util';
import { createRunplane, type Notice, type RetryPolicy, type RunEvent, type RunplaneError } from '@runplane/client';
import WebSocket from 'ws';
import { isMain } from '../lib/is-main.ts';

const usage =
  'usage: [RUNPLANE_URL=<url>] [RUNPLANE_API_KEY=<key>] runplane tail <runId> [--after-seq N | --from-start | --output STREAM] [--types a,b] [--url URL] [--transport ws|sse] [--wait SECONDS]';

/** Once it has reached the server, an operator's terminal waits out an outage for up to an hour, then says it gave up. */
const PATIENCE: Partial<RetryPolicy> = { maxAttempts: 1_000, baseDelayMs: 250, maxDelayMs: 5_000, deadlineMs: 3_600_000 };

function parse(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'after-seq': { type: 'string' },
      'from-start': { type: 'boolean' },
      types: { type: 'string' },
      url: { type: 'string' },
      transport: { type: 'string' },
      output: { type: 'string' },
      wait: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help' as const;
  const [runId, ...extra] = positionals;
  if (!runId || extra.length > 0) throw new Error(`give exactly one run id\n${usage}`);
  const afterSeq = values['from-start'] ? 0 : values['after-seq'] === undefined ? undefined : Number(values['after-seq']);
  if (afterSeq !== undefined && !(Number.isSafeInteger(afterSeq) && afterSeq >= 0)) {
    throw new Error(`--after-seq must be a whole number, 0 or more (got "${values['after-seq']}")`);
  }
  const url = values.url ?? process.env.RUNPLANE_URL ?? `http://127.0.0.1:${process.env.PORT ?? 4000}/graphql`;
  const waitSeconds = values.wait === undefined ? 10 : Number(values.wait);
  if (!(waitSeconds >= 0 && waitSeconds <= 3600)) throw new Error(`--wait must be a number of seconds, 0 to 3600 (got "${values.wait}")`);
  if (!URL.canParse(url)) throw new Error(`--url must be a URL such as http://127.0.0.1:4000/graphql (got "${url}")`);
  const transport = values.transport ?? 'ws';
  if (transport !== 'ws' && transport !== 'sse') throw new Error(`--transport must be ws or sse (got "${transport}")`);
  const types = values.types
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return { runId, afterSeq, url, types, transport: transport as 'ws' | 'sse', output: values.output, waitMs: waitSeconds * 1000 };
}

export function formatEvent(event: Pick<RunEvent, 'seq' | 'createdAt' | 'type' | 'payload' | 'late'>) {
  const payload = event.payload === null || event.payload === undefined ? '' : `  ${JSON.stringify(event.payload)}`;
  return `#${event.seq}  ${event.createdAt}  ${event.type}${payload}${event.late ? '  (late)' : ''}`;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 1000 ? 2 : 0)} s`;

/** What the client did to recover, in an operator's words. */
function describeNotice(notice: Notice): string | undefined {
  if (notice.kind === 'retry') return `tail: ${notice.error.message}; retrying in ${seconds(notice.delayMs)}`;
  if (notice.kind === 'reconnect' && notice.reason === 'error') {
    return `tail: ${notice.error?.message}; retrying in ${seconds(notice.delayMs)}, resuming after seq ${notice.afterSeq}`;
  }
  if (notice.kind === 'gap' && notice.missing.length > 0) {
    return `tail: not in the table, stepped over: ${notice.missing.map((r) => (r.from === r.to ? r.from : `${r.from}-${r.to}`)).join(', ')}`;
  }
  return undefined;
}

async function follow(
  options: Exclude<ReturnType<typeof parse>, 'help'>,
  print: (line: string, newline?: boolean) => void,
  note: (line: string) => void,
) {
  const client = createRunplane({
    url: options.url,
    apiKey: process.env.RUNPLANE_API_KEY,
    webSocketImpl: WebSocket,
    transport: options.transport,
    retry: PATIENCE,
    reconnect: PATIENCE,
    onNotice: (notice) => {
      const line = describeNotice(notice);
      if (line) note(line);
    },
  });
  try {
    // A first answer within --wait, or a plain word that nobody answers there.
    await client.viewer({ retry: { deadlineMs: options.waitMs } }).catch((err: RunplaneError) => {
      if (err.code !== 'NETWORK_ERROR' && err.code !== 'TIMEOUT') throw err;
      throw new Error(
        `no Runplane server answered at ${options.url} within ${seconds(options.waitMs)} (${err.message}): start one (npm start), or point --url or RUNPLANE_URL at it`,
      );
    });
    if (options.output !== undefined) {
      for await (const text of client.runOutput(options.runId, options.output)) print(text, false);
      note(`tail: output stream ${options.output} of run ${options.runId} is final`);
      return;
    }
    const stop = new AbortController();
    // Ends once the run is finished and its last event printed (read when it finished: nothing comes after).
    let endSeq: number | undefined;
    // Live from now is after the run's last seq as it stands (so a finished run ends at once).
    const afterSeq = options.afterSeq ?? (await client.run(options.runId, { consistent: true, first: 1 }))?.lastSeq;
    let printed = afterSeq ?? 0;
    // With --types the last event may not be one it prints: it follows until stopped.
    const finished = (async () => {
      if (options.types) return;
      for await (const run of client.runChanged(options.runId, { signal: stop.signal })) {
        if (!FINAL.has(run.status)) continue;
        const read = await client.run(options.runId, { consistent: true, first: 1 });
        endSeq = read?.lastSeq ?? 0;
        note(`tail: run ${options.runId} is ${run.status}; its last event is #${endSeq}`);
        if (printed >= endSeq) stop.abort();
        return;
      }
    })().catch(() => undefined);
    try {
      for await (const event of client.runEvents(options.runId, { afterSeq, types: options.types, signal: stop.signal })) {
        print(formatEvent(event));
        printed = event.seq;
        if (endSeq !== undefined && printed >= endSeq) stop.abort();
      }
    } finally {
      stop.abort();
      await finished;
    }
  } finally {
    await client.close();
  }
}

const FINAL = new Set<string>(['COMPLETED', 'FAILED', 'CANCELLED']);

/** `runplane tail <runId> [flags]`. */
export async function main(args = process.argv.slice(2)) {
  let options: ReturnType<typeof parse>;
  try {
    options = parse(args);
  } catch (err) {
    console.error(`tail: ${(err as Error).message}`);
    process.exit(2);
  }
  if (options === 'help') {
    console.log(usage);
    return;
  }
  process.once('SIGINT', () => process.exit(0));
  process.once('SIGTERM', () => process.exit(0));
  console.error(
    `tail: run ${options.runId} on ${options.url}${options.afterSeq === undefined ? ', live from now' : `, after seq ${options.afterSeq}`}`,
  );
  try {
    await follow(
      options,
      (line, newline = true) => (newline ? console.log(line) : process.stdout.write(line)),
      (line) => console.error(line),
    );
  } catch (err) {
    console.error(`tail: ${(err as Error).message}`);
    process.exit(1);
  }
}

if (isMain(import.meta.url)) void main();
