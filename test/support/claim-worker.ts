/**
 * A worker process holding a run with `withRun` and appending to it, fenced, until it is
 * killed: `node --conditions=runplane-source --import tsx test/support/claim-worker.ts <url> <runId> <holder> <ttlSeconds>`.
 * It prints `claimed <token>` once it holds the run, and `appended <seq>` for each event.
 */
import { createRunplane } from 'runplane/client';
import WebSocket from 'ws';

const [url, runId, holder, ttl] = process.argv.slice(2) as [string, string, string, string];
const client = createRunplane({ url, webSocketImpl: WebSocket });
client
  .withRun({ runId, holder, ttlSeconds: Number(ttl), waitMs: 30_000 }, async (run, signal) => {
    console.log(`claimed ${run.claim.token}`);
    while (!signal.aborted) {
      const answer = await run.append({ type: 'work', payload: { holder } });
      console.log(answer.__typename === 'Event' ? `appended ${answer.seq}` : `refused ${answer.__typename}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.log(`stopped: ${String(signal.reason)}`);
  })
  .catch((err) => {
    // Said where the test reads: a worker that gave up must not look like one still working.
    console.log(`failed: ${err instanceof Error ? `${err.name} ${(err as { code?: string }).code ?? ''} ${err.message}` : String(err)}`);
    process.exit(1);
  });
