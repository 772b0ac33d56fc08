/**
 * The text of one output stream as the page holds it: pieces of at most PIECE_POINTS code
 * points (text nodes in the page, so a token appends to the last one, not a node each), at most
 * MAX_SHOWN_POINTS in all. Past that the oldest pieces go and `trimmed` says how much is gone:
 * `end` (trimmed + shown) is the stream's offset the page has reached, where a reader resumes.
 * No DOM here: a piece is anything text can be appended to and removed from.
 */

/** Code points kept per stream at most (about 1 MB of text); the start goes past this. */
export const MAX_SHOWN_POINTS = 1_000_000;
/** A piece grows to this many code points before the next one starts (what one trim drops at least). */
export const PIECE_POINTS = 16 * 1024;

export interface Piece {
  appendData(text: string): void;
  remove(): void;
}

/** Code points of `text` (offsets are counted in them, not in UTF-16 units). */
export function codePoints(text: string) {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** The first `points` code points of `text` (all of it when shorter), and how many it has. */
function headOf(text: string, points: number): [string, number] {
  let i = 0;
  let seen = 0;
  for (; seen < points && i < text.length; seen++) i += (text.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
  return [text.slice(0, i), seen];
}

export class OutputText<P extends Piece> {
  private readonly pieces: Array<{ piece: P; points: number }> = [];
  private shown = 0;
  /** Code points of the stream before what is shown: dropped to keep the bound, or never read. */
  trimmed: number;

  /** `start`: the stream's offset the first text appended here begins at. */
  constructor(
    private readonly newPiece: (text: string) => P,
    start = 0,
    private readonly max = MAX_SHOWN_POINTS,
    private readonly pieceSize = PIECE_POINTS,
  ) {
    this.trimmed = start;
  }

  /** The stream's offset after the last character shown. */
  get end() {
    return this.trimmed + this.shown;
  }

  get shownPoints() {
    return this.shown;
  }

  get pieceCount() {
    return this.pieces.length;
  }

  append(text: string) {
    let rest = text;
    while (rest) {
      let last = this.pieces.at(-1);
      const room = last && last.points < this.pieceSize ? this.pieceSize - last.points : this.pieceSize;
      const [head, points] = headOf(rest, room);
      rest = rest.slice(head.length);
      if (last && last.points < this.pieceSize) last.piece.appendData(head);
      else {
        last = { piece: this.newPiece(head), points: 0 };
        this.pieces.push(last);
      }
      last.points += points;
      this.shown += points;
    }
    // Whole pieces from the start: what is shown stays within max, and above max - pieceSize.
    while (this.shown > this.max && this.pieces.length > 1) {
      const first = this.pieces.shift() as { piece: P; points: number };
      first.piece.remove();
      this.shown -= first.points;
      this.trimmed += first.points;
    }
  }
}
