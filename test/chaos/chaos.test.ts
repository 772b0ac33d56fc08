/**
 * The chaos harness in its short mode: each fault scenario against a real engine process and
 * two real server processes, a few seconds of load, then every invariant checked over the
 * history and the table. `npm run chaos` runs the same scenarios longer.
 */
import { describe, expect, test } from 'vitest';
import { runScenario, scenarios } from '../../chaos/scenarios.ts';
import { noRedis } from '../support/redis.ts';

/** Seconds of load per scenario here (CI); `npm run chaos` defaults to 20. */
const SECONDS = 4;

describe('chaos, short mode', () => {
  // The replica scenarios need a redis-server (test/support/redis.ts says when there is none).
  test.each(scenarios.filter((s) => !s.redis || !noRedis).map((s) => [s.name, s] as const))(
    '%s: no invariant broken',
    async (_name, scenario) => {
      const report = await runScenario(scenario, SECONDS);
      console.log(
        `${report.scenario}: ${report.requests} requests, ${report.acknowledgedWrites} acknowledged writes, ${report.faults} faults, ${report.stalls} stalls, ${report.subscriberResumes} resumes, ${report.budgetRefusals} cap refusals, ${report.violations.length} violations`,
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
