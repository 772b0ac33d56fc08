/** What the engine knows about one request besides its body. */
export interface RequestContext {
  /** The region the client signed the request for (or the engine's own, in process). */
  region: string;
  /** Fault injection: a wait to make once the request holds its item locks (a stalled batch). */
  stall?: () => Promise<void>;
}
