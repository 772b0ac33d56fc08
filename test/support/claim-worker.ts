/**
 * A worker process holding a run with `withRun` and appending to it, fenced, until it is
 * killed: `node --conditions=runplane-source --import tsx test/support/claim-worker.ts <url> <runId> <holder> <ttlSeconds>`.
 * It prints `claimed <token>` once it holds the run, and `appended <seq>` for each event.
 */
import { createRunplane } from 'runplane/client';
import WebSocket from 'ws';

const [url, runId, holder, ttl] = process.argv.slice(2) as [string, string, string, string];
const client = createRunplane({ url, webSocketImpl: WebSocket });
void client.withRun({ runId, holder, ttlSeconds: Number(ttl), waitMs: 30_000 }, async (run, signal) => {
  console.log(`claimed ${run.claim.token}`);
  while (!signal.aborted) {
    const answer = await run.append({ type: 'work', payload: { holder } });
    if (answer.__typename === 'Event') console.log(`appended ${answer.seq}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});
