/**
 * runEvents' bookkeeping, without I/O: which seq it stands at, which event is old news, which
 * seqs are missing before an event (to be read from the table first), and which seqs were
 * stepped over (announced in `missingBefore`, still handed out if they come later, once).
 */
import type { SeqRange } from './notices.ts';

export interface FeedEvent {
  seq: number;
  type: string;
  late: boolean;
  missingBefore: readonly SeqRange[];
}

/** Stepped-over ranges remembered for a late arrival; past this the oldest is forgotten (as the server does). */
export const MAX_MISSING_RANGES = 64;

/** What an event from the feed needs: dropped (had it), handed out late, or handed out after reading `holes` from the table. */
export type Verdict = { kind: 'drop' } | { kind: 'late' } | { kind: 'next'; holes: SeqRange[] };

export class Sequencer {
  /** The highest seq accounted for: handed out, filtered out by type, or stepped over. */
  private position: number;
  /** Stepped over since the last event handed out: its `missingBefore`. */
  private unannounced: SeqRange[] = [];
  /** Stepped over and not come since: a late arrival of one of these is handed out. */
  private missing: SeqRange[] = [];

  constructor(
    afterSeq: number,
    /** Only these types are handed out (the feed was asked for them alone); every type when absent. */
    private readonly types?: ReadonlySet<string>,
  ) {
    this.position = afterSeq;
  }

  /** Where a new subscription resumes: after this seq. */
  get resumeAfter() {
    return this.position;
  }

  /** Seqs stepped over that may still come. */
  get stillMissing(): readonly SeqRange[] {
    return this.missing;
  }

  judge(event: FeedEvent): Verdict {
    if (event.late) return includes(this.missing, event.seq) ? { kind: 'late' } : { kind: 'drop' };
    if (event.seq <= this.position) return { kind: 'drop' };
    // Unfiltered, seqs are contiguous: anything between is a hole, said or not. Filtered, only
    // the server knows which seqs it stepped over.
    const holes = this.types
      ? clip(event.missingBefore, this.position + 1, event.seq - 1)
      : [{ from: this.position + 1, to: event.seq - 1 }];
    return { kind: 'next', holes: holes.filter((range) => range.from <= range.to) };
  }

  /** A row read from the table for `holes`: the event to hand out, if any (not filtered out, not had). */
  fromTable<E extends FeedEvent>(row: E, holes: readonly SeqRange[]): E | undefined {
    if (row.seq <= this.position || !includes(holes, row.seq)) return undefined;
    this.stepTo(row.seq, holes);
    return this.handOut(row);
  }

  /** The feed's event, once its holes were read: handed out with what is still missing before it. */
  inOrder<E extends FeedEvent>(event: E, holes: readonly SeqRange[]): E | undefined {
    this.stepTo(event.seq, holes);
    return this.handOut(event);
  }

  /** A seq stepped over came after all (late from the feed, or found in the table): handed out once. */
  late<E extends FeedEvent>(event: E): E | undefined {
    if (!includes(this.missing, event.seq)) return undefined;
    this.missing = remove(this.missing, event.seq);
    if (this.types && !this.types.has(event.type)) return undefined;
    return { ...event, late: true, missingBefore: [] };
  }

  private stepTo(seq: number, holes: readonly SeqRange[]) {
    const stepped = clip(holes, this.position + 1, seq - 1);
    this.unannounced = bounded([...this.unannounced, ...stepped]);
    this.missing = bounded([...this.missing, ...stepped]);
    this.position = seq;
  }

  private handOut<E extends FeedEvent>(event: E): E | undefined {
    if (this.types && !this.types.has(event.type)) return undefined;
    const missingBefore = this.unannounced;
    this.unannounced = [];
    return { ...event, late: false, missingBefore };
  }
}

const bounded = (ranges: SeqRange[]) => ranges.slice(-MAX_MISSING_RANGES);

const includes = (ranges: readonly SeqRange[], seq: number) => ranges.some((r) => r.from <= seq && seq <= r.to);

/** The parts of `ranges` within from..to. */
export function clip(ranges: readonly SeqRange[], from: number, to: number): SeqRange[] {
  return ranges.map((r) => ({ from: Math.max(r.from, from), to: Math.min(r.to, to) })).filter((r) => r.from <= r.to);
}

function remove(ranges: readonly SeqRange[], seq: number): SeqRange[] {
  return ranges.flatMap((r) =>
    r.from <= seq && seq <= r.to
      ? [
          { from: r.from, to: seq - 1 },
          { from: seq + 1, to: r.to },
        ].filter((part) => part.from <= part.to)
      : [r],
  );
}
