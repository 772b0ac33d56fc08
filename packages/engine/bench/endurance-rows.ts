/** The endurance result as rows of the benchmark table. */

import { ms, ratio } from '../../../harness/stats.ts';
import type { EnduranceResult } from './endurance.ts';

type Row = [benchmark: string, result: string, baseline: string, ratio: string];

const perSecond = (n: number) => `${Math.round(n)}/s`;

export function enduranceRows(result: EnduranceResult): Row[] {
  const writes = result.writes.toLocaleString('en-US');
  return [
    [
      `engine endurance: RSS after ${writes} writes (1 KB items, NEW_AND_OLD_IMAGES stream)`,
      `${result.rssEndMiB.toFixed(0)} MiB (uncollected ${result.rssEndUncollectedMiB.toFixed(0)}, peak ${result.rssPeakMiB.toFixed(0)})`,
      `after 10,000: ${result.rssBaselineMiB.toFixed(0)} MiB (uncollected ${result.rssBaselineUncollectedMiB.toFixed(0)}; target < 1.2x)`,
      ratio(result.rssRatio),
    ],
    [
      'engine endurance: write rate, last 10% of the writes',
      perSecond(result.lastTenthPerSecond),
      `first 10%: ${perSecond(result.firstTenthPerSecond)} (target > 0.8x)`,
      ratio(result.throughputRatio),
    ],
    [
      'engine endurance: engine CPU per write, last 10% of the writes',
      `${result.lastTenthCpuMsPerWrite.toFixed(2)} ms`,
      `first 10%: ${result.firstTenthCpuMsPerWrite.toFixed(2)} ms (machine load ${result.loadAverage.firstTenth.map((l) => l.toFixed(1)).join('-')} / ${result.loadAverage.lastTenth.map((l) => l.toFixed(1)).join('-')})`,
      ratio(result.cpuRatio),
    ],
    [
      `engine endurance: restart to first answer (first stream record) on that data, ${result.dataDirMiB.toFixed(0)} MiB`,
      `${ms(result.restart.dataMs)} (${ms(result.restart.dataFirstRecordMs)})`,
      `on a fresh folder: ${ms(result.restart.emptyMs)} (${ms(result.restart.emptyFirstRecordMs)})`,
      ratio(result.restart.ratio),
    ],
  ];
}
