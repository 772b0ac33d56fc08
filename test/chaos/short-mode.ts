/**
 * The chaos harness in its short mode: each fault scenario against a real engine process and
 * real server processes, a few seconds of load, then every invariant checked over the history
 * and the table. `npm run chaos` runs the same scenarios longer, one after another. Here they
 * are in two groups, run one after the other in test/chaos/chaos.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { runScenario, type Scenario, scenarios } from '../../chaos/scenarios.ts';
import { noRedis } from '../support/redis.ts';

/** Seconds of load per scenario here (CI); `npm run chaos` defaults to 20. */
const SECONDS = 2;
/**
 * More for a scenario that must make something happen under its load: the stalled readers need
 * enough large events for a stall to put a feed behind, with other tests on the machine.
 */
const LONGER: Record<string, number> = { 'stalled-readers': 6 };

/** The scenarios of the first group, by name; the other group takes every other scenario. */
export const groups = {
  engine: ['engine-restart', 'server-restart', 'throttling', 'transaction-conflicts', 'iterator-expiry', 'lost-responses'],
} as const;

export type Group = keyof typeof groups | 'rest';

const named: readonly string[] = Object.values(groups).flat();

function scenariosOf(group: Group): Scenario[] {
  if (group !== 'rest') {
    const unknown = groups[group].filter((name) => !scenarios.some((s) => s.name === name));
    if (unknown.length) throw new Error(`no chaos scenario ${unknown.join(', ')}`);
    return scenarios.filter((s) => (groups[group] as readonly string[]).includes(s.name));
  }
  return scenarios.filter((s) => !named.includes(s.name));
}

export function shortMode(group: Group) {
  describe(`chaos, short mode (${group})`, () => {
    const chosen = scenariosOf(group);
    test('the group has scenarios', () => expect(chosen.length).toBeGreaterThan(0));
    // The replica scenarios need a redis-server (test/support/redis.ts says when there is none).
    test.each(chosen.filter((s) => !s.redis || !noRedis).map((s) => [s.name, s] as const))(
      '%s: no invariant broken',
      async (_name, scenario) => {
        const report = await runScenario(scenario, LONGER[scenario.name] ?? SECONDS);
        console.log(
          `${report.scenario}: ${report.requests} requests, ${report.acknowledgedWrites} acknowledged writes, ${report.faults} faults, ${report.stalls} stalls, ${report.subscriberResumes} resumes, ${report.budgetRefusals} cap refusals, ${report.violations.length} violations; seconds by phase ${JSON.stringify(report.phases)}`,
        );
        expect(report.violations, `history: ${report.historyFile}`).toEqual([]);
        // The load and the fault both happened: a quiet run proves nothing. (How much load a few
        // seconds carry depends on the machine: every kind of write must have gone through.)
        for (const kind of ['append', 'charge', 'acquire', 'renew', 'release'])
          expect(report.acknowledgedByKind[kind], kind).toBeGreaterThan(0);
        expect(report.faults + report.stalls).toBeGreaterThan(0);
        // Run gamma's cap is low: some charge or costed append must have been refused at it.
        expect(report.budgetRefusals).toBeGreaterThan(0);
        expect(report.subscriberResumes).toBeGreaterThan(0);
        expect(report.outputLength).toBeGreaterThan(0);
        expect([...new Set(report.unexpected)]).toEqual([]);
      },
      240_000,
    );
  });
}
