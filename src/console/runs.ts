/** Comparing states of a run: of two, the one whose run or budget version went forward is newer. */
export interface Versioned {
  version: number;
  budget: { version: number };
}

export const isNewer = (next: Versioned, seen: Versioned) =>
  next.version >= seen.version &&
  next.budget.version >= seen.budget.version &&
  (next.version > seen.version || next.budget.version > seen.budget.version);
