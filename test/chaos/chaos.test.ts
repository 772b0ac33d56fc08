/**
 * The chaos harness in its short mode: each fault scenario against a real engine process and
 * two real server processes, a few seconds of load, then every invariant checked over the
 * history and the table. `npm run chaos` runs the same scenarios longer.
 */
import { describe, expect, test } from 'vitest';
import { runScenario, scenarios } from '../../chaos/scenarios.ts';

/** Seconds of load per scenario here (CI); `npm run chaos` defaults to 20. */
const SECONDS = 4;

describe('chaos, short mode', () => {
  test.each(scenarios.map((s) => [s.name, s] as const))(
    '%s: no invariant broken',
    async (_name, scenario) => {
      const report = await runScenario(scenario, SECONDS);
      console.log(
        `${report.scenario}: ${report.requests} requests, ${report.acknowledgedWrites} acknowledged writes, ${report.faults} faults, ${report.stalls} stalls, ${report.subscriberResumes} resumes, ${report.violations.length} violations`,
      );
      expect(report.violations).toEqual([]);
      // The load and the fault both happened: a quiet run proves nothing.
      expect(report.acknowledgedWrites).toBeGreaterThan(100);
      expect(report.faults + report.stalls).toBeGreaterThan(0);
      expect(report.subscriberResumes).toBeGreaterThan(0);
      expect([...new Set(report.unexpected)]).toEqual([]);
    },
    90_000,
  );
});
