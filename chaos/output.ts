/**
 * Live output under the faults: one writer appends tokens to a run's output stream through
 * either server (resending from the length a server reports after a failure, as the client
 * does), and readers follow it over WebSocket, dropping their connection now and then and
 * resuming from the offset they reached, on either server. Checked: every reader's text is a
 * prefix of the stored text, equal to it once the stream is final, with no chunk out of place;
 * the stored text is exactly what the writer wrote.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { graphql, sleep } from './client.ts';
import type { History } from './history.ts';

const APPEND = `mutation($input: AppendOutputInput!) { appendOutput(input: $input) {
  __typename ... on OutputChunk { offset } ... on OffsetConflict { length } } }`;
const READ = 'query($id: ID!, $after: Int) { run(id: $id) { output(stream: "llm", afterOffset: $after) { offset text final } } }';

export interface OutputReader {
  text: string;
  final: boolean;
  resumes: number;
  /** Chunks that did not start where the reader's text ended. */
  misplaced: string[];
}

export interface OutputLoad {
  readers: OutputReader[];
  /** Stops writing, closes the stream (final) and waits up to `ms` for the readers to reach its end. */
  stop(ms: number): Promise<void>;
  /** The text written, and whether its close was acknowledged. */
  readonly written: string;
  readonly closed: boolean;
}

/** Output text is ASCII here, so code points and string length agree. */
export function startOutputLoad({
  urls,
  runId,
  history,
  readers: count = 3,
}: {
  urls: string[];
  runId: string;
  history: History;
  readers?: number;
}): OutputLoad {
  let written = '';
  let writing = true;
  let closed = false;
  /** Where the writer believes the stream ends (what a server has taken). */
  let position = 0;
  const pick = () => urls[Math.floor(Math.random() * urls.length)] as string;

  /** One append of what is unsent, at `position`; the server's length decides where the next goes. */
  async function sendOnce(final: boolean) {
    const url = pick();
    const text = written.slice(position);
    if (!text && !final) return;
    const answer = await graphql(() => url, history)(APPEND, {
      input: { runId, stream: 'llm', offset: position, text, final, durable: final },
    });
    const result = answer.data?.appendOutput;
    if (result?.__typename === 'OutputChunk') {
      position += text.length;
      if (final) closed = true;
    } else if (result?.__typename === 'OffsetConflict') {
      const length = result.length as number;
      // A server's text is always a prefix of what was written; a longer one is another writer's.
      if (length > written.length) history.unexpected.push(`output stream is ${length} long, more than the ${written.length} written`);
      else position = length;
    } else await sleep(50 + Math.random() * 100);
  }

  const writer = (async () => {
    for (let i = 0; writing; i++) {
      written += `t${i} `;
      if (i % 3 === 0) await sendOnce(false);
      await sleep(10 + Math.random() * 20);
    }
    const deadline = performance.now() + 30_000;
    while (!closed && performance.now() < deadline) await sendOnce(true);
  })();

  const readers: OutputReader[] = [];
  let reading = true;
  const readerLoops = Array.from({ length: count }, async () => {
    const reader: OutputReader = { text: '', final: false, resumes: 0, misplaced: [] };
    readers.push(reader);
    while (reading && !reader.final) {
      const client = createClient({ url: pick().replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 0, lazy: true });
      let drop: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        const dispose = client.subscribe<{ runOutput: { offset: number; text: string; final: boolean } }>(
          {
            query: 'subscription($r: ID!, $after: Int) { runOutput(runId: $r, stream: "llm", afterOffset: $after) { offset text final } }',
            variables: { r: runId, after: reader.text.length },
          },
          {
            next: ({ data }) => {
              if (!data) return;
              const chunk = data.runOutput;
              if (chunk.offset !== reader.text.length) reader.misplaced.push(`${chunk.offset} after ${reader.text.length}`);
              reader.text += chunk.text;
              if (chunk.final) reader.final = true;
            },
            error: () => resolve(),
            complete: () => resolve(),
          },
        );
        // A dashboard drops its connection now and then on its own, and resumes where it was.
        drop = setTimeout(
          () => {
            dispose();
            resolve();
          },
          1_000 + Math.random() * 3_000,
        );
      });
      clearTimeout(drop);
      // A socket that failed while connecting fails its dispose too: the reader resumes all the same.
      await Promise.resolve(client.dispose()).catch(() => undefined);
      if (!reader.final) {
        reader.resumes++;
        await sleep(50 + Math.random() * 100);
      }
    }
  });

  return {
    readers,
    get written() {
      return written;
    },
    get closed() {
      return closed;
    },
    async stop(ms) {
      writing = false;
      await writer;
      const deadline = performance.now() + ms;
      while (readers.some((r) => !r.final) && performance.now() < deadline) await sleep(50);
      reading = false;
      await Promise.all(readerLoops);
    },
  };
}

/** The stream's stored text, read page by page. */
export async function storedOutput(url: string, runId: string, history: History) {
  let text = '';
  for (;;) {
    const answer = await graphql(() => url, history)(READ, { id: runId, after: text.length });
    const page = (answer.data?.run as { output: { text: string; final: boolean } | null } | undefined)?.output;
    if (!page) throw new Error(`could not read output of run ${runId}: ${answer.failure ?? 'no stream'}`);
    text += page.text;
    if (page.final || !page.text) return { text, final: page.final };
  }
}

export function checkOutput(load: OutputLoad, stored: { text: string; final: boolean }): string[] {
  const violations: string[] = [];
  if (!load.closed) violations.push('the output stream was never closed: its final write went unanswered');
  else if (!stored.final) violations.push('the output stream was closed but its stored text is not final');
  if (stored.text !== load.written)
    violations.push(
      `stored output (${stored.text.length}) is not what was written (${load.written.length}) from ${firstDifference(stored.text, load.written)}`,
    );
  load.readers.forEach((reader, i) => {
    for (const place of reader.misplaced) violations.push(`output reader ${i} got a chunk out of place: ${place}`);
    if (!stored.text.startsWith(reader.text))
      violations.push(
        `output reader ${i}'s text (${reader.text.length}) is not a prefix of the stored text, from ${firstDifference(reader.text, stored.text)}`,
      );
    else if (stored.final && reader.text !== stored.text)
      violations.push(`output reader ${i} stopped at ${reader.text.length} of ${stored.text.length}`);
  });
  return violations;
}

function firstDifference(a: string, b: string) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
