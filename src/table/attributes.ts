/** The table's rows: their shape, and the name of every attribute they hold (here and only here). */

export type Item = Record<string, unknown>;

/** Attribute names of the table's rows. */
export const attr = {
  entity: 'entity',
  runId: 'runId',
  task: 'task',
  status: 'status',
  version: 'version',
  createdAt: 'createdAt',
  updatedAt: 'updatedAt',
  cap: 'cap',
  spent: 'spent',
  remaining: 'remaining',
  seq: 'seq',
  type: 'type',
  payload: 'payload',
  unitId: 'unitId',
  owner: 'owner',
  token: 'token',
  acquiredAt: 'acquiredAt',
  /** Lease expiry in epoch milliseconds (conditions compare it with the clock). */
  leaseUntil: 'leaseUntil',
  /** A random id of the write that last changed the row: a write resent by the SDK recognises itself. */
  writeId: 'writeId',
  /** The id of the last charge applied to a budget (same purpose). */
  lastChargeId: 'lastChargeId',
  /** A stream shard's lease row: the sequence number of the last record its holder handed on. */
  checkpoint: 'checkpoint',
  /** A stream shard's lease row: the shard was read to its end (its children may start). */
  drained: 'drained',
  /** The table's TTL attribute, epoch seconds (stored as `expiresAt`; a lease's or claim's end is another thing: leaseUntil, claimUntil). */
  ttl: 'expiresAt',
  /** A run claim's holder. */
  holder: 'holder',
  /** A run claim's end in epoch milliseconds (conditions compare it with the clock). */
  claimUntil: 'claimUntil',
  /** A run claim that ended (released, cancelled, finished with its run, stalled): no write fenced by its token lands again, whatever the clock says. */
  claimEnded: 'claimEnded',
  /** An output chunk's stream, its first code point's offset, its text; whether the stream ends with it. */
  stream: 'stream',
  offset: 'offset',
  text: 'text',
  final: 'final',
  /** A run's metadata: over how many partition keys its events are spread (absent: 1). */
  eventShards: 'eventShards',
  /** An output stream row: its length, once final. */
  length: 'length',
  /** An event's writer as the server set it: SERVER (its own steps) or CLIENT; anything else, or none, reads CLIENT. */
  origin: 'origin',
} as const;
