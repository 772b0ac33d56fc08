/** Seqs a feed stepped over after waiting for them: kept so that one written later is still handed out. */
import type { SeqRange } from '../domain/run.ts';

/** Ranges remembered per feed; past this the oldest is forgotten (a seq written in it later is then not handed out). */
const MAX_RANGES = 64;

export class SkippedSeqs {
  private readonly list: SeqRange[] = [];

  add(range: SeqRange) {
    this.list.push({ ...range });
    if (this.list.length > MAX_RANGES) this.list.shift();
  }

  /** Forgets `seq` if it was stepped over; true if it was. */
  take(seq: number) {
    const index = this.list.findIndex((range) => range.from <= seq && seq <= range.to);
    if (index < 0) return false;
    const range = this.list[index] as SeqRange;
    const rest = [
      ...(range.from < seq ? [{ from: range.from, to: seq - 1 }] : []),
      ...(seq < range.to ? [{ from: seq + 1, to: range.to }] : []),
    ];
    this.list.splice(index, 1, ...rest);
    return true;
  }

  ranges(): readonly SeqRange[] {
    return [...this.list];
  }

  get size() {
    return this.list.length;
  }
}
