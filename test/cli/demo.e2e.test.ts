import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, test } from 'vitest';
import { nodeArgs } from '../../scripts/process-bundles.ts';
import { ANSWER_TOKENS, runDemo } from '../../src/cli/demo.ts';
import { startTestServer } from '../support/server.ts';

test("npm run demo prints the lab's five blocks from real GraphQL calls", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgs('src/cli/demo.ts'), '--own'], { timeout: 60_000 });
  const lines = stdout.split('\n');
  const block = (title: string) => lines.slice(lines.findIndex((l) => l.includes(title)) + 1).join('\n');

  const story = block("--- one table, one query: the run's whole story ---");
  expect(story).toMatch(/run#demo-\w+\s+budget\s+\{"cap":500000,"spent":0\}/);
  expect(story).toMatch(/meta\s+\{"task":"audit checkout","status":"RUNNING"\}/);
  expect(story).toMatch(/evt#1\s+\{"type":"run.created"\}[\s\S]*evt#2[\s\S]*evt#3[\s\S]*evt#4\s+\{"type":"run.completed"\}/);

  const race = block('--- conditional append: two workers race for seq 5 ---');
  expect(race).toMatch(
    /worker [AB]: append seq 5 -> ok\n\s+worker [AB]: append seq 5 -> SequenceConflict \(last seq is 5; retries at seq 6\)\n\s+worker [AB]: append seq 6 -> ok/,
  );

  const leases = block('--- leases: acquire, refuse, reclaim after a crash ---');
  const first = Number(/worker A acquires unit#\S+ : true \(token (\d+)/.exec(leases)?.[1]);
  expect(leases).toMatch(/worker B tries unit#\S+\s+: false \(LeaseHeld/);
  const reclaimed = Number(/worker B reclaims unit#\S+ : true \(lease expired at t=\d+\.\ds; B wins, token (\d+)\)/.exec(leases)?.[1]);
  expect(reclaimed).toBeGreaterThan(first);
  // A's 1 s lease, counted from before A asked for it: a slow machine adds the request's time.
  expect(Number(/lease expired at t=(\d+\.\d)s/.exec(leases)?.[1])).toBeGreaterThanOrEqual(1);
  expect(leases).toMatch(/lease now held by B until/);

  const claims = block('--- run claims: a worker dies mid-run, another takes over ---');
  const dead = Number(/worker A claims run#\S+ \(token (\d+)\) and appends seq 1/.exec(claims)?.[1]);
  expect(claims).toMatch(/the stall watcher finds run#\S+ STALLED \(event run.stalled\)/);
  const rescuer = Number(/worker B claims it \(token (\d+)\): RUNNING again \(event run.reclaimed\), appends seq 4/.exec(claims)?.[1]);
  expect(rescuer).toBeGreaterThan(dead);
  expect(claims).toMatch(new RegExp(`worker A wakes up and appends with token ${dead} -> ClaimLost \\(nothing written`));

  const output = block("--- live output: a model's answer, token by token, beside the events ---");
  expect(output).toMatch(/worker M claims run#\S+ \(token (\d+)\); event model.requested \(seq 1\)/);
  expect(output).toMatch(
    /streams \d+ tokens into output "llm" \(fenced by token \d+\), then closes it\n\s+event model.responded \(seq 2\)/,
  );
  expect(output).toMatch(/Run.outputs: llm, \d+ characters, final/);
  expect(output).toContain('a reader following it live got exactly the text written');
});

test("the demo's model answer is in the server, as written, token by token, and final; its events mark the steps", async () => {
  const api = await startTestServer({ RUNPLANE_STALL_CHECK_SECONDS: '1' });
  const lines: string[] = [];
  await runDemo(api.url, (line) => lines.push(line));
  const runId = lines.map((line) => /worker M claims run#(\S+)/.exec(line)?.[1]).find(Boolean);
  expect(runId).toBeDefined();
  const { data } = await api.gql(
    `query($id: ID!) { run(id: $id, consistent: true) {
      outputs { stream length final }
      output(stream: "llm") { offset text final }
      events { edges { node { type } } }
    } }`,
    { id: runId },
  );
  const written = ANSWER_TOKENS.join('');
  expect(ANSWER_TOKENS.length).toBeGreaterThan(30);
  expect(data.run.output).toEqual({ offset: 0, text: written, final: true });
  expect(data.run.outputs).toEqual([{ stream: 'llm', length: [...written].length, final: true }]);
  const types = data.run.events.edges.map((e: { node: { type: string } }) => e.node.type);
  expect(types).toEqual(expect.arrayContaining(['model.requested', 'model.responded']));
  expect(types.indexOf('model.requested')).toBeLessThan(types.indexOf('model.responded'));
});
