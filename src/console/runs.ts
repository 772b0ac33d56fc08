/** Comparing states of a run: of two, the one whose run, budget or claim version went forward (or whose claim ended) is newer. */
export interface Versioned {
  version: number;
  budget: { version: number };
  claim?: { version: number } | null;
}

export const isNewer = (next: Versioned, seen: Versioned) => {
  const claimMoved = next.claim ? next.claim.version > (seen.claim?.version ?? 0) : !!seen.claim;
  return (
    next.version >= seen.version &&
    next.budget.version >= seen.budget.version &&
    (next.version > seen.version || next.budget.version > seen.budget.version || (claimMoved && next.claim !== undefined))
  );
};
