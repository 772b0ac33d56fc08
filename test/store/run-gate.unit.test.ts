/**
 * The run gate between this process's batches of appends and its server steps: batches share
 * a run; a step waits for the batches being written, has the run alone, and goes before any
 * batch that came after it; runs nobody uses are forgotten.
 */
import { expect, test } from 'vitest';
import { createRunGates } from '../../src/store/events/run-gate.ts';

/** A piece of work the test finishes when it likes, recording when it began and ended. */
function work(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    run: async () => {
      log.push(`${name} begins`);
      await done;
      log.push(`${name} ends`);
      return name;
    },
    finish: () => finish(),
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test('a step waits for the batches being written, has the run alone, and goes before batches that came after it', async () => {
  const gates = createRunGates();
  const log: string[] = [];
  const [b1, b2, step, b3] = [work(log, 'b1'), work(log, 'b2'), work(log, 'step'), work(log, 'b3')];
  const writing = [gates.batch('run', b1.run), gates.batch('run', b2.run)];
  await settle();
  const stepping = gates.step('run', step.run);
  const late = gates.batch('run', b3.run);
  await settle();
  expect(log).toEqual(['b1 begins', 'b2 begins']);
  b1.finish();
  await settle();
  expect(log).toEqual(['b1 begins', 'b2 begins', 'b1 ends']);
  b2.finish();
  await settle();
  expect(log.slice(3)).toEqual(['b2 ends', 'step begins']);
  step.finish();
  await settle();
  expect(log.slice(5)).toEqual(['step ends', 'b3 begins']);
  b3.finish();
  expect(await Promise.all([...writing, stepping, late])).toEqual(['b1', 'b2', 'step', 'b3']);
  expect(gates.size).toBe(0);
});

test('other runs are not held back, and a step that throws hands the run on', async () => {
  const gates = createRunGates();
  const log: string[] = [];
  const step = work(log, 'step');
  const stepping = gates.step('a', step.run);
  await settle();
  expect(await gates.batch('b', async () => 'other run')).toBe('other run');
  const failing = gates.step('a', async () => {
    throw new Error('refused');
  });
  const after = gates.batch('a', async () => 'after');
  step.finish();
  await stepping;
  await expect(failing).rejects.toThrow('refused');
  expect(await after).toBe('after');
  expect(gates.size).toBe(0);
});

test('steps in a row never starve appends: the batches that waited for a step go before the next step', async () => {
  const gates = createRunGates();
  const log: string[] = [];
  const [s1, b, s2] = [work(log, 's1'), work(log, 'b'), work(log, 's2')];
  const first = gates.step('run', s1.run);
  await settle();
  const batch = gates.batch('run', b.run);
  const second = gates.step('run', s2.run);
  await settle();
  s1.finish();
  await settle();
  expect(log).toEqual(['s1 begins', 's1 ends', 'b begins']);
  b.finish();
  await settle();
  expect(log.slice(3)).toEqual(['b ends', 's2 begins']);
  s2.finish();
  expect(await Promise.all([first, batch, second])).toEqual(['s1', 'b', 's2']);
  expect(gates.size).toBe(0);
});
