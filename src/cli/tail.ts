/**
 * `npm run tail -- <runId>`: prints a run's events as they happen, over graphql-ws.
 * It resumes after the last event it printed when the connection drops, so it never
 * shows an event twice or skips one.
 *
 *   npm run tail -- <runId>                  live from now
 *   npm run tail -- <runId> --after-seq 40   from seq 41 on, then live
 *   npm run tail -- <runId> --from-start     the whole run, then live
 *   --types a,b   only these event types     --url URL   the server (default http://127.0.0.1:$PORT/graphql)
 *   With API keys on the server: RUNPLANE_API_KEY=<key> npm run tail -- <runId>
 */
import { parseArgs } from 'node:util';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const usage = 'usage: [RUNPLANE_API_KEY=<key>] npm run tail -- <runId> [--after-seq N | --from-start] [--types a,b] [--url URL]';
const apiKey = process.env.RUNPLANE_API_KEY;

interface Event {
  seq: number;
  type: string;
  payload: unknown;
  createdAt: string;
}

/** A refusal by the server (bad input, unknown run, bad key): retrying will not help. */
class Refused extends Error {}

/** Errors a retry can cure (the table briefly unreachable, an unexpected failure): resume instead of giving up. */
const TRANSIENT = new Set(['UNAVAILABLE', 'THROTTLED', 'CONFLICT', 'CONTENTION', 'INTERNAL_SERVER_ERROR']);
const transient = (errors: readonly { extensions?: Record<string, unknown> }[]) =>
  errors.every((e) => TRANSIENT.has(String(e.extensions?.code ?? '')));

class Transient extends Error {}

function parse(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'after-seq': { type: 'string' },
      'from-start': { type: 'boolean' },
      types: { type: 'string' },
      url: { type: 'string' },
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
  const url = values.url ?? `http://127.0.0.1:${process.env.PORT ?? 4000}/graphql`;
  if (!URL.canParse(url)) throw new Error(`--url must be a URL such as http://127.0.0.1:4000/graphql (got "${url}")`);
  const types = values.types
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return { runId, afterSeq, url, types };
}

export function formatEvent(event: Event) {
  const payload = event.payload === null || event.payload === undefined ? '' : `  ${JSON.stringify(event.payload)}`;
  return `#${event.seq}  ${event.createdAt}  ${event.type}${payload}`;
}

/** The run's last seq now, so that "live from now" can resume exactly after a disconnect too. */
async function lastSeq(url: string, runId: string, note: (line: string) => void) {
  for (let failures = 0; ; failures++) {
    try {
      return await readLastSeq(url, runId);
    } catch (err) {
      if (err instanceof Refused) throw err;
      const delay = backoff(failures);
      note(`tail: ${describe(err, url)}; retrying in ${seconds(delay)}`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

async function readLastSeq(url: string, runId: string) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify({ query: 'query($id: ID!) { run(id: $id, consistent: true) { lastSeq } }', variables: { id: runId } }),
  });
  const body = (await response.json()) as { data?: { run: { lastSeq: number } | null }; errors?: { message: string }[] };
  if (body.errors?.length) throw new Refused(body.errors.map((e) => e.message).join('; '));
  if (!body.data?.run) throw new Refused(`run ${runId} does not exist`);
  return body.data.run.lastSeq;
}

const backoff = (failures: number) => Math.min(5_000, 250 * 2 ** failures);
const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 1000 ? 2 : 0)} s`;

async function follow(options: Exclude<ReturnType<typeof parse>, 'help'>, print: (line: string) => void, note: (line: string) => void) {
  let afterSeq = options.afterSeq ?? (await lastSeq(options.url, options.runId, note));
  for (let failures = 0; ; ) {
    const client = createClient({
      url: options.url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      lazy: true,
      connectionParams: apiKey ? { authorization: `Bearer ${apiKey}` } : undefined,
    });
    try {
      const events = client.iterate<{ runEvents: Event }>({
        query: `subscription($runId: ID!, $afterSeq: Int, $types: [String!]) {
          runEvents(runId: $runId, afterSeq: $afterSeq, types: $types) { seq type payload createdAt }
        }`,
        variables: { runId: options.runId, afterSeq, types: options.types },
      });
      for await (const result of events) {
        if (result.errors?.length) {
          const message = result.errors.map((e) => e.message).join('; ');
          throw transient(result.errors) ? new Transient(message) : new Refused(message);
        }
        const event = result.data?.runEvents;
        if (!event) continue;
        failures = 0;
        print(formatEvent(event));
        // Where to resume from if the connection drops: nothing is printed twice.
        afterSeq = event.seq;
      }
      return;
    } catch (err) {
      if (err instanceof Refused) throw err;
      let cause = err;
      if (Array.isArray(err)) {
        const message = (err as { message: string }[]).map((e) => e.message).join('; ');
        if (!transient(err as { extensions?: Record<string, unknown> }[])) throw new Refused(message);
        cause = new Transient(message);
      }
      const delay = backoff(failures++);
      note(`tail: ${describe(cause, options.url)}; retrying in ${seconds(delay)}, resuming after seq ${afterSeq}`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    } finally {
      await client.dispose();
    }
  }
}

/** What went wrong, in words: never an object's default string. */
function describe(err: unknown, url: string) {
  const e = err as {
    code?: unknown;
    reason?: string;
    message?: string;
    error?: { code?: string; message?: string };
    cause?: { code?: string };
  };
  const code = e?.error?.code ?? e?.cause?.code ?? (typeof e?.code === 'string' ? e.code : undefined);
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ECONNRESET') {
    return `server not reachable at ${url} (${code})`;
  }
  if (typeof e?.code === 'number') {
    return e.code === 1012 ? 'the server is restarting' : `connection closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`;
  }
  const message = e?.error?.message ?? e?.message;
  if (message) return message === 'fetch failed' ? `server not reachable at ${url}` : message;
  return `connection to ${url} failed`;
}

async function main() {
  let options: ReturnType<typeof parse>;
  try {
    options = parse(process.argv.slice(2));
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
      (line) => console.log(line),
      (line) => console.error(line),
    );
  } catch (err) {
    console.error(`tail: ${(err as Error).message}`);
    process.exit(1);
  }
}

if (process.argv[1]?.endsWith('tail.ts')) void main();
