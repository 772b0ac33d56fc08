/**
 * Turns on a run between this process's appends and its server steps (a cancel, a stall, a
 * takeover, an approval). A step reads the run's last seq and writes its event at the next one;
 * appends write at the next seqs one after another, and a step racing them loses every time
 * one lands between its read and its write. So a step waits for the appends being written to
 * land, and holds back new ones until it has written: appends share the run, a step has it
 * alone, a waiting step goes before appends that come after it, and the appends that waited
 * for a step go before the next step.
 *
 * Writers in other processes are not held back: against them a step still retries.
 */

interface Gate {
  /** Batches being written now. */
  batches: number;
  /** A step has the run. */
  stepping: boolean;
  stepsWaiting: (() => void)[];
  batchesWaiting: (() => void)[];
}

export function createRunGates() {
  const gates = new Map<string, Gate>();
  const gateOf = (key: string) => {
    let gate = gates.get(key);
    if (!gate) {
      gate = { batches: 0, stepping: false, stepsWaiting: [], batchesWaiting: [] };
      gates.set(key, gate);
    }
    return gate;
  };
  const forgetIfIdle = (key: string, gate: Gate) => {
    if (gate.batches === 0 && !gate.stepping && gate.stepsWaiting.length === 0 && gate.batchesWaiting.length === 0) gates.delete(key);
  };
  /** Lets every waiting batch write. */
  const letBatchesIn = (key: string, gate: Gate) => {
    const batches = gate.batchesWaiting.splice(0);
    gate.batches += batches.length;
    for (const batch of batches) batch();
    forgetIfIdle(key, gate);
  };
  /**
   * Hands the run on once nobody holds it. After a step, the batches that waited for it go
   * first (steps in a row never starve appends); after the last batch, the next step.
   */
  const handOn = (key: string, gate: Gate, afterStep: boolean) => {
    if (gate.batches > 0 || gate.stepping) return;
    if (afterStep && gate.batchesWaiting.length > 0) return letBatchesIn(key, gate);
    const step = gate.stepsWaiting.shift();
    if (step) {
      gate.stepping = true;
      step();
      return;
    }
    letBatchesIn(key, gate);
  };

  return {
    /** Writes a batch of appends to the run, alongside other batches, never while a step has it. */
    async batch<T>(key: string, write: () => Promise<T>): Promise<T> {
      const gate = gateOf(key);
      if (gate.stepping || gate.stepsWaiting.length > 0) await new Promise<void>((resolve) => gate.batchesWaiting.push(resolve));
      else gate.batches++;
      try {
        return await write();
      } finally {
        gate.batches--;
        handOn(key, gate, false);
      }
    },

    /** Runs a step with the run to itself: once the batches being written have landed, before any new one. */
    async step<T>(key: string, run: () => Promise<T>): Promise<T> {
      const gate = gateOf(key);
      if (gate.batches > 0 || gate.stepping) await new Promise<void>((resolve) => gate.stepsWaiting.push(resolve));
      else gate.stepping = true;
      try {
        return await run();
      } finally {
        gate.stepping = false;
        handOn(key, gate, true);
      }
    },

    /** Runs with a gate kept (for tests: the map holds only runs in use). */
    get size() {
      return gates.size;
    },
  };
}

export type RunGates = ReturnType<typeof createRunGates>;
